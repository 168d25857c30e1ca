"""Fill-mask in Python (`BertPretrainer.fill_mask`) and `bert-zoo predict` on a pretrained directory,
against HF `BertForPreTraining` on the same weights."""

import json

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertPreprocessor, BertPretrainer
from keras_bert_zoo.cli import main
from tests.helpers import minilm_path

TEXTS = ["the capital of france is [MASK] .", "[MASK] and [MASK] went home", "no mask here"]


@pytest.fixture(scope="module")
def pretrained_dir(tmp_path_factory):
    keras.utils.set_random_seed(0)
    pre = BertPreprocessor.from_preset(minilm_path(), sequence_length=16)
    backbone = BertBackbone(
        vocabulary_size=pre.tokenizer.vocabulary_size(),
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=16,
    )
    model = BertPretrainer(backbone=backbone, preprocessor=pre)
    path = str(tmp_path_factory.mktemp("fill_mask"))
    model.save_to_preset(path)
    return path


def test_fill_mask_matches_hf(pretrained_dir):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    model = BertPretrainer.from_preset(pretrained_dir)
    answers = model.fill_mask(TEXTS, top_k=4)
    assert [len(a) for a in answers] == [1, 2, 0] and all(len(slot) == 4 for a in answers for slot in a)

    hf = transformers.BertForPreTraining.from_pretrained(pretrained_dir).eval()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    for text, answer in zip(TEXTS, answers, strict=True):
        batch = tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(hf(**batch).prediction_logits[0], -1).numpy()
        where = np.flatnonzero(batch["input_ids"][0].numpy() == tokenizer.mask_token_id)
        for slot, position in zip(answer, where, strict=True):
            best = np.argsort(-probs[position])[:4]
            assert [t for t, _ in slot] == tokenizer.convert_ids_to_tokens(best.tolist())
            np.testing.assert_allclose([p for _, p in slot], probs[position, best], atol=1e-5)


def test_predict_verb_fills_masks(pretrained_dir, capsys):
    assert main(["predict", "--model", pretrained_dir, "--json", TEXTS[0], TEXTS[1]]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    assert [len(r["masks"]) for r in rows] == [1, 2] and len(rows[0]["masks"][0]) == 5
    assert main(["predict", "--model", pretrained_dir, "no mask at all"]) == 1
    assert "write [MASK]" in capsys.readouterr().err
