"""Small inputs are cut into windows eagerly (`base.windows_runner`): the same windows as the
traced function, without paying its trace; large inputs, and any input once it is traced, use it."""

import numpy as np

from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_windows
from keras_bert_zoo.tasks.tagger.data import read_tagged
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.windows import make_windows
from tests.helpers import minilm_path, shared_data


def assert_same_arrays(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_tagging_windows_eager_equal_traced():
    examples = read_tagged(shared_data("conll2003", "eng.testa"), max_examples=300)
    pre = TaggingPreprocessor.from_preset(minilm_path(), sequence_length=32, label_names=examples.label_names)
    eager = make_windows(examples, pre, chunk_size=128)  # 3 chunks: eager
    assert pre.compiled_windows(True, trace=False) is None  # nothing was traced
    assert len(eager.features["token_ids"]) > 300  # some sentences need several windows at 32
    traced = make_windows(examples, pre, chunk_size=30)  # 10 chunks: above the eager limit (8), traced
    assert pre.compiled_windows(True, trace=False) is not None
    assert_same_arrays(eager.features, traced.features)
    np.testing.assert_array_equal(eager.labels, traced.labels)
    np.testing.assert_array_equal(eager.word_ids, traced.word_ids)
    np.testing.assert_array_equal(eager.sentence_ids, traced.sentence_ids)


def test_qa_windows_eager_equal_traced():
    examples = read_squad(shared_data("squad", "dev.json"), max_examples=40)
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=128, doc_stride=64)
    args = (examples.questions, examples.contexts, examples.answer_starts, examples.answer_ends)
    eager = make_qa_windows(pre, *args, chunk_size=16)
    assert pre.compiled_windows(True, trace=False) is None
    traced = make_qa_windows(pre, *args, chunk_size=4)  # 10 chunks: above the eager limit (8), traced
    assert pre.compiled_windows(True, trace=False) is not None
    assert_same_arrays(eager.features, traced.features)
    assert_same_arrays(eager.labels, traced.labels)
    assert_same_arrays(eager.info, traced.info)
    np.testing.assert_array_equal(eager.example_ids, traced.example_ids)
