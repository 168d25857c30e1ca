"""LoRA on `BertBackbone` (`enable_lora`): what trains, what is saved, what reloads.

References nobody here wrote: KerasHub's `enable_lora` (which weights it leaves trainable),
HF PEFT (`LoraConfig(target_modules=["query", "value"], bias="lora_only")`: the same
trainable-parameter count, and a preset directory PEFT loads and predicts the same with).
"""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.backbone import BertBackbone
from keras_bert_zoo.tasks.classifier.model import BertClassifier
from tests.helpers import assert_allclose_tree

VOCAB, LAYERS, HIDDEN = 50, 2, 8


def tiny_backbone(**kwargs):
    return BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=2,
        hidden_dim=HIDDEN,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def int_inputs(batch=4, seq=7, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, size=batch)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    return {
        "token_ids": (rng.integers(1, VOCAB, size=(batch, seq)) * mask).astype("int32"),
        "segment_ids": np.zeros((batch, seq), "int32"),
        "padding_mask": mask,
    }


def lora_classifier(rank=4, seed=0, **lora_kwargs):
    keras.utils.set_random_seed(seed)
    model = BertClassifier(tiny_backbone(dropout=0.0), num_classes=3, dropout=0.0)
    model.backbone.enable_lora(rank, **lora_kwargs)
    return model


def nonzero_adapters(model, seed=1):
    """Random values in every adapter (b starts at zero: a fresh LoRA model equals the base)."""
    rng = np.random.default_rng(seed)
    for w in model.weights:
        if "lora_kernel" in w.path:
            w.assign(rng.normal(0, 0.3, w.shape).astype("float32"))


def trained_lora_classifier(steps=3):
    model = lora_classifier()
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    x = int_inputs(batch=8)
    model.fit(x, np.arange(8) % 3, epochs=steps, batch_size=8, verbose=0)
    return model


def snapshot(model):
    return {w.path: np.array(w.numpy()) for w in model.weights}


def test_fit_changes_only_adapters_biases_and_head():
    model = lora_classifier()
    before = snapshot(model)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    model.fit(int_inputs(batch=8), np.arange(8) % 3, epochs=2, batch_size=8, verbose=0)
    after = snapshot(model)
    changed = {p for p in before if not np.array_equal(before[p], after[p]) and "seed_generator" not in p}
    expected = {
        f"encoder_layer_{i}/{name}/{w}"
        for i in range(LAYERS)
        for name in ("query", "value")
        for w in ("lora_kernel_a", "lora_kernel_b", "bias")
    } | {"classifier/kernel", "classifier/bias"}
    assert changed == expected
    assert {w.path for w in model.trainable_weights} == expected


def test_trainable_weights_as_keras_hub():
    """KerasHub's `enable_lora` (installed) leaves the targeted layers' biases and adapters
    trainable, nothing else; ours the same (its EinsumDense adapters have other shapes)."""
    keras_hub = pytest.importorskip("keras_hub")
    hub = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=LAYERS,
        num_heads=2,
        hidden_dim=HIDDEN,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    hub.enable_lora(4)
    ours = tiny_backbone()
    ours.enable_lora(4)

    def kinds(model):  # (layer, projection, weight) per trainable weight
        return sorted((w.path.split("/")[0][-1], w.path.split("/")[-2], w.name) for w in model.trainable_weights)

    assert kinds(ours) == kinds(hub)
    assert ours.default_lora_layer_names() == ["query", "value"]
    assert set(ours.default_lora_layer_names()) <= set(hub.default_lora_layer_names())


def _hf_config(transformers):
    """HF's config of the tiny model these tests build (3 labels)."""
    return transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=HIDDEN,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=16,
        num_labels=3,
    )


