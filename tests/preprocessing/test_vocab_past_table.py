"""A `vocab.txt` with more tokens than the checkpoint's word-embedding table is refused at load time.

The user's mistake: a 21,128-line Chinese vocabulary copied beside a model built with a smaller one. Before,
it loaded, and the first id past the table failed deep in TensorFlow (`GatherV2`, index out of range). Now
every `from_preset` that reads both files says so in one line naming both files and both sizes; the
`bert-zoo` command prints that line. A vocabulary *smaller* than the table (HF pads tables) loads.
The checkpoints are written by HF's own classes (`tests.chinese_fixtures`).
"""

import os
import shutil

import pytest

from keras_bert_zoo import (
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPreprocessor,
    BertPretrainer,
    BertSentenceEmbedder,
    BertSpanQA,
    BertTagger,
    BertTokenizer,
    MultipleChoicePreprocessor,
    SpanQAPreprocessor,
    TaggingPreprocessor,
)
from keras_bert_zoo.errors import CheckpointError
from tests.chinese_fixtures import CHINESE_SENTENCES, hf_tokenizer, write_chinese_checkpoint
from tests.failures.helpers import check_failure, run_cli

LABELS = ["负面", "正面"]
# Ideographs none of the fixture sentences hold: the swapped-in vocabulary is the model's plus these.
EXTRA = [chr(0x9F00 + i) for i in range(40)]


def _vocab(path):
    with open(os.path.join(path, "vocab.txt"), encoding="utf-8") as f:
        return f.read().splitlines()


def _write_vocab(path, tokens):
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tokens) + "\n")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """`(good, swapped, padded)`: an HF classifier; the same with a longer vocab.txt beside it; the same
    with a vocab.txt shorter than its table (as HF's padded tables)."""
    root = tmp_path_factory.mktemp("vocab_table")
    good = write_chinese_checkpoint(str(root / "good"), head="classify", label_names=LABELS)
    swapped, padded = str(root / "swapped"), str(root / "padded")
    shutil.copytree(good, swapped)
    shutil.copytree(good, padded)
    _write_vocab(swapped, _vocab(good) + [c for c in EXTRA if c not in _vocab(good)])
    _write_vocab(padded, _vocab(good)[:-8])  # the last 8 rows have no token: single ASCII characters
    return good, swapped, padded


def _check_message(message, path):
    rows, tokens = len(_vocab(path)) - len(EXTRA), len(_vocab(path))
    assert "\n" not in message
    assert f"{os.path.join(path, 'vocab.txt')} has {tokens:,} entries" in message
    assert f"embedding table has {rows:,} rows (vocab_size in {os.path.join(path, 'config.json')})" in message
    assert "Use the vocab.txt the checkpoint was trained with" in message


LOADS = {
    "backbone": lambda p: BertBackbone.from_preset(p),
    "classifier": lambda p: BertClassifier.from_preset(p),
    "tagger": lambda p: BertTagger.from_preset(p, num_labels=3),
    "span_qa": lambda p: BertSpanQA.from_preset(p),
    "choice": lambda p: BertMultipleChoice.from_preset(p),
    "embedder": lambda p: BertSentenceEmbedder.from_preset(p),
    "pretrainer": lambda p: BertPretrainer.from_preset(p),
    "tokenizer": lambda p: BertTokenizer.from_preset(p),
    "preprocessor": lambda p: BertPreprocessor.from_preset(p),
    "tagging_preprocessor": lambda p: TaggingPreprocessor.from_preset(p),
    "qa_preprocessor": lambda p: SpanQAPreprocessor.from_preset(p, sequence_length=64),
    "choice_preprocessor": lambda p: MultipleChoicePreprocessor.from_preset(p),
}


@pytest.mark.parametrize("kind", sorted(LOADS))
def test_longer_vocabulary_is_refused_at_load_time(checkpoints, kind):
    _, swapped, _ = checkpoints
    with pytest.raises(CheckpointError) as e:
        LOADS[kind](swapped)
    _check_message(str(e.value), swapped)


def test_shorter_vocabulary_loads_and_tokenizes_as_hf(checkpoints):
    good, _, padded = checkpoints
    model = BertClassifier.from_preset(padded)
    assert model.backbone.vocabulary_size == len(_vocab(good)) > model.preprocessor.tokenizer.vocabulary_size()
    features = model.preprocessor(CHINESE_SENTENCES)
    expected = [hf_tokenizer(padded)(t)["input_ids"] for t in CHINESE_SENTENCES]
    for row, mask, want in zip(features["token_ids"].numpy(), features["padding_mask"].numpy(), expected, strict=True):
        assert row[mask.astype(bool)].tolist() == want
    assert model.predict(CHINESE_SENTENCES, verbose=0).shape == (len(CHINESE_SENTENCES), 2)


def test_cli_prints_one_line(checkpoints, tmp_path, capsys):
    good, swapped, _ = checkpoints
    code, _, err = run_cli(["convert", "--from", swapped, "--out", tmp_path / "refused"], capsys)
    _check_message(check_failure(code, err, 1, r"entries").split(": error: ", 1)[1], swapped)
    converted = str(tmp_path / "converted")
    assert run_cli(["convert", "--from", good, "--out", converted], capsys)[0] == 0
    _write_vocab(converted, _vocab(swapped))  # the user's swap, in a directory predict reads
    code, _, err = run_cli(["predict", "--model", converted, CHINESE_SENTENCES[0]], capsys)
    line = check_failure(code, err, 1, r"vocab\.txt has [\d,]+ entries but the model's embedding table has")
    _check_message(line.split(": error: ", 1)[1], converted)
    train = tmp_path / "train.tsv"
    train.write_text(
        "sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(CHINESE_SENTENCES)), encoding="utf-8"
    )
    argv = ["finetune", "classify", "--model", swapped, "--train", train, "--dev", train, "--out", tmp_path / "out"]
    code, _, err = run_cli(argv + ["--glue", "sst2", "--sequence-length", "32"], capsys)
    check_failure(code, err, 1, r"vocab\.txt has [\d,]+ entries")
    assert not (tmp_path / "out").exists()


def test_finetune_trains_a_checkpoint_whose_table_is_padded(checkpoints, tmp_path, capsys):
    """`finetune` takes what every loader takes: a vocab.txt shorter than the table (HF's padded tables)."""
    _, _, padded = checkpoints
    train = tmp_path / "train.tsv"
    train.write_text(
        "sentence\tlabel\n" + "".join(f"{t}\t{i % 2}\n" for i, t in enumerate(CHINESE_SENTENCES)), encoding="utf-8"
    )
    argv = ["finetune", "classify", "--model", padded, "--train", train, "--dev", train, "--out", tmp_path / "out"]
    code, _, err = run_cli(argv + ["--glue", "sst2", "--sequence-length", "32"], capsys)
    assert code == 0, err
    assert (tmp_path / "out" / "metrics.json").exists()
