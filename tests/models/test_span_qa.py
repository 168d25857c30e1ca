"""`BertSpanQA`: the contract, HF `BertForQuestionAnswering` parity both ways, HF's loss, Google names."""

import os
import shutil

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertSpanQA
from tests.helpers import minilm_path, run_model_test, shared_data, train_side_by_side


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
        "segment_ids": ((np.arange(seq)[None, :] >= 3) * mask).astype("int32"),
        "padding_mask": mask,
    }


def test_contract(tmp_path):
    model = BertSpanQA(tiny_backbone())
    out = run_model_test(model, int_inputs(), tmp_path)
    assert set(out) == {"start_logits", "end_logits"} and tuple(out["start_logits"].shape) == (3, 7)
    with pytest.raises(ValueError, match="own loss"):
        model.compile(loss="mse")


def test_loss_is_hf_mean_of_start_and_end_cross_entropy():
    torch = pytest.importorskip("torch")
    model = BertSpanQA(tiny_backbone())
    rng = np.random.default_rng(1)
    start, end = rng.normal(size=(2, 5, 9)).astype("float32")
    s_pos, e_pos = rng.integers(0, 9, 5), rng.integers(0, 9, 5)
    ours = float(
        model.compute_loss(
            y={"start_positions": s_pos, "end_positions": e_pos},
            y_pred={"start_logits": keras.ops.convert_to_tensor(start), "end_logits": keras.ops.convert_to_tensor(end)},
        )
    )
    ce = torch.nn.CrossEntropyLoss()
    ref = (ce(torch.tensor(start), torch.tensor(s_pos)) + ce(torch.tensor(end), torch.tensor(e_pos))) / 2
    assert ours == pytest.approx(float(ref), rel=1e-6)


def test_fit_learns_a_position_rule():
    keras.utils.set_random_seed(0)
    model = BertSpanQA(tiny_backbone(dropout=0.0))
    x = int_inputs(batch=32, seq=8, seed=2)
    x["padding_mask"][:] = 1
    y = {"start_positions": np.argmax(x["token_ids"], axis=1), "end_positions": np.argmin(x["token_ids"], axis=1)}
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(x, y, epochs=80, batch_size=32, verbose=0).history
    assert history["loss"][-1] < 0.5 * history["loss"][0] and history["start_accuracy"][-1] > 0.5


