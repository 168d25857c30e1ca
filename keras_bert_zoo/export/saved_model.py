"""`export_saved_model`: a task model as a SavedModel that takes raw strings.

The exported module carries the whole path `text -> WordPiece -> [CLS] A [SEP] (B
[SEP]) -> model -> labels`, so a process with only `tensorflow` and
`tensorflow_text` (whose `import` registers the WordPiece / regex-split ops) can serve
it: `tf.saved_model.load(path).signatures["serving_default"](text=...)`, or TF
Serving. KerasHub's exported BERTs take integer tensors only; ours take text.

Signatures (every input is `[batch]`):

- `serving_default`: `text` (and `text_pair` for pair tasks) `tf.string` -> the task's
  outputs (classifier: `label_ids`, `probabilities`, `labels`; tagger, also as `tag`:
  word `tags` and entity spans, each ragged output padded with a `num_words` /
  `num_entities` length vector).
- `predict_token_ids`: `token_ids`, `segment_ids`, `padding_mask` int32
  `[batch, seq]` -> the same outputs, for users who preprocess themselves (tagger:
  token-level `logits`, `probabilities`, `tag_ids`, `tags`; there are no words).
- `fill_mask` (pretrainer; also its `serving_default`): `text` with `[MASK]` ->
  the top-k `tokens`, `token_ids` and `scores` at each `[MASK]`.

The raw-text signatures (all but QA's, whose windows are fixed-length by design) do not
pay for padding: the packed rows are cut to the batch's longest input, sorted by length
and run through the model in chunks of `chunk_size` rows, each cut to its own longest
(`keras_bert_zoo.export.length_chunks`). The cut positions are padding,
which the model masks out, so the answers equal the full-width model's (tested);
`predict_token_ids` runs the ids as given.

The vocabulary is an asset (`assets/vocab.txt`); the fill-mask signature reads token
strings from it, and `assets/export_info.json` records the task, labels and
sequence length.

Each task declares its `TaskServing` subclass (`export/serving.py`) in its own module
(`TaskSpec.serving`); the exporter finds it through the task registry, by the model's class.
"""

import contextlib
import json
import os
import shutil
import tempfile

import tensorflow as tf

from keras_bert_zoo.backends import require_tensorflow
from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.export.length_chunks import run_in_length_chunks, trim_to_longest
from keras_bert_zoo.files import check_output, output_dir
from keras_bert_zoo.keras_compat import all_layers
from keras_bert_zoo.models.layers import int8
from keras_bert_zoo.models.precision import precision_name, with_precision
from keras_bert_zoo.tasks.options import option_values

__all__ = ["export_saved_model", "read_export_info", "signature_summary"]

_VOCAB_ASSET = "vocab.txt"
_INFO_ASSET = "export_info.json"


class _ServingModule(tf.Module):
    """Holds the model's variables, the preprocessor and the assets; defines the signatures."""

    def __init__(self, serving, vocab_path, info_path):
        super().__init__()
        self.model = serving.model
        self.vocab_file = tf.saved_model.Asset(vocab_path)
        self.info_file = tf.saved_model.Asset(info_path)
        self._serving = serving
        # Tracked here so the preprocessor's lookup tables are saved with the module.
        self._pre = serving.preprocessor
        # id -> token, initialised from the asset so the file travels and is used.
        self.vocab_table = tf.lookup.StaticHashTable(
            tf.lookup.TextFileInitializer(
                self.vocab_file,
                tf.int64,
                tf.lookup.TextFileIndex.LINE_NUMBER,
                tf.string,
                tf.lookup.TextFileIndex.WHOLE_LINE,
            ),
            default_value="[UNK]",
        )
        serving.bind(self)

    def run(self, features, trim=False):
        """Model outputs -> the serving's outputs. `trim` (the raw-text signatures): cut the
        padding (see `trim_to_longest` and `run_in_length_chunks`)."""
        serving = self._serving
        trim = trim and bool(serving.position_keys)
        if trim:
            features = trim_to_longest(features, serving.position_keys)
        features = serving.model_inputs(features)
        # Only the model's own inputs go in; helpers such as `is_mask` stay outside.
        inputs = {k: features[k] for k in self.model.input}

        def model(x):
            return self.model(x, training=False)

        if trim and serving.chunk_size:
            outputs = run_in_length_chunks(
                model, inputs, serving.position_keys, serving.chunk_size, serving.position_outputs
            )
        else:
            outputs = model(inputs)
        return serving.outputs(outputs, features)

    def preprocess(self, *inputs):
        with tf.device("cpu"):
            return self._serving.preprocess(*inputs)


