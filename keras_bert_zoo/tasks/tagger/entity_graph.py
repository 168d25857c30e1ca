"""Entities of tag ids by the conlleval rules, in TensorFlow ops (for SavedModel serving).

The same rule as `tasks.tagger.metrics.entity_spans(tags, mode="conlleval")`, written with
its constants (`CHUNK_STARTS`, `CHUNK_ENDS`, `PREFIX_CODES`, `tag_parts`), for ragged
`[batch, (words)]` tag ids instead of lists of tag strings, so that an exported tagger
returns entity spans from the graph. A chunk starts at a non-O tag that follows O or a
tag whose prefix is in `CHUNK_ENDS` (`E`, `S`), that has a prefix in `CHUNK_STARTS`
(`B`, `S`), or whose type differs from the previous tag's; it ends before O, at the end
of the sentence or where the next chunk starts. Any label set reads (IOB1, IOB2 and
BIOES alike); a label without a `B-`/`I-`/`E-`/`S-` prefix and a type counts as O.

Examples:
>>> from keras_bert_zoo.tasks.tagger.entity_graph import entity_spans_tf, label_tables
>>> import tensorflow as tf
>>> tables = label_tables(["O", "B-PER", "I-PER", "I-LOC"])
>>> ids = tf.ragged.constant([[1, 2, 0, 3, 3], [2]], row_splits_dtype=tf.int64)
>>> spans, _ = entity_spans_tf(ids, tables)
>>> spans["entity_type"].to_list(), spans["first_word"].to_list(), spans["last_word"].to_list()
([[b'PER', b'LOC'], [b'PER']], [[0, 3], [0]], [[2, 5], [1]])
"""

import tensorflow as tf

from keras_bert_zoo.tasks.tagger.metrics import CHUNK_ENDS, CHUNK_STARTS, PREFIX_CODES, tag_parts

__all__ = ["label_tables", "chunk_bounds", "entity_spans_tf"]


def label_tables(label_names):
    """Per label id, as Python lists: `prefix_codes` (`PREFIX_CODES`, 0 for O and for
    labels that are not tags), `type_codes` (index of the type among the sorted types,
    -1 for O) and `entity_types` (the type name, "" for O).

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.entity_graph import label_tables
    >>> label_tables(["O", "B-PER", "I-PER", "S-LOC", "X"])["type_codes"]
    [-1, 1, 1, 0, -1]
    """
    parts = [tag_parts(str(n)) or ("O", "") for n in label_names]
    index = {t: i for i, t in enumerate(sorted({t for _, t in parts} - {""}))}
    return {
        "prefix_codes": [PREFIX_CODES[p] for p, _ in parts],
        "type_codes": [index.get(t, -1) for _, t in parts],
        "entity_types": [t for _, t in parts],
    }


def _one_of(codes, prefixes):
    """`codes` (int32 prefix codes) equal to the code of one of `prefixes`."""
    out = tf.zeros_like(codes, dtype=tf.bool)
    for p in prefixes:
        out = out | tf.equal(codes, PREFIX_CODES[p])
    return out


def chunk_bounds(tag_ids, prefix_codes, type_codes):
    """Where conlleval chunks start and end, as masks over the words of ragged tag ids.

    Args:
        tag_ids: int ragged `[batch, (words)]`.
        prefix_codes, type_codes: `label_tables`' lists (or int32 tensors of them).

    Returns:
        dict of flat `[total_words]` tensors: `ids` int32, `rows` and `pos` int64 (each
        word's sentence and position in it), `inside` (in a chunk), `begins` (a chunk's
        first word) and `ends` (its last word), bool.
    """
    ids = tf.cast(tag_ids.values, tf.int32)
    rows = tag_ids.value_rowids()
    pos = tf.range(tf.size(ids, out_type=tf.int64)) - tf.gather(tag_ids.row_splits, rows)
    last = pos == tf.gather(tag_ids.row_lengths(), rows) - 1
    prefix, kind = tf.gather(prefix_codes, ids), tf.gather(type_codes, ids)
    inside = prefix > 0
    prev_prefix = tf.where(pos == 0, 0, tf.concat([[0], prefix], 0)[:-1])
    prev_kind = tf.concat([[-1], kind], 0)[:-1]
    begins = inside & (
        (prev_prefix == PREFIX_CODES["O"])
        | _one_of(prev_prefix, CHUNK_ENDS)
        | _one_of(prefix, CHUNK_STARTS)
        | (prev_kind != kind)
    )
    next_prefix = tf.concat([prefix, [0]], 0)[1:]
    next_begins = tf.concat([begins, [False]], 0)[1:]
    ends = inside & (last | (next_prefix == PREFIX_CODES["O"]) | next_begins)
    return {"ids": ids, "rows": rows, "pos": pos, "inside": inside, "begins": begins, "ends": ends}


def entity_spans_tf(tag_ids, tables):
    """Entities of ragged `[batch, (words)]` tag ids by the conlleval rules.

    Args:
        tag_ids: int ragged `[batch, (words)]`.
        tables: `label_tables(label_names)` (lists, or tensors of them).

    Returns:
        (spans, bounds): `spans` a dict of ragged `[batch, (entities)]`: `entity_type`
        (string), `first_word` and `last_word` (int64, exclusive), the same entities
        in the same order as `entity_spans`; `bounds` is `chunk_bounds`' dict.
    """
    bounds = chunk_bounds(tag_ids, tables["prefix_codes"], tables["type_codes"])
    begins, pos = bounds["begins"], bounds["pos"]
    entity_rows = tf.boolean_mask(bounds["rows"], begins)

    def ragged(v):
        return tf.RaggedTensor.from_value_rowids(v, entity_rows, nrows=tag_ids.nrows())

    spans = {
        "entity_type": ragged(tf.gather(tables["entity_types"], tf.boolean_mask(bounds["ids"], begins))),
        "first_word": ragged(tf.boolean_mask(pos, begins)),
        "last_word": ragged(tf.boolean_mask(pos, bounds["ends"]) + 1),
    }
    return spans, bounds
