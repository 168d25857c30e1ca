"""Answer search over window logits (google-research/bert `run_squad.py`'s `write_predictions`).

`SpanSearch` is TensorFlow ops on whole batches of windows; `BertSpanQA.predict_answers`
and the SavedModel's `serving_default` both run it, so Python and serving answers come
from one code path. Per window it takes the top-`top_k` (20) start and end positions
over the window's real tokens, pairs them (20 x 20), and drops a pair when either end is
off the passage (question, `[CLS]`, `[SEP]`), the end is before the start, the span is
longer than `max_answer_length` (30) pieces, or the start piece is not in its
max-context window (`SpanQAPreprocessor` marks it). A span scores `start + end logit`;
its text is cut from the *original* passage by the pieces' character offsets (no
detokenising, so case, accents and spacing are the passage's). Spans of one question,
over all its windows, are ranked; the same character span found in two windows counts
once (run_squad.py merges equal *texts*; we merge equal spans, which differs only in
the n-best list, never in the answer); the first `n_best` (20) are kept with their
softmax probabilities.

SQuAD v2.0: the null score of a question is the minimum over its windows of
`start_logits[0] + end_logits[0]` (the `[CLS]` span); the answer is `""` when
`null score - best span score > null_threshold` (run_squad.py's
`null_score_diff_threshold`); `null_score_diff` is what `null_odds.json` holds.

A question with no valid span (an empty passage) gets answer `""`, `start = end = -1`
and score 0.
"""

import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import InvalidInputError

__all__ = ["SpanSearch", "predict_answers"]

_NO_SPAN_DIFF = 1e4  # null_score_diff of a question without any valid span (always answered "")


class SpanSearch:
    """Window logits -> best answer and n-best list per question (see the module docstring).

    Args:
        n_best: spans kept per question.
        max_answer_length: longest answer, in pieces.
        top_k: start and end candidates per window.
        version_2_with_negative: answer `""` when the null score wins by `null_threshold`.
        null_threshold: float.
    """

    def __init__(self, n_best=20, max_answer_length=30, top_k=20, version_2_with_negative=False, null_threshold=0.0):
        self.n_best = int(n_best)
        self.max_answer_length = int(max_answer_length)
        self.top_k = int(top_k)
        self.version_2_with_negative = bool(version_2_with_negative)
        self.null_threshold = float(null_threshold)

    def __call__(self, start_logits, end_logits, windows, context):
        """Args:
            start_logits, end_logits: float `[num_windows, seq]`.
            windows: dict with `char_start`, `char_end`, `max_context`, `padding_mask`
                `[num_windows, seq]` and `example_ids` `[num_windows]` (`SpanQAPreprocessor.windows`).
            context: tf.string `[batch]`, the passages (`example_ids` index them).

        Returns:
            dict: `answer` string `[batch]`, `start`, `end` int64 (characters, end
            exclusive), `score`, `probability`, `null_score_diff` float32 `[batch]`,
            `span_answer` (the best non-null span, also under v2.0), and ragged
            `[batch, (n)]` `n_best_text`, `n_best_start`, `n_best_end`, `n_best_score`,
            `n_best_probability`.
        """
        start_logits = tf.cast(start_logits, tf.float32)
        end_logits = tf.cast(end_logits, tf.float32)
        width = tf.shape(start_logits)[1]
        char_start = tf.cast(windows["char_start"][:, :width], tf.int64)
        char_end = tf.cast(windows["char_end"][:, :width], tf.int64)
        max_context = windows["max_context"][:, :width] > 0
        real = windows["padding_mask"][:, :width] > 0
        examples = tf.cast(windows["example_ids"], tf.int64)
        batch = tf.shape(context, out_type=tf.int64)[0]
        k = tf.minimum(self.top_k, width)
        s_val, s_idx = tf.math.top_k(tf.where(real, start_logits, -np.inf), k)
        e_val, e_idx = tf.math.top_k(tf.where(real, end_logits, -np.inf), k)
        passage = char_start >= 0
        start_ok = (tf.gather(passage & max_context, s_idx, batch_dims=1)) & tf.math.is_finite(s_val)
        end_ok = tf.gather(passage, e_idx, batch_dims=1) & tf.math.is_finite(e_val)
        si, ei = s_idx[:, :, None], e_idx[:, None, :]
        ok = start_ok[:, :, None] & end_ok[:, None, :] & (ei >= si) & (ei - si + 1 <= self.max_answer_length)
        shape = tf.shape(ok)
        window = tf.boolean_mask(tf.broadcast_to(tf.range(shape[0])[:, None, None], shape), ok)
        s_pos = tf.boolean_mask(tf.broadcast_to(si, shape), ok)
        e_pos = tf.boolean_mask(tf.broadcast_to(ei, shape), ok)
        score = tf.boolean_mask(s_val[:, :, None] + e_val[:, None, :], ok)
        c_start = tf.gather_nd(char_start, tf.stack([window, s_pos], 1))
        c_end = tf.gather_nd(char_end, tf.stack([window, e_pos], 1))
        example = tf.gather(examples, window)
        # Rank: by question, then score (highest first); keep each character span once.
        order = tf.argsort(score, direction="DESCENDING", stable=True)
        order = tf.gather(order, tf.argsort(tf.gather(example, order), stable=True))
        example, score, c_start, c_end = (tf.gather(t, order) for t in (example, score, c_start, c_end))
        _, span_id = tf.raw_ops.UniqueV2(x=tf.stack([example, c_start, c_end], 1), axis=[0])
        n = tf.size(example, out_type=tf.int64)
        position = tf.range(n)
        first = tf.math.unsorted_segment_min(position, span_id, tf.maximum(tf.reduce_max(span_id) + 1, 1))
        keep = tf.gather(first, span_id) == position
        example, score, c_start, c_end = (tf.boolean_mask(t, keep) for t in (example, score, c_start, c_end))
        rank = tf.range(tf.size(example, out_type=tf.int64))
        rank -= tf.gather(tf.math.unsorted_segment_min(rank, example, batch), example)
        keep = rank < self.n_best
        example, score, c_start, c_end = (tf.boolean_mask(t, keep) for t in (example, score, c_start, c_end))
        top = tf.gather(tf.math.unsorted_segment_max(score, example, batch), example)
        weight = tf.exp(score - top)
        probability = weight / tf.gather(tf.math.unsorted_segment_sum(weight, example, batch), example)
        text = tf.strings.substr(tf.gather(context, example), c_start, c_end - c_start, unit="UTF8_CHAR")

        def ragged(values):
            return tf.RaggedTensor.from_value_rowids(values, example, nrows=batch)

        n_best = {
            "n_best_text": ragged(text),
            "n_best_start": ragged(c_start),
            "n_best_end": ragged(c_end),
            "n_best_score": ragged(score),
            "n_best_probability": ragged(probability),
        }
        found = n_best["n_best_start"].row_lengths() > 0

        def best(name, default):
            return n_best[name][:, :1].to_tensor(default, shape=[None, 1])[:, 0]

        out = {
            "span_answer": best("n_best_text", ""),
            "start": best("n_best_start", -1),
            "end": best("n_best_end", -1),
            "score": best("n_best_score", 0.0),
            "probability": best("n_best_probability", 0.0),
        }
        null = tf.math.unsorted_segment_min(start_logits[:, 0] + end_logits[:, 0], examples, batch)
        out["null_score_diff"] = tf.where(found, null - out["score"], _NO_SPAN_DIFF)
        answer = out["span_answer"]
        if self.version_2_with_negative:
            is_null = out["null_score_diff"] > self.null_threshold
            answer = tf.where(is_null, "", answer)
            out["start"] = tf.where(is_null, tf.constant(-1, tf.int64), out["start"])
            out["end"] = tf.where(is_null, tf.constant(-1, tf.int64), out["end"])
        out["answer"] = answer
        out.update(n_best)
        return out


