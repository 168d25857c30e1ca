"""`BertMultipleChoice`: the contract, HF `BertForMultipleChoice` parity both ways on real weights,
HF `run_swag.py`'s tokenization of real SWAG rows, and raw strings in `fit`/`predict`."""

import os
import shutil

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertMultipleChoice
from keras_bert_zoo.tasks.multiple_choice.data import read_choices
from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor
from tests.helpers import minilm_path, run_model_test, shared_data


def tiny_backbone(vocabulary_size=50, **kwargs):
    return BertBackbone(
        vocabulary_size=vocabulary_size,
        num_layers=2,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
        **kwargs,
    )


def int_inputs(batch=3, choices=4, seq=7, vocab=50, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(3, seq + 1, (batch, choices))
    mask = (np.arange(seq)[None, None, :] < lengths[..., None]).astype("int32")
    return {
        "token_ids": (rng.integers(1, vocab, (batch, choices, seq)) * mask).astype("int32"),
        "segment_ids": ((np.arange(seq)[None, None, :] >= 2) * mask).astype("int32"),
        "padding_mask": mask,
    }


def test_contract(tmp_path):
    model = BertMultipleChoice(tiny_backbone())
    out = run_model_test(model, int_inputs(), tmp_path)
    assert tuple(out.shape) == (3, 4)
    # Any number of choices: each pair is scored alone, so the scores do not depend on the others.
    x = int_inputs(batch=2, choices=5, seq=6, seed=3)
    five = model.predict(x, verbose=0)
    two = model.predict({k: v[:, 1:3] for k, v in x.items()}, verbose=0)
    assert five.shape == (2, 5)
    np.testing.assert_allclose(two, five[:, 1:3], rtol=1e-5, atol=1e-5)


def test_loss_is_softmax_cross_entropy_over_choices():
    """The default loss equals torch's CrossEntropyLoss on [batch, num_choices] logits (HF's)."""
    torch = pytest.importorskip("torch")
    model = BertMultipleChoice(tiny_backbone())
    model.compile()
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 4)).astype("float32")
    labels = rng.integers(0, 4, 6).astype("int32")
    ours = float(model.loss(labels, keras.ops.convert_to_tensor(logits)))
    ref = torch.nn.CrossEntropyLoss()(torch.tensor(logits), torch.tensor(labels, dtype=torch.long))
    assert ours == pytest.approx(float(ref), rel=1e-6)


def test_fit_learns_which_choice_has_a_token():
    keras.utils.set_random_seed(0)
    model = BertMultipleChoice(tiny_backbone(dropout=0.0), dropout=0.0)
    x = int_inputs(batch=64, choices=3, seq=6, vocab=40, seed=2)
    x["token_ids"] = np.where(x["token_ids"] == 45, 1, x["token_ids"])
    y = np.random.default_rng(4).integers(0, 3, 64).astype("int32")
    x["token_ids"][np.arange(64), y, 1] = 45  # the right choice carries token 45
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    history = model.fit(x, y, epochs=40, batch_size=32, verbose=0).history
    assert history["accuracy"][-1] > 0.95 and history["loss"][-1] < 0.3 * history["loss"][0], history


def _hf_tokens(tokenizer, contexts, choices, length):
    """HF run_swag.py's preprocessing: first = [context] * n, second = the choices, truncation=True."""
    n = len(choices[0])
    first = [c for c in contexts for _ in range(n)]
    second = [c for row in choices for c in row]
    enc = tokenizer(first, second, truncation=True, max_length=length, padding="max_length", return_tensors="np")
    return {k: v.reshape(len(contexts), n, length) for k, v in enc.items()}


@pytest.fixture(scope="module")
def hf_and_ours(tmp_path_factory):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForMultipleChoice.from_pretrained(minilm_path())  # head: random, HF's init
    with torch.no_grad():
        hf.classifier.bias.normal_()  # HF starts it at 0: make the bias count
    hf.eval()
    hf_dir = str(tmp_path_factory.mktemp("hf_mc"))
    hf.save_pretrained(hf_dir, safe_serialization=True)
    for name in ("vocab.txt", "tokenizer_config.json"):
        if os.path.exists(os.path.join(minilm_path(), name)):
            shutil.copy(os.path.join(minilm_path(), name), os.path.join(hf_dir, name))
    return hf, hf_dir


