"""Chinese NER files as distributed (MSRA, Resume, Weibo NER): one character a line, CRLF, BMES tags.

References nobody here wrote: seqeval (entity F1 on BMES read as its IOBES) and an independent
line-by-line reader of the real MSRA file.
"""

import time

import numpy as np
import pytest

from keras_bert_zoo.tasks.tagger.data import read_tagged, write_tagged
from keras_bert_zoo.tasks.tagger.metrics import entity_scores
from tests.helpers import shared_data

# 北京 is a LOC (B E), 李小明 a PER (B M E), 中 a one-character ORG (S); the same sentences in three schemes.
CHARS = [list("我在北京见到李小明"), list("中方说好")]
BMES = [["O", "O", "B-LOC", "E-LOC", "O", "O", "B-PER", "M-PER", "E-PER"], ["S-ORG", "O", "O", "O"]]
BIOES = [[t.replace("M-", "I-") for t in s] for s in BMES]
BIO = [[t.replace("M-", "I-").replace("E-", "I-").replace("S-", "B-") for t in s] for s in BMES]


def _write_crlf(path, chars, tags, blank_lines=1):
    """`char SPACE tag` CRLF lines, `blank_lines` blank lines between sentences, as MSRA is distributed."""
    text = ("\r\n" * blank_lines).join(
        "".join(f"{c} {t}\r\n" for c, t in zip(w, s, strict=True)) for w, s in zip(chars, tags, strict=True)
    )
    path.write_bytes(text.encode("utf-8"))
    return str(path)


@pytest.mark.parametrize(
    "tags, scheme, labels",
    [
        (BMES, "BMES", ["O", "B-LOC", "B-ORG", "B-PER", "E-LOC", "E-ORG", "E-PER", "M-LOC", "M-ORG", "M-PER"]),
        (BIOES, "BIOES", ["O", "B-LOC", "B-ORG", "B-PER", "E-LOC", "E-ORG", "E-PER", "I-LOC", "I-ORG", "I-PER"]),
        (BIO, "IOB2", ["O", "B-LOC", "B-ORG", "B-PER", "I-LOC", "I-ORG", "I-PER"]),
    ],
)
def test_crlf_character_files_read_in_each_scheme(tmp_path, capsys, tags, scheme, labels):
    path = _write_crlf(tmp_path / "train.txt", CHARS, tags, blank_lines=2)
    ex = read_tagged(path)
    assert ex.words == CHARS and ex.tags == tags and ex.scheme == scheme
    assert ex.label_names[: len(labels)] == labels[: len(ex.label_names)] or set(labels) <= set(ex.label_names)
    assert all(not w.endswith("\r") for s in ex.words for w in s) and all(t[-1] != "\r" for s in ex.tags for t in s)
    named = read_tagged(path, scheme={"IOB2": "BIO"}.get(scheme, scheme))  # naming the scheme gives the same
    assert (named.tags, named.scheme) == (ex.tags, ex.scheme)
    assert capsys.readouterr().err == ""  # well-formed: nothing printed
    # The file read back after writing it with write_tagged (LF) is the same.
    write_tagged(str(tmp_path / "again.txt"), ex.words, ex.tags)
    assert read_tagged(str(tmp_path / "again.txt")).tags == tags


def test_bmes_label_names_keep_m_and_complete_the_types(tmp_path):
    ex = read_tagged(_write_crlf(tmp_path / "t.txt", CHARS, BMES))
    # S-LOC/S-PER and M-LOC... never occur in the file but are completed, so a dev file holding them still reads.
    assert ex.label_names == [
        "O", "B-LOC", "B-ORG", "B-PER", "E-LOC", "E-ORG", "E-PER", "M-LOC", "M-ORG", "M-PER", "S-LOC", "S-ORG", "S-PER",
    ]  # fmt: skip
    dev = read_tagged(_write_crlf(tmp_path / "d.txt", [list("上海")], [["S-LOC", "O"]]), label_names=ex.label_names)
    assert dev.label_ids() == [[10, 0]]


def test_bmes_without_m_can_be_named(tmp_path):
    """A BMES file whose entities are all 1-2 characters has no M- to detect: it reads as BIOES unless named."""
    path = _write_crlf(tmp_path / "t.txt", [list("北京人")], [["B-LOC", "E-LOC", "O"]])
    assert read_tagged(path).scheme == "BIOES"
    assert read_tagged(path, scheme="BMES").scheme == "BMES"
    assert "M-LOC" in read_tagged(path, scheme="BMES").label_names


def test_mixed_m_and_i_is_an_error_naming_file_and_line(tmp_path):
    path = _write_crlf(
        tmp_path / "t.txt", [list("李小明"), list("王大")], [["B-PER", "M-PER", "E-PER"], ["B-PER", "I-PER"]]
    )
    with pytest.raises(ValueError, match=r"t\.txt:6: tag 'I-PER' does not fit the BMES scheme.*M- is I-"):
        read_tagged(path)


NOISY = [
    (list("我在北京"), ["O", "O", "B-LOC", "E-LOC"]),
    (list("李小明说"), ["O", "M-PER", "E-PER", "O"]),  # line 7: M-PER continues no PER entity
    (list("上海市"), ["B-LOC", "M-LOC", "E-LOC"]),
    (list("张三"), ["O", "E-PER"]),  # line 16: E-PER continues no entity
    (list("中国"), ["S-LOC", "O"]),
]


