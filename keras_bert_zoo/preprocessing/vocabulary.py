"""`learn_vocabulary`: a WordPiece vocabulary from text, with the tokenizer's own normalisation."""

import collections
import os

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.files import check_text_file, write_text
from keras_bert_zoo.preprocessing import normalization
from keras_bert_zoo.preprocessing.tokenizer import SPECIAL_TOKENS


def _text_dataset(dataset_or_files, batch_size):
    if isinstance(dataset_or_files, tf.data.Dataset):
        ds = dataset_or_files
        spec = ds.element_spec
        if not isinstance(spec, tf.TensorSpec) or spec.dtype != tf.string:
            raise ValueError(f"the dataset must yield tf.string tensors (lines), got element_spec {spec}.")
        return ds.batch(batch_size) if spec.shape.rank == 0 else ds
    files = [dataset_or_files] if isinstance(dataset_or_files, (str, os.PathLike)) else list(dataset_or_files)
    if not files:
        raise UsageError("no corpus given: pass text files or a tf.data.Dataset of lines.")
    files = [check_text_file(os.fspath(f), "corpus file") for f in files]
    return tf.data.TextLineDataset(files).batch(batch_size)


def count_words(dataset_or_files, lowercase=True, strip_accents=None, tokenize_chinese_chars=True, batch_size=1024):
    """{word: count} over the corpus, words exactly as `BertTokenizer` hands them to WordPiece."""
    ds = _text_dataset(dataset_or_files, batch_size).map(
        lambda text: normalization.normalize_and_split(text, lowercase, strip_accents, tokenize_chinese_chars).flat_values,
        num_parallel_calls=tf.data.AUTOTUNE,
    )
    counts = collections.Counter()
    for words in ds.prefetch(tf.data.AUTOTUNE).as_numpy_iterator():
        unique, n = np.unique(words, return_counts=True)
        counts.update(dict(zip((w.decode("utf-8") for w in unique), n.tolist())))
    return counts


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
):
    """Learns a BERT WordPiece vocabulary (tensorflow-text's learner, our normalisation).

    Words are counted after the same normalisation and splitting `BertTokenizer`
    applies with the same options, then tensorflow-text's
    `wordpiece_tokenizer_learner_lib.learn` (the algorithm behind
    `bert_vocab_from_dataset`) picks the pieces.

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
    from tensorflow_text.tools.wordpiece_vocab import (
        wordpiece_tokenizer_learner_lib as learner,
    )

    reserved = list(SPECIAL_TOKENS) + [f"[unused{i}]" for i in range(num_unused_tokens)]
    if not isinstance(vocabulary_size, int) or vocabulary_size <= len(reserved):
        raise UsageError(
            f"`vocabulary_size` must be an int larger than the {len(reserved)} reserved tokens, got {vocabulary_size!r}."
        )
    counts = count_words(dataset_or_files, lowercase, strip_accents, tokenize_chinese_chars, batch_size)
    if not counts:
        raise InvalidInputError("the corpus has no words after normalisation (empty or blank files?); "
                                "give UTF-8 text files with one sentence or paragraph a line.")
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
