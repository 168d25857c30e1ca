"""`TaskServing`: how one task turns its model's outputs into a SavedModel's outputs.

A task package subclasses it (`tasks/tagger/serving.py`'s `TaggerServing`, ...) and names the
subclass in its `TaskSpec.serving`; `export_saved_model` finds it through the task
registry by the model's class. This module holds only the base class, so the task
modules can import it without importing the exporter (which imports the registry), and
it imports TensorFlow only when a serving is built: the task registry (and with it
`bert-zoo finetune --help`) loads without TensorFlow.
"""

__all__ = ["TaskServing"]


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
    # The keyword options its constructor takes, as `tasks.options.TaskOption`s: the
    # `bert-zoo export` flags, their checks and `export_saved_model`'s keywords.
    options = ()
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
        import tensorflow as tf

        features = self.preprocessor((text, text_pair) if text_pair is not None else text)
        return {k: tf.cast(v, tf.int32) for k, v in features.items()}

    def text_inputs(self):
        """`tf.TensorSpec`s of `serving_default`'s raw-string inputs, in the order `preprocess`
        takes them: `text` (and `text_pair`). Tasks with other inputs (a context and its
        choices) override it."""
        import tensorflow as tf

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