def _noisy_file(tmp_path):
    return _write_crlf(tmp_path / "noisy.txt", [c for c, _ in NOISY], [t for _, t in NOISY])


def test_tags_continuing_no_entity_train_with_one_line(tmp_path, capsys):
    path = _noisy_file(tmp_path)
    ex = read_tagged(path)
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"{path}: 2 tags in 5 entities break the BMES scheme" in err
    assert f"the first: {path}:7: tag 'M-PER' continues no PER entity" in err
    assert "--strict-tags" in err
    assert ex.tags == [t for _, t in NOISY] and ex.scheme == "BMES"  # kept as written
    # ... and read as conlleval and seqeval read them: the M-PER E-PER pair is one PER entity.
    seqeval = pytest.importorskip("seqeval.metrics.sequence_labeling")
    as_iobes = [[t.replace("M-", "I-") for t in s] for s in ex.tags]
    assert entity_scores(ex.tags, ex.tags, scheme="BMES")["true_entities"] == len(seqeval.get_entities(as_iobes)) == 5


def test_strict_refuses_noisy_tags(tmp_path):
    path = _noisy_file(tmp_path)
    with pytest.raises(ValueError) as info:
        read_tagged(path, strict=True)
    text = str(info.value)
    assert text.startswith(f"{path}:7: tag 'M-PER' continues no PER entity, which BMES does not allow")
    assert "2 tags in 5 entities break it" in text and "strict=True" in text and "\n" not in text


def test_a_file_in_another_scheme_is_refused_without_strict(tmp_path):
    """Most entities breaking the grammar is no noise: IOB1 tags read as BIOES are refused, naming --scheme."""
    path = _write_crlf(tmp_path / "iob1.txt", [list("abc"), list("de")], [["I-PER", "I-PER", "O"], ["O", "I-LOC"]])
    with pytest.raises(ValueError, match=r"iob1\.txt:1: tag 'I-PER' continues no PER entity.*another scheme.*--scheme"):
        read_tagged(path, scheme="BIOES")
    assert read_tagged(path).tags == [["B-PER", "I-PER", "O"], ["O", "B-LOC"]]  # detected: IOB1


def _seqeval_iobes(sequences):
    """BMES as seqeval's IOBES, converted here (not with the package's `bmes_to_bioes`)."""
    return [["I" + t[1:] if t.startswith("M-") else t for t in s] for s in sequences]


@pytest.mark.parametrize("mode", ["conlleval", "strict"])
def test_bmes_entity_f1_matches_seqeval_on_random_sequences(mode):
    seqeval = pytest.importorskip("seqeval.metrics")
    from seqeval.scheme import IOBES

    rng = np.random.default_rng(3)
    vocab = ["O"] + [f"{p}-{t}" for p in "BMES" for t in ("PER", "LOC")]
    true = [[str(t) for t in rng.choice(vocab, size=int(rng.integers(1, 12)))] for _ in range(3000)]
    pred = [[t if rng.random() < 0.7 else str(rng.choice(vocab)) for t in s] for s in true]
    kwargs = {"mode": "strict", "scheme": IOBES} if mode == "strict" else {}
    ours = entity_scores(true, pred, scheme="BMES", mode=mode)
    for key, fn in (("precision", "precision_score"), ("recall", "recall_score"), ("f1", "f1_score")):
        reference = getattr(seqeval, fn)(_seqeval_iobes(true), _seqeval_iobes(pred), zero_division=0, **kwargs)
        assert abs(ours[key] - reference) < 1e-12, (key, ours[key], reference)
    assert 0.2 < ours["f1"] < 0.9  # a comparison with something to compare
    assert ours == entity_scores(_seqeval_iobes(true), _seqeval_iobes(pred), scheme="BIOES", mode=mode)


def test_real_msra_train_reads_quickly_and_reports_its_six_noisy_tags(capsys):
    path = shared_data("msra_ner", "train.txt")
    start = time.process_time()  # CPU time: what the reader costs, whatever else the host runs
    ex = read_tagged(path)
    seconds = time.process_time() - start
    err = capsys.readouterr().err
    assert len(ex) == 47289 and ex.scheme == "BMES" and seconds < 10, seconds
    assert err.count("\n") == 1 and f"{path}: 6 tags in " in err and f"{path}:739284: tag 'M-PER'" in err, err
    # An independent line-by-line reading of the same file gives the same characters and tags.
    sentences, chars, tags = [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            if line.strip():
                char, tag = line.rstrip("\r\n").split(" ")
                chars.append(char), tags.append(tag)
            elif chars:
                sentences.append((chars, tags))
                chars, tags = [], []
    if chars:
        sentences.append((chars, tags))
    assert ex.words == [c for c, _ in sentences] and ex.tags == [t for _, t in sentences]
    with pytest.raises(ValueError, match=r"train\.txt:739284: tag 'M-PER' continues no PER entity"):
        read_tagged(path, strict=True)
    dev = read_tagged(shared_data("msra_ner", "dev.txt"), label_names=ex.label_names)
    assert len(dev) == 3000 and capsys.readouterr().err == ""
