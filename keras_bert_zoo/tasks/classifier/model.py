"""`BertClassifier`: sentence / sentence-pair classification, regression, multi-label."""

import dataclasses

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.task import Task, default_optimizer, label_table
from keras_bert_zoo.models.weight_names import head_dense_specs

__all__ = ["BertClassifier"]

_PROBLEM_TYPES = ("single_label", "multi_label", "regression")


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertClassifier(Task):
    """BERT for sequence classification: pooled output -> dropout -> Dense.

    The head is HF's `BertForSequenceClassification` (`classifier.weight/bias`) and
    google-research/bert's `run_classifier.py` (`output_weights/output_bias`), so
    `from_preset` loads a fine-tuned head from either when the number of classes
    matches, and starts a fresh one otherwise.

    Args:
        backbone: `BertBackbone`.
        num_classes: int, number of outputs. `1` means regression (MSE loss,
            Pearson/Spearman metrics) unless `problem_type` says otherwise.
        preprocessor: optional layer turning raw strings (or `(text_a, text_b)`
            pairs) into `token_ids`, `segment_ids`, `padding_mask`; with one attached,
            `fit`, `evaluate` and `predict` take raw strings.
        dropout: float, dropout on the pooled output (0.1, HF's
            `classifier_dropout`/`hidden_dropout_prob`).
        problem_type: `"single_label"` (softmax over classes, sparse
            cross-entropy), `"multi_label"` (one sigmoid per class, binary
            cross-entropy on multi-hot labels) or `"regression"`. Defaults to
            `"regression"` when `num_classes == 1`, else `"single_label"`.
        label_names: optional list of `num_classes` strings; `predict_labels`
            returns them and presets remember them.
        data_layout: optional JSON-able dict describing the data layout the model
            was trained on (e.g. `{"task": "sst2"}`); saved with the preset.

    Outputs: logits `float Tensor [batch, num_classes]` (the raw score for
    regression).

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone
    >>> from keras_bert_zoo.tasks.classifier.model import BertClassifier
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertClassifier(backbone, num_classes=3, label_names=["a", "b", "c"])
    >>> logits = model.predict({
    ...     "token_ids": np.array([[2, 7, 9, 3, 0]]),
    ...     "segment_ids": np.zeros((1, 5), "int32"),
    ...     "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    ... }, verbose=0)
    >>> logits.shape
    (1, 3)
    """

    hf_architecture = "BertForSequenceClassification"
    reads_packed_rows = True  # `call` pools each packed sequence's [CLS] (`cls_index`)

    def __init__(
        self,
        backbone,
        num_classes,
        preprocessor=None,
        dropout=0.1,
        problem_type=None,
        label_names=None,
        data_layout=None,
        **kwargs,
    ):
        num_classes = int(num_classes)
        if num_classes < 1:
            raise UsageError(f"num_classes must be >= 1, got {num_classes}.")
        if problem_type is None:
            problem_type = "regression" if num_classes == 1 else "single_label"
        if problem_type not in _PROBLEM_TYPES:
            raise UsageError(f"problem_type={problem_type!r}; use one of {_PROBLEM_TYPES}.")
        if problem_type == "single_label" and num_classes < 2:
            raise UsageError(
                "single_label classification needs num_classes >= 2; use num_classes=1 "
                "for regression or problem_type='multi_label'."
            )
        if label_names is not None:
            label_names = [str(n) for n in label_names]
            if len(label_names) != num_classes:
                raise UsageError(
                    f"label_names has {len(label_names)} entries but num_classes={num_classes}; "
                    "give one name per class."
                )
        # === Layers ===
        dtype = kwargs.pop("dtype", None) or backbone.dtype_policy
        head_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="classifier_dropout")
        # Named like the checkpoint tensor (`classifier.weight`), so loading is a table lookup.
        classifier = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_initializer(backbone.initializer_range),
            dtype=dtype,
            name="classifier",
        )

        # === Functional Model ===
        inputs = backbone.input
        pooled = backbone(inputs)["pooled_output"]
        # Logits stay float32 under mixed precision: softmax/losses are computed in float32.
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(classifier(head_dropout(pooled)))
        super().__init__(inputs=inputs, outputs=logits, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.head_dropout = head_dropout
        self.classifier = classifier

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.problem_type = problem_type
        self.label_names = label_names
        self.data_layout = dict(data_layout) if data_layout else None

    def call(self, inputs, training=None, mask=None):
        # The graph above, with the pooled path of the backbone: the head reads [CLS]
        # only, so the last layer's other tokens are not computed (same logits,
        # ~14% less work for MiniLM: `BertBackbone.pooled_output`).
        # A packed batch (`batching="packed"`) says where each sequence's [CLS] is.
        pooled = self.backbone.pooled_output(inputs, query_index=inputs.get("cls_index"), training=training)
        return ops.cast(self.classifier(self.head_dropout(pooled, training=training)), "float32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_classes": self.num_classes,
                "dropout": self.dropout,
                "problem_type": self.problem_type,
                "label_names": self.label_names,
                "data_layout": self.data_layout,
            }
        )
        return config

    # --- checkpoints ------------------------------------------------------------------
    def head_weight_specs(self):
        # run_classifier.py creates `output_weights` [num_labels, hidden] (transposed) and
        # `output_bias` at the top level, outside any variable scope, hence no prefix.
        kernel, bias = head_dense_specs("classifier", self.classifier, google_transposed=True)
        return [
            dataclasses.replace(kernel, google_name="output_weights"),
            dataclasses.replace(bias, google_name="output_bias"),
        ]

    def hf_config_extras(self):
        """HF's `id2label`/`label2id`/`problem_type`, so
        `transformers.BertForSequenceClassification.from_pretrained(path)` loads the preset."""
        names = self.label_names or [f"LABEL_{i}" for i in range(self.num_classes)]
        problem_type = {
            "single_label": "single_label_classification",
            "multi_label": "multi_label_classification",
            "regression": "regression",
        }[self.problem_type]
        return {**label_table(names), "problem_type": problem_type, "classifier_dropout": self.dropout}

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, preprocessor="auto", **kwargs):
        """Builds the classifier from a preset name or a checkpoint directory.

        For an HF `BertForSequenceClassification` directory, `num_classes` and the
        label names default to its `id2label`; for a Google `run_classifier.py`
        checkpoint, `num_classes` defaults to the size of its `output_bias`. The head
        is loaded when the class count matches, otherwise a fresh head starts (with a
        note). A preset name loads its pretrained checkpoint through the Hub cache (the
        head starts fresh); with `load_weights=False`, the architecture only, random
        initialisation. A KerasHub `BertTextClassifier` preset loads with its head.

        Args:
            name_or_path: preset name, `hf://ORG/NAME[@REV]`, or a checkpoint directory.
            load_weights: False builds the architecture only.
            preprocessor: `"auto"` (from the directory's `vocab.txt`, or a KerasHub
                preset's tokenizer), None, or a layer.
            **kwargs: `BertClassifier` arguments, e.g. `num_classes=2`.

        Examples:
        >>> from keras_bert_zoo.tasks.classifier.model import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny_uncased", load_weights=False, num_classes=2)
        >>> model.output_shape
        (None, 2)
        """
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        import os

        ours = False
        config = None if loading.is_preset_name(name_or_path) else loading.read_config(name_or_path)
        if config is not None:
            ours = config.get(loading.CONFIG_SECTION, {}).get("task") == cls.__name__
            id2label = config.get("id2label")
            if not ours and id2label and "num_classes" not in kwargs:
                names = [id2label[k] for k in sorted(id2label, key=int)]
                kwargs["num_classes"] = len(names)
                if not all(n.startswith("LABEL_") for n in names):
                    kwargs.setdefault("label_names", names)
        if not kwargs.get("num_classes") and "label_names" in kwargs and kwargs["label_names"]:
            kwargs["num_classes"] = len(kwargs["label_names"])
        if (
            "num_classes" not in kwargs
            and not ours
            and not loading.is_preset_name(name_or_path)
            and os.path.isdir(os.fspath(name_or_path))
        ):
            # No label table: the head tensor says how many classes it has
            # (HF `classifier.bias`, Google run_classifier.py `output_bias`).
            checkpoint = loading.open_checkpoint(name_or_path)
            stored = set(checkpoint.tensor_names())
            for name in ("classifier.bias", "output_bias"):
                if name in stored:
                    kwargs["num_classes"] = int(checkpoint.tensor_shape(name)[0])
                    break
        return super().from_preset(name_or_path, load_weights=load_weights, preprocessor=preprocessor, **kwargs)

    # --- training defaults ------------------------------------------------------------
    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`compile` with the loss and metrics that fit `problem_type`.

        Args:
            optimizer: `"auto"` is AdamW at 5e-5 (`training.default_optimizer`; use
                `keras_bert_zoo.training.create_optimizer` for BERT's schedule).
            loss: `"auto"`: sparse categorical cross-entropy, binary cross-entropy
                (multi-label) or MSE (regression), all on logits.
            metrics: `"auto"`: accuracy (binary accuracy for multi-label, none for
                regression).
        """
        if optimizer == "auto":
            optimizer = default_optimizer()
        if loss == "auto":
            loss = {
                "single_label": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "multi_label": keras.losses.BinaryCrossentropy(from_logits=True),
                "regression": keras.losses.MeanSquaredError(),
            }[self.problem_type]
        if metrics == "auto":
            metrics = {
                "single_label": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
                "multi_label": [keras.metrics.BinaryAccuracy(name="accuracy", threshold=0.0)],
                "regression": [],
            }[self.problem_type]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    # --- outputs --------------------------------------------------------------------
    def logits_to_probabilities(self, logits):
        """Softmax (single-label), sigmoid (multi-label) or identity (regression), numpy."""
        import numpy as np

        logits = np.asarray(logits, dtype=np.float64)
        if self.problem_type == "single_label":
            z = logits - logits.max(axis=-1, keepdims=True)
            e = np.exp(z)
            return e / e.sum(axis=-1, keepdims=True)
        if self.problem_type == "multi_label":
            return 1.0 / (1.0 + np.exp(-logits))
        return logits

    def predict_labels(self, x, batch_size=None, **kwargs):
        """Label names (or class ids without names) and probabilities for inputs `x`.

        Returns:
            `(labels, probabilities)`: a list with one entry per example (a name, a
            list of names for multi-label, a float for regression) and the
            `[batch, num_classes]` probabilities.
        """
        import numpy as np

        probs = self.logits_to_probabilities(self.predict(x, batch_size=batch_size, **kwargs))
        names = self.label_names or [str(i) for i in range(self.num_classes)]
        if self.problem_type == "single_label":
            labels = [names[i] for i in np.argmax(probs, axis=-1)]
        elif self.problem_type == "multi_label":
            labels = [[names[i] for i in np.flatnonzero(row > 0.5)] for row in probs]
        else:
            labels = [float(v) for v in probs[:, 0]]
        return labels, probs
