"""docs/failures.md, row by row: every user mistake through `bert-zoo`'s `main`.

Each case builds its bad input in a fresh directory, runs the command in-process
(`keras_bert_zoo.cli.main`, as the console script does), and checks: the documented
exit code (2 usage, 1 data/model), stderr ending in exactly one `bert-zoo VERB: error:`
line that says what is wrong, no traceback, and the whole directory, `--out` included,
byte-identical before and after (nothing written, nothing half-written, nothing
deleted). `test_real_command_*` repeat a few through the installed console script.
"""

import json
import os
import pickle
import shutil
import struct

import numpy as np
import pytest

from tests.failures.helpers import check_case, check_failure, run_bert_zoo, run_cli, tree_hash

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = ["good", "great", "fine", "bad", "awful", "poor", "the", "film", "was", "plot", "a", "very"]
VOCAB = SPECIAL + WORDS


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny HF-layout checkpoint with its vocabulary, and a classifier directory made from it."""
    import keras

    from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor
    from keras_bert_zoo.tasks.classifier.data import DataLayout

    root = tmp_path_factory.mktemp("models")
    tiny = str(root / "tiny")
    keras.utils.set_random_seed(0)
    backbone = BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=32,
        dropout=0.0,
    )
    backbone.save_to_preset(tiny)
    with open(os.path.join(tiny, "vocab.txt"), "w") as f:
        f.write("\n".join(VOCAB) + "\n")
    classifier = str(root / "classifier")
    layout = DataLayout.for_task("sst2").to_dict() | {"label_names": ["0", "1"], "sequence_length": 16}
    model = BertClassifier.from_preset(
        tiny,
        num_classes=2,
        label_names=["negative", "positive"],
        data_layout=layout,
        preprocessor=BertPreprocessor.from_preset(tiny, sequence_length=16),
    )
    model.save_to_preset(classifier)
    return {"tiny": tiny, "classifier": classifier}


class World:
    """The files one case works with, all under its own `root`."""

    def __init__(self, root, models):
        self.root = str(root)
        self.tiny = models["tiny"]
        self.classifier = models["classifier"]
        self.out = os.path.join(self.root, "out")
        self.train = self.write(
            "train.tsv",
            "sentence\tlabel\n"
            + "".join(f"the film was {w}\t{int(w in ('good', 'great', 'fine'))}\n" for w in WORDS[:6] * 2),
        )
        self.dev = self.write("dev.tsv", "sentence\tlabel\nthe film was good\t1\nthe plot was bad\t0\n")
        self.conll = self.write("train.conll", "the O\nfilm B-MISC\n\ngood O\nplot I-MISC\n")
        self.corpus = self.write(
            "corpus.txt",
            "".join(f"the film was {a}. a plot was {b}.\nvery {a} film.\n\n" for a in WORDS[:6] for b in WORDS[:3]),
        )

    def path(self, name):
        return os.path.join(self.root, name)

    def write(self, name, content):
        path = self.path(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content.encode("utf-8") if isinstance(content, str) else content)
        return path

    def copy_model(self, source, name, drop=(), edit_config=None):
        """A copy of a model directory, optionally without some files or with an edited config."""
        path = self.path(name)
        shutil.copytree(source, path)
        for f in drop:
            os.remove(os.path.join(path, f))
        if edit_config is not None:
            config_path = os.path.join(path, "config.json")
            with open(config_path) as f:
                config = json.load(f)
            edit_config(config)
            with open(config_path, "w") as f:
                json.dump(config, f)
        return path

    def finetune(self, *extra, train=None, dev=None, model=None, out=None, task="classify", layout=None):
        layout = layout if layout is not None else ["--glue", "sst2"] if task == "classify" else []
        return [
            "finetune",
            task,
            "--model",
            model or self.tiny,
            "--train",
            train or self.train,
            "--dev",
            dev or self.dev,
            "--out",
            out or self.out,
            "--sequence-length",
            "16",
            *layout,
            *extra,
        ]

    def pretrain(self, *extra, corpus=None, out=None):
        return [
            "pretrain",
            "--corpus",
            corpus or self.corpus,
            "--model",
            self.tiny,
            "--out",
            out or self.out,
            "--sequence-length",
            "16",
            "--steps",
            "2",
            "--batch-size",
            "2",
            *extra,
        ]

    def vocab(self, *extra, corpus=None, out=None):
        return [
            "vocab",
            "--corpus",
            corpus or self.corpus,
            "--size",
            "50",
            "--out",
            out or self.path("vocab.txt"),
            *extra,
        ]


# --- bad checkpoint files ---------------------------------------------------------------------
def _safetensors_parts(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + n]), data[8 + n :]


def _write_safetensors_raw(path, header, body, header_len=None):
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw) if header_len is None else header_len) + raw + body)


def broken_safetensors(w, how):
    """A copy of the tiny checkpoint whose model.safetensors is damaged in one way."""
    model = w.copy_model(w.tiny, "broken")
    path = os.path.join(model, "model.safetensors")
    header, body = _safetensors_parts(path)
    names = [k for k in header if k != "__metadata__"]
    first, second = sorted(names, key=lambda k: header[k]["data_offsets"])[:2]
    if how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 100)
        return model
    if how == "header_length":
        _write_safetensors_raw(path, header, body, header_len=10**12)
        return model
    if how == "overlap":
        header[second]["data_offsets"] = [header[second]["data_offsets"][0] - 4, header[second]["data_offsets"][1] - 4]
    elif how == "out_of_range":
        header[first]["data_offsets"] = [len(body) + 8, len(body) + 8 + header[first]["data_offsets"][1]]
    elif how == "dtype":
        header[first]["dtype"] = "F128"
    elif how == "dtype_shape":
        header[first]["dtype"] = "F16"
    elif how == "shape":
        header[first]["shape"] = [d + 1 for d in header[first]["shape"]]
    elif how == "duplicate":
        raw = json.dumps(header).encode()
        raw = raw[:-1] + b', "' + first.encode() + b'": ' + json.dumps(header[first]).encode() + b"}"
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw + body)
        return model
    _write_safetensors_raw(path, header, body)
    return model


def wrong_shape_checkpoint(w):
    """A valid safetensors file whose word embeddings are wider than the config says."""
    from keras_bert_zoo.convert.safetensors_io import read_safetensors, write_safetensors

    model = w.copy_model(w.tiny, "wide")
    path = os.path.join(model, "model.safetensors")
    tensors = {k: np.array(v) for k, v in read_safetensors(path).items()}
    name = next(k for k in tensors if "word_embeddings" in k)
    tensors[name] = np.zeros((len(VOCAB), 12), np.float32)
    write_safetensors(tensors, path)
    return model


def google_checkpoint(w, drop_one=False, damage_index=False):
    """A tiny original-format (TF1) checkpoint; `drop_one` leaves out one variable."""
    from tests.convert.test_google_checkpoint_layout import bert_config, google_variables, write_google_checkpoint

    sizes = {"V": len(VOCAB), "H": 8, "I": 16, "P": 16, "layers": 1}
    rng = np.random.default_rng(0)
    tensors = {n: rng.standard_normal(s).astype(np.float32) for n, s in google_variables(sizes).items()}
    if drop_one:
        del tensors["bert/encoder/layer_0/attention/self/query/kernel"]
    path = w.path("google")
    write_google_checkpoint(path, tensors, bert_config(sizes))
    if damage_index:
        with open(os.path.join(path, "bert_model.ckpt.index"), "wb") as f:
            f.write(b"\x00garbage" * 10)
    shutil.copy(os.path.join(w.tiny, "vocab.txt"), path)
    return path


class Exploit:
    """Unpickling this creates a file: proof that a pickle was opened."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (open, (self.flag, "w"))


