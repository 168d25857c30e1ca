"""The training verbs' `--help` says what `--out` receives, where the XLA cache is, and points at
docs/outputs.md, which documents both (they were documented nowhere a user reads)."""

import pathlib

import pytest

from keras_bert_zoo.cli import main

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "outputs.md"


def _help(argv, capsys):
    with pytest.raises(SystemExit):
        main(argv + ["--help"])
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines


@pytest.mark.parametrize(
    "argv, files",
    [
        (["pretrain"], ["logs/", "loss_curves.png", "tensorboard --logdir OUT/logs"]),
        (["finetune"], ["training_curve.png"]),
        (["finetune", "classify"], ["training_curve.png"]),
    ],
)
def test_training_help_names_the_outputs_and_the_cache(argv, files, capsys):
    shown = _help(argv, capsys)
    for text in files + [
        "metrics.json",
        "checkpoints/",
        "~/.cache/keras_bert_zoo/jit_choices.json",
        "BERT_ZOO_JIT_CACHE",
        "docs/outputs.md",
    ]:
        assert text in shown, f"bert-zoo {' '.join(argv)} --help does not mention {text}"


def test_the_outputs_page_documents_logs_and_the_cache():
    text = DOC.read_text(encoding="utf-8")
    for needle in (
        "`logs/`",
        "tensorboard --logdir OUT/logs",
        "~/.cache/keras_bert_zoo/jit_choices.json",
        "BERT_ZOO_JIT_CACHE=off",
        "checkpoints/",
        "metrics.json",
    ):
        assert needle in text
