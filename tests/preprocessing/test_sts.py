"""STS-B reader on the real files (original release) and on GLUE's layout; errors name file and line.

The reference is the release's own description (readme.txt: tab-separated fields genre,
filename, year, id, score, sentence1, sentence2) applied by plain `str.split("\\t")`
written out here; the counts are ../shared/data/README.md's.
"""

import numpy as np
import pytest

from keras_bert_zoo.tasks.classifier.data import DataLayout, read_examples
from keras_bert_zoo.tasks.embedder.data import read_sts
from tests.helpers import shared_data


def _by_hand(path):
    with open(path, "rb") as f:
        rows = [line.decode("utf-8").rstrip("\n").split("\t") for line in f.read().split(b"\n") if line]
    return [r[5] for r in rows], [r[6] for r in rows], np.array([float(r[4]) for r in rows], np.float32), rows


@pytest.mark.parametrize("name,count", [("sts-train.csv", 5749), ("sts-dev.csv", 1500)])
def test_real_files_match_the_release_layout(name, count):
    path = shared_data("stsb", name)
    pairs = read_sts(path)
    s1, s2, scores, rows = _by_hand(path)
    assert len(pairs) == count
    assert pairs.sentences1 == s1 and pairs.sentences2 == s2
    np.testing.assert_array_equal(pairs.scores, scores)
    assert 0.0 <= pairs.scores.min() and pairs.scores.max() <= 5.0
    assert any(len(r) == 9 for r in rows)  # the 2016 rows with two more fields are read too
    # `finetune classify --task stsb` reads the same pairs and scores.
    examples = read_examples(path, DataLayout.for_task("stsb"))
    assert examples.texts == (s1, s2)
    np.testing.assert_array_equal(examples.labels, scores)


def test_quotes_and_the_control_character_are_text():
    pairs = read_sts(shared_data("stsb", "sts-train.csv"))
    assert "Treasury\x12s long-range plan" in pairs.sentences1[2918]  # train line 2919
    assert any(s.count('"') % 2 for s in pairs.sentences1 + pairs.sentences2)  # unbalanced quotes kept


def test_glue_layout_and_errors(tmp_path):
    glue = tmp_path / "dev.tsv"
    glue.write_text(
        "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
        '0\tmain-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA man.\tA "man.\t4.2\n'
    )
    pairs = read_sts(str(glue))
    assert (pairs.sentences1, pairs.sentences2, pairs.scores.tolist()) == (
        ["A man."],
        ['A "man.'],
        [pytest.approx(4.2)],
    )
    short = tmp_path / "short.csv"
    short.write_text("main\tMSRvid\t2012\t0001\t5.0\tonly one sentence\n")
    with pytest.raises(ValueError, match=r"short.csv:1: 6 tab-separated fields"):
        read_sts(str(short))
    bad = tmp_path / "bad.csv"
    bad.write_text("main\tMSRvid\t2012\t0001\t5.0\ta\tb\nmain\tMSRvid\t2012\t0002\tfive\ta\tb\n")
    with pytest.raises(ValueError, match=r"bad.csv:2: score 'five' is not a number"):
        read_sts(str(bad))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_sts(str(tmp_path / "missing.csv"))
    (tmp_path / "empty.csv").write_text("\n")
    with pytest.raises(ValueError, match="has no sentence pairs"):
        read_sts(str(tmp_path / "empty.csv"))
