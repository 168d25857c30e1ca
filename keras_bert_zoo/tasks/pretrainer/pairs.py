"""Sentence-pair instances for pretraining, following google-research/bert's
`create_pretraining_data.py` (`create_instances_from_document`).

Documents stream in already tokenized (lists of sentences, each a list of token
ids). For each document: a target length (`max_num_tokens`, or with probability
`short_seq_prob` a random shorter one so the model also sees short inputs), chunks
of whole sentences up to that length, a random split point into A and B, then:

- `nsp="nsp"`: 50% B is the actual continuation (label 0 = IsNext); 50% B is read
  from a random *other* document (label 1) and the unused sentences of the chunk
  are put back to start the next chunk. One deviation: a one-sentence chunk is
  split inside the sentence, so its label is 50/50 too (the original always took a
  random B there, skewing labels to 56% random-next on WikiText-2).
- `nsp="sop"` (ALBERT sentence order): label 1 swaps A and B instead; both always
  come from the same document.
- `nsp="none"`: one segment per instance, no label (the paper's "No NSP" ablation).

Then the pair is truncated to fit, one token at a time from the longer segment,
randomly from its front or back.

The original shuffles all documents in memory; to stream corpora larger than
memory, documents pass through a buffer of `buffer_size` documents instead: one is
drawn at random to make instances, and random-next segments come from the other
documents in the buffer. With the buffer at least as large as the corpus this is
the original algorithm.

The pair logic is per-document Python, like the original (it is a data *creation*
step; its output is written to TFRecords or fed to `tf.data` as fixed-shape int
arrays). Tokenization and masking run as TF ops on whole batches.
"""

import collections
import dataclasses
import random

from keras_bert_zoo.errors import UsageError

__all__ = ["Instance", "truncate_seq_pair", "instances_from_document", "generate_instances", "pack_instance"]

_NSP_MODES = ("nsp", "sop", "none")


