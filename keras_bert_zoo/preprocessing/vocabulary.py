"""`learn_vocabulary`: a WordPiece vocabulary from text, with the tokenizer's own normalisation.

The pieces are chosen by Hugging Face `tokenizers`' `WordPieceTrainer` (Rust): on the
1.1 MB WikiText-2 file it learns 8,000 pieces in about a second and returns the size
asked for, where tensorflow-text's pure-Python learner took minutes and returned 3,574
(docs/decisions.md, the retired `vocab_speed.py`). That learner stays as `learner="tensorflow_text"`, and
is the fallback when `tokenizers` cannot be imported.
"""

import collections
import itertools
import os
import sys

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.files import check_text_file, write_text
from keras_bert_zoo.preprocessing import normalization
from keras_bert_zoo.preprocessing.vocab_file import SPECIAL_TOKENS

__all__ = ["count_words", "learn_vocabulary", "save_vocabulary"]


def _text_dataset(dataset_or_files, batch_size):
    if isinstance(dataset_or_files, tf.data.Dataset):
        ds = dataset_or_files
        spec = ds.element_spec
        if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
            raise ArgumentTypeError(f"the dataset must yield tf.string tensors (lines), got element_spec {spec}.")
        return ds.batch(batch_size) if spec.shape.rank == 0 else ds
    files = [dataset_or_files] if isinstance(dataset_or_files, (str, os.PathLike)) else list(dataset_or_files)
    if not files:
        raise UsageError("no corpus given: pass text files or a tf.data.Dataset of lines.")
    files = [check_text_file(os.fspath(f), "corpus file") for f in files]
    return tf.data.TextLineDataset(files).batch(batch_size)


def count_words(dataset_or_files, lowercase=True, strip_accents=None, tokenize_chinese_chars=True, batch_size=1024):
    """{word: count} over the corpus, words exactly as `BertTokenizer` hands them to WordPiece."""
    ds = _text_dataset(dataset_or_files, batch_size).map(
        lambda text: (
            normalization.normalize_and_split(text, lowercase, strip_accents, tokenize_chinese_chars).flat_values
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    counts = collections.Counter()
    for words in ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        unique, n = np.unique(words, return_counts=True)
        counts.update(dict(zip((w.decode("utf-8") for w in unique), n.tolist(), strict=True)))
    return counts


_LEARNERS = ("auto", "tokenizers", "tensorflow_text")


def _word_batches(dataset_or_files, lowercase, strip_accents, tokenize_chinese_chars, batch_size):
    """Yields lists of words, exactly as `BertTokenizer` hands them to WordPiece."""
    ds = _text_dataset(dataset_or_files, batch_size).map(
        lambda text: (
            normalization.normalize_and_split(text, lowercase, strip_accents, tokenize_chinese_chars).flat_values
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    for words in ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        yield [w.decode("utf-8") for w in words]


def _learn_with_tokenizers(word_batches, vocabulary_size, reserved, min_count, max_token_length):
    """HF `tokenizers`' WordPiece trainer on our words (split on the spaces we put between them only).

    `word_batches()` gives a fresh iterator of word lists; it is read twice. The trainer creates
    each `##c` piece the first time its hash map of word counts reaches it, so those pieces' ids,
    and with them the merges that tie on count, change from run to run: the same text gave
    another vocabulary (huggingface/tokenizers#1794). Declaring every `##c` the text has up front,
    in sorted order, fixes their ids, and the same text gives the same vocabulary.
    """
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    continuing = sorted({char for words in word_batches() for word in set(words) for char in word[1:]})
    continuing = [f"##{char}" for char in continuing]
    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    # Our normalisation and splitting already ran: the trainer must see these very words.
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocabulary_size,
        special_tokens=list(reserved) + continuing,
        continuing_subword_prefix="##",
        min_frequency=int(min_count or 0),
        show_progress=False,
    )
    tokenizer.train_from_iterator((" ".join(words) for words in word_batches()), trainer)
    by_id = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])]
    # BERT's layout: the reserved tokens, the characters, their `##` forms, then the merges.
    learned = by_id[len(reserved) + len(continuing) :]
    alphabet = list(itertools.takewhile(lambda t: len(t) == 1, learned))
    vocab = list(reserved) + alphabet + continuing + learned[len(alphabet) :]
    # Longer pieces than the tensorflow-text learner's limit are dropped the same way.
    return [t for t in vocab if t in reserved or len(t.removeprefix("##")) <= max_token_length]


