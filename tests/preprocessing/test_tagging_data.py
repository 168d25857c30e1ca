import json

import pytest

from keras_bert_zoo.tasks.tagger.data import TaggedExamples, read_tagged, write_tagged
from keras_bert_zoo.tasks.tagger.metrics import iob1_to_iob2
from tests.helpers import shared_data

CONLL_LABELS = ["O", "B-LOC", "B-MISC", "B-ORG", "B-PER", "I-LOC", "I-MISC", "I-ORG", "I-PER"]


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def _reference_read(path):
    """Independent CoNLL reader: sentences of (token, last column), IOB1 tags as in the file."""
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip() or line.startswith("-DOCSTART-"):
                if current:
                    sentences.append(current)
                current = []
                continue
            cols = line.split()
            current.append((cols[0], cols[-1]))
    if current:
        sentences.append(current)
    return sentences


@pytest.mark.parametrize("name, sentences, tokens", [("eng.train", 14041, 203621), ("eng.testa", 3250, 51362)])
def test_real_conll2003_counts_and_labels(name, sentences, tokens):
    """The published CoNLL-2003 counts; IOB1 becomes IOB2; 9 labels; entities unchanged."""
    path = shared_data("conll2003", name)
    ex = read_tagged(path)
    assert len(ex) == sentences and ex.num_words == tokens
    assert ex.scheme == "IOB2" and ex.label_names == CONLL_LABELS
    reference = _reference_read(path)
    assert ex.words == [[w for w, _ in s] for s in reference]
    # IOB2: every entity starts with B-; the entity spans equal the IOB1 file's.
    for tags, ref in zip(ex.tags, reference, strict=True):
        previous = "O"
        for tag in tags:
            assert not (tag.startswith("I-") and previous[2:] != tag[2:])
            previous = tag
        assert _spans(tags, "IOB2") == _spans([t for _, t in ref], "IOB1")
    assert ex.label_ids()[0] and max(max(s) for s in ex.label_ids()) == 8
    # Explicit scheme gives the same; dev read with the training labels.
    assert read_tagged(path, scheme="IOB1", max_examples=50).tags == ex.tags[:50]


def _spans(tags, scheme):
    """Entity spans (type, start, end) computed the textbook way for IOB1/IOB2."""
    spans, start, kind = [], None, None
    for i, tag in enumerate(tags + ["O"]):
        prefix, typ = (tag[0], tag[2:]) if tag != "O" else ("O", None)
        begins = prefix == "B" or (prefix == "I" and typ != kind)
        if start is not None and (prefix == "O" or begins):
            spans.append((kind, start, i))
            start, kind = None, None
        if prefix != "O" and (begins or start is None):
            start, kind = i, typ
    return spans


def test_iob1_to_iob2_rule():
    assert iob1_to_iob2(["I-PER", "I-PER", "B-PER", "I-PER", "O", "I-LOC", "I-ORG"]) == [
        "B-PER",
        "I-PER",
        "B-PER",
        "I-PER",
        "O",
        "B-LOC",
        "B-ORG",
    ]


def test_jsonl_round_trip_and_detection(tmp_path):
    words = [["John", "lives", "in", "New", "York"], ["Hi"]]
    tags = [["B-PER", "O", "O", "B-LOC", "I-LOC"], ["O"]]
    path = str(tmp_path / "d.jsonl")
    write_tagged(path, words, tags)
    ex = read_tagged(path)
    assert ex.words == words and ex.tags == tags and ex.scheme == "IOB2"
    assert ex.label_names == ["O", "B-LOC", "B-PER", "I-LOC", "I-PER"]
    # Content decides when the extension does not: a .txt holding JSON Lines.
    other = _write(tmp_path / "d.txt", open(path).read())
    assert read_tagged(other).tags == tags
    # Column round trip.
    cols = str(tmp_path / "d.conll")
    write_tagged(cols, words, tags)
    assert read_tagged(cols).words == words and read_tagged(cols).tags == tags


def test_bioes_round_trip(tmp_path):
    words = [["Barack", "Obama", "met", "Merkel", "in", "Bad", "Ems", "Kur"]]
    tags = [["B-PER", "E-PER", "O", "S-PER", "O", "B-LOC", "I-LOC", "E-LOC"]]
    for name in ("b.jsonl", "b.txt"):
        path = str(tmp_path / name)
        write_tagged(path, words, tags)
        ex = read_tagged(path)
        assert ex.scheme == "BIOES" and ex.tags == tags and ex.words == words
        assert ex.label_names == ["O", "B-LOC", "B-PER", "E-LOC", "E-PER", "I-LOC", "I-PER", "S-LOC", "S-PER"]
        write_tagged(str(tmp_path / ("again_" + name)), ex.words, ex.tags)
        assert open(tmp_path / ("again_" + name)).read() == open(path).read()
    assert read_tagged(str(tmp_path / "b.txt"), scheme="BIOES").tags == tags


