"""Every line of real text in ../shared/data (for parity tests and the speed benchmark)."""

import csv
import json
import os


def _tsv_columns(path, columns):
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    header, rows = rows[0], rows[1:]
    index = [i for i, name in enumerate(header) if name in columns]
    return [row[i] for row in rows for i in index if i < len(row)]


def _squad(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    lines = []
    for article in data:
        for paragraph in article["paragraphs"]:
            lines.append(paragraph["context"])
            lines.extend(qa["question"] for qa in paragraph["qas"])
    return lines


def _conll(path):
    sentences, words = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] == "-DOCSTART-":
                if words:
                    sentences.append(" ".join(words))
                words = []
            else:
                words.append(parts[0])
    if words:
        sentences.append(" ".join(words))
    return sentences


def _plain(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


SOURCES = {
    "sst2": lambda root: (
        _tsv_columns(os.path.join(root, "sst2", "dev.tsv"), {"sentence"})
        + _tsv_columns(os.path.join(root, "sst2", "train.tsv"), {"sentence"})
    ),
    "mrpc": lambda root: sum(
        (_tsv_columns(os.path.join(root, "mrpc", f), {"#1 String", "#2 String"}) for f in ("train.tsv", "dev.tsv")), []
    ),
    "rte": lambda root: sum(
        (_tsv_columns(os.path.join(root, "rte", f), {"sentence1", "sentence2"}) for f in ("train.tsv", "dev.tsv")), []
    ),
    "squad": lambda root: (
        _squad(os.path.join(root, "squad", "train.json")) + _squad(os.path.join(root, "squad", "dev.json"))
    ),
    "conll2003": lambda root: (
        _conll(os.path.join(root, "conll2003", "eng.train")) + _conll(os.path.join(root, "conll2003", "eng.testa"))
    ),
    "pretrain_text": lambda root: (
        _plain(os.path.join(root, "pretrain_text", "sample_text.txt"))
        + _plain(os.path.join(root, "pretrain_text", "wikitext-2.valid.tokens.txt"))
    ),
}


def shared_lines(root, sources=None):
    """{source: [line, ...]} for every real text line under `root` (../shared/data)."""
    return {name: SOURCES[name](root) for name in (sources or SOURCES)}
