import os

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from keras_bert_zoo.cli import main
from tests.helpers import minilm_path


def test_convert_hf_checkpoint_to_preset(tmp_path, capsys):
    source = minilm_path()
    out = str(tmp_path / "converted")
    assert main(["convert", "--from", source, "--out", out]) == 0
    assert "22,713,216 parameters" in capsys.readouterr().out
    assert os.path.exists(os.path.join(out, "vocab.txt"))
    original, converted = BertBackbone.from_preset(source), BertBackbone.from_preset(out)
    for a, b in zip(original.weights, converted.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_convert_reports_a_bad_source_without_traceback(tmp_path, capsys):
    assert main(["convert", "--from", str(tmp_path), "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "not a BERT checkpoint" in err and "Traceback" not in err
    assert not os.path.exists(tmp_path / "o")


def test_unknown_verb_is_rejected():
    with pytest.raises(SystemExit):
        main(["frobnicate"])