def test_detection_iob1_vs_iob2(tmp_path):
    iob2 = _write(tmp_path / "a.txt", "A B-ORG\nB I-ORG\nc O\n\nD B-PER\n")
    iob1 = _write(tmp_path / "b.txt", "A I-ORG\nB I-ORG\nc O\n\nD I-PER\nE B-PER\n")
    assert read_tagged(iob2).tags == [["B-ORG", "I-ORG", "O"], ["B-PER"]]
    assert read_tagged(iob1).tags == [["B-ORG", "I-ORG", "O"], ["B-PER", "B-PER"]]
    only_o = read_tagged(_write(tmp_path / "c.txt", "a O\n"))
    assert only_o.scheme == "IOB2" and only_o.label_names == ["O"]
    # Several columns and tabs: the tag is the last column; the token the first.
    multi = read_tagged(_write(tmp_path / "d.txt", "-DOCSTART- -X- O O\n\nEU\tNNP\tI-NP\tI-ORG\n\n\n"))
    assert multi.words == [["EU"]] and multi.tags == [["B-ORG"]]


def test_dev_labels_from_train(tmp_path):
    train = read_tagged(_write(tmp_path / "train.txt", "A B-ORG\nb O\n"))
    dev = read_tagged(_write(tmp_path / "dev.txt", "A B-ORG\nB I-ORG\n"), label_names=train.label_names)
    assert dev.label_names == train.label_names == ["O", "B-ORG", "I-ORG"]
    assert isinstance(dev, TaggedExamples) and dev.label_ids() == [[1, 2]]


BAD_INPUTS = [
    # (file name, content, kwargs, line number, message part)
    (
        "dev.txt",
        "A O\nB B-ORG\n\nC O\nD B-FOO\n",
        {"label_names": ["O", "B-ORG", "I-ORG"]},
        5,
        "tag 'B-FOO' is not among the model's labels ['O', 'B-ORG', 'I-ORG']",
    ),
    ("a.txt", "A O\nB O\n\n-DOCSTART- -X- O O\n\nlonely\n", {}, 6, "one column ('lonely') and no tag"),
    (
        "a.jsonl",
        '{"tokens": ["a"], "tags": ["O"]}\n\n{"tokens": ["a", "b"], "tags": ["O"]}\n',
        {},
        3,
        "2 tokens but 1 tags",
    ),
    ("a.jsonl", '{"tokens": ["a"], "tags": ["O"]}\n{"tokens": ["a"], "tags": ["O"]\n', {}, 2, "not valid JSON"),
    ("a.jsonl", '{"tokens": ["a"], "labels": ["O"]}\n', {}, 1, "no key 'tags'"),
    ("a.jsonl", '{"tokens": ["a"], "tags": [3]}\n', {}, 1, "'tags' must be a list of strings"),
    ("a.txt", "A O\nB X-ORG\n", {}, 2, "tag 'X-ORG' does not fit the IOB2 scheme"),
    ("a.txt", "A B-PER\nB S-PER\nC U-PER\n", {}, 3, "tag 'U-PER' does not fit the BIOES scheme"),
    ("a.txt", "A O\nB E-PER\n", {"scheme": "IOB2"}, 2, "tag 'E-PER' does not fit the IOB2 scheme"),
    ("a.txt", "A O\nB I-PER\n", {"scheme": "IOB2"}, 2, "starts an entity, which IOB2 does not allow"),
    ("a.txt", "A O\nB ORG\n", {}, 2, "tag 'ORG' does not fit"),
]


@pytest.mark.parametrize("name, content, kwargs, line, message", BAD_INPUTS)
def test_bad_inputs_name_file_and_line(tmp_path, name, content, kwargs, line, message):
    path = _write(tmp_path / name, content)
    with pytest.raises(ValueError) as info:
        read_tagged(path, **kwargs)
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: ") and message in text and "\n" not in text


def test_empty_and_missing_files(tmp_path):
    for content in ("", "\n\n", "-DOCSTART- -X- O O\n\n"):
        path = _write(tmp_path / "e.txt", content)
        with pytest.raises(ValueError, match="has no sentences"):
            read_tagged(path)
    with pytest.raises(ValueError, match="has no sentences"):
        read_tagged(_write(tmp_path / "e.jsonl", "\n"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_tagged(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="unknown tagging scheme"):
        read_tagged(_write(tmp_path / "f.txt", "a O\n"), scheme="BILOU")


def test_max_examples_and_jsonl_tags_with_label_names(tmp_path):
    path = _write(
        tmp_path / "m.jsonl", "".join(json.dumps({"tokens": [f"w{i}"], "tags": ["O"]}) + "\n" for i in range(10))
    )
    ex = read_tagged(path, max_examples=3)
    assert ex.words == [["w0"], ["w1"], ["w2"]]
    cols = _write(tmp_path / "m.txt", "".join(f"w{i} O\n\n" for i in range(10)))
    assert len(read_tagged(cols, max_examples=4)) == 4
