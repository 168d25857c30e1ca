"""`BertTagger`: token classification (named entities), one label per word's first piece."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.layers.initializers import bert_initializer
from keras_bert_zoo.models.losses import replicas_in_sync, token_cross_entropy
from keras_bert_zoo.models.task import Task, default_optimizer, label_table
from keras_bert_zoo.models.weight_names import head_dense_specs
from keras_bert_zoo.tasks.tagger.alignment import IGNORE_LABEL
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor
from keras_bert_zoo.tasks.tagger.schemes import detect_scheme
from keras_bert_zoo.tasks.tagger.words import as_words, word_spans

__all__ = ["BertTagger"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTagger(Task):
    """BERT for token classification: sequence output -> dropout -> Dense(num_labels).

    The head is HF's `BertForTokenClassification` (`classifier.weight/bias`), so
    `from_preset` loads a fine-tuned HF tagger (labels from its `id2label`) and
    `save_to_preset` writes one that `transformers` loads back.

    Training labels are int `[batch, seq]` with `-100` where no label applies (the
    word-piece convention of HF's `run_ner.py`: only the first piece of a word is
    labelled); the loss is the cross-entropy averaged over the labelled positions
    of the *global* batch, so N replicas train exactly like one device.
    `keras_bert_zoo.tasks.tagger.alignment` makes such labels from words and tags.

    Args:
        backbone: `BertBackbone`.
        num_labels: int, number of tags (e.g. 9 for CoNLL-2003 in IOB2).
        preprocessor: optional `TaggingPreprocessor` (words in, pieces out); with one
            attached, `fit` takes lists of word lists and tag lists, `predict_tags`
            and `predict_entities` take word lists or raw strings.
        dropout: float, dropout on the sequence output (HF's `classifier_dropout`).
        label_names: list of `num_labels` tags in id order (`"O"`, `"B-PER"`, ...).
        scheme: the tagging scheme of `label_names`: `"IOB2"`, `"BIOES"` or
            `"BMES"` (the Chinese NER sets' BIOES with `M-` for `I-`: the labels keep the
            file's `M-` tags, and entities read `M-` as `I-`). Default: read from
            `label_names` (any `M-`: BMES; any `E-`/`S-`: BIOES; else IOB2).
        data_layout: optional JSON-able dict of how the training data was read.

    Outputs: logits `float32 [batch, seq, num_labels]`.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo import BertBackbone, BertTagger
    >>> backbone = BertBackbone(vocabulary_size=100, num_layers=1, num_heads=2,
    ...                         hidden_dim=8, intermediate_dim=16)
    >>> model = BertTagger(backbone, num_labels=3, label_names=["O", "B-PER", "I-PER"])
    >>> model.predict({"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...                "padding_mask": np.ones((1, 4), "int32")}, verbose=0).shape
    (1, 4, 3)
    """

    hf_architecture = "BertForTokenClassification"
    preprocessor_cls = TaggingPreprocessor
    preprocessor_options = ()
    uses_pooler = False  # as HF's BertForTokenClassification: no pooler loaded or saved

    def __init__(
        self,
        backbone,
        num_labels,
        preprocessor=None,
        dropout=0.1,
        label_names=None,
        scheme=None,
        data_layout=None,
        **kwargs,
    ):
        num_labels = int(num_labels)
        if num_labels < 2:
            raise UsageError(f"num_labels must be >= 2 (e.g. 'O' and one entity tag), got {num_labels}.")
        if label_names is not None:
            label_names = [str(n) for n in label_names]
            if len(label_names) != num_labels:
                raise UsageError(
                    f"label_names has {len(label_names)} entries but num_labels={num_labels}; give one tag per label."
                )
        if scheme is None:
            # A checkpoint's own labels say their scheme (an HF BMES tagger's id2label holds M-/E-/S- tags);
            # without labels, IOB2.
            scheme = detect_scheme([], tag_set=set(label_names)) if label_names else "IOB2"
        if scheme not in ("IOB2", "BIOES", "BMES"):
            raise UsageError(
                f"scheme={scheme!r}; use 'IOB2', 'BIOES' or 'BMES' (read IOB1 files with "
                "keras_bert_zoo.tasks.tagger.data.read_tagged, which converts them)."
            )
        # === Layers ===
        dtype = kwargs.pop("dtype", None) or backbone.dtype_policy
        head_dropout = keras.layers.Dropout(dropout, dtype=dtype, name="classifier_dropout")
        classifier = keras.layers.Dense(
            num_labels, kernel_initializer=bert_initializer(backbone.initializer_range), dtype=dtype, name="classifier"
        )

        # The pooler is not used for tagging (HF builds BertForTokenClassification without
        # one): freeze it, so the optimizer does not track variables that get no gradient.
        backbone.pooler.trainable = False

        # === Functional Model ===
        inputs = backbone.input
        sequence = backbone(inputs)["sequence_output"]
        # Logits stay float32 under mixed precision: the softmax and the loss run in float32.
        logits = keras.layers.Activation("linear", dtype="float32", name="logits")(classifier(head_dropout(sequence)))
        super().__init__(inputs=inputs, outputs=logits, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.head_dropout = head_dropout
        self.classifier = classifier

        # === Config ===
        self.num_labels = num_labels
        self.dropout = dropout
        self.label_names = label_names
        self.scheme = scheme
        self.data_layout = dict(data_layout) if data_layout else None
        self.token_accuracy_tracker = keras.metrics.Mean(name="accuracy")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_labels": self.num_labels,
                "dropout": self.dropout,
                "label_names": self.label_names,
                "scheme": self.scheme,
                "data_layout": self.data_layout,
            }
        )
        return config

    # --- training --------------------------------------------------------------------
    def compile(self, optimizer="auto", **kwargs):
        """`compile` with the built-in token loss (pass no `loss`); `"auto"` is AdamW
        at 5e-5 (`training.default_optimizer`).

        Metrics: `loss` and `accuracy` over labelled positions (entity F1 needs whole
        sentences: `keras_bert_zoo.tasks.tagger.metrics.entity_scores` on `predict_tags`).
        """
        if kwargs.get("loss") is not None:
            raise UsageError(
                "BertTagger has its own loss (token cross-entropy over labelled positions); "
                "call compile() without `loss=`."
            )
        kwargs.pop("loss", None)
        if optimizer == "auto":
            optimizer = default_optimizer()
        super().compile(optimizer=optimizer, **kwargs)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        loss = token_cross_entropy(y, y_pred, ignore_index=IGNORE_LABEL, sample_weight=sample_weight)
        if self.losses:  # regularisers, shared out over the replicas as Keras' own losses are
            loss = loss + ops.sum(ops.stack(self.losses)) / replicas_in_sync()
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        labels = ops.cast(y, "int32")
        valid = ops.cast(ops.not_equal(labels, IGNORE_LABEL), "float32")
        hits = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), labels), "float32") * valid
        count = ops.sum(valid)
        self.token_accuracy_tracker.update_state(ops.sum(hits) / ops.maximum(count, 1.0), sample_weight=count)
        return self.get_metrics_result()

    def _names(self):
        return self.label_names or [str(i) for i in range(self.num_labels)]

    def predict_tags(self, sentences, batch_size=64, batching="auto"):
        """One tag per word for each sentence: word lists (kept as given), or raw strings split
        as BERT splits text (`tasks.tagger.words`: at whitespace, and each CJK ideograph and
        punctuation mark is a word, so a Chinese sentence gets one tag per character).

        Sentences longer than the preprocessor's `sequence_length` are read in
        overlapping windows; every word gets exactly one tag. `batching`: `"auto"`
        (windows sorted by length, each batch cut to its longest; the faster on
        CoNLL-2003) or `"packed"` (several windows per row; the same tags).
        """
        from keras_bert_zoo.tasks.tagger.predict import predict_words

        if self.preprocessor is None:
            raise UsageError(
                "predict_tags needs a TaggingPreprocessor: load the model from a directory with "
                "vocab.txt, or pass preprocessor=TaggingPreprocessor.from_preset(DIR)."
            )
        return predict_words(
            self,
            [as_words(s) for s in sentences],
            self.preprocessor,
            label_names=self._names(),
            batch_size=batch_size,
            batching=batching,
        )

    def predict_entities(self, texts, batch_size=64, batching="auto"):
        """Entity spans of raw texts: per text a list of dicts `text`, `type`, `start`, `end`
        (character offsets into the text, end exclusive) and `score` (the mean probability of the
        entity's word tags). Words are split as `predict_tags` splits a string; `batching` as
        for `predict_tags`.

        Examples:
        >>> from keras_bert_zoo.tasks.tagger.words import word_spans
        >>> text = "我们在北京天安门广场见到了中国国家主席习近平。"
        >>> [text[a:b] for a, b in word_spans(text)][:5]  # the words predict_entities tags
        ['我', '们', '在', '北', '京']
        """
        import numpy as np

        from keras_bert_zoo.tasks.tagger.metrics import entity_spans
        from keras_bert_zoo.tasks.tagger.predict import predict_words

        if self.preprocessor is None:
            raise UsageError("predict_entities needs a TaggingPreprocessor (see predict_tags).")
        spans = [word_spans(t) for t in texts]
        tags, logits = predict_words(
            self,
            [[t[a:b] for a, b in s] for t, s in zip(texts, spans, strict=True)],
            self.preprocessor,
            label_names=self._names(),
            batch_size=batch_size,
            return_logits=True,
            batching=batching,
        )
        results = []
        for text, words, sentence_tags, word_logits in zip(texts, spans, tags, logits, strict=True):
            probs = np.exp(word_logits - word_logits.max(-1, keepdims=True))
            probs /= probs.sum(-1, keepdims=True)
            best = probs.max(-1)
            entities = []
            for kind, first, last in entity_spans(sentence_tags, scheme=self.scheme):
                start, end = words[first][0], words[last - 1][1]
                entities.append(
                    {
                        "text": text[start:end],
                        "type": kind,
                        "start": start,
                        "end": end,
                        "score": float(best[first:last].mean()),
                    }
                )
            results.append(entities)
        return results

    # --- checkpoints ------------------------------------------------------------------
    def head_weight_specs(self):
        return head_dense_specs("classifier", self.classifier)

    def hf_config_extras(self):
        """HF's `id2label`/`label2id`, so `transformers.BertForTokenClassification.from_pretrained`
        loads the preset with its tag names."""
        return {**label_table(self._names()), "classifier_dropout": self.dropout}

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, preprocessor="auto", **kwargs):
        """Builds the tagger from a preset name (architecture only, random initialisation)
        or a checkpoint directory; an HF `BertForTokenClassification` directory gives
        `num_labels` and `label_names` from its `id2label` and loads its head.

        Examples:
        >>> from keras_bert_zoo import BertTagger
        >>> BertTagger.from_preset("bert_tiny_uncased", load_weights=False, num_labels=9).output_shape
        (None, None, 9)
        """
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        if not loading.is_preset_name(name_or_path):
            config = loading.read_config(name_or_path)
            ours = (config or {}).get(loading.CONFIG_SECTION, {}).get("task") == cls.__name__
            id2label = (config or {}).get("id2label")
            if (
                not ours
                and id2label
                and "num_labels" not in kwargs
                and config.get("architectures") == [cls.hf_architecture]
            ):
                names = [id2label[k] for k in sorted(id2label, key=int)]
                kwargs["num_labels"] = len(names)
                if not all(n.startswith("LABEL_") for n in names):
                    kwargs.setdefault("label_names", names)
        if "num_labels" not in kwargs and kwargs.get("label_names"):
            kwargs["num_labels"] = len(kwargs["label_names"])
        return super().from_preset(name_or_path, load_weights=load_weights, preprocessor=preprocessor, **kwargs)
