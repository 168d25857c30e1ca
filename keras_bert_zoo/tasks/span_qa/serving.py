"""`QAServing`: the `qa` task's SavedModel serving: `(question, context)` in, answer and n-best out.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.errors import ArgumentTypeError
from keras_bert_zoo.export.serving import TaskServing
from keras_bert_zoo.tasks.options import TaskOption

__all__ = ["QAServing"]


class QAServing(TaskServing):
    """`(question, context)` raw strings in; answer, character span, score and n-best out.

    Everything runs in the graph, with the same functions as `BertSpanQA.predict_answers`:
    `SpanQAPreprocessor.windows` (question cut to 64 pieces, passage windows, character
    offsets, max-context marks), the model on all windows of the batch at once, and
    `SpanSearch` (run_squad.py's n-best search). A passage of any length works: it
    becomes as many windows as it needs.

    Signatures (inputs `[batch]`):
    - `serving_default` / `answer`: `question`, `context` `tf.string` -> `answer`
      string, `start`, `end` int64 (characters of `context`, end exclusive; -1 when no
      span), `score` (start + end logit), `probability` float32 `[batch]`,
      `null_score_diff` float32 (v2.0's null odds), and the n-best list padded to
      `[batch, n_best]` with `num_n_best` int64 `[batch]`: `n_best_text`,
      `n_best_start`, `n_best_end`, `n_best_score`, `n_best_probability`.
    - `tokenize`: `question`, `context` -> the windows (`token_ids`, `segment_ids`,
      `padding_mask`, `char_start`, `char_end`, `max_context`, `example_ids`).
    - `predict_token_ids`: `token_ids`, `segment_ids`, `padding_mask` -> `start_logits`,
      `end_logits`.
    """

    default_signature = "answer"
    options = (
        TaskOption("n_best", int, 20, "answers in the n-best list (20, as run_squad.py)", low=1, high=1000),
        TaskOption("max_answer_length", int, 30, "longest answer span in pieces (30)", low=1, high=8192),
    )
    N_BEST_OUTPUTS = ("n_best_text", "n_best_start", "n_best_end", "n_best_score", "n_best_probability")

    def __init__(self, model, preprocessor, text_pair=False, n_best=20, max_answer_length=30):
        from keras_bert_zoo.tasks.span_qa.span_search import SpanSearch

        if not hasattr(preprocessor, "windows") or not hasattr(preprocessor, "doc_stride"):
            raise ArgumentTypeError(
                f"a BertSpanQA needs a SpanQAPreprocessor (question + passage -> windows), got "
                f"{type(preprocessor).__name__}."
            )
        super().__init__(model, preprocessor, False)
        self.search = SpanSearch(
            n_best=n_best,
            max_answer_length=max_answer_length,
            version_2_with_negative=model.version_2_with_negative,
            null_threshold=model.null_threshold,
        )

    def preprocess(self, question, context=None):
        return {**self.preprocessor.windows(question, context), "context": context}

    def outputs(self, model_outputs, features):
        import tensorflow as tf

        if "example_ids" not in features:  # predict_token_ids
            return {k: tf.cast(model_outputs[k], tf.float32) for k in ("start_logits", "end_logits")}
        found = self.search(model_outputs["start_logits"], model_outputs["end_logits"], features, features["context"])
        pads = {"n_best_text": "", "n_best_start": -1, "n_best_end": -1, "n_best_score": 0.0, "n_best_probability": 0.0}
        out = {k: found[k] for k in ("answer", "start", "end", "score", "probability", "null_score_diff")}
        out.update({k: found[k].to_tensor(pads[k]) for k in self.N_BEST_OUTPUTS})
        out["num_n_best"] = found["n_best_start"].row_lengths()
        return out

    def signatures(self, module):
        import tensorflow as tf

        text = [tf.TensorSpec([None], tf.string, name="question"), tf.TensorSpec([None], tf.string, name="context")]

        @tf.function(input_signature=text)
        def answer(question, context):
            return module.run(module.preprocess(question, context))

        @tf.function(input_signature=text)
        def tokenize(question, context):
            features = module.preprocess(question, context)
            return {k: v for k, v in features.items() if k != "context"}

        ids = [tf.TensorSpec([None, None], tf.int32, name=n) for n in ("token_ids", "segment_ids", "padding_mask")]

        @tf.function(input_signature=ids)
        def from_ids(token_ids, segment_ids, padding_mask):
            return module.run({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

        return {"serving_default": answer, "answer": answer, "tokenize": tokenize, "predict_token_ids": from_ids}

    def info(self):
        pre = self.preprocessor
        return {
            "inputs": ["question", "context"],
            "offsets": "characters",
            "doc_stride": pre.doc_stride,
            "stride_mode": pre.stride_mode,
            "max_query_length": pre.max_query_length,
            "n_best": self.search.n_best,
            "max_answer_length": self.search.max_answer_length,
            "version_2_with_negative": self.model.version_2_with_negative,
            "null_threshold": self.model.null_threshold,
            "ragged_outputs": {"num_n_best": list(self.N_BEST_OUTPUTS)},
        }
