"""`pretrain`'s inputs checked before any work: the corpus files, the arguments, the vocabulary.

A bad flag or a corpus that cannot make sentence pairs stops `pretrain`
(`tasks.pretrainer.job`) before it builds a model, with a message naming the flag.
Part of the task's data half: it imports nothing of the models.

Examples:
>>> from keras_bert_zoo.tasks.pretrainer.inputs import is_records
>>> is_records(["wiki-00.tfrecord", "wiki-01.tfrecord"]), is_records(["wiki.train.tokens"])
(True, False)
"""

import math
import os

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.files import check_input_file

__all__ = [
    "is_records",
    "check_paths",
    "check_corpus",
    "check_arguments",
    "learn_vocabulary_file",
    "read_vocabulary",
    "training_documents",
]


def is_records(paths):
    """True when the corpus is TFRecord files (pretraining examples with ids), not text."""
    return all(str(p).endswith((".tfrecord", ".tfrecords")) or "tfrecord" in os.path.basename(str(p)) for p in paths)


def check_paths(paths, flag="--corpus"):
    """The corpus as a list of paths, each checked to be a readable file."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for p in paths:
        check_input_file(p, f"{flag} file")
    return paths


def check_corpus(paths, corpus_format, nsp, flag="--corpus"):
    """Raises before training when a text corpus cannot make pretraining pairs.

    Every file is scanned once (binary data, lines over 10 MB), then documents are
    counted until two are found: NSP and SOP need sentence pairs, and NSP draws its
    "random next" sentences from another document.
    """
    from keras_bert_zoo.files import check_text_file
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    for p in paths:
        check_text_file(p, f"{flag} file")
    documents = sentences = 0
    for document in read_documents(paths, corpus_format):
        documents += 1
        sentences += len(document)
        if documents >= 2 and sentences >= 2:
            return
    shown = ", ".join(paths)
    if not sentences:
        raise InvalidInputError(
            f"{shown} has no text (empty, or blank lines only); give a corpus with one "
            "sentence per line and a blank line between documents."
        )
    if nsp == "nsp" and documents < 2:
        raise InvalidInputError(
            f"{shown} holds {documents} document ({sentences} sentence(s)) in the {corpus_format!r} format; "
            "next-sentence prediction draws its negatives from other documents: separate documents with a "
            "blank line (--corpus-format bert), or pass --nsp none."
        )
    if nsp != "none" and sentences < 2:
        raise InvalidInputError(
            f"{shown} has a single sentence; sentence pairs need at least two (add text, or pass --nsp none)."
        )


def learn_vocabulary_file(corpus, size, out_path, corpus_format="bert", lowercase=True, document_filter=None):
    """Learns a WordPiece vocabulary of at most `size` tokens from a corpus into `out_path`.

    `document_filter(index) -> bool` keeps only some documents (the training ones).
    """
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary, save_vocabulary
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    if size < 100:
        raise UsageError(f"--vocab-size {size} is too small; use at least a few thousand (e.g. 8000).")
    sentences = [
        s
        for i, doc in enumerate(read_documents(corpus, corpus_format))
        if document_filter is None or document_filter(i)
        for s in doc
    ]
    if not sentences:
        raise InvalidInputError(f"{corpus} has no training sentences to learn a vocabulary from.")
    vocab = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences), size, lowercase=lowercase)
    if out_path is not None:
        save_vocabulary(vocab, out_path)
    return vocab


def check_arguments(
    corpus, records, data_layout, run, *, eval_corpus, batch_size, eval_every, eval_batches, learning_rate, strategy
):
    """Raises `UsageError` / `InvalidInputError` for what would fail later, before any work.

    `data_layout` and `run` are `pretrain`'s dicts (the pretraining data's layout; the
    preset or model, steps, seed and input shards).
    """
    preset, model, steps, input_shards = run["preset"], run["model"], run["steps"], run["input_shards"]
    corpus_format, nsp = data_layout["corpus_format"], data_layout["nsp"]
    sequence_length, holdout_every = data_layout["sequence_length"], data_layout["holdout_every"]
    if not records:
        check_corpus(corpus, corpus_format, nsp)
    if eval_corpus:
        check_corpus(check_paths(eval_corpus, "--eval-corpus"), corpus_format, "none", "--eval-corpus")
    if (preset is None) == (model is None):
        raise UsageError("give exactly one of --preset (architecture, random init) and --model (checkpoint).")
    for name, value in (
        ("steps", steps),
        ("batch-size", batch_size),
        ("eval-every", eval_every),
        ("eval-batches", eval_batches),
        ("input-shards", input_shards),
    ):
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"--{name} {value} must be a positive integer.")
    if not (learning_rate > 0 and math.isfinite(learning_rate)):
        raise UsageError(f"--learning-rate {learning_rate} must be a positive number.")
    if sequence_length < 16 or sequence_length > 512:
        raise UsageError(f"--sequence-length {sequence_length} must be within [16, 512].")
    if holdout_every == 1:
        raise UsageError(
            "--holdout-every 1 holds out every document and leaves none to train on; use 2 or more "
            "(every N-th document is held out) or --eval-corpus FILE."
        )
    if input_shards > 1 and not records:
        raise UsageError(
            "--input-shards splits TFRecord files; a text corpus is read as one stream. Write "
            "the records once (keras_bert_zoo.tasks.pretrainer.records.write_pretraining_records)."
        )
    if strategy == "tpu" and not records:
        raise UsageError(
            "--strategy tpu reads TFRecords (a Python generator cannot run on a TPU host): write "
            "them once with keras_bert_zoo.tasks.pretrainer.records.write_pretraining_records and "
            "pass the .tfrecord files as --corpus."
        )


def training_documents(holdout_every):
    """The filter `document index -> bool` keeping the training documents (None: all of them).

    Held-out documents (every `holdout_every`-th) stay out of training and out of the vocabulary.
    """
    from keras_bert_zoo.tasks.pretrainer.data import split_documents

    return (lambda i: not split_documents(i, holdout_every)) if holdout_every else None


def read_vocabulary(corpus, records, data_layout, *, vocab, vocab_size, model):
    """The vocabulary as a list: learned from the training documents (`vocab_size`) or read."""
    from keras_bert_zoo.tasks.pretrainer.data import load_vocabulary

    if vocab_size:
        if records:
            raise UsageError("--vocab-size learns from text; TFRecords already hold ids: pass --vocab.")
        return learn_vocabulary_file(
            corpus,
            vocab_size,
            None,
            data_layout["corpus_format"],
            data_layout["lowercase"],
            document_filter=training_documents(data_layout["holdout_every"]),
        )
    if vocab is None:
        if model is None:
            raise UsageError("--preset needs a vocabulary: pass --vocab vocab.txt or --vocab-size N.")
        vocab = os.path.join(model, "vocab.txt")
        if not os.path.isfile(vocab):
            raise UsageError(f"{model} has no vocab.txt; pass --vocab.")
    elif os.path.isdir(vocab):
        vocab = os.path.join(vocab, "vocab.txt")
    return load_vocabulary(vocab)
