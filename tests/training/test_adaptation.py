"""Continued pretraining of a checkpoint that ships no MLM head (all-MiniLM-L6-v2).

The reference is the checkpoint file itself, read with the `safetensors` library (not
our reader): the backbone must start from exactly those tensors, stay on them while
the new head trains alone, and the new head must be saved and reloaded under HF's names.
"""

import os

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file

from keras_bert_zoo import BertPreprocessor, BertPretrainer, continue_pretraining
from keras_bert_zoo.tasks.pretrainer.data import masked_lm_dataset
from tests.helpers import minilm_path

TEXTS = [
    "a fine film .",
    "a dull , tired film that goes on and on .",
    "the cast is great",
    "it is not funny",
    "a moving , well acted story of two brothers .",
    "boring",
] * 4
HEAD = {  # HF name -> the head variable of a BertPretrainer
    "cls.predictions.transform.dense.weight": lambda m: m.mlm_head.dense.kernel.numpy().T,
    "cls.predictions.transform.dense.bias": lambda m: m.mlm_head.dense.bias.numpy(),
    "cls.predictions.transform.LayerNorm.weight": lambda m: m.mlm_head.layer_norm.gamma.numpy(),
    "cls.predictions.transform.LayerNorm.bias": lambda m: m.mlm_head.layer_norm.beta.numpy(),
    "cls.predictions.bias": lambda m: m.mlm_head.bias.numpy(),
}


def backbone_tensors(model):
    """A few backbone tensors in HF's layout (embeddings, a first and a last layer; HF kernels are [out, in])."""
    variables = {v.path: v.numpy() for v in model.backbone.weights}
    return {
        "embeddings.word_embeddings.weight": variables["embeddings/word_embeddings/embeddings"],
        "encoder.layer.0.attention.self.query.weight": variables["encoder_layer_0/query/kernel"].T,
        "encoder.layer.5.output.dense.weight": variables["encoder_layer_5/output_dense/kernel"].T,
    }


@pytest.fixture(scope="module")
def checkpoint():
    path = minilm_path()
    return path, load_file(os.path.join(path, "model.safetensors"))


def new_pretrainer(path, length=32):
    keras.utils.set_random_seed(0)
    return BertPretrainer.from_preset(path, preprocessor=BertPreprocessor.from_preset(path, sequence_length=length))


def test_fresh_head_is_initialised_as_the_original_code(checkpoint):
    path, _ = checkpoint
    model = new_pretrainer(path)
    assert not model.mlm_head_loaded
    kernel = model.mlm_head.dense.kernel.numpy()
    assert abs(kernel.std() - 0.02 * 0.88) < 0.002  # TruncatedNormal(0.02) at 2 sd has sd 0.88 * 0.02
    assert np.abs(kernel).max() <= 0.04 + 1e-6
    np.testing.assert_array_equal(model.mlm_head.dense.bias.numpy(), 0)
    np.testing.assert_array_equal(model.mlm_head.layer_norm.gamma.numpy(), 1)
    np.testing.assert_array_equal(model.mlm_head.layer_norm.beta.numpy(), 0)
    np.testing.assert_array_equal(model.mlm_head.bias.numpy(), 0)


def test_backbone_starts_from_the_checkpoint_and_stays_while_the_head_trains(checkpoint):
    path, tensors = checkpoint
    model = new_pretrainer(path)
    for name, value in backbone_tensors(model).items():
        np.testing.assert_array_equal(value, tensors[name], err_msg=name)
    head_before = {name: get(model).copy() for name, get in HEAD.items()}

    figures = continue_pretraining(model, TEXTS, head_steps=3, steps=0, batch_size=8, verbose=0)

    assert figures["head_steps"] == 3 and figures["mlm_accuracy"] is None
    for name, value in backbone_tensors(model).items():  # frozen: bit-identical
        np.testing.assert_array_equal(value, tensors[name], err_msg=name)
    assert model.backbone.trainable  # given back to the caller trainable
    moved = [name for name, get in HEAD.items() if not np.array_equal(get(model), head_before[name])]
    assert "cls.predictions.transform.dense.weight" in moved and "cls.predictions.bias" in moved

    continue_pretraining(model, TEXTS, head_steps=0, steps=2, batch_size=8, verbose=0)
    query = backbone_tensors(model)["encoder.layer.0.attention.self.query.weight"]
    assert not np.array_equal(query, tensors["encoder.layer.0.attention.self.query.weight"])
    # The MLM loss gives the pooler no gradient: it stays the checkpoint's, and trainable afterwards.
    np.testing.assert_array_equal(model.backbone.pooler.kernel.numpy().T, tensors["pooler.dense.weight"])
    assert model.backbone.pooler.trainable and model.nsp_head.trainable


def test_new_head_is_saved_and_reloaded_by_name(checkpoint, tmp_path):
    path, _ = checkpoint
    model = new_pretrainer(path)
    continue_pretraining(model, TEXTS, head_steps=2, steps=1, batch_size=8, verbose=0)
    model.save_to_preset(str(tmp_path))

    saved = load_file(str(tmp_path / "model.safetensors"))
    for name, get in HEAD.items():
        np.testing.assert_array_equal(saved[name], get(model), err_msg=name)
    reloaded = BertPretrainer.from_preset(str(tmp_path))
    assert reloaded.mlm_head_loaded
    for name, get in HEAD.items():
        np.testing.assert_array_equal(get(reloaded), get(model), err_msg=name)
    # A checkpoint with its head skips the head-only stage by default.
    assert continue_pretraining(reloaded, TEXTS[:8], steps=1, batch_size=8, verbose=0)["head_steps"] == 0


def test_masked_lm_batches_keep_every_masked_piece(checkpoint):
    """The slots cut off past ceil(0.15 * width) are always empty: no masked piece is lost."""
    path, _ = checkpoint
    pre = BertPreprocessor.from_preset(path, sequence_length=64)
    texts = [" ".join(["word"] * n) for n in range(1, 60, 3)]
    seen = 0
    for x, y in masked_lm_dataset(pre, texts, batch_size=4).take(20):
        width, slots = int(x["token_ids"].shape[1]), int(x["mask_positions"].shape[1])
        assert slots == min(10, int(np.ceil(0.15 * width)))
        real = x["padding_mask"].numpy().sum(1) - 2
        expected = np.clip(np.round(0.15 * real), 1, 10)  # the masker's budget per row
        np.testing.assert_array_equal(y["mask_weights"].numpy().sum(1), expected)
        seen += len(real)
    assert seen > len(texts)  # more than one pass over the texts


def test_bad_arguments_name_the_fix(checkpoint):
    path, _ = checkpoint
    model = BertPretrainer.from_preset(path, preprocessor=None)
    with pytest.raises(ValueError, match="needs a BertPretrainer with a BertPreprocessor"):
        continue_pretraining(model, TEXTS)
    model = new_pretrainer(path)
    with pytest.raises(ValueError, match="at least one non-empty text"):
        continue_pretraining(model, ["", "  "])
    with pytest.raises(ValueError, match="train nothing"):
        continue_pretraining(model, TEXTS, steps=0, head_steps=0)
