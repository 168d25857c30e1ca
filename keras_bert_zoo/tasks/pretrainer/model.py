"""`BertPretrainer`: backbone + masked-LM head + next-sentence head (BERT pretraining)."""

import keras
from keras import ops

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.layers.heads import MaskedLMHead, NextSentenceHead
from keras_bert_zoo.models.layers.int8 import dense_kernel, embedding_matrix
from keras_bert_zoo.models.losses import global_sum, replicas_in_sync
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.models.weight_names import WeightSpec, head_dense_specs

__all__ = ["masked_lm_loss", "masked_lm_accuracy", "next_sentence_loss", "BertPretrainer"]

# Names of the label dict `fit` / `evaluate` expect (same as the original TFRecord
# features, so a record maps onto it without renaming).
_MASK_IDS = "mask_ids"
_MASK_WEIGHTS = "mask_weights"
_NSP_LABELS = "next_sentence_labels"


def masked_lm_loss(mask_ids, mask_weights, mlm_logits, denominator=None):
    """Cross-entropy averaged over the *real* mask positions of the whole batch.

    Padding slots (weight 0) neither add loss nor count in the mean: a row with 3
    predictions weighs 3/20 of a row with 20, exactly as the original
    `sum(weight * loss) / sum(weight)`. `denominator` replaces `sum(weight)`
    (a replica divides by the count of the global batch, see `compute_loss`).
    """
    weights = ops.cast(mask_weights, "float32")
    per_token = keras.losses.sparse_categorical_crossentropy(mask_ids, mlm_logits, from_logits=True)
    if denominator is None:
        denominator = ops.sum(weights)
    return ops.sum(per_token * weights) / ops.maximum(denominator, 1e-5)


def masked_lm_accuracy(mask_ids, mask_weights, mlm_logits):
    weights = ops.cast(mask_weights, "float32")
    hits = ops.cast(ops.equal(ops.argmax(mlm_logits, axis=-1), ops.cast(mask_ids, "int32")), "float32")
    return ops.sum(hits * weights) / ops.maximum(ops.sum(weights), 1e-5)