def predict_answers(
    model,
    questions,
    contexts,
    batch_size=64,
    n_best=20,
    max_answer_length=30,
    version_2_with_negative=False,
    null_threshold=0.0,
    chunk_size=256,
    batching="auto",
):
    """Answers of a `BertSpanQA` (with its `SpanQAPreprocessor`) for raw (question, passage) pairs.

    Questions are processed in chunks (windows, model, `SpanSearch`), so memory stays
    bounded on whole dev files; `batching` is `squad.window_logits`'. Returns one dict
    per question (see `BertSpanQA.predict_answers`)."""
    from keras_bert_zoo.tasks.span_qa.preprocessor import make_qa_windows, window_logits

    questions, contexts = list(questions), list(contexts)
    if len(questions) != len(contexts):
        raise InvalidInputError(
            f"{len(questions)} questions but {len(contexts)} passages; give one passage per question."
        )
    search = SpanSearch(
        n_best=n_best,
        max_answer_length=max_answer_length,
        version_2_with_negative=version_2_with_negative,
        null_threshold=null_threshold,
    )
    results = []
    for begin in range(0, len(questions), chunk_size):
        q, c = questions[begin : begin + chunk_size], contexts[begin : begin + chunk_size]
        windows = make_qa_windows(model.preprocessor, q, c)
        start, end = window_logits(model, windows, batch_size, batching=batching)
        info = {**windows.info, "padding_mask": windows.features["padding_mask"], "example_ids": windows.example_ids}
        out = search(start, end, info, tf.constant(c, tf.string))
        results += _rows(out)
    return results


def _rows(out):
    """SpanSearch outputs (eager) -> one JSON-able dict per question."""
    plain = {k: v.numpy() for k, v in out.items() if not isinstance(v, tf.RaggedTensor)}
    ragged = {k: v.to_list() for k, v in out.items() if isinstance(v, tf.RaggedTensor)}
    rows = []
    for i in range(len(plain["answer"])):
        rows.append(
            {
                "answer": plain["answer"][i].decode("utf-8"),
                "start": int(plain["start"][i]),
                "end": int(plain["end"][i]),
                "score": float(plain["score"][i]),
                "probability": float(plain["probability"][i]),
                "null_score_diff": float(plain["null_score_diff"][i]),
                "span_answer": plain["span_answer"][i].decode("utf-8"),
                "n_best": [
                    {
                        "text": t.decode("utf-8"),
                        "start": int(s),
                        "end": int(e),
                        "score": float(sc),
                        "probability": float(p),
                    }
                    for t, s, e, sc, p in zip(
                        ragged["n_best_text"][i],
                        ragged["n_best_start"][i],
                        ragged["n_best_end"][i],
                        ragged["n_best_score"][i],
                        ragged["n_best_probability"][i],
                        strict=True,
                    )
                ],
            }
        )
    return rows
