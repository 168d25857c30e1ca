"""`BertTagger`: the contract, HF `BertForTokenClassification` parity both ways, the loss HF uses."""

import os

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertTagger
from keras_bert_zoo.tasks.tagger.alignment import IGNORE_LABEL
from tests.helpers import minilm_path, run_model_test, shared_data, train_side_by_side

LABELS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]


def tiny_backbone(**kwargs):
    return BertBackbone(
        vocabulary_size=50,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def int_inputs(batch=3, seq=7, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    mask = (np.arange(seq)[None, :] < rng.integers(3, seq + 1, batch)[:, None]).astype("int32")
    return {
        "token_ids": (rng.integers(1, vocab, (batch, seq)) * mask).astype("int32"),
        "segment_ids": np.zeros((batch, seq), "int32"),
        "padding_mask": mask,
    }


def test_contract(tmp_path):
    model = BertTagger(tiny_backbone(), num_labels=9, label_names=LABELS)
    out = run_model_test(model, int_inputs(), tmp_path)
    assert tuple(out.shape) == (3, 7, 9)
    with pytest.raises(ValueError, match="label_names has 2 entries"):
        BertTagger(tiny_backbone(), num_labels=3, label_names=["O", "B-X"])
    with pytest.raises(ValueError, match="scheme='IOB1'"):
        BertTagger(tiny_backbone(), num_labels=3, scheme="IOB1")
    with pytest.raises(ValueError, match="own loss"):
        model.compile(loss="mse")


def test_loss_is_hf_cross_entropy_over_labelled_positions():
    """The built-in loss equals torch's CrossEntropyLoss(ignore_index=-100), HF's token loss."""
    torch = pytest.importorskip("torch")
    model = BertTagger(tiny_backbone(), num_labels=9)
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(4, 7, 9)).astype("float32")
    labels = np.where(rng.random((4, 7)) < 0.4, rng.integers(0, 9, (4, 7)), IGNORE_LABEL).astype("int32")
    ours = float(model.compute_loss(y=labels, y_pred=keras.ops.convert_to_tensor(logits)))
    ref = torch.nn.CrossEntropyLoss(ignore_index=-100)(
        torch.tensor(logits).reshape(-1, 9), torch.tensor(labels, dtype=torch.long).reshape(-1)
    )
    assert ours == pytest.approx(float(ref), rel=1e-6)
    # Row weights (length-grouped batches): torch's per-token losses, each row's scaled by
    # its weight, summed, over the unweighted count of labelled tokens.
    row_weights = np.array([0.5, 2.0, 1.0, 0.0], "float32")
    weighted = float(
        model.compute_loss(y=labels, y_pred=keras.ops.convert_to_tensor(logits), sample_weight=row_weights)
    )
    per_token = torch.nn.CrossEntropyLoss(ignore_index=-100, reduction="none")(
        torch.tensor(logits).reshape(-1, 9), torch.tensor(labels, dtype=torch.long).reshape(-1)
    ).reshape(4, 7)
    expected = float((per_token * torch.tensor(row_weights)[:, None]).sum()) / int((labels != IGNORE_LABEL).sum())
    assert weighted == pytest.approx(expected, rel=1e-6) and abs(weighted - ours) > 1e-3
    # Per-token weights ([batch, seq], Keras' temporal form) take the same path.
    token_weights = np.random.default_rng(2).random((4, 7)).astype("float32")
    per_token_weighted = float(
        model.compute_loss(y=labels, y_pred=keras.ops.convert_to_tensor(logits), sample_weight=token_weights)
    )
    expected = float((per_token * torch.tensor(token_weights)).sum()) / int((labels != IGNORE_LABEL).sum())
    assert per_token_weighted == pytest.approx(expected, rel=1e-6)


def test_fit_learns_a_token_rule():
    keras.utils.set_random_seed(0)
    model = BertTagger(tiny_backbone(dropout=0.0), num_labels=2, dropout=0.0)
    x = int_inputs(batch=32, seq=8, seed=2)
    y = np.where(x["padding_mask"] == 1, (x["token_ids"] > 25).astype("int32"), IGNORE_LABEL)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(x, y, epochs=60, batch_size=32, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0] and history["accuracy"][-1] > 0.9


def test_real_weights_match_hf_and_hf_loads_ours(tmp_path):
    """all-MiniLM-L6-v2 with a token head: logits equal HF BertForTokenClassification, both directions."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForTokenClassification.from_pretrained(
        minilm_path(), num_labels=9, id2label=dict(enumerate(LABELS)), label2id={n: i for i, n in enumerate(LABELS)}
    )
    with torch.no_grad():
        hf.classifier.bias.normal_()  # HF starts it at 0: make the head's bias count
    hf.eval()
    hf_dir = str(tmp_path / "hf")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer_config.json"):
        if os.path.exists(os.path.join(minilm_path(), name)):
            with open(os.path.join(minilm_path(), name), "rb") as f, open(os.path.join(hf_dir, name), "wb") as g:
                g.write(f.read())

    ours = BertTagger.from_preset(hf_dir)
    assert ours.label_names == LABELS and ours.num_labels == 9
    sentences = [
        line.split()[0]
        for line in open(shared_data("conll2003", "eng.testa")).read().splitlines()[2:60]
        if line.strip()
    ]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = tokenizer([" ".join(sentences[:20]), " ".join(sentences[20:30])], padding=True, return_tensors="np")
    x = {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }
    with torch.no_grad():
        ref = hf(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    got = ours.predict(x, verbose=0)
    mask = x["padding_mask"].astype(bool)
    np.testing.assert_allclose(got[mask], ref[mask], rtol=1e-5, atol=1e-4)

    out = str(tmp_path / "ours")
    ours.save_to_preset(out)
    back, info = transformers.BertForTokenClassification.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert back.config.id2label == dict(enumerate(LABELS))
    with torch.no_grad():
        again = back.eval()(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    np.testing.assert_allclose(again[mask], ref[mask], rtol=1e-5, atol=1e-4)


def test_packed_sentences_match_hf_one_by_one():
    """Real CoNLL sentences packed end to end into rows (`preprocessing.packing`): each
    sentence's logits equal HF BertForTokenClassification's on that sentence alone."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.packing import pack_batch

    torch.manual_seed(0)
    hf = transformers.BertForTokenClassification.from_pretrained(minilm_path(), num_labels=9).eval()
    ours = BertTagger(BertBackbone.from_preset(minilm_path()), num_labels=9)
    ours.classifier.set_weights([hf.classifier.weight.detach().numpy().T, hf.classifier.bias.detach().numpy()])
    text = open(shared_data("conll2003", "eng.testa")).read().split("\n\n")[1:13]
    sentences = [" ".join(line.split()[0] for line in s.strip().splitlines()) for s in text]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = tokenizer(sentences, padding=True, return_tensors="np")
    packed, _ = pack_batch(
        {
            "token_ids": tf.constant(batch["input_ids"], tf.int32),
            "segment_ids": tf.constant(batch["token_type_ids"], tf.int32),
            "padding_mask": tf.constant(batch["attention_mask"], tf.int32),
        },
        width=96,
    )
    numbers = packed["padding_mask"].numpy()
    assert len(numbers) <= len(sentences) / 2  # several sentences share each row
    logits = ours.predict({k: v.numpy() for k, v in packed.items()}, verbose=0)
    for i, sentence in enumerate(sentences):
        alone = tokenizer(sentence, return_tensors="pt")
        with torch.no_grad():
            ref = hf(**alone).logits.numpy()[0]
        row = np.flatnonzero((numbers == i + 1).any(axis=1))[0]
        np.testing.assert_allclose(logits[row][numbers[row] == i + 1], ref, rtol=1e-5, atol=1e-4)


@pytest.mark.slow  # the real 6-layer model traced and trained: about a minute on 2 quiet cores
def test_fine_tuning_steps_match_hf(tmp_path):
    """Six optimizer steps of fine-tuning on real CoNLL sentences from the same all-MiniLM-L6-v2
    weights (dropout off): our tagger, loss and `create_optimizer` against HF's
    BertForTokenClassification, torch AdamW (decay off biases and LayerNorm), the linear
    warm-up/decay schedule and clip_grad_norm_. Same losses at every step, same logits after."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForTokenClassification.from_pretrained(minilm_path(), num_labels=len(LABELS)).eval()
    hf_dir = str(tmp_path / "hf")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    with open(os.path.join(minilm_path(), "vocab.txt"), "rb") as f, open(os.path.join(hf_dir, "vocab.txt"), "wb") as g:
        g.write(f.read())
    ours = BertTagger.from_preset(hf_dir)
    for layer in ours._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0  # HF runs in eval mode: no dropout on either side

    sentences = open(shared_data("conll2003", "eng.train")).read().split("\n\n")[1:17]
    rows = [[line.split() for line in s.strip().splitlines()] for s in sentences]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = tokenizer([[r[0] for r in s] for s in rows], is_split_into_words=True, padding=True, return_tensors="np")
    labels = np.full(batch["input_ids"].shape, IGNORE_LABEL, "int64")
    for i, sentence in enumerate(rows):  # first piece of each word, IOB1 read as its B-/I- type
        previous = None
        for j, word in enumerate(batch.word_ids(i)):
            if word is not None and word != previous:
                labels[i, j] = LABELS.index(sentence[word][-1]) if sentence[word][-1] in LABELS else 0
            previous = word
    x = {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }

    before = ours.predict(x, verbose=0)
    halves = [slice(0, 8), slice(8, 16)] * 3
    train_side_by_side(
        ours,
        hf,
        [
            (
                {k: v[rows] for k, v in x.items()},
                labels[rows].astype("int32"),
                {**{k: torch.tensor(v[rows]) for k, v in batch.items()}, "labels": torch.tensor(labels[rows])},
            )
            for rows in halves
        ],
    )
    after = ours.predict(x, verbose=0)
    with torch.no_grad():
        reference = hf(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    mask = x["padding_mask"].astype(bool)
    assert np.abs(after[mask] - before[mask]).max() > 0.5  # training moved the logits a lot...
    np.testing.assert_allclose(after[mask], reference[mask], atol=5e-3)  # ...and the same way