def learn_vocabulary(
    dataset_or_files,
    vocabulary_size,
    lowercase=True,
    strip_accents=None,
    tokenize_chinese_chars=True,
    num_unused_tokens=0,
    min_count=None,
    max_token_length=50,
    batch_size=1024,
    learner="auto",
):
    """Learns a BERT WordPiece vocabulary of `vocabulary_size` tokens, with our normalisation.

    Words are split with the same normalisation `BertTokenizer` applies with the same
    options; then HF `tokenizers`' `WordPieceTrainer` picks the pieces (all characters
    seen, then merges until the size is reached; fewer only when the corpus has no more
    to merge). `BertTokenizer` reads the result exactly as HF `tokenizers`' `BertWordPieceTokenizer` does
    (tests/preprocessing/test_vocabulary.py). The same text and arguments give the same vocabulary.

    Args:
        dataset_or_files: a text file path, a list of them (one sentence or
            paragraph a line), or a `tf.data.Dataset` of `tf.string` lines.
        vocabulary_size: int, the maximum size of the vocabulary (special and
            unused tokens included).
        lowercase, strip_accents, tokenize_chinese_chars: as in `BertTokenizer`.
        num_unused_tokens: int, `[unused0]...` slots reserved after the special
            tokens (for tokens added later without resizing the embedding).
        min_count: int or None, the lowest count threshold the learner's binary
            search may use (None: tensorflow-text's default, 10). Lower it for
            small corpora.
        max_token_length: int, longest piece kept.
        batch_size: lines per batch when counting.
        learner: `"auto"` (`tokenizers` when importable, else tensorflow-text's, with a
            note), `"tokenizers"` or `"tensorflow_text"` (the learner behind
            `bert_vocab_from_dataset`: a binary search over count thresholds, pure Python;
            it often returns fewer tokens than asked).

    Returns:
        list of str: `[PAD] [UNK] [CLS] [SEP] [MASK]`, the unused slots, then the
        learned pieces (`##` marks word continuations).

    Examples:
    ```python
    from keras_bert_zoo import learn_vocabulary, BertTokenizer

    vocab = learn_vocabulary(["corpus.txt"], vocabulary_size=8000)
    tokenizer = BertTokenizer(vocab)
    ```
    """
    reserved = list(SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused_tokens)]
    if not isinstance(vocabulary_size, int) or vocabulary_size <= len(reserved):
        raise UsageError(
            f"`vocabulary_size` must be an int larger than the {len(reserved)} reserved tokens, got {vocabulary_size!r}."
        )
    if learner not in _LEARNERS:
        raise UsageError(f"learner={learner!r}; use one of {_LEARNERS}.")
    if learner == "auto":
        try:
            import tokenizers  # noqa: F401

            learner = "tokenizers"
        except ImportError:
            print(
                "note: the `tokenizers` package is not installed (pip install tokenizers); learning the "
                "vocabulary with tensorflow-text's slower learner, which may return fewer tokens.",
                flush=True,
            )
            learner = "tensorflow_text"
    if learner == "tokenizers":
        vocab = _learn_with_tokenizers(
            lambda: _word_batches(dataset_or_files, lowercase, strip_accents, tokenize_chinese_chars, batch_size),
            vocabulary_size,
            reserved,
            min_count,
            max_token_length,
        )
        if len(vocab) <= len(reserved):
            raise InvalidInputError(
                "the corpus has no words after normalisation (empty or blank files?); "
                "give UTF-8 text files with one sentence or paragraph a line."
            )
    else:
        vocab = _learn_with_tensorflow_text(
            dataset_or_files,
            vocabulary_size,
            reserved,
            lowercase,
            strip_accents,
            tokenize_chinese_chars,
            min_count,
            max_token_length,
            batch_size,
        )
    _note_if_smaller(len(vocab), vocabulary_size, learner, min_count)
    return vocab


def _note_if_smaller(learned, asked, learner, min_count):
    """One line on stderr when the vocabulary is smaller than asked, and why: a model built on
    it has that many embedding rows, which a user who asked for 8,000 would not guess."""
    if learned >= asked:
        return
    if learner != "tokenizers":
        why = (
            "tensorflow-text's learner keeps only pieces above a count threshold (learner='tokenizers' "
            "fills the size when the text allows)"
        )
    elif min_count:
        why = f"no pair of pieces left occurs at least min_count={min_count} times"
    else:
        why = "every word of the text is already one token, so nothing is left to merge; a larger text gives more"
    print(
        f"note: learned a vocabulary of {learned:,} tokens, not the {asked:,} asked for: {why}.",
        file=sys.stderr,
        flush=True,
    )


def _learn_with_tensorflow_text(
    dataset_or_files,
    vocabulary_size,
    reserved,
    lowercase,
    strip_accents,
    tokenize_chinese_chars,
    min_count,
    max_token_length,
    batch_size,
):
    from tensorflow_text.tools.wordpiece_vocab import (
        wordpiece_tokenizer_learner_lib as learner,
    )

    counts = count_words(dataset_or_files, lowercase, strip_accents, tokenize_chinese_chars, batch_size)
    if not counts:
        raise InvalidInputError(
            "the corpus has no words after normalisation (empty or blank files?); "
            "give UTF-8 text files with one sentence or paragraph a line."
        )
    kwargs = {"max_token_length": max_token_length}
    if min_count is not None:
        kwargs["lower_thresh"] = int(min_count)
    vocab = learner.learn(list(counts.items()), vocabulary_size, reserved, **kwargs)
    if len(vocab) > vocabulary_size:
        raise UsageError(
            f"the learner found no threshold giving at most {vocabulary_size} tokens (got {len(vocab)}): "
            "the corpus alphabet alone may be too large. Raise the vocabulary size."
        )
    # The learner puts reserved tokens first; keep that order and drop any repeat.
    seen, ordered = set(), []
    for token in reserved + list(vocab):
        if token not in seen:
            seen.add(token)
            ordered.append(token)
    return ordered


def save_vocabulary(vocabulary, path):
    """Writes one token a line, atomically."""
    write_text(path, "".join(token + "\n" for token in vocabulary))
