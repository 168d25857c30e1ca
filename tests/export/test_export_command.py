"""`bert-zoo export`: a saved task directory in, a raw-string SavedModel out."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor, cli
from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
from tests.helpers import minilm_path


def _backbone(vocabulary_size):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=32,
    )


def test_export_classifier_directory(tmp_path, capsys):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=12)
    model = BertClassifier(
        _backbone(pre.tokenizer.vocabulary_size()), num_classes=2, label_names=["no", "yes"], preprocessor=pre
    )
    model.classifier.kernel.assign(model.classifier.kernel * 100.0)
    model.save_to_preset(str(tmp_path / "model"))
    texts = ["is it raining?", "", "ça va très bien"]
    expected = model.logits_to_probabilities(model.predict(texts, verbose=0))

    assert cli.main(["export", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "served")]) == 0
    shown = capsys.readouterr().out
    assert "serving_default(text) -> label_ids, labels, probabilities" in shown
    served = tf.saved_model.load(str(tmp_path / "served"))
    got = served.signatures["serving_default"](text=tf.constant(texts))
    assert np.abs(got["probabilities"].numpy() - expected).max() <= 1e-5
    assert [s.decode() for s in got["labels"].numpy()] == [["no", "yes"][i] for i in expected.argmax(-1)]


def test_export_pretrainer_directory(tmp_path, capsys):
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=12)
    model = BertPretrainer(backbone=_backbone(pre.tokenizer.vocabulary_size()))
    model.save_to_preset(str(tmp_path / "pre"))
    pre.save_to_preset(str(tmp_path / "pre"))
    assert cli.main(["export", "--model", str(tmp_path / "pre"), "--out", str(tmp_path / "mlm"), "--top-k", "2"]) == 0
    assert "fill_mask(text) -> is_mask, mask_positions, scores, token_ids, tokens" in capsys.readouterr().out
    got = tf.saved_model.load(str(tmp_path / "mlm")).signatures["fill_mask"](text=tf.constant(["a [MASK] day"]))
    assert got["tokens"].shape == (1, 8, 2)


def test_export_bad_directory_is_a_clear_error(tmp_path, capsys):
    assert cli.main(["export", "--model", str(tmp_path), "--out", str(tmp_path / "x")]) == 1
    err = capsys.readouterr().err
    assert "has no config.json" in err and "bert-zoo finetune" in err
