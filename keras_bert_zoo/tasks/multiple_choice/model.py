"""`BertMultipleChoice`: pick one of several continuations (SWAG), one score per choice."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.task import Task, default_optimizer
from keras_bert_zoo.models.weight_names import head_dense_specs
from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor

__all__ = ["BertMultipleChoice"]

_INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")


class _FlattenChoices(keras.layers.Layer):
    """`[batch, num_choices, seq]` -> `[batch * num_choices, seq]` (HF's `input_ids.view(-1, seq)`)."""

    def call(self, x):
        return ops.reshape(x, (-1, ops.shape(x)[-1]))

    def compute_output_shape(self, shape):
        rows = None if shape[0] is None or shape[1] is None else shape[0] * shape[1]
        return (rows, shape[-1])


class _ChoiceScores(keras.layers.Layer):
    """`[batch * num_choices, 1]` scores -> `[batch, num_choices]`, the choice count read off the ids."""

    def call(self, scores, token_ids):
        return ops.reshape(scores, (-1, ops.shape(token_ids)[1]))

    def compute_output_shape(self, scores_shape, token_ids_shape):
        return (token_ids_shape[0], token_ids_shape[1])


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertMultipleChoice(Task):
    """BERT for multiple choice: each `(context, choice)` pair is scored on its own,
    pooled output -> dropout -> Dense(1), and the scores of one question are the
    logits of a softmax over its choices. On raw inputs, `fit`, `evaluate` and `predict`
    pack by default (`batching="auto"` on one replica; `"packed"`): the pairs of a batch
    lie end to end in shared rows and the model pools each pair's `[CLS]` where
    `cls_index` says (`packing.pack_for_pooling`), the same scores as the padded batch
    with less padding computed; `batching="by_length"` groups questions by length instead.

    The head is HF's `BertForMultipleChoice` (`classifier.weight` `[1, hidden]`,
    `classifier.bias`), so `from_preset` loads a fine-tuned HF model and
    `save_to_preset` writes one `transformers` loads back. The number of choices is
    not part of the model: any count works, the same within a batch.

    Args:
        backbone: `BertBackbone`.
        preprocessor: optional `MultipleChoicePreprocessor`; with one attached, `fit`,
            `evaluate` and `predict` take `(contexts, choices)`: a list of strings and
            a list of equally long lists of strings (`[CLS] context [SEP] choice [SEP]`
            per choice), and `predict_choices` returns probabilities.
        dropout: float, dropout on the pooled output (HF's `classifier_dropout`).
        data_layout: optional JSON-able dict of how the training data was read.

    Inputs: dict of int `token_ids`, `segment_ids`, `padding_mask`,
    `[batch, num_choices, seq]`.

    Outputs: logits `float32 [batch, num_choices]`; labels are the index of the right
    choice, int `[batch]` (softmax cross-entropy over the choices, as HF's).

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone, BertMultipleChoice
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertMultipleChoice(backbone)
    >>> ids = np.array([[[2, 7, 3, 9, 3], [2, 7, 3, 8, 3], [2, 7, 3, 5, 3]]])   # 1 question, 3 choices
    >>> model.predict({"token_ids": ids, "segment_ids": np.array([[[0, 0, 0, 1, 1]] * 3]),
    ...                "padding_mask": np.ones_like(ids)}, verbose=0).shape
    (1, 3)
    """

    hf_architecture = "BertForMultipleChoice"
    preprocessor_cls = MultipleChoicePreprocessor
    reads_packed_rows = True  # `call` pools each packed pair's [CLS] (`cls_index`)
    # A question's choices differ in length, so even sorted batches carry padding (1.30x
    # their real tokens on WikiText-2 questions; packed 1.045x): packed fit / evaluate /
    # predict ran 1.21x / 1.12x / 1.21x faster (the retired `fit_speed.py --task choice`, in git history,
    # docs/benchmarks.md, 2026-12-04).
    packs_by_default = True

    def __init__(self, backbone, preprocessor=None, dropout=0.1, data_layout=None, **kwargs):
        # === Layers ===
        dtype = kwargs.pop("dtype", None) or backbone.dtype_policy
        flatten = _FlattenChoices(name="flatten_choices")
        head_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="classifier_dropout")
        # Named like the checkpoint tensor (`classifier.weight`), so loading is a table lookup.
        classifier = keras.layers.Dense(
            1, kernel_initializer=bert_initializer(backbone.initializer_range), dtype=dtype, name="classifier"
        )
        unflatten = _ChoiceScores(name="choice_scores")

        # === Functional Model ===
        inputs = {name: keras.Input(shape=(None, None), dtype="int32", name=name) for name in _INPUT_NAMES}
        pooled = backbone({name: flatten(inputs[name]) for name in _INPUT_NAMES})["pooled_output"]
        scores = classifier(head_dropout(pooled))
        # Logits stay float32 under mixed precision: the softmax and the loss run in float32.
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(
            unflatten(scores, inputs["token_ids"])
        )
        super().__init__(inputs=inputs, outputs=logits, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.head_dropout = head_dropout
        self.classifier = classifier

        # === Config ===
        self.dropout = dropout
        self.data_layout = dict(data_layout) if data_layout else None

    def call(self, inputs, training=None, mask=None):
        # The graph above, with the backbone's pooled path: each pair's [CLS] alone of the
        # last layer (same scores, less work: `BertBackbone.pooled_output`).
        cls_index = inputs.get("cls_index")
        if cls_index is None:
            pairs = {name: ops.reshape(inputs[name], (-1, ops.shape(inputs[name])[-1])) for name in _INPUT_NAMES}
            num_choices = ops.shape(inputs["token_ids"])[1]
        else:
            # A packed batch (`batching="packed"`): the pairs lie end to end in rows, and
            # `cls_index` `[batch, num_choices, 2]` says where each pair's [CLS] is.
            pairs = {name: inputs[name] for name in _INPUT_NAMES}
            num_choices = ops.shape(cls_index)[1]
            cls_index = ops.reshape(cls_index, (-1, 2))
        pooled = self.backbone.pooled_output(pairs, query_index=cls_index, training=training)
        scores = self.classifier(self.head_dropout(pooled, training=training))
        return ops.cast(ops.reshape(scores, (-1, num_choices)), "float32")

    def get_config(self):
        config = super().get_config()
        config.update({"dropout": self.dropout, "data_layout": self.data_layout})
        return config

    # --- training defaults ------------------------------------------------------------
    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """`compile` with softmax cross-entropy over the choices and accuracy.

        Args:
            optimizer: `"auto"` is AdamW at 5e-5 (`training.default_optimizer`;
                `keras_bert_zoo.training.create_optimizer` gives BERT's schedule).
            loss: `"auto"`: sparse categorical cross-entropy on the `[batch, num_choices]`
                logits, HF's `CrossEntropyLoss` on its reshaped logits.
            metrics: `"auto"`: accuracy (the right choice ranked first).
        """
        if optimizer == "auto":
            optimizer = default_optimizer()
        if loss == "auto":
            loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        if metrics == "auto":
            metrics = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def predict_choices(self, contexts, choices, batch_size=32, **kwargs):
        """Probabilities `[n, num_choices]` (numpy) and the best choice's index `[n]`.

        Args:
            contexts: list of `n` strings.
            choices: list of `n` lists of choice strings, all of the same length.

        Examples:
        ```python
        model = BertMultipleChoice.from_preset("path/to/finetuned")   # has a preprocessor
        probs, best = model.predict_choices(["She opened the door."],
                                            [["and walked in.", "the moon sang.", "then the door."]])
        ```
        """
        import numpy as np

        if self.preprocessor is None:
            raise UsageError(
                "predict_choices needs a MultipleChoicePreprocessor: load the model from a directory "
                "with vocab.txt, or pass preprocessor=MultipleChoicePreprocessor.from_preset(DIR)."
            )
        kwargs.setdefault("verbose", 0)
        logits = np.asarray(
            self.predict((list(contexts), [list(c) for c in choices]), batch_size=batch_size, **kwargs),
            dtype=np.float64,
        )
        e = np.exp(logits - logits.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True)
        return probs, probs.argmax(-1)

    # --- checkpoints ------------------------------------------------------------------
    def head_weight_specs(self):
        return head_dense_specs("classifier", self.classifier)

    def hf_config_extras(self):
        return {"classifier_dropout": self.dropout}

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, preprocessor="auto", **kwargs):
        """Builds the model from a preset name (its pretrained backbone; with
        `load_weights=False` the architecture only, random initialisation), `hf://`, or a
        checkpoint directory; an HF `BertForMultipleChoice` directory loads its head.

        Examples:
        >>> from keras_bert_zoo import BertMultipleChoice
        >>> BertMultipleChoice.from_preset("bert_tiny_uncased", load_weights=False).output_shape
        (None, None)
        """
        return super().from_preset(name_or_path, load_weights=load_weights, preprocessor=preprocessor, **kwargs)