@dataclasses.dataclass
class Instance:
    tokens_a: list
    tokens_b: list  # empty when nsp="none"
    label: int  # 0 = IsNext / in order, 1 = random / swapped, -1 = none
    document: int  # index of the document A comes from
    document_b: int  # index of the document B comes from (== document unless random)


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Truncates in place until `len(a) + len(b) <= max_num_tokens` (the original's rule)."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        trunc = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Random side, so the model sees cut-offs at both ends of a segment.
        if rng.random() < 0.5:
            del trunc[0]
        else:
            trunc.pop()


def _flatten(sentences):
    return [t for s in sentences for t in s]


def instances_from_document(doc_index, document, others, max_seq_length, rng, nsp="nsp", short_seq_prob=0.1):
    """Instances of one document (the original `create_instances_from_document`).

    Args:
        doc_index: int, the document's index (recorded in the instances).
        document: list of sentences, each a list of token ids.
        others: callable `() -> (index, document)` drawing a random *other*
            document, or None when there is none (then B is always the actual next).
        max_seq_length: int, packed length including `[CLS]` and `[SEP]`s.
        rng: `random.Random`.
        nsp: `"nsp"`, `"sop"` or `"none"`.
        short_seq_prob: float, probability of a shorter random target length.
    """
    special = 2 if nsp == "none" else 3  # [CLS] A [SEP] (B [SEP])
    max_num_tokens = max_seq_length - special
    if max_num_tokens < 2:
        raise UsageError(f"max_seq_length={max_seq_length} is too short for a pair; use at least {special + 2}.")
    document = [s for s in document if s]
    # One target per document, as the original: mostly full length, sometimes short.
    target = max_num_tokens
    if rng.random() < short_seq_prob:
        target = rng.randint(2, max_num_tokens)
    instances = []
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            if chunk and nsp == "none":
                tokens = _flatten(chunk)
                if len(tokens) > max_num_tokens:
                    tokens = tokens[:max_num_tokens]
                instances.append(Instance(tokens, [], -1, doc_index, doc_index))
            elif chunk:
                instance, unused = _pair(doc_index, chunk, target, max_num_tokens, others, rng, nsp)
                if instance is not None:
                    instances.append(instance)
                i -= unused
            chunk, length = [], 0
        i += 1
    return instances


def _pair(doc_index, chunk, target, max_num_tokens, others, rng, nsp):
    split_one = len(chunk) == 1 and len(chunk[0]) >= 2
    if split_one:
        # One long sentence: split it at a random token so that "actual next" is
        # possible too. The original always took a random B here, which skews the
        # labels towards random-next (56% instead of 50% on WikiText-2).
        cut = rng.randint(1, len(chunk[0]) - 1)
        chunk = [chunk[0][:cut], chunk[0][cut:]]
    a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
    tokens_a = _flatten(chunk[:a_end])
    tokens_b = []
    label, doc_b, unused = 0, doc_index, 0
    if nsp == "nsp" and others is not None and (len(chunk) == 1 or rng.random() < 0.5):
        label = 1
        doc_b, random_document = others()
        target_b = target - len(tokens_a)
        start = rng.randint(0, len(random_document) - 1)
        for sentence in random_document[start:]:
            tokens_b.extend(sentence)
            if len(tokens_b) >= target_b:
                break
        # The sentences after A were not used: put them back for the next chunk.
        unused = 0 if split_one else len(chunk) - a_end
    elif len(chunk) >= 2:
        tokens_b = _flatten(chunk[a_end:])
    if not tokens_b:
        return None, unused  # a one-token chunk with no other document: nothing to pair
    if nsp == "sop" and rng.random() < 0.5:
        tokens_a, tokens_b, label = tokens_b, tokens_a, 1
    truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
    if not tokens_a or not tokens_b:
        return None, unused
    return Instance(tokens_a, tokens_b, label, doc_index, doc_b), unused


def generate_instances(documents, max_seq_length=128, nsp="nsp", short_seq_prob=0.1, buffer_size=1000, seed=12345):
    """Streams `Instance`s from an iterable of tokenized documents.

    Args:
        documents: iterable of documents, each a list of sentences (lists of ids).
        max_seq_length: int, packed length (128).
        nsp: `"nsp"`, `"sop"` or `"none"`.
        short_seq_prob: float (0.1).
        buffer_size: int, documents held at once (see the module doc).
        seed: int, makes the stream reproducible.

    Examples:
    >>> from keras_bert_zoo.tasks.pretrainer.pairs import generate_instances
    >>> docs = [[[5, 6], [7, 8, 9]], [[10, 11], [12]], [[13], [14, 15]]]
    >>> out = list(generate_instances(docs, max_seq_length=16, seed=1))
    >>> all(i.label in (0, 1) for i in out), all(i.tokens_a and i.tokens_b for i in out)
    (True, True)
    """
    if nsp not in _NSP_MODES:
        raise UsageError(f"nsp must be one of {_NSP_MODES}, got {nsp!r}.")
    if buffer_size < 2:
        raise UsageError("buffer_size must be >= 2 so random-next segments can come from another document.")
    rng = random.Random(seed)
    buffer = []  # (index, document) waiting to be turned into instances
    # Recent documents (emitted or not) that random-next segments are drawn from;
    # separate from `buffer` so the last documents of the stream still have peers.
    pool = collections.deque(maxlen=buffer_size)

    def emit(position):
        index, document = buffer.pop(position)
        # Where this document sits in the pool (None once evicted); drawing from the
        # other len-1 slots makes a random-next segment never come from itself.
        mine = next((k for k, (idx, _) in enumerate(pool) if idx == index), None)
        candidates = len(pool) - (mine is not None)

        def others():
            j = rng.randrange(candidates)
            if mine is not None and j >= mine:
                j += 1
            return pool[j]

        yield from instances_from_document(
            index, document, others if candidates else None, max_seq_length, rng, nsp, short_seq_prob
        )

    count = 0
    for document in documents:
        document = [s for s in document if s]
        if not document:
            continue
        buffer.append((count, document))
        pool.append((count, document))
        count += 1
        if len(buffer) >= buffer_size:
            yield from emit(rng.randrange(len(buffer)))
    while buffer:
        yield from emit(rng.randrange(len(buffer)))


def pack_instance(instance, sequence_length, cls_id, sep_id, pad_id=0):
    """`[CLS] A [SEP] (B [SEP])` padded: `(token_ids, segment_ids, padding_mask)` lists."""
    ids = [cls_id] + list(instance.tokens_a) + [sep_id]
    segments = [0] * len(ids)
    if instance.tokens_b:
        ids += list(instance.tokens_b) + [sep_id]
        segments += [1] * (len(instance.tokens_b) + 1)
    if len(ids) > sequence_length:
        raise UsageError(
            f"instance of {len(ids)} tokens does not fit sequence_length={sequence_length}; pack "
            "with the max_seq_length the instances were made for."
        )
    mask = [1] * len(ids)
    pad = sequence_length - len(ids)
    return ids + [pad_id] * pad, segments + [0] * pad, mask + [0] * pad
