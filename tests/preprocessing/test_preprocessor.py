"""BertPreprocessor against HF `tokenizers` with its BERT template, plus the layer contract."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing import BertPreprocessor, BertTokenizer
from tests.helpers import minilm_path, shared_data
from tests.preprocessing.shared_text import _tsv_columns

tokenizers = pytest.importorskip("tokenizers")

# An odd length leaves an even budget for a pair (length - 3): there HF's
# LongestFirst and the original BERT rule agree (on odd budgets with two long
# segments BERT gives the extra token to A, HF to the longer one).
LENGTH = 67


@pytest.fixture(scope="module")
def preprocessor():
    return BertPreprocessor.from_preset(minilm_path(), sequence_length=LENGTH)


def hf_encode(texts, pairs=None):
    hf = tokenizers.Tokenizer.from_file(os.path.join(minilm_path(), "tokenizer.json"))
    hf.enable_truncation(LENGTH, strategy="longest_first")
    hf.enable_padding(length=LENGTH, pad_id=0)
    encs = hf.encode_batch(list(zip(texts, pairs, strict=True)) if pairs else texts)
    return (
        np.array([e.ids for e in encs]),
        np.array([e.type_ids for e in encs]),
        np.array([e.attention_mask for e in encs]),
    )


def _rte():
    path = shared_data("rte", "dev.tsv")
    a = _tsv_columns(path, {"sentence1"})
    b = _tsv_columns(path, {"sentence2"})
    return a, b


def test_pairs_match_hf(preprocessor):
    a, b = _rte()  # RTE premises are long: many rows are truncated
    out = preprocessor((tf.constant(a), tf.constant(b)))
    ids, types, mask = hf_encode(a, b)
    assert (mask.sum(1) == LENGTH).sum() > 20
    np.testing.assert_array_equal(out["token_ids"], ids)
    np.testing.assert_array_equal(out["segment_ids"], types)
    np.testing.assert_array_equal(out["padding_mask"], mask)


def test_single_texts_match_hf(preprocessor):
    a, _ = _rte()
    out = preprocessor(tf.constant(a))
    ids, types, mask = hf_encode(a)
    np.testing.assert_array_equal(out["token_ids"], ids)
    np.testing.assert_array_equal(out["segment_ids"], types)
    np.testing.assert_array_equal(out["padding_mask"], mask)
    assert all(v.dtype == tf.int32 for v in out.values())


def test_input_forms(preprocessor):
    batch = preprocessor(["first text", "second"])  # python list = one batch
    assert batch["token_ids"].shape == (2, LENGTH)
    scalar = preprocessor("first text")
    np.testing.assert_array_equal(scalar["token_ids"], batch["token_ids"][0])
    pair = preprocessor(("a question?", "a context."))  # tuple of scalars = one pair
    assert pair["segment_ids"].shape == (LENGTH,) and int(pair["segment_ids"].numpy().sum()) == 4
    listed = preprocessor([tf.constant(["a question?"]), tf.constant(["a context."])])
    np.testing.assert_array_equal(listed["token_ids"][0], pair["token_ids"])


def test_tf_data_tf_function_and_saved_model(preprocessor, tmp_path):
    a, b = _rte()
    a, b = a[:40], b[:40]
    direct = preprocessor((tf.constant(a), tf.constant(b)))
    ds = tf.data.Dataset.from_tensor_slices((a, b)).batch(16).map(lambda x, y: preprocessor((x, y)))
    assert ds.element_spec["token_ids"].shape.as_list() == [None, LENGTH]
    batches = list(ds)
    for key in direct:
        np.testing.assert_array_equal(np.concatenate([x[key] for x in batches]), direct[key])
    graph = tf.function(lambda x, y: preprocessor((x, y)), jit_compile=False)(tf.constant(a), tf.constant(b))
    for key in direct:
        np.testing.assert_array_equal(graph[key], direct[key])
    module = tf.Module()
    module.preprocessor = preprocessor
    module.serve = tf.function(
        lambda x, y: preprocessor((x, y)), input_signature=[tf.TensorSpec([None], tf.string)] * 2
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    served = restored.serve(tf.constant(a), tf.constant(b))
    for key in direct:
        np.testing.assert_array_equal(served[key], direct[key])


def _without_names(config):
    if isinstance(config, dict):
        return {k: _without_names(v) for k, v in config.items() if k != "name"}
    return config


def test_config_preset_and_keras_round_trip(preprocessor, tmp_path):
    config = preprocessor.get_config()
    clone = BertPreprocessor.from_config(config)
    assert clone.get_config() == config
    preprocessor.save_to_preset(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["preprocessor.json", "tokenizer_config.json", "vocab.txt"]
    again = BertPreprocessor.from_preset(str(tmp_path))
    # Layer names are Keras' auto-names, unique per session ("bert_tokenizer_1" when an earlier
    # test's tokenizer still holds "bert_tokenizer"): not part of what a preset restores.
    assert _without_names(again.get_config()) == _without_names(config)
    assert BertPreprocessor.from_preset(str(tmp_path), sequence_length=16).sequence_length == 16

    @keras.saving.register_keras_serializable(package="test_preprocessor")
    class Holder(keras.Model):
        def __init__(self, preprocessor, **kwargs):
            super().__init__(**kwargs)
            self.preprocessor = preprocessor
            self.embedding = keras.layers.Embedding(preprocessor.tokenizer.vocabulary_size(), 2)

        def call(self, x):
            return self.embedding(x["token_ids"])

        def get_config(self):
            return {"preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}

        @classmethod
        def from_config(cls, config):
            return cls(keras.saving.deserialize_keras_object(config["preprocessor"]))

    model = Holder(preprocessor)
    x = preprocessor(["a saved model"])
    model(x)
    model.save(str(tmp_path / "m.keras"))
    restored = keras.saving.load_model(str(tmp_path / "m.keras"))
    assert restored.preprocessor.get_config() == config
    np.testing.assert_array_equal(restored(restored.preprocessor(["a saved model"])), model(x))


def test_refuses_a_padding_tokenizer():
    tokenizer = BertTokenizer.from_preset(minilm_path(), sequence_length=8)
    with pytest.raises(ValueError, match="sequence_length=None"):
        BertPreprocessor(tokenizer)
