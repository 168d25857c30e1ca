"""`BertSpanQA`: extractive question answering (SQuAD), a start and an end logit per token."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.losses import global_sum, replicas_in_sync
from keras_bert_zoo.models.task import Task, default_optimizer
from keras_bert_zoo.models.weight_names import head_dense_specs
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor

__all__ = ["BertSpanQA", "packed_cross_entropy"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSpanQA(Task):
    """BERT for span extraction: sequence output -> `Dense(2)` -> start and end logits.

    The paper's start vector S and end vector E are the two columns of one `Dense(2)`
    named `qa_outputs`, exactly HF's `BertForQuestionAnswering` (no dropout on the
    head, no pooler), so `from_preset` loads a fine-tuned HF QA model and
    `save_to_preset` writes one `transformers` loads back; a Google `run_squad.py`
    checkpoint's `cls/squad/output_weights` `[2, hidden]` / `output_bias` load too.

    Training targets are `{"start_positions": int [batch], "end_positions": int [batch]}`
    (window positions; 0, the `[CLS]`, when the window does not hold the answer); the
    loss is the mean of the start and end cross-entropies over the *global* batch
    (HF's loss; N replicas train like one device). Packed rows (several windows per
    row, `preprocessing.packing`) take `int [rows, seq]` maps instead, 1 at each
    window's start / end, and one softmax per window over its own positions
    (`packed_cross_entropy`). Windows,
    labels and answer search come from `keras_bert_zoo.tasks.span_qa.preprocessor`.

    Args:
        backbone: `BertBackbone`.
        preprocessor: optional `SpanQAPreprocessor` (question + passage -> windows);
            needed by `predict_answers`.
        version_2_with_negative: bool, the model was trained on SQuAD v2.0 (questions
            may have no answer); `predict_answers` then answers `""` when the null
            score beats the best span by more than `null_threshold`.
        null_threshold: float, SQuAD v2.0's `null_score_diff_threshold`.
        data_layout: optional JSON-able dict of how the training data was read.

    Outputs: dict `start_logits`, `end_logits`, `float32 [batch, seq]`.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone, BertSpanQA
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertSpanQA(backbone)
    >>> out = model.predict({"token_ids": np.array([[2, 7, 3, 9, 3]]),
    ...                      "segment_ids": np.array([[0, 0, 0, 1, 1]]),
    ...                      "padding_mask": np.ones((1, 5), "int32")}, verbose=0)
    >>> out["start_logits"].shape, out["end_logits"].shape
    ((1, 5), (1, 5))
    """

    hf_architecture = "BertForQuestionAnswering"
    preprocessor_cls = SpanQAPreprocessor
    preprocessor_options = ("sequence_length", "doc_stride", "stride_mode", "max_query_length")
    uses_pooler = False  # HF builds BertForQuestionAnswering with add_pooling_layer=False

    def __init__(
        self, backbone, preprocessor=None, version_2_with_negative=False, null_threshold=0.0, data_layout=None, **kwargs
    ):
        # === Layers ===
        dtype = kwargs.pop("dtype", None) or backbone.dtype_policy
        qa_outputs = keras.layers.Dense(
            2, kernel_initializer=bert_initializer(backbone.initializer_range), dtype=dtype, name="qa_outputs"
        )
        backbone.pooler.trainable = False  # unused: no variables without gradients in the optimizer

        # === Functional Model ===
        inputs = backbone.input
        logits = qa_outputs(backbone(inputs)["sequence_output"])
        # float32 under mixed precision: the softmax over positions and the loss need it.
        start = keras.layers.Activation("linear", dtype="float32", name="start_logits")(logits[..., 0])
        end = keras.layers.Activation("linear", dtype="float32", name="end_logits")(logits[..., 1])
        super().__init__(
            inputs=inputs,
            outputs={"start_logits": start, "end_logits": end},
            backbone=backbone,
            preprocessor=preprocessor,
            **kwargs,
        )
        self.qa_outputs = qa_outputs

        # === Config ===
        self.version_2_with_negative = bool(version_2_with_negative)
        self.null_threshold = float(null_threshold)
        self.data_layout = dict(data_layout) if data_layout else None
        self.start_accuracy_tracker = keras.metrics.Mean(name="start_accuracy")
        self.end_accuracy_tracker = keras.metrics.Mean(name="end_accuracy")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "version_2_with_negative": self.version_2_with_negative,
                "null_threshold": self.null_threshold,
                "data_layout": self.data_layout,
            }
        )
        return config

    # --- training --------------------------------------------------------------------
    def compile(self, optimizer="auto", **kwargs):
        """`compile` with the built-in span loss (pass no `loss`); `"auto"` is AdamW
        at 5e-5 (`training.default_optimizer`).

        Metrics: `loss`, `start_accuracy`, `end_accuracy` (per window; EM/F1 need the
        answer search over all windows: `keras_bert_zoo.tasks.span_qa.metrics`).
        """
        if kwargs.get("loss") is not None:
            raise UsageError(
                "BertSpanQA has its own loss (mean of the start and end cross-entropies); "
                "call compile() without `loss=`."
            )
        kwargs.pop("loss", None)
        if optimizer == "auto":
            optimizer = default_optimizer()
        super().compile(optimizer=optimizer, **kwargs)

    @staticmethod
    def _targets(y):
        if isinstance(y, dict):
            return y["start_positions"], y["end_positions"]
        start, end = y
        return start, end

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        start, end = self._targets(y)
        total, count = 0.0, None
        for positions, logits in ((start, y_pred["start_logits"]), (end, y_pred["end_logits"])):
            logits = ops.cast(logits, "float32")
            if len(positions.shape) == 2:  # packed rows: one softmax per window (`packed_cross_entropy`)
                ce, _ = packed_cross_entropy(positions, logits, x["padding_mask"])
                total, count = total + ce, ops.sum(ops.cast(positions, "float32"))
                continue
            # HF clamps positions outside the window to `seq` and ignores them; ours are always inside.
            positions = ops.clip(ops.reshape(ops.cast(positions, "int32"), [-1]), 0, ops.shape(logits)[1] - 1)
            ce = keras.losses.sparse_categorical_crossentropy(positions, logits, from_logits=True)
            total, count = total + ops.sum(ce), ops.cast(ops.shape(start)[0], "float32")
        loss = total / (2.0 * ops.maximum(global_sum(count), 1.0))
        if self.losses:
            loss = loss + ops.sum(ops.stack(self.losses)) / replicas_in_sync()
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        start, end = self._targets(y)
        for tracker, positions, logits in (
            (self.start_accuracy_tracker, start, y_pred["start_logits"]),
            (self.end_accuracy_tracker, end, y_pred["end_logits"]),
        ):
            if len(positions.shape) == 2:
                _, accuracy = packed_cross_entropy(positions, ops.cast(logits, "float32"), x["padding_mask"])
            else:
                hits = ops.equal(
                    ops.cast(ops.argmax(logits, axis=-1), "int32"), ops.reshape(ops.cast(positions, "int32"), [-1])
                )
                accuracy = ops.mean(ops.cast(hits, "float32"))
            tracker.update_state(accuracy)
        return self.get_metrics_result()

    def predict_answers(
        self, questions, contexts, batch_size=64, n_best=20, max_answer_length=30, null_threshold=None, batching="auto"
    ):
        """The best answer span of each (question, passage) pair, and its n-best list.

        Long passages are read in windows; spans are searched as google-research/bert's
        `run_squad.py` does (`keras_bert_zoo.tasks.span_qa.preprocessor.SpanSearch`, the same
        graph the SavedModel serves). `batching`: `"auto"` (windows bucketed by length;
        the faster on SQuAD) or `"packed"` (several windows per row; the same answers).

        Returns:
            a list of dicts: `answer` (text cut from the passage), `start`, `end`
            (character offsets, end exclusive; -1 when there is no span), `score`
            (start + end logit), `probability`, `null_score_diff` (v2), and `n_best`
            (lists `text`, `start`, `end`, `score`, `probability`).
        """
        from keras_bert_zoo.tasks.span_qa.span_search import predict_answers

        if self.preprocessor is None:
            raise UsageError(
                "predict_answers needs a SpanQAPreprocessor: load the model from a directory with "
                "vocab.txt, or pass preprocessor=SpanQAPreprocessor.from_preset(DIR)."
            )
        threshold = self.null_threshold if null_threshold is None else null_threshold
        return predict_answers(
            self,
            questions,
            contexts,
            batch_size=batch_size,
            n_best=n_best,
            max_answer_length=max_answer_length,
            version_2_with_negative=self.version_2_with_negative,
            null_threshold=threshold,
            batching=batching,
        )

    # --- checkpoints ------------------------------------------------------------------
    def head_weight_specs(self):
        # run_squad.py: `cls/squad/output_weights` [2, hidden] (transposed) and `cls/squad/output_bias`.
        return head_dense_specs("qa_outputs", self.qa_outputs, google_prefix="cls/squad", google_transposed=True)


def packed_cross_entropy(targets, logits, padding_mask):
    """Span cross-entropy on packed rows (`preprocessing.packing`): one softmax per window.

    Args:
        targets: int `[rows, seq]`, 1 at each packed window's answer position, else 0.
        logits: float32 `[rows, seq]`.
        padding_mask: int `[rows, seq]`, the windows' numbers (0: padding).

    Returns:
        `(loss, accuracy)`: the cross-entropy summed over the windows (those with a
        target), and the fraction of them whose target has the highest logit (the
        padded path's argmax accuracy, up to ties).
    """
    # One segment per window: a new one wherever the window number changes along the flattened
    # rows (numbers are unique in the batch; a padding run is a segment with no target). At most
    # one segment per position: the count is a static shape, read from no data.
    ids = ops.reshape(ops.cast(padding_mask, "int32"), [-1])
    changes = ops.not_equal(ids, ops.concatenate([ops.convert_to_tensor([-1], "int32"), ids[:-1]], axis=0))
    segment = ops.cumsum(ops.cast(changes, "int32")) - 1
    count = ops.shape(ids)[0]
    flat = ops.reshape(logits, [-1])
    highest = ops.segment_max(flat, segment, num_segments=count)
    log_sum = highest + ops.log(
        ops.segment_sum(ops.exp(flat - ops.take(highest, segment)), segment, num_segments=count)
    )
    target = ops.reshape(ops.cast(targets, "float32"), [-1])
    target_logit = ops.segment_sum(flat * target, segment, num_segments=count)
    has_target = ops.segment_sum(target, segment, num_segments=count) > 0
    loss = ops.sum(ops.where(has_target, log_sum - target_logit, 0.0))
    hits = ops.logical_and(has_target, ops.greater_equal(target_logit, highest))
    accuracy = ops.sum(ops.cast(hits, "float32")) / ops.maximum(ops.sum(ops.cast(has_target, "float32")), 1.0)
    return loss, accuracy