def test_trainable_count_as_peft():
    """PEFT's LoRA on HF `BertForSequenceClassification` with KerasHub's choice (q and v, their
    biases, the classifier) trains exactly as many parameters as ours."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _hf_config(transformers)
    hf = peft.get_peft_model(
        transformers.BertForSequenceClassification(config),
        peft.LoraConfig(r=4, lora_alpha=4, target_modules=["query", "value"], bias="lora_only", task_type="SEQ_CLS"),
    )
    peft_trainable = sum(p.numel() for p in hf.parameters() if p.requires_grad)
    ours = lora_classifier(rank=4)
    assert sum(int(np.prod(w.shape)) for w in ours.trainable_weights) == peft_trainable == 315


def test_fresh_adapters_change_nothing_and_nonzero_ones_do():
    keras.utils.set_random_seed(0)
    model = BertClassifier(tiny_backbone(dropout=0.0), num_classes=3, dropout=0.0)
    x = int_inputs()
    base, base_sequence = model.predict(x, verbose=0), model.backbone.predict(x, verbose=0)["sequence_output"]
    model.backbone.enable_lora(4)  # after predict: its traced steps are stale now
    np.testing.assert_allclose(model.predict(x, verbose=0), base, atol=1e-6)
    nonzero_adapters(model)
    # (the untrained head's logits are ~1e-3: the backbone's output shows the change better)
    assert np.abs(model.predict(x, verbose=0) - base).max() > 2e-5
    assert np.abs(model.backbone.predict(x, verbose=0)["sequence_output"] - base_sequence).max() > 1e-2


def test_traced_inference_equals_eager_with_adapters():
    """`predict` runs the blocks through the shared inference trace (block_trace): with
    non-zero adapters it must compute what the eager call does."""
    model = lora_classifier()
    nonzero_adapters(model)
    x = int_inputs()
    eager = model(x, training=False)
    traced = tf.function(lambda inputs: model(inputs, training=False))(x)
    assert_allclose_tree(traced, eager, atol=1e-5)
    assert_allclose_tree(model.predict(x, verbose=0), eager, atol=1e-5)


def test_shared_trace_keeps_lora_scales_apart():
    """Two blocks with adapters of one shape but another scale (alpha) must not share one trace."""
    from keras_bert_zoo.models.layers.block_trace import clear_shared_block_traces
    from keras_bert_zoo.models.layers.encoder_block import BertEncoderBlock

    clear_shared_block_traces()
    x, bias = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32"), np.zeros((2, 1, 5, 5), "float32")
    blocks = [BertEncoderBlock(num_heads=2, hidden_dim=8, intermediate_dim=16, dropout=0.0) for _ in range(2)]
    for block, alpha in zip(blocks, (4.0, 16.0), strict=True):
        block(x, bias)  # build
        block.query.enable_lora(4, lora_alpha=alpha)
        block.query.lora_kernel_a.assign(np.full((8, 4), 0.5, "float32"))
        block.query.lora_kernel_b.assign(np.full((4, 8), 0.5, "float32"))
    for block in blocks:
        traced = tf.function(lambda a, b, block=block: block(a, b, training=False))(x, bias)
        np.testing.assert_allclose(traced, block(x, bias, training=False), atol=1e-5)


def test_keras_file_keeps_adapters(tmp_path):
    """`.keras` round trip: same outputs, LoRA still on (same trainable weights), and the
    adapters themselves back (Keras' Dense would save them merged and reload them as zeros,
    which can no longer learn)."""
    model = trained_lora_classifier()
    x = int_inputs()
    path = str(tmp_path / "m.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    assert [w.path for w in loaded.trainable_weights] == [w.path for w in model.trainable_weights]
    for a, b in zip(loaded.weights, model.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert np.abs(loaded.backbone.encoder_layers[0].query.lora_kernel_b.numpy()).max() > 0


def test_preset_round_trip(tmp_path):
    model = trained_lora_classifier()
    x = int_inputs()
    model.save_to_preset(str(tmp_path))
    assert {"adapter_config.json", "adapter_model.safetensors"} <= set(os.listdir(tmp_path))
    loaded = BertClassifier.from_preset(str(tmp_path))
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5)
    assert [w.path for w in loaded.trainable_weights] == [w.path for w in model.trainable_weights]
    # saved again without LoRA, the stale adapter files go
    BertClassifier(tiny_backbone(), num_classes=3).save_to_preset(str(tmp_path))
    assert "adapter_config.json" not in os.listdir(tmp_path)


def _hf_inputs(x):
    import torch

    return {
        "input_ids": torch.tensor(x["token_ids"], dtype=torch.long),
        "token_type_ids": torch.tensor(x["segment_ids"], dtype=torch.long),
        "attention_mask": torch.tensor(x["padding_mask"], dtype=torch.long),
    }


def test_peft_loads_our_preset(tmp_path):
    """HF PEFT reads our preset directory (base model + its adapter files) and computes our logits."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    model = lora_classifier()
    nonzero_adapters(model)
    model.save_to_preset(str(tmp_path))
    base = transformers.BertForSequenceClassification.from_pretrained(str(tmp_path))
    hf = peft.PeftModel.from_pretrained(base, str(tmp_path)).eval()
    x = int_inputs()
    with torch.no_grad():
        logits = hf(**_hf_inputs(x)).logits.numpy()
    np.testing.assert_allclose(logits, model.predict(x, verbose=0), atol=1e-4)


