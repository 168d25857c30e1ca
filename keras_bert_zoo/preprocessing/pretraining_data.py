"""The streaming pretraining pipeline: corpus -> tokens -> pairs -> packed -> masked batches.

`pretraining_dataset` is what `bert-zoo pretrain` trains on. Reading and pair
generation stream documents (see `corpus` and `pretraining_pairs`); tokenization
is one TF call per chunk of documents; masking is `MaskedLMMasker` on whole
batches inside `tf.data`, so every epoch (every pass over a repeated stream) gets
fresh masks, reproducibly from `seed`.
"""

import tensorflow as tf

from keras_bert_zoo.preprocessing.corpus import read_documents
from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
from keras_bert_zoo.preprocessing.pretraining_pairs import generate_instances, pack_instance
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer, read_vocabulary

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
        return [values[splits[i]: splits[i + 1]].tolist() for i in range(len(sentences))]


def tokenize_documents(documents, tokenize, chunk_documents=64):
    """Yields tokenized documents, tokenizing `chunk_documents` at a time."""
    chunk = []

    def flush():
        sentences = [s for doc in chunk for s in doc]
        ids = tokenize(sentences)
        out, k = [], 0
        for doc in chunk:
            out.append(ids[k: k + len(doc)])
            k += len(doc)
        return out

    for document in documents:
        chunk.append(document)
        if len(chunk) >= chunk_documents:
            yield from flush()
            chunk = []
    if chunk:
        yield from flush()


def make_masker(vocabulary, max_predictions=20, whole_word_masking=False, max_ngram=1, seed=None):
    """The `MaskedLMMasker` of the original recipe for this vocabulary."""
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
    )


def packed_instances(paths, vocabulary, sequence_length=128, nsp="nsp", corpus_format="bert",
                     short_seq_prob=0.1, buffer_size=1000, seed=12345, lowercase=True,
                     document_filter=None):
    """Yields `(token_ids, segment_ids, padding_mask, label, instance)` for each instance.

    `document_filter(index) -> bool` keeps only some documents (e.g. held-out ones).
    """
    tokenize = WordPieceIds(vocabulary, lowercase=lowercase)
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


def pretraining_dataset(paths, vocabulary, sequence_length=128, max_predictions=20, batch_size=32,
                        nsp="nsp", whole_word_masking=False, max_ngram=1, corpus_format="bert",
                        short_seq_prob=0.1, buffer_size=1000, seed=12345, lowercase=True,
                        repeat=False, drop_remainder=False, document_filter=None):
    """A `tf.data.Dataset` of `(x, y)` batches for `BertPretrainer.fit`.

    x: `token_ids`, `segment_ids`, `padding_mask` `[batch, sequence_length]`,
    `mask_positions` `[batch, max_predictions]`; y: `mask_ids`, `mask_weights` and
    (unless `nsp="none"`) `next_sentence_labels`.

    With `repeat=True` the corpus is re-read and re-paired with a new seed each pass
    and masks are drawn anew (dynamic masking).

    Examples:
    >>> # ds = pretraining_dataset(["corpus.txt"], "vocab.txt", batch_size=32, repeat=True)
    >>> # model.fit(ds, steps_per_epoch=1000)
    """
    vocabulary = load_vocabulary(vocabulary)
    if sequence_length < 8:
        raise ValueError(f"sequence_length={sequence_length} is too short; use at least 8 (128 is usual).")
    masker = make_masker(vocabulary, max_predictions, whole_word_masking, max_ngram)

    def generator(pass_index):
        for token_ids, segment_ids, padding_mask, label, _ in packed_instances(
            paths, vocabulary, sequence_length, nsp, corpus_format, short_seq_prob, buffer_size,
            seed + int(pass_index), lowercase, document_filter,
        ):
            yield token_ids, segment_ids, padding_mask, label

    spec = (
        tf.TensorSpec([sequence_length], tf.int32),
        tf.TensorSpec([sequence_length], tf.int32),
        tf.TensorSpec([sequence_length], tf.int32),
        tf.TensorSpec([], tf.int32),
    )
    passes = tf.data.Dataset.range(1 << 30 if repeat else 1)
    ds = passes.flat_map(
        lambda p: tf.data.Dataset.from_generator(generator, output_signature=spec, args=(p,))
    )
    ds = ds.shuffle(10 * batch_size, seed=seed) if repeat else ds
    ds = ds.batch(batch_size, drop_remainder=drop_remainder).enumerate()

    def mask(index, batch):
        token_ids, segment_ids, padding_mask, labels = batch
        # A stateless seed per batch index: reproducible, and new masks each pass.
        masked = masker(token_ids, seed=tf.stack([tf.constant(seed, tf.int64), index]))
        x = {"token_ids": masked["token_ids"], "segment_ids": segment_ids,
             "padding_mask": padding_mask, "mask_positions": masked["mask_positions"]}
        y = {"mask_ids": masked["mask_ids"], "mask_weights": masked["mask_weights"]}
        if nsp != "none":
            y["next_sentence_labels"] = labels
        return x, y

    return ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