def test_real_weights_match_hf_on_swag_rows_and_hf_loads_ours(hf_and_ours, tmp_path):
    """all-MiniLM-L6-v2 + a random HF head: our logits on raw SWAG text equal HF BertForMultipleChoice
    on run_swag.py's tokenization (<= 1e-4); HF loads what we save and gives the same logits."""
    import torch
    import transformers

    hf, hf_dir = hf_and_ours
    assert isinstance(BertMultipleChoice.from_preset(hf_dir).preprocessor, MultipleChoicePreprocessor)
    ours = BertMultipleChoice.from_preset(
        hf_dir,
        data_layout={"sequence_length": 64},
        preprocessor=MultipleChoicePreprocessor.from_preset(hf_dir, sequence_length=64),
    )
    np.testing.assert_allclose(ours.classifier.kernel.numpy()[:, 0], hf.classifier.weight.detach().numpy()[0])

    examples = read_choices(shared_data("swag", "val_sample.csv"))
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    batch = _hf_tokens(tokenizer, examples.contexts, examples.choices, 64)
    # Our preprocessor packs the same pairs as run_swag.py's tokenizer call.
    packed = ours.preprocessor((examples.contexts, examples.choices))
    for ours_key, hf_key in (
        ("token_ids", "input_ids"),
        ("segment_ids", "token_type_ids"),
        ("padding_mask", "attention_mask"),
    ):
        np.testing.assert_array_equal(packed[ours_key].numpy(), batch[hf_key])
    with torch.no_grad():
        ref = hf(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    assert np.ptp(ref, axis=1).min() > 1e-3  # the head distinguishes the choices: a real check
    got = ours.predict((examples.contexts, examples.choices), verbose=0)  # raw strings in
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
    probs, best = ours.predict_choices(examples.contexts, examples.choices)
    np.testing.assert_allclose(probs, torch.softmax(torch.tensor(ref), -1).numpy(), atol=1e-5)
    np.testing.assert_array_equal(best, ref.argmax(-1))

    out = str(tmp_path / "ours")
    ours.save_to_preset(out)
    back, info = transformers.BertForMultipleChoice.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    with torch.no_grad():
        again = back.eval()(**{k: torch.tensor(v) for k, v in batch.items()}).logits.numpy()
    np.testing.assert_allclose(again, ref, rtol=1e-5, atol=1e-4)
    # And ours reads its own preset back, preprocessor length included.
    reloaded = BertMultipleChoice.from_preset(out)
    assert reloaded.preprocessor.sequence_length == 64
    np.testing.assert_allclose(
        reloaded.predict((examples.contexts, examples.choices), verbose=0), got, rtol=1e-5, atol=1e-5
    )


def test_convert_keeps_the_multiple_choice_head(hf_and_ours, tmp_path):
    from keras_bert_zoo.convert.checkpoint import Checkpoint
    from keras_bert_zoo.convert.tasks import detect_task

    _, hf_dir = hf_and_ours
    assert detect_task(Checkpoint(hf_dir)).task == "BertMultipleChoice"


@pytest.mark.slow  # default-run budget
def test_raw_strings_fit_and_bad_input():
    keras.utils.set_random_seed(0)
    pre = MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=24)
    model = BertMultipleChoice(tiny_backbone(pre.tokenizer.vocabulary_size(), dropout=0.0), preprocessor=pre)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    contexts = ["the cat sat down."] * 16
    choices = [
        ["it purred softly.", "stocks fell sharply."] if i % 2 else ["stocks fell sharply.", "it purred softly."]
        for i in range(16)
    ]
    labels = [1 if i % 2 else 0 for i in range(16)]
    history = model.fit((contexts, choices), labels, epochs=15, batch_size=8, verbose=0).history
    assert history["accuracy"][-1] == 1.0, history
    probs, best = model.predict_choices(contexts[:2], choices[:2])
    assert best.tolist() == [0, 1] and probs.shape == (2, 2)
    with pytest.raises(ValueError, match="question 1 has 3 choices"):
        model.predict_choices(["a", "b"], [["x", "y"], ["x", "y", "z"]])
    with pytest.raises(ValueError, match="label 2; labels are choice indices 0..1"):
        model.fit((["a"], [["x", "y"]]), [2], verbose=0)
