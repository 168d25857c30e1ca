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

Each task module (`keras_bert_zoo/tasks/`) plugs in its own `TaskServing` subclass,
registered for its model's class name with `@register_serving("BertTagger")`.
"""

import json
import os
import shutil
import tempfile

import tensorflow as tf

from keras_bert_zoo.export.length_chunks import run_in_length_chunks, trim_to_longest
from keras_bert_zoo.files import check_output, output_dir

VOCAB_ASSET = "vocab.txt"
INFO_ASSET = "export_info.json"
_SERVINGS = {}


def register_serving(task_class_name):
    """Class decorator: the `TaskServing` used to export models of `task_class_name`."""

    def wrap(cls):
        _SERVINGS[task_class_name] = cls
        return cls

    return wrap


class TaskServing:
    """How one task type turns model outputs into serving outputs.

    Subclasses set `default_signature` and implement `outputs(model_outputs, features)`
    (a dict of tensors, each with a leading batch dimension); they may override
    `preprocess(text, text_pair)`, `model_inputs(features)` and `extra_signatures(module)`.

    Args:
        model: the task model (a `keras_bert_zoo.models.task.Task`).
        preprocessor: a `BertPreprocessor`.
        text_pair: bool, whether `serving_default` takes `text_pair` too.
    """

    default_signature = "predict"
    options = ()  # names of the keyword options its constructor takes
    ids_shape = (None, None)  # shape of `predict_token_ids`' int inputs (multiple choice: 3 dims)
    # Features of `preprocess` whose last axis is the positions (`padding_mask` among them).
    # The raw-text signatures cut them to the longest input, so short inputs do not pay for
    # all `sequence_length` positions. Empty: the model always sees the full width.
    position_keys = ("token_ids", "segment_ids", "padding_mask")
    # Model outputs whose axis 1 is the positions (a single-tensor output is "output"):
    # padded back to the batch's width after each chunk ran at its own.
    position_outputs = ()
    # Rows per model call in the raw-text signatures; rows are sorted by length first, so
    # each chunk is cut to its own longest (the 872 SST-2 dev sentences in batches of 64:
    # 27k positions in chunks of 16, 44k padded to each batch's longest, 112k at 128). None:
    # one call.
    chunk_size = 16

    def __init__(self, model, preprocessor, text_pair=False):
        self.model = model
        self.preprocessor = preprocessor
        self.text_pair = text_pair

    def preprocess(self, text, text_pair=None):
        """Raw strings `[batch]` -> the feature dict `run` takes (and the `tokenize`
        signature returns, so every value must be a dense tensor). Default: the
        preprocessor's packing, cast to int32. Tasks whose inputs are not one packed
        row per text (e.g. the tagger's word windows) override it."""
        features = self.preprocessor((text, text_pair) if text_pair is not None else text)
        return {k: tf.cast(v, tf.int32) for k, v in features.items()}

    def text_inputs(self):
        """`tf.TensorSpec`s of `serving_default`'s raw-string inputs, in the order `preprocess`
        takes them: `text` (and `text_pair`). Tasks with other inputs (a context and its
        choices) override it."""
        specs = [tf.TensorSpec([None], tf.string, name="text")]
        if self.text_pair:
            specs.append(tf.TensorSpec([None], tf.string, name="text_pair"))
        return specs

    def tokenize_inputs(self):
        """`tf.TensorSpec`s of the `tokenize` signature's inputs (default: `text` alone)."""
        return self.text_inputs()[:1]

    def model_inputs(self, features):
        """The model's input dict (plus any helper tensors `outputs` needs)."""
        return features

    def outputs(self, model_outputs, features):
        raise NotImplementedError

    def info(self):
        """JSON-able facts stored in `assets/export_info.json`."""
        return {}

    def extra_signatures(self, module):
        return {}

    def signatures(self, module):
        """All signatures, for tasks whose inputs are not `text` (+ `text_pair`); None
        (default) builds `serving_default`, `predict_token_ids` and `tokenize` on `text`."""
        return None

    def bind(self, module):
        """Called once with the `tf.Module` being exported (e.g. to reach its
        `vocab_table`, built from the vocabulary asset)."""


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
                self.vocab_file, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER,
                tf.string, tf.lookup.TextFileIndex.WHOLE_LINE,
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
            outputs = run_in_length_chunks(model, inputs, serving.position_keys, serving.chunk_size,
                                           serving.position_outputs)
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
    raise ValueError(f"a serving takes one or two string inputs, got {[s.name for s in specs]}.")


def _signatures(module, serving):
    own = serving.signatures(module)
    if own:
        return own
    from_text = _string_function(serving.text_inputs(),
                                 lambda *inputs: module.run(module.preprocess(*inputs), trim=True))
    ids_spec = [tf.TensorSpec(list(serving.ids_shape), tf.int32, name=n)
                for n in ("token_ids", "segment_ids", "padding_mask")]

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
    # Task modules register their servings when the task registry loads them. Always load
    # it: a user (or a test) may have imported one task module, which fills `_SERVINGS`
    # with that task alone.
    import importlib

    importlib.import_module("keras_bert_zoo.tasks.registry").task_names()
    for klass in type(model).__mro__:
        if klass.__name__ in _SERVINGS:
            return _SERVINGS[klass.__name__]
    raise ValueError(
        f"cannot export a {type(model).__name__}: known task models are {', '.join(sorted(_SERVINGS))}. "
        "Register a TaskServing for it with @register_serving(...) in its task module."
    )


def export_saved_model(model, path, preprocessor=None, text_pair=None, overwrite=False, **serving_options):
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
    check_output(path, overwrite)
    name = type(model).__name__
    serving_cls = _serving_class(model)
    preprocessor = preprocessor if preprocessor is not None else getattr(model, "preprocessor", None)
    if preprocessor is None or not hasattr(preprocessor, "tokenizer"):
        raise ValueError(
            f"the {name} has no preprocessor, so the SavedModel could not take raw text. Pass "
            "preprocessor=BertPreprocessor.from_preset(DIR_WITH_VOCAB_TXT) (or load the model with "
            "from_preset on a directory that has vocab.txt)."
        )
    vocab_size = preprocessor.tokenizer.vocabulary_size()
    if vocab_size != model.backbone.vocabulary_size:
        raise ValueError(
            f"the preprocessor's vocabulary has {vocab_size} tokens but the model's embedding table "
            f"{model.backbone.vocabulary_size}; use the vocabulary the model was trained with."
        )
    pair = _text_pair(model, text_pair)
    unknown = set(serving_options) - set(serving_cls.options)
    if unknown:
        raise ValueError(f"{sorted(unknown)} do not apply to a {name}; its serving options are "
                         f"{list(serving_cls.options) or 'none'}.")
    serving = serving_cls(model, preprocessor, pair, **serving_options)

    path = os.fspath(path)
    work = tempfile.mkdtemp(prefix="bert-zoo-export-")  # the assets' sources (copied into the SavedModel)
    try:
        staging = os.path.join(work, "assets_src")
        os.makedirs(staging)
        vocab_path = os.path.join(staging, VOCAB_ASSET)
        with open(vocab_path, "w", encoding="utf-8") as f:
            f.write("".join(t + "\n" for t in preprocessor.tokenizer.get_vocabulary()))
        info = {
            "task": name,
            "text_pair": pair,
            "sequence_length": preprocessor.sequence_length,
            "signatures": None,
            **serving.info(),
        }
        module = _ServingModule(serving, vocab_path, os.path.join(staging, INFO_ASSET))
        signatures = _signatures(module, serving)
        info["signatures"] = sorted(signatures)
        with open(os.path.join(staging, INFO_ASSET), "w", encoding="utf-8") as f:
            json.dump(info, f, indent=2)
        with output_dir(path, overwrite, flag=None) as out:  # renamed into place once complete
            tf.saved_model.save(module, out, signatures=signatures)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return path