def _hf_qa(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForQuestionAnswering.from_pretrained(minilm_path())
    with torch.no_grad():
        hf.qa_outputs.bias.normal_()  # HF starts it at 0: make the bias count
    hf.eval()
    hf_dir = str(tmp_path / "hf")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer_config.json"):
        if os.path.exists(os.path.join(minilm_path(), name)):
            shutil.copy(os.path.join(minilm_path(), name), hf_dir)
    return hf, hf_dir


def test_real_weights_match_hf_and_hf_loads_ours(tmp_path):
    """all-MiniLM-L6-v2 with a QA head: logits equal HF BertForQuestionAnswering (<= 1e-4), both ways."""
    import json

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    hf, hf_dir = _hf_qa(tmp_path)
    ours = BertSpanQA.from_preset(hf_dir)
    with open(shared_data("squad", "dev.json"), encoding="utf-8") as f:
        paragraph = json.load(f)["data"][0]["paragraphs"][0]
    questions = [q["question"] for q in paragraph["qas"][:4]]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = tokenizer(
        questions,
        [paragraph["context"]] * len(questions),
        padding=True,
        truncation="only_second",
        max_length=384,
        return_tensors="np",
    )
    x = {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }
    with torch.no_grad():
        ref = hf(**{k: torch.tensor(v) for k, v in batch.items()})
    got = ours.predict(x, verbose=0)
    mask = x["padding_mask"].astype(bool)
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(got[name][mask], getattr(ref, name).numpy()[mask], rtol=1e-5, atol=1e-4)

    out = str(tmp_path / "ours")
    ours.save_to_preset(out)
    back, info = transformers.BertForQuestionAnswering.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        again = back.eval()(**{k: torch.tensor(v) for k, v in batch.items()})
    for name in ("start_logits", "end_logits"):
        np.testing.assert_allclose(
            getattr(again, name).numpy()[mask], getattr(ref, name).numpy()[mask], rtol=1e-5, atol=1e-4
        )


def test_google_names_of_the_head():
    from keras_bert_zoo.models.weight_names import google_name

    specs = BertSpanQA(tiny_backbone()).head_weight_specs()
    assert [s.name for s in specs] == ["qa_outputs.weight", "qa_outputs.bias"]
    assert [google_name(s) for s in specs] == ["cls/squad/output_weights", "cls/squad/output_bias"]
    assert specs[0].google_transposed  # run_squad.py stores [2, hidden]


@pytest.mark.slow  # the real 6-layer model traced and trained on 192-piece windows: about a minute
def test_fine_tuning_steps_match_hf(tmp_path):
    """Six optimizer steps of span-QA fine-tuning on real SQuAD questions from the same
    all-MiniLM-L6-v2 weights (dropout off): our span model, its loss and `create_optimizer`
    against HF's BertForQuestionAnswering, torch AdamW (decay off biases and LayerNorm), the
    linear warm-up/decay schedule and clip_grad_norm_. Same losses at every step, same logits after."""
    import json

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForQuestionAnswering.from_pretrained(minilm_path()).eval()
    hf_dir = str(tmp_path / "hf")
    hf.save_pretrained(hf_dir, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer_config.json"):
        if os.path.exists(os.path.join(minilm_path(), name)):
            shutil.copy(os.path.join(minilm_path(), name), os.path.join(hf_dir, name))
    ours = BertSpanQA.from_preset(hf_dir)
    for layer in ours._flatten_layers():
        if isinstance(layer, keras.layers.Dropout):
            layer.rate = 0.0  # HF runs in eval mode: no dropout on either side

    with open(shared_data("squad", "train.json"), encoding="utf-8") as f:
        paragraphs = [p for article in json.load(f)["data"] for p in article["paragraphs"]]
    questions = [(qa["question"], p["context"], qa["answers"][0]) for p in paragraphs[:8] for qa in p["qas"]][:16]
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = tokenizer(
        [q for q, _, _ in questions],
        [c for _, c, _ in questions],
        truncation="only_second",
        max_length=192,
        padding=True,
        return_offsets_mapping=True,
        return_tensors="np",
    )
    starts, ends = np.zeros(16, "int64"), np.zeros(16, "int64")
    for i, (_, _, answer) in enumerate(questions):  # run_qa.py's labels: the pieces covering the answer's characters
        first, last = answer["answer_start"], answer["answer_start"] + len(answer["text"])
        for j, (offset, segment) in enumerate(zip(batch["offset_mapping"][i], batch.sequence_ids(i), strict=True)):
            if segment == 1 and offset[0] <= first < offset[1]:
                starts[i] = j
            if segment == 1 and offset[0] < last <= offset[1]:
                ends[i] = j
    assert (starts > 0).sum() >= 12 and (ends >= starts).all()  # most answers lie in their window
    x = {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }
    hf_inputs = {k: torch.tensor(batch[k]) for k in ("input_ids", "token_type_ids", "attention_mask")}

    before = ours.predict(x, verbose=0)
    halves = [slice(0, 8), slice(8, 16)] * 3
    train_side_by_side(
        ours,
        hf,
        [
            (
                {k: v[rows] for k, v in x.items()},
                {"start_positions": starts[rows].astype("int32"), "end_positions": ends[rows].astype("int32")},
                {
                    **{k: v[rows] for k, v in hf_inputs.items()},
                    "start_positions": torch.tensor(starts[rows]),
                    "end_positions": torch.tensor(ends[rows]),
                },
            )
            for rows in halves
        ],
    )
    after = ours.predict(x, verbose=0)
    with torch.no_grad():
        reference = hf(**hf_inputs)
    mask = x["padding_mask"].astype(bool)
    for key, theirs in (("start_logits", reference.start_logits), ("end_logits", reference.end_logits)):
        assert np.abs(after[key][mask] - before[key][mask]).max() > 0.5  # training moved the logits a lot...
        np.testing.assert_allclose(after[key][mask], theirs.numpy()[mask], atol=5e-3)  # ...and the same way