def pickle_checkpoint(w, name, disguised=False):
    model = w.copy_model(w.tiny, "pickled", drop=("model.safetensors",) if not disguised else ())
    target = os.path.join(model, "model.safetensors" if disguised else name)
    with open(target, "wb") as f:
        pickle.dump(Exploit(w.path("UNPICKLED")), f, protocol=4)
    return model


def existing_out(w, kind):
    """An `--out` that already exists, of the given kind."""
    if kind == "file":
        return w.write("out", "precious\n")
    if kind == "model":
        return w.copy_model(w.classifier, "out")
    os.makedirs(w.out)
    w.write("out/keep.txt", "precious\n")
    return w.out


def read_only_out():
    """A path whose parent cannot be written, even by root (sysfs), else skip."""
    probe = "/sys/bert-zoo-probe"
    try:
        os.mkdir(probe)
    except OSError:
        return probe + "/out"
    os.rmdir(probe)
    pytest.skip("no read-only location available")


def latin1(text):
    return text.encode("latin-1")


# --- the table: (id, argv(w), exit code, pattern in the error line) ---------------------------
CASES = [
    # paths
    ("train-missing", lambda w: w.finetune(train=w.path("nope.tsv")), 1, r"nope\.tsv does not exist"),
    ("train-directory", lambda w: w.finetune(train=w.root), 1, r"is a directory"),
    ("train-empty", lambda w: w.finetune(train=w.write("e.tsv", "")), 1, r"e\.tsv has no examples"),
    ("dev-missing", lambda w: w.finetune(dev=w.path("nope.tsv")), 1, r"nope\.tsv does not exist"),
    ("corpus-missing", lambda w: w.pretrain(corpus=w.path("nope.txt")), 1, r"nope\.txt does not exist"),
    ("corpus-directory", lambda w: w.pretrain(corpus=w.root), 1, r"is a directory"),
    ("vocab-corpus-missing", lambda w: w.vocab(corpus=w.path("nope.txt")), 1, r"nope\.txt does not exist"),
    ("model-missing", lambda w: w.finetune(model=w.path("nowhere")), 1, r"neither a preset name nor a directory"),
    (
        "evaluate-model-missing",
        lambda w: ["evaluate", "--model", w.path("nowhere"), "--data", w.dev],
        1,
        r"has no config\.json",
    ),
    ("convert-from-empty-dir", lambda w: ["convert", "--from", w.root, "--out", w.out], 1, r"not a BERT checkpoint"),
    (
        "vocab-file-missing",
        lambda w: w.finetune("--vocab", w.path("nope/vocab.txt"), model="bert_tiny_uncased"),
        2,
        r"no vocab\.txt",
    ),
    # encodings and binary files
    (
        "train-latin1",
        lambda w: w.finetune(train=w.write("l.tsv", latin1("sentence\tlabel\ngood\t1\ncaf\xe9\t0\n"))),
        1,
        r"l\.tsv:3: not UTF-8 text \(byte 0xe9",
    ),
    (
        "dev-binary",
        lambda w: w.finetune(dev=w.write("d.tsv", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff")),
        1,
        r"d\.tsv:\d+: not UTF-8",
    ),
    (
        "tag-train-latin1",
        lambda w: w.finetune(train=w.write("t.conll", latin1("caf\xe9 O\n")), task="tag"),
        1,
        r"t\.conll:1: not UTF-8",
    ),
    (
        "corpus-binary",
        lambda w: w.pretrain(corpus=w.write("c.txt", b"text\n\x00\x01\x02binary")),
        1,
        r"c\.txt:2: binary data",
    ),
    ("vocab-corpus-binary", lambda w: w.vocab(corpus=w.write("c.txt", b"\x00" * 64)), 1, r"c\.txt:1: binary data"),
    (
        "vocab-file-latin1",
        lambda w: w.finetune(
            "--vocab",
            w.write("v/vocab.txt", latin1("\n".join(VOCAB[:-1] + ["caf\xe9"]) + "\n")),
            model="bert_tiny_uncased",
        ),
        1,
        r"vocab\.txt:17: not UTF-8",
    ),
    # columns
    (
        "tsv-missing-label-column",
        lambda w: w.finetune(dev=w.write("d.tsv", "sentence\tstars\ngood\t1\n")),
        1,
        r"no column 'label'",
    ),
    (
        "tsv-short-row",
        lambda w: w.finetune(dev=w.write("d.tsv", "sentence\tlabel\ngood\t1\nbad\n")),
        1,
        r"d\.tsv:3: 1 columns, the layout needs at least 2",
    ),
    (
        "tsv-extra-columns",
        lambda w: w.finetune(dev=w.write("d.tsv", "sentence\tlabel\ngood\tfilm\t1\n")),
        1,
        r"d\.tsv:2: 3 columns, the header has 2 \(a tab inside the text\?\)",
    ),
    (
        "csv-ragged",
        lambda w: w.finetune(
            layout=["--text-column", "text", "--label-column", "y"],
            train=w.write("t.csv", 'text,y\ngood,1\n"bad, awful",0,extra\n'),
        ),
        1,
        r"t\.csv:3: 3 columns, the header has 2",
    ),
    (
        "jsonl-invalid-line",
        lambda w: w.finetune(dev=w.write("d.jsonl", '{"sentence": "good", "label": 1}\n{oops\n')),
        1,
        r"d\.jsonl:2: not a JSON object",
    ),
    (
        "dev-unseen-label",
        lambda w: w.finetune(dev=w.write("d.tsv", "sentence\tlabel\ngood\t1\nmeh\t7\n")),
        1,
        r"d\.tsv:3: unknown label '7'",
    ),
    (
        "train-single-label",
        lambda w: w.finetune(
            layout=["--text-column", "sentence", "--label-column", "label"],
            train=w.write("t.tsv", "sentence\tlabel\ngood\t1\ngreat\t1\n"),
        ),
        1,
        r"t\.tsv has a single label",
    ),
    (
        "conll-no-tag",
        lambda w: w.finetune(train=w.write("t.conll", "the O\nfilm\n"), task="tag"),
        1,
        r"t\.conll:2: one column \('film'\) and no tag",
    ),
    (
        "conll-dev-unseen-tag",
        lambda w: w.finetune(train=w.conll, dev=w.write("d.conll", "the B-LOC\n"), task="tag"),
        1,
        r"d\.conll:1: tag 'B-LOC' is not among the model's labels",
    ),
    # corpora
    (
        "corpus-one-line",
        lambda w: w.pretrain(corpus=w.write("c.txt", "only one sentence here.\n")),
        1,
        r"c\.txt holds 1 document \(1 sentence\(s\)\).*--nsp none",
    ),
    (
        "corpus-no-document-breaks",
        lambda w: w.pretrain(corpus=w.write("c.txt", "a film.\nthe plot.\ngood.\n" * 5)),
        1,
        r"c\.txt holds 1 document \(15 sentence\(s\)\).*separate documents with a blank line",
    ),
    (
        "corpus-blank-lines",
        lambda w: w.pretrain(corpus=w.write("c.txt", "\n \n\t\n" * 10)),
        1,
        r"c\.txt has no text \(empty, or blank lines only\)",
    ),
    (
        "corpus-100mb-line",
        lambda w: w.pretrain(corpus=w.write("c.txt", b"word " * (20 * 2**20))),
        1,
        r"c\.txt:1: a line longer than 10 MB",
    ),
    (
        "vocab-corpus-100mb-line",
        lambda w: w.vocab(corpus=w.write("c.txt", b"word " * (20 * 2**20))),
        1,
        r"c\.txt:1: a line longer than 10 MB",
    ),
    ("vocab-corpus-blank", lambda w: w.vocab(corpus=w.write("c.txt", "\n\n  \n")), 1, r"no words"),
    # numeric flags
    ("batch-size-zero", lambda w: w.finetune("--batch-size", "0"), 2, r"--batch-size: .*0 is out of range"),
    ("batch-size-negative", lambda w: w.finetune("--batch-size", "-4"), 2, r"--batch-size: .*out of range"),
    ("batch-size-huge", lambda w: w.finetune("--batch-size", "10000000"), 2, r"--batch-size: .*out of range"),
    ("learning-rate-nan", lambda w: w.finetune("--learning-rate", "nan"), 2, r"--learning-rate: .*nan is out of range"),
    (
        "input-shards-text-corpus",
        lambda w: w.pretrain("--input-shards", "2"),
        2,
        r"--input-shards splits TFRecord files; a text corpus is read as one stream",
    ),
    (
        "batching-misspelt",
        lambda w: w.finetune("--batching", "bylength"),
        2,
        r"--batching: invalid choice: 'bylength' \(choose from .*auto.*by_length.*bucketed.*fixed.*packed",
    ),
    ("learning-rate-zero", lambda w: w.finetune("--learning-rate", "0"), 2, r"--learning-rate: .*out of range"),
    ("learning-rate-huge", lambda w: w.finetune("--learning-rate", "1e9"), 2, r"--learning-rate: .*out of range"),
    ("learning-rate-text", lambda w: w.finetune("--learning-rate", "fast"), 2, r"'fast' is not a number"),
    ("epochs-huge", lambda w: w.finetune("--epochs", str(10**12)), 2, r"--epochs: .*out of range"),
    ("warmup-ratio-above-one", lambda w: w.finetune("--warmup-ratio", "1.5"), 2, r"--warmup-ratio: .*out of range"),
    ("steps-zero", lambda w: w.pretrain("--steps", "0"), 2, r"--steps: .*out of range"),
    ("steps-huge", lambda w: w.pretrain("--steps", str(10**20)), 2, r"--steps: .*out of range"),
    (
        "sequence-length-beyond-positions",
        lambda w: w.finetune("--sequence-length", "64"),
        2,
        r"--sequence-length 64 is longer than the model's 32 learned positions",
    ),
    (
        "sequence-length-huge",
        lambda w: w.finetune("--sequence-length", str(10**9)),
        2,
        r"--sequence-length: .*out of range",
    ),
    (
        "pretrain-sequence-length-beyond-positions",
        lambda w: w.pretrain("--sequence-length", "64"),
        2,
        r"--sequence-length 64 exceeds the model's 32 positions",
    ),
    (
        "vocab-size-zero",
        lambda w: ["vocab", "--corpus", w.corpus, "--size", "0", "--out", w.path("v.txt")],
        2,
        r"--size: .*out of range",
    ),
    (
        "vocab-size-huge",
        lambda w: ["vocab", "--corpus", w.corpus, "--size", str(10**12), "--out", w.path("v.txt")],
        2,
        r"--size: .*out of range",
    ),
    (
        "pretrain-vocab-size-tiny",
        lambda w: [
            "pretrain",
            "--corpus",
            w.corpus,
            "--preset",
            "bert_tiny_uncased",
            "--vocab-size",
            "5",
            "--out",
            w.out,
        ],
        2,
        r"--vocab-size: .*out of range",
    ),
    (
        "export-top-k-zero",
        lambda w: ["export", "--model", w.classifier, "--out", w.out, "--top-k", "0"],
        2,
        r"--top-k: .*out of range",
    ),
    # vocabularies
    (
        "vocab-no-cls",
        lambda w: w.finetune(
            "--vocab",
            w.write("v/vocab.txt", "\n".join([t for t in VOCAB if t != "[CLS]"] + ["x"]) + "\n"),
            model="bert_tiny_uncased",
        ),
        1,
        r"lacks the special token\(s\) \[CLS\]",
    ),
    (
        "vocab-no-mask-pretrain",
        lambda w: w.pretrain(
            "--vocab", w.write("v/vocab.txt", "\n".join([t for t in VOCAB if t != "[MASK]"] + ["x"]) + "\n")
        ),
        1,
        r"vocab\.txt lacks the special token\(s\) \[MASK\]",
    ),
    (
        "vocab-duplicates",
        lambda w: w.finetune(
            "--vocab", w.write("v/vocab.txt", "\n".join(VOCAB[:-1] + ["good"]) + "\n"), model="bert_tiny_uncased"
        ),
        1,
        r"has 'good' twice \(lines 6 and 17\)",
    ),
    (
        "vocab-empty",
        lambda w: w.finetune("--vocab", w.write("v/vocab.txt", ""), model="bert_tiny_uncased"),
        1,
        r"vocab\.txt is empty",
    ),
    (
        "vocab-size-mismatch",
        lambda w: w.finetune(model=vocab_one_longer(w)),
        1,
        r"vocab\.txt has 18 entries but the model's embedding table has 17 rows \(--model '.*'\)",
    ),
    # config.json
    (
        "config-not-json",
        lambda w: ["convert", "--from", config_not_json(w), "--out", w.out],
        1,
        r"config\.json is not valid JSON",
    ),
    (
        "config-heads-not-dividing",
        lambda w: [
            "convert",
            "--from",
            w.copy_model(w.tiny, "bad", edit_config=lambda c: c.update(num_attention_heads=3)),
            "--out",
            w.out,
        ],
        1,
        r"hidden_size 8 is not divisible by num_attention_heads 3",
    ),
    (
        "config-unknown-activation",
        lambda w: [
            "convert",
            "--from",
            w.copy_model(w.tiny, "bad", edit_config=lambda c: c.update(hidden_act="swishy")),
            "--out",
            w.out,
        ],
        1,
        r"hidden_act='swishy' is not supported",
    ),
    (
        "config-missing-key",
        lambda w: [
            "convert",
            "--from",
            w.copy_model(w.tiny, "bad", edit_config=lambda c: c.pop("vocab_size")),
            "--out",
            w.out,
        ],
        1,
        r"has no 'vocab_size' entry",
    ),
    (
        "config-negative-size",
        lambda w: [
            "convert",
            "--from",
            w.copy_model(w.tiny, "bad", edit_config=lambda c: c.update(num_hidden_layers=-2)),
            "--out",
            w.out,
        ],
        1,
        r"num_layers = -2 is impossible",
    ),
    # safetensors
    (
        "safetensors-truncated",
        lambda w: ["convert", "--from", broken_safetensors(w, "truncated"), "--out", w.out],
        1,
        r"model\.safetensors: the tensors end past the end of the file \(truncated\?\)",
    ),
    (
        "safetensors-header-length",
        lambda w: ["convert", "--from", broken_safetensors(w, "header_length"), "--out", w.out],
        1,
        r"header claims 1000000000000 bytes",
    ),
    (
        "safetensors-overlap",
        lambda w: ["convert", "--from", broken_safetensors(w, "overlap"), "--out", w.out],
        1,
        r"overlaps the tensor before it",
    ),
    (
        "safetensors-out-of-range",
        lambda w: ["convert", "--from", broken_safetensors(w, "out_of_range"), "--out", w.out],
        1,
        r"model\.safetensors: .*(belong to no tensor|past the end)",
    ),
    (
        "safetensors-unknown-dtype",
        lambda w: ["convert", "--from", broken_safetensors(w, "dtype"), "--out", w.out],
        1,
        r"unsupported dtype 'F128'",
    ),
    (
        "safetensors-dtype-shape-bytes",
        lambda w: ["convert", "--from", broken_safetensors(w, "dtype_shape"), "--out", w.out],
        1,
        r"of dtype F16 and shape .* needs \d+ bytes",
    ),
    (
        "safetensors-shape-bytes",
        lambda w: ["convert", "--from", broken_safetensors(w, "shape"), "--out", w.out],
        1,
        r"needs \d+ bytes, its data_offsets",
    ),
    (
        "safetensors-duplicate-name",
        lambda w: ["convert", "--from", broken_safetensors(w, "duplicate"), "--out", w.out],
        1,
        r"names tensor '.*' twice",
    ),
    (
        "checkpoint-tensor-shape",
        lambda w: ["convert", "--from", wrong_shape_checkpoint(w), "--out", w.out],
        1,
        r"word_embeddings.weight' has shape \(17, 12\), the model expects \(17, 8\)",
    ),
    # original TF checkpoints
    (
        "google-missing-variable",
        lambda w: ["convert", "--from", google_checkpoint(w, drop_one=True), "--out", w.out],
        1,
        r"tensor\(s\) missing from the checkpoint, first \['bert/encoder/layer_0/attention/self/query/kernel'\]",
    ),
    (
        "google-damaged-index",
        lambda w: ["convert", "--from", google_checkpoint(w, damage_index=True), "--out", w.out],
        1,
        r"the TF checkpoint cannot be read",
    ),
    # pickles: refused, never opened
    (
        "pickle-pytorch-model-bin",
        lambda w: ["convert", "--from", pickle_checkpoint(w, "pytorch_model.bin"), "--out", w.out],
        1,
        r"pytorch_model\.bin.*never loaded",
    ),
    ("pickle-pt", lambda w: w.finetune(model=pickle_checkpoint(w, "model.pt")), 1, r"model\.pt.*never loaded"),
    (
        "pickle-pkl",
        lambda w: ["convert", "--from", pickle_checkpoint(w, "weights.pkl"), "--out", w.out],
        1,
        r"weights\.pkl.*never loaded",
    ),
    (
        "pickle-disguised-as-safetensors",
        lambda w: ["convert", "--from", pickle_checkpoint(w, None, disguised=True), "--out", w.out],
        1,
        r"model\.safetensors is a pickle",
    ),
    # a model directory of another task
    (
        "evaluate-backbone-dir",
        lambda w: ["evaluate", "--model", w.tiny, "--data", w.dev],
        1,
        r"holds a BERT encoder without a task head .* so evaluate has nothing to run",
    ),
    (
        "predict-backbone-dir",
        lambda w: ["predict", "--model", w.tiny, "hello"],
        1,
        r"holds a BERT encoder without a task head .* so predict has nothing to run",
    ),
    (
        "export-backbone-dir",
        lambda w: ["export", "--model", w.tiny, "--out", w.out],
        1,
        r"holds a BERT encoder without a task head .* so export has nothing to run",
    ),
    (
        "evaluate-classifier-on-conll",
        lambda w: ["evaluate", "--model", w.classifier, "--data", w.conll],
        1,
        r"train\.conll: no column 'sentence'; the header has \['the O'\]",
    ),
    (
        "model-dir-without-vocab",
        lambda w: ["predict", "--model", w.copy_model(w.classifier, "nv", drop=("vocab.txt",)), "hello"],
        1,
        r"(no vocab\.txt|vocabulary file not found)",
    ),
    # --out
    ("out-is-a-file", lambda w: w.finetune(out=existing_out(w, "file")), 1, r"--out .* is an existing file"),
    (
        "out-holds-another-model",
        lambda w: w.pretrain(out=existing_out(w, "model")),
        2,
        r"--out .* already exists \(a BertClassifier model directory\).*--overwrite",
    ),
    ("out-existing-dir", lambda w: w.finetune(out=existing_out(w, "dir")), 2, r"already exists.*--overwrite"),
    ("out-read-only", lambda w: w.finetune(out=read_only_out()), 1, r"cannot write --out .*(not writable|Operation)"),
    ("out-under-a-file", lambda w: w.pretrain(out=os.path.join(w.train, "out")), 1, r"train\.tsv is a file"),
    (
        "convert-out-exists",
        lambda w: ["convert", "--from", w.tiny, "--out", existing_out(w, "model")],
        2,
        r"already exists",
    ),
    ("vocab-out-exists", lambda w: w.vocab(out=existing_out(w, "file")), 2, r"already exists \(a file\)"),
    (
        "evaluate-out-exists",
        lambda w: ["evaluate", "--model", w.classifier, "--data", w.dev, "--out", existing_out(w, "file")],
        2,
        r"already exists",
    ),
    (
        "export-over-saved-model",
        lambda w: ["export", "--model", w.classifier, "--out", existing_saved_model(w)],
        2,
        r"already exists \(a SavedModel\)",
    ),
    # usage
    ("unknown-verb", lambda w: ["frobnicate"], 2, r"invalid choice: 'frobnicate'"),
    (
        "missing-required-flag",
        lambda w: ["finetune", "classify", "--model", w.tiny],
        2,
        r"the following arguments are required: --train, --dev, --out",
    ),
    ("unknown-task", lambda w: ["finetune", "no_such_task"], 2, r"invalid choice: 'no_such_task'"),
    (
        "unknown-preset",
        lambda w: [
            "pretrain",
            "--corpus",
            w.corpus,
            "--preset",
            "bert_gigantic",
            "--vocab-size",
            "200",
            "--out",
            w.out,
        ],
        2,
        r"--preset 'bert_gigantic' is unknown",
    ),
]


def vocab_one_longer(w):
    path = w.copy_model(w.tiny, "m")
    with open(os.path.join(path, "vocab.txt"), "a") as f:
        f.write("extra\n")
    return path


def config_not_json(w):
    path = w.copy_model(w.tiny, "bad")
    w.write("bad/config.json", "{not json")
    return path


def existing_saved_model(w):
    path = w.path("served")
    os.makedirs(os.path.join(path, "variables"))
    w.write("served/saved_model.pb", b"\x08\x01")
    return path


@pytest.mark.parametrize("case_id, argv, code, pattern", CASES, ids=[c[0] for c in CASES])
def test_cli_failure(case_id, argv, code, pattern, models, tmp_path, capsys):
    w = World(tmp_path / "w", models)
    check_case(w.root, argv(w), code, pattern, capsys)
    assert not os.path.exists(w.path("UNPICKLED")), "a pickle was opened"


def test_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


# --- odd but valid input: a defined answer, exit code 0 -----------------------------------------
def test_predict_empty_huge_and_invalid_utf8_text(models, capsys):
    """Empty text, 1 MB of text and bytes that are not UTF-8 (as a shell passes them: surrogate
    escapes) each get a prediction; the invalid bytes are read as U+FFFD, like the tokenizer does."""
    huge = "the film was good " * 60_000  # 1 MB
    invalid = b"caf\xe9 \xff good".decode("utf-8", "surrogateescape")
    code, out, err = run_cli(["predict", "--model", models["classifier"], "--json", "", huge, invalid], capsys)
    assert code == 0, err
    rows = [json.loads(line) for line in out.strip().splitlines()]
    assert len(rows) == 3 and all(r["label"] in ("negative", "positive") for r in rows)
    code, out_replaced, _ = run_cli(
        ["predict", "--model", models["classifier"], "--json", "caf\ufffd \ufffd good"], capsys
    )
    assert json.loads(out_replaced) == rows[2]


# --- a run that fails late leaves --out as it was --------------------------------------------
def test_failed_finetune_leaves_existing_out_byte_identical(models, tmp_path, capsys, monkeypatch):
    """`--overwrite` over a finished run, and the new run fails after training, while writing its
    last file: the old output is byte-identical and no staging directory is left. The new run's
    checkpoints stay in the hidden `.NAME.run/` beside it (resume state, #14: rerunning the
    command resumes from them), and nothing else is added."""
    # Where finetune looks the name up (it imports it at the top of its module).
    import keras_bert_zoo.training.curves as curves

    w = World(tmp_path / "w", models)
    out = existing_out(w, "model")
    before = tree_hash(w.root)
    run_state = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.run")

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device", os.path.join(out, "training_curve.png"))

    monkeypatch.setattr(curves, "plot_finetuning", disk_full)
    code, _, err = run_cli(w.finetune("--epochs", "1", "--batch-size", "8", "--overwrite", out=out), capsys)
    check_failure(code, err, 1, r"training_curve\.png: No space left on device")
    assert os.listdir(run_state) == ["checkpoints"]
    shutil.rmtree(run_state)
    assert tree_hash(w.root) == before


def test_debug_shows_the_traceback(models, tmp_path, capsys):
    w = World(tmp_path / "w", models)
    with pytest.raises(Exception, match="nope.tsv does not exist"):
        run_cli(w.finetune("--debug", train=w.path("nope.tsv")), capsys)


# --- the real console script: exit codes and stderr as a user sees them -------------------------
@pytest.mark.parametrize("case_id", ["train-missing", "learning-rate-nan", "pickle-pytorch-model-bin"])
def test_real_command(case_id, models, tmp_path):
    _, argv, expected, pattern = next(c for c in CASES if c[0] == case_id)
    w = World(tmp_path / "w", models)
    args = argv(w)
    before = tree_hash(w.root)
    code, _, err = run_bert_zoo(args)
    check_failure(code, err, expected, pattern)
    assert tree_hash(w.root) == before
    assert not os.path.exists(w.path("UNPICKLED"))