def next_sentence_loss(labels, nsp_logits):
    return ops.mean(keras.losses.sparse_categorical_crossentropy(labels, nsp_logits, from_logits=True))


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPretrainer(Task):
    """BERT pretraining model: masked-LM (MLM) plus next-sentence prediction (NSP).

    The MLM head is Dense(hidden) + activation + LayerNorm, decoded with the
    backbone's token-embedding matrix transposed plus its own bias; the NSP head is
    Dense(2) on the pooled output (label 0 = "B follows A", 1 = random).

    `compile` needs only an optimizer: the loss is built in, MLM cross-entropy
    averaged over real mask positions plus NSP cross-entropy (the NSP term is
    dropped when the labels have no `next_sentence_labels`, the "No NSP"
    ablation). Metrics: `mlm_loss`, `mlm_accuracy`, `nsp_loss`, `nsp_accuracy` (the last two only
    when the labels have `next_sentence_labels`).

    Inputs: dict of int Tensors `token_ids`, `segment_ids`, `padding_mask`
    `[batch, seq]` and `mask_positions` `[batch, max_predictions]`.
    Labels: dict `mask_ids` (int `[batch, max_predictions]`), `mask_weights`
    (float `[batch, max_predictions]`, 0 for padding slots) and optionally
    `next_sentence_labels` (int `[batch]`).
    Outputs: dict `mlm_logits` `[batch, max_predictions, vocab]`, `nsp_logits` `[batch, 2]`.

    Args:
        backbone: `BertBackbone`.
        preprocessor: optional layer (kept with the preset; pretraining data is
            usually made by `keras_bert_zoo.preprocessing` pipelines instead).
        data_layout: optional dict, how the pretraining data was made
            (`sequence_length`, `max_predictions`, `nsp`, `corpus_format`, ...);
            saved with the preset so `bert-zoo evaluate` prepares data the same way.
        mlm_activation: str or None, the MLM transform's activation; None: the
            backbone's (HF and Google use one for both). KerasHub's `BertMaskedLM`
            uses the exact erf `"gelu"` here over a tanh-GELU backbone.
        mlm_layer_norm_epsilon: float or None, the MLM transform's LayerNorm epsilon;
            None: the backbone's (1e-12). KerasHub's `BertMaskedLM` uses 1e-5.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone, BertPretrainer
    >>> backbone = BertBackbone(vocabulary_size=30, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertPretrainer(backbone=backbone)
    >>> x = {"token_ids": np.array([[2, 4, 1, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32"), "mask_positions": np.array([[2, 0]])}
    >>> out = model(x)
    >>> tuple(out["mlm_logits"].shape), tuple(out["nsp_logits"].shape)
    ((1, 2, 30), (1, 2))
    """

    hf_architecture = "BertForPreTraining"

    def __init__(
        self, backbone, preprocessor=None, data_layout=None, mlm_activation=None, mlm_layer_norm_epsilon=None, **kwargs
    ):
        # === Layers ===
        mlm_head = MaskedLMHead(
            token_embedding=backbone.token_embedding,
            activation=mlm_activation or backbone.activation,
            layer_norm_epsilon=mlm_layer_norm_epsilon or backbone.layer_norm_epsilon,
            initializer_range=backbone.initializer_range,
            dtype=backbone.dtype_policy,
            name="predictions",
        )
        nsp_head = NextSentenceHead(
            initializer_range=backbone.initializer_range,
            dtype=backbone.dtype_policy,
            name="seq_relationship",
        )

        # === Functional Model ===
        inputs = {
            **backbone.input,
            "mask_positions": keras.Input(shape=(None,), dtype="int32", name="mask_positions"),
        }
        features = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
        outputs = {
            "mlm_logits": mlm_head(features["sequence_output"], inputs["mask_positions"]),
            "nsp_logits": nsp_head(features["pooled_output"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.mlm_head = mlm_head
        self.nsp_head = nsp_head
        self.data_layout = dict(data_layout or {})
        # True once `from_preset` filled the MLM head from a checkpoint; a fresh head
        # (e.g. a sentence-transformers checkpoint, which ships none) is trained alone
        # first by `keras_bert_zoo.continue_pretraining`.
        self.mlm_head_loaded = False
        self.mlm_activation = mlm_activation
        self.mlm_layer_norm_epsilon = mlm_layer_norm_epsilon

        # Metrics are computed from (y, y_pred) in `compute_metrics`, not in the
        # loss, so the JAX backend's stateless training step works too.
        self.mlm_loss_tracker = keras.metrics.Mean(name="mlm_loss")
        self.mlm_accuracy_tracker = keras.metrics.Mean(name="mlm_accuracy")
        self.nsp_loss_tracker = keras.metrics.Mean(name="nsp_loss")
        self.nsp_accuracy_tracker = keras.metrics.SparseCategoricalAccuracy(name="nsp_accuracy")

    # --- training -----------------------------------------------------------------------
    def compile(self, optimizer="adam", **kwargs):
        """Like `keras.Model.compile`; the loss is built in (pass none)."""
        if kwargs.get("loss") is not None:
            raise UsageError("BertPretrainer has its own loss (MLM + NSP); call compile() without `loss=`.")
        kwargs.pop("loss", None)
        super().compile(optimizer=optimizer, **kwargs)

    def _check_labels(self, y):
        if not isinstance(y, dict) or _MASK_IDS not in y or _MASK_WEIGHTS not in y:
            raise InvalidInputError(
                "BertPretrainer expects labels as a dict with 'mask_ids' and 'mask_weights' "
                "(and optionally 'next_sentence_labels'), e.g. from "
                "keras_bert_zoo.tasks.pretrainer.records.read_pretraining_records or "
                f"pretraining_dataset; got {type(y).__name__}"
                f"{' with keys ' + str(sorted(y)) if isinstance(y, dict) else ''}."
            )

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """MLM + NSP cross-entropy (+ `self.losses`) of the batch.

        On one of N replicas it returns the replica's share of the global-batch loss,
        so the summed gradients and the logged `loss` are one device's on the same
        global batch: the MLM numerator is divided by the real predictions of the
        *global* batch and the NSP one by the global batch size (one all-reduce of
        two numbers), and regularisers by N, as Keras' own losses are scaled.
        """
        self._check_labels(y)
        weights = ops.cast(y[_MASK_WEIGHTS], "float32")
        count = ops.sum(weights)
        batch = ops.cast(ops.shape(weights)[0], "float32")
        local_batch = batch
        replicas = replicas_in_sync()
        if replicas > 1:
            totals = global_sum(ops.stack([count, batch]))
            count, batch = totals[0], totals[1]
        loss = masked_lm_loss(y[_MASK_IDS], weights, y_pred["mlm_logits"], denominator=count)
        if _NSP_LABELS in y:
            nsp_sum = next_sentence_loss(y[_NSP_LABELS], y_pred["nsp_logits"]) * local_batch
            loss = loss + nsp_sum / batch
        losses = self.losses  # regularisers, if a user adds any
        if losses:
            loss = loss + ops.sum(ops.stack(losses)) / replicas
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        self._check_labels(y)
        weights = ops.cast(y[_MASK_WEIGHTS], "float32")
        count = ops.sum(weights)
        # Weighted by the number of real predictions, so the epoch value is the
        # per-token mean (as the original's tf.metrics.mean(weights=...)).
        self.mlm_loss_tracker.update_state(
            masked_lm_loss(y[_MASK_IDS], weights, y_pred["mlm_logits"]), sample_weight=count
        )
        self.mlm_accuracy_tracker.update_state(
            masked_lm_accuracy(y[_MASK_IDS], weights, y_pred["mlm_logits"]), sample_weight=count
        )
        if _NSP_LABELS in y:
            # Weighted by the batch size, as Keras' `loss`: replicas' shares pool exactly.
            self.nsp_loss_tracker.update_state(
                next_sentence_loss(y[_NSP_LABELS], y_pred["nsp_logits"]), sample_weight=ops.shape(weights)[0]
            )
            self.nsp_accuracy_tracker.update_state(y[_NSP_LABELS], y_pred["nsp_logits"])
            return self.get_metrics_result()
        # MLM alone (no `next_sentence_labels`: `--nsp none`, `continue_pretraining`): the NSP
        # trackers see nothing, and their 0.0 would read as a perfect NSP loss, so they are not
        # shown (Keras' progress bar, `History` and `evaluate` take the step's dict).
        return {k: v for k, v in self.get_metrics_result().items() if not k.startswith("nsp_")}

    # --- checkpoints --------------------------------------------------------------------
    def head_weight_specs(self):
        """HF `cls.predictions.*` / `cls.seq_relationship.*`; Google `cls/...`."""
        mlm = self.mlm_head
        return [
            WeightSpec("cls.predictions.transform.dense.weight", dense_kernel(mlm.dense), "kernel", in_backbone=False),
            WeightSpec("cls.predictions.transform.dense.bias", mlm.dense.bias, "vector", in_backbone=False),
            WeightSpec("cls.predictions.transform.LayerNorm.weight", mlm.layer_norm.gamma, "vector", in_backbone=False),
            WeightSpec("cls.predictions.transform.LayerNorm.bias", mlm.layer_norm.beta, "vector", in_backbone=False),
            # Google: cls/predictions/output_bias; HF: cls.predictions.bias
            WeightSpec(
                "cls.predictions.bias", mlm.bias, "vector", google_name="cls/predictions/output_bias", in_backbone=False
            ),
            # Google stores output_weights as [2, hidden], i.e. transposed like HF.
            *head_dense_specs(
                "cls.seq_relationship",
                self.nsp_head.dense,
                google_prefix="cls/seq_relationship",
                google_transposed=True,
            ),
        ]

    def _load_head(self, checkpoint):
        # A masked-LM checkpoint without NSP (HF `BertForMaskedLM`, KerasHub `BertMaskedLM`)
        # still fills the MLM head; the NSP head stays random and one line says so.
        specs = self.head_weight_specs()
        mlm_specs = [s for s in specs if s.name.startswith("cls.predictions.")]
        nsp_missing = all(checkpoint.get(s) is None for s in specs if not s.name.startswith("cls.predictions."))
        if nsp_missing and loading.assign_weights(checkpoint, mlm_specs, required=False):
            print(
                f"{type(self).__name__}: MLM head loaded; NSP head initialised randomly "
                "(the checkpoint has no cls.seq_relationship weights)."
            )
            self.mlm_head_loaded = True
            return
        self.mlm_head_loaded = super()._load_head(checkpoint)

    def _tied_tensors(self):
        # HF's BertForPreTraining ties the decoder to the word embeddings; writing the
        # decoder tensors too makes the preset load in HF without "newly initialized".
        return (
            (
                "cls.predictions.decoder.weight",
                keras.ops.convert_to_numpy(embedding_matrix(self.backbone.token_embedding)),
            ),
            ("cls.predictions.decoder.bias", self.mlm_head.bias.numpy()),
        )

    # --- fill-mask ------------------------------------------------------------------------
    def fill_mask(self, texts, top_k=5, batch_size=32):
        """The `top_k` most likely tokens at each `[MASK]` of each text.

        Needs a preprocessor (`BertPreprocessor`; `from_preset` on a directory with a
        `vocab.txt` attaches one). Texts longer than its `sequence_length` are cut, and a
        `[MASK]` beyond the cut gets no answer.

        Returns:
            per text, a list with one entry per `[MASK]` (in order), each a list of
            `top_k` `(token, probability)` pairs, most likely first.

        Examples:
        ```python
        model = BertPretrainer.from_preset("path/to/pretrained")   # with vocab.txt
        model.fill_mask(["the capital of france is [MASK] ."], top_k=3)
        # [[[('paris', 0.41), ('lyon', 0.07), ('marseille', 0.05)]]]
        ```
        """
        import numpy as np

        if self.preprocessor is None or not hasattr(self.preprocessor, "tokenizer"):
            raise UsageError(
                "fill_mask needs a BertPreprocessor: load the model from a directory with vocab.txt, "
                "or pass preprocessor=BertPreprocessor.from_preset(DIR)."
            )
        texts = [texts] if isinstance(texts, str) else list(texts)
        tokenizer = self.preprocessor.tokenizer
        vocabulary = tokenizer.get_vocabulary()
        answers = []
        for start in range(0, len(texts), batch_size):
            features = {k: np.asarray(v) for k, v in self.preprocessor(texts[start : start + batch_size]).items()}
            is_mask = features["token_ids"] == tokenizer.mask_token_id
            count = max(int(is_mask.sum(axis=1).max()), 1)
            positions = np.zeros((len(is_mask), count), "int32")
            for row, where in enumerate(is_mask):
                found = np.flatnonzero(where)
                positions[row, : len(found)] = found
            logits = self.predict_on_batch({**features, "mask_positions": positions})["mlm_logits"]
            logits = np.asarray(logits, dtype=np.float64)
            probs = np.exp(logits - logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            best = np.argsort(-probs, axis=-1)[..., :top_k]
            for row, where in enumerate(is_mask):
                answers.append(
                    [
                        [(vocabulary[i], float(probs[row, slot, i])) for i in best[row, slot]]
                        for slot in range(int(where.sum()))
                    ]
                )
        return answers

    def get_config(self):
        config = super().get_config()
        config["data_layout"] = dict(self.data_layout)
        if self.mlm_activation is not None or self.mlm_layer_norm_epsilon is not None:
            config.update(mlm_activation=self.mlm_activation, mlm_layer_norm_epsilon=self.mlm_layer_norm_epsilon)
        return config