def test_we_load_a_peft_adapter(tmp_path):
    """An adapter PEFT saved beside its base model (alpha 8 != rank 4) loads into ours with the same logits."""
    torch = pytest.importorskip("torch")
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = _hf_config(transformers)
    base = transformers.BertForSequenceClassification(config)
    base.save_pretrained(str(tmp_path))
    hf = peft.get_peft_model(
        base,
        peft.LoraConfig(r=4, lora_alpha=8, target_modules=["query", "value"], bias="lora_only", task_type="SEQ_CLS"),
    )
    with torch.no_grad():  # trained-looking adapters, biases and head
        for p in hf.parameters():
            if p.requires_grad:
                p.add_(torch.randn_like(p) * 0.3)
    hf.save_pretrained(str(tmp_path))
    ours = BertClassifier.from_preset(str(tmp_path))
    x = int_inputs()
    with torch.no_grad():
        expected = hf.eval()(**_hf_inputs(x)).logits.numpy()
    np.testing.assert_allclose(ours.predict(x, verbose=0), expected, atol=1e-4)
    assert ours.backbone.encoder_layers[0].query.lora_alpha == 8


def test_lora_weights_file(tmp_path):
    model = trained_lora_classifier()
    path = str(tmp_path / "adapters.lora.h5")
    model.backbone.save_lora_weights(path)
    fresh = lora_classifier(seed=0)  # same base (same seed), untrained adapters
    fresh.classifier.set_weights(model.classifier.get_weights())
    for name in ("query", "value"):  # the biases trained too; the .lora.h5 file holds adapters only
        for i in range(LAYERS):
            getattr(fresh.backbone.encoder_layers[i], name).bias.assign(
                getattr(model.backbone.encoder_layers[i], name).bias
            )
    fresh.backbone.load_lora_weights(path)
    x = int_inputs()
    np.testing.assert_allclose(fresh.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    other = BertClassifier(tiny_backbone(), num_classes=3)  # no LoRA yet: load enables it
    other.backbone.load_lora_weights(path)
    assert other.backbone.encoder_layers[1].value.lora_rank == 4
    with pytest.raises(UsageError, match="rank 4"):
        lora_classifier(rank=2).backbone.load_lora_weights(path)
    with pytest.raises(UsageError, match=".lora.h5"):
        model.backbone.save_lora_weights(str(tmp_path / "x.h5"))


def test_bad_arguments():
    with pytest.raises(UsageError, match="positive integer"):
        tiny_backbone().enable_lora(0)
    with pytest.raises(UsageError, match="target_layer_names"):
        tiny_backbone().enable_lora(4, target_layer_names=["query_dense"])
    backbone = tiny_backbone()
    backbone.enable_lora(4)
    with pytest.raises(UsageError, match="already enabled"):
        backbone.enable_lora(4)
    with pytest.raises(UsageError, match="no LoRA layers"):
        tiny_backbone().save_lora_weights("x.lora.h5")


@pytest.mark.parametrize(
    "damage, message",
    [
        ("no_weights", "adapter_config.json but no adapter_model.safetensors"),
        ("dora", "use_dora=True is not supported"),
        ("some_layers", "in only some layers"),
    ],
)
def test_damaged_or_unsupported_adapters_are_refused(tmp_path, damage, message):
    import json

    from keras_bert_zoo.convert.safetensors_io import read_safetensors, write_safetensors
    from keras_bert_zoo.errors import CheckpointError

    model = lora_classifier()
    model.save_to_preset(str(tmp_path))
    config_path, weights_path = tmp_path / "adapter_config.json", str(tmp_path / "adapter_model.safetensors")
    if damage == "no_weights":
        os.remove(weights_path)
    elif damage == "dora":
        config_path.write_text(json.dumps({**json.loads(config_path.read_text()), "use_dora": True}))
    else:
        tensors = read_safetensors(weights_path)
        write_safetensors({k: v for k, v in tensors.items() if ".layer.1." not in k}, weights_path)
    with pytest.raises(CheckpointError, match=message):
        BertClassifier.from_preset(str(tmp_path))