def _string_function(specs, fn):
    """`tf.function` of one or two string inputs named by `specs` (the signature's input names)."""
    if len(specs) == 1:

        @tf.function(input_signature=specs)
        def one(a):
            return fn(a)

        return one
    if len(specs) == 2:

        @tf.function(input_signature=specs)
        def two(a, b):
            return fn(a, b)

        return two
    raise UsageError(f"a serving takes one or two string inputs, got {[s.name for s in specs]}.")


def _signatures(module, serving):
    own = serving.signatures(module)
    if own:
        return own
    from_text = _string_function(
        serving.text_inputs(), lambda *inputs: module.run(module.preprocess(*inputs), trim=True)
    )
    ids_spec = [
        tf.TensorSpec(list(serving.ids_shape), tf.int32, name=n) for n in ("token_ids", "segment_ids", "padding_mask")
    ]

    @tf.function(input_signature=ids_spec)
    def from_ids(token_ids, segment_ids, padding_mask):
        return module.run({"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask})

    # Shows users exactly what the model sees (and lets them check their own ids).
    tokenize = _string_function(serving.tokenize_inputs(), module.preprocess)

    signatures = {"serving_default": from_text, "predict_token_ids": from_ids, "tokenize": tokenize}
    if serving.default_signature != "predict":
        signatures[serving.default_signature] = from_text
    return signatures


def _text_pair(model, text_pair):
    if text_pair is not None:
        return bool(text_pair)
    layout = getattr(model, "data_layout", None) or {}
    return len(layout.get("text_columns") or ()) == 2


def _serving_class(model):
    """The `TaskServing` of the task whose model class `model` is (or subclasses)."""
    from keras_bert_zoo.tasks.registry import task_of_model

    return task_of_model(model).serving


def _int8_kernel(model, portable):
    """What the export's int8 layers run: `"onednn"`, `"float32"`, or None (none quantized)."""
    if not any(isinstance(layer, int8.Int8Dense) and layer.quantization_mode == "int8" for layer in all_layers(model)):
        return None
    return "float32" if portable or not int8.onednn_int8_here() else "onednn"


def export_saved_model(
    model,
    path,
    preprocessor=None,
    text_pair=None,
    overwrite=False,
    precision="float32",
    int8_kernel="auto",
    **serving_options,
):
    """Writes `model` as a SavedModel whose `serving_default` takes raw strings.

    Args:
        model: a `BertClassifier`, `BertTagger` or `BertPretrainer` (other tasks:
            register a `TaskServing`).
        path: output directory; written to a temporary sibling and moved into
            place, so a failed export never leaves a half-written model.
        overwrite: replace an existing `path` (once the new SavedModel is complete);
            False raises `OutputExistsError` before any work.
        preprocessor: a `BertPreprocessor`; defaults to `model.preprocessor`.
        text_pair: bool, whether `serving_default` takes `text_pair`; None
            decides from the model's `data_layout` (two text columns = pairs).
        precision: `"float32"` (default), or `"bfloat16"` (`"bf16"`) for hosts with native
            bf16 (AVX512-BF16, AMX, TPU, recent GPUs): the graph computes the float32 model
            in Keras' `mixed_bfloat16` (matmuls in bf16; softmax, LayerNorm and outputs in
            float32; `models.precision.with_precision`). Weights are saved in float32.
        int8_kernel: for a `quantize("int8")`-ed model, `"auto"` (default) traces the int8
            layers as this process runs them: oneDNN's int8 kernel on a CPU with VNNI (AVX512-VNNI,
            AVX-VNNI, AMX), which then serves only on such CPUs with TensorFlow's oneDNN on (its
            default there; elsewhere the graph fails, "Missing 0-th output"); `"portable"`
            computes the same numbers through the float32 matmul, for any CPU.
            `export_info.json` records which (`int8_kernel`: `"onednn"`, `"float32"` or null).
        **serving_options: options of the task's serving, e.g. for the pretrainer's
            fill-mask `top_k` (tokens returned per `[MASK]`, 5) and `max_masks` (8).

    Returns:
        `path`.

    Examples:
    ```python
    from keras_bert_zoo import BertClassifier, export_saved_model
    model = BertClassifier.from_preset("path/to/finetuned")     # has a preprocessor
    export_saved_model(model, "/tmp/served")
    # In any process with tensorflow + tensorflow_text:
    import tensorflow as tf, tensorflow_text  # noqa: F401  (registers the ops)
    served = tf.saved_model.load("/tmp/served")
    served.signatures["serving_default"](text=tf.constant(["a fine film"]))["labels"]
    ```
    """
    require_tensorflow("export_saved_model (a TensorFlow SavedModel)")
    check_output(path, overwrite)
    precision = precision_name(precision)
    name = type(model).__name__
    serving_cls = _serving_class(model)
    preprocessor = preprocessor if preprocessor is not None else getattr(model, "preprocessor", None)
    if preprocessor is None or not hasattr(preprocessor, "tokenizer"):
        raise UsageError(
            f"the {name} has no preprocessor, so the SavedModel could not take raw text. Pass "
            "preprocessor=BertPreprocessor.from_preset(DIR_WITH_VOCAB_TXT) (or load the model with "
            "from_preset on a directory that has vocab.txt)."
        )
    vocab_size = preprocessor.tokenizer.vocabulary_size()
    if vocab_size != model.backbone.vocabulary_size:
        raise CheckpointError(
            f"the preprocessor's vocabulary has {vocab_size} tokens but the model's embedding table "
            f"{model.backbone.vocabulary_size}; use the vocabulary the model was trained with."
        )
    pair = _text_pair(model, text_pair)
    declared = [option.name for option in serving_cls.options]
    unknown = set(serving_options) - set(declared)
    if unknown:
        raise UsageError(f"{sorted(unknown)} do not apply to a {name}; its serving options are {declared or 'none'}.")
    if int8_kernel not in ("auto", "portable"):
        raise UsageError(
            f"int8_kernel={int8_kernel!r} is not one of 'auto' (oneDNN's int8 kernel where this CPU "
            "has VNNI) or 'portable' (the float32 product, for any CPU)."
        )
    served = with_precision(model, precision)
    serving = serving_cls(served, preprocessor, pair, **option_values(serving_cls.options, name, serving_options))
    kernel = _int8_kernel(served, portable=int8_kernel == "portable")

    path = os.fspath(path)
    work = tempfile.mkdtemp(prefix="bert-zoo-export-")  # the assets' sources (copied into the SavedModel)
    try:
        staging = os.path.join(work, "assets_src")
        os.makedirs(staging)
        vocab_path = os.path.join(staging, _VOCAB_ASSET)
        with open(vocab_path, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in preprocessor.tokenizer.get_vocabulary()))
        info = {
            "task": name,
            "text_pair": pair,
            "sequence_length": preprocessor.sequence_length,
            "precision": precision,
            "int8_kernel": kernel,
            "signatures": None,
            **serving.info(),
        }
        portable = int8.portable_int8_product() if kernel == "float32" else contextlib.nullcontext()
        with portable:  # the signatures are traced here and in `save`
            module = _ServingModule(serving, vocab_path, os.path.join(staging, _INFO_ASSET))
            signatures = _signatures(module, serving)
            info["signatures"] = sorted(signatures)
            with open(os.path.join(staging, _INFO_ASSET), "w", encoding="utf-8") as f:
                json.dump(info, f, indent=2)
            with output_dir(path, overwrite, flag=None) as out:  # renamed into place once complete
                tf.saved_model.save(module, out, signatures=signatures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path


def read_export_info(path):
    """The facts an exported SavedModel records about itself (`assets/export_info.json`: task, labels, kernel)."""
    with open(os.path.join(path, "assets", _INFO_ASSET), encoding="utf-8") as f:
        return json.load(f)


def signature_summary(path):
    """`{signature: ([inputs], [outputs])}` of a SavedModel, read back with TensorFlow."""
    loaded = tf.saved_model.load(path)
    return {
        name: (sorted(fn.structured_input_signature[1]), sorted(fn.structured_outputs))
        for name, fn in loaded.signatures.items()
    }
