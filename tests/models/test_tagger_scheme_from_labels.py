"""A tagger loaded from an HF checkpoint takes its scheme from the checkpoint's own label names.

HF's `BertForTokenClassification` saves only `id2label`; a Chinese NER model fine-tuned on MSRA holds `M-`, `E-`
and `S-` tags there. Read as IOB2, `predict_entities` refused its own predictions.
"""

import pytest

from keras_bert_zoo import BertTagger
from tests.chinese_fixtures import CHINESE_SENTENCES, write_chinese_checkpoint

CASES = {
    "BMES": ["O", "B-LOC", "M-LOC", "E-LOC", "S-LOC", "B-PER", "E-PER"],
    "BIOES": ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC"],
    "IOB2": ["O", "B-LOC", "I-LOC"],
}


@pytest.mark.parametrize("scheme", sorted(CASES))
def test_scheme_comes_from_the_checkpoints_labels(tmp_path, scheme):
    path = write_chinese_checkpoint(str(tmp_path / "ckpt"), head="tag", label_names=CASES[scheme])
    model = BertTagger.from_preset(path)
    assert model.scheme == scheme and model.label_names == CASES[scheme]
    texts = CHINESE_SENTENCES[:3] + ["北京" * 200]
    entities = model.predict_entities(texts)  # the random head predicts every kind of tag
    assert sum(len(row) for row in entities) > 0
    for row, text in zip(entities, texts, strict=True):
        for entity in row:
            assert entity["text"] == text[entity["start"] : entity["end"]]


def test_named_scheme_still_wins_and_no_labels_is_iob2(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "ckpt"), head="tag", label_names=CASES["BIOES"])
    assert BertTagger.from_preset(path, scheme="BIOES").scheme == "BIOES"
    backbone = BertTagger.from_preset(path).backbone
    assert BertTagger(backbone, num_labels=3).scheme == "IOB2"
