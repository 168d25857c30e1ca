"""The in-graph conlleval decoder (`tasks.tagger.entity_graph`) against the Python one
(`tasks.tagger.metrics.entity_spans`): the same entities on every sentence of CoNLL-2003
eng.testa, gold and corrupted, in IOB1, IOB2 and BIOES."""

import doctest

import pytest
import tensorflow as tf

from keras_bert_zoo.tasks.tagger import entity_graph
from keras_bert_zoo.tasks.tagger.entity_graph import entity_spans_tf, label_tables
from keras_bert_zoo.tasks.tagger.metrics import entity_spans
from tests.metrics.test_entities import dev_data


def _graph_spans(sentences, label_names):
    """`entity_spans_tf` of tag strings, in a `tf.function` (as in a SavedModel)."""
    index = {n: i for i, n in enumerate(label_names)}
    ids = tf.ragged.constant([[index[t] for t in s] for s in sentences], dtype=tf.int32, row_splits_dtype=tf.int64)
    tables = {k: tf.constant(v) for k, v in label_tables(label_names).items()}
    spans = tf.function(lambda x: entity_spans_tf(x, tables)[0])(ids)
    rows = zip(*(spans[k].to_list() for k in ("entity_type", "first_word", "last_word")), strict=True)
    return [[(t.decode(), a, b) for t, a, b in zip(*row, strict=True)] for row in rows]


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "BIOES"])
def test_graph_decoder_equals_python_decoder_on_conll2003_dev(scheme):
    gold, predicted = dev_data(scheme, seed=3)
    assert len(gold) == 3250
    for sentences in (gold, predicted):
        names = ["O"] + sorted({t for s in sentences for t in s} - {"O"})
        expected = [entity_spans(s, scheme=scheme) for s in sentences]
        assert _graph_spans(sentences, names) == expected
    assert sum(len(s) for s in expected) > 5000  # the corrupted side still has its entities


def test_labels_that_are_not_tags_count_as_o():
    assert _graph_spans([["B-PER", "X", "I-PER", "PER"]], ["O", "B-PER", "I-PER", "X", "PER"]) == [
        [("PER", 0, 1), ("PER", 2, 3)]
    ]


def test_docstring_examples_run():
    result = doctest.testmod(entity_graph)
    assert result.attempted >= 2 and result.failed == 0
