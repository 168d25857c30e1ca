"""`TaskSpec`: everything the library needs to know about one task, in one place.

A task (`classify`, `tag`, `qa`, `choice`, `embed`, and `pretrain`, the masked-LM pretraining) is one
package under `keras_bert_zoo/tasks/` (`classifier/`, `tagger/`, ...); its `spec.py` holds one
subclass of `TaskSpec` and one module-level instance named `TASK`. The registry
(`keras_bert_zoo.tasks`) finds it there; the fine-tuning job, `bert-zoo evaluate`,
`predict`, `export` and `finetune` dispatch through it and hold no task names of their
own. See docs/architecture.md, "How to add a task".

The model class (`model.py`; a user builds it without any of this), data readers,
preprocessor, metrics and serving are modules of the same package; the spec ties them together.
"""

import dataclasses
import importlib

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.tasks.options import add_option_flags, option_values, values_from_args

__all__ = ["check_vocabulary_fits", "TaskSpec"]


def check_vocabulary_fits(model, model_dir):
    """Raises `CheckpointError` when the attached tokenizer's `vocab.txt` has more entries than
    the model's token-embedding table: its last ids would index past the table, and TensorFlow
    would fail mid-prediction (`indices[0,1] = 1037 is not in [0, 125)`) naming neither file."""
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    backbone = getattr(model, "backbone", None)
    if tokenizer is None or backbone is None:
        return
    entries, rows = int(tokenizer.vocabulary_size()), int(backbone.vocabulary_size)
    if entries > rows:
        from keras_bert_zoo.preprocessing.vocab_file import vocabulary_past_table

        raise vocabulary_past_table(f"--model {model_dir!r}: its vocab.txt", entries, rows)


class TaskSpec:
    """One task, declared once.

    Class attributes:
        name: the CLI name (`bert-zoo finetune NAME`), e.g. `"classify"`.
        description: one line for `--help`.
        finetunable: False for tasks `bert-zoo finetune` does not offer (pretraining).
        default_learning_rate / default_sequence_length / default_epochs: the recipe's defaults.
        options: the task's options (`tasks.options.TaskOption`), from which its
            `bert-zoo finetune NAME` flags, their checks and `finetune(NAME, ..., option=value)`
            keywords are made; `make_layout` turns their values into the data layout.
        batchings: the names of `tasks.options.BATCHINGS` its `dataset` gives a meaning to,
            `"auto"` (its default) first; `finetune` refuses the rest.
        checkpoint_heads: `{format: tensor names}` ("hf", "google") that show a checkpoint
            holds this task's head; `bert-zoo convert` keeps the head only when they are all
            there (`convert.tasks.detect_task`). Formats not listed are not checked.
        model_path: the task model class by its dotted path, imported by `model_class()`.
        head_priority: for a checkpoint that names no class (Google's, an HF config without
            `architectures`), tasks are tried by their head tensors in this order, lowest first.
        shown_metrics: the dev metrics printed during training (None: all of `score`'s).
        serving: the `keras_bert_zoo.export.TaskServing` subclass of this task's SavedModel
            (its package's `serving.py`); None: not exportable.
    """

    name = None
    description = ""
    finetunable = True
    default_learning_rate = 5e-5
    default_sequence_length = 128
    default_epochs = 3
    options = ()
    batchings = ("auto", "fixed")
    checkpoint_heads = {}
    head_priority = 100
    shown_metrics = None
    serving = None
    # The task model class by its dotted path ("keras_bert_zoo.tasks.classifier.model.BertClassifier"):
    # the registry is built (and `bert-zoo finetune --help` printed) without importing Keras.
    model_path = None

    # --- the model ------------------------------------------------------------------
    @property
    def model_name(self):
        """The task model class's name (`"BertClassifier"`), without importing it."""
        return self.model_path.rpartition(".")[2]

    def model_class(self):
        """The task model class (`BertClassifier`), imported when first needed.

        The class itself, never its name: the registry also finds a task by the class's
        `__name__` (what a preset's `config.json` records), and `task_of_model` matches a
        model to its task by class, so a user's subclass keeps its task.
        """
        module, _, name = self.model_path.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def load_model(self, model_dir):
        """The model saved in `model_dir`, with the preprocessor it was trained with."""
        model = self.model_class().from_preset(model_dir)
        if model.preprocessor is None:
            raise CheckpointError(
                f"{model_dir} has no vocab.txt, so raw text cannot be tokenized; copy the "
                "vocabulary the model was trained with into it (directories written by "
                "`bert-zoo finetune` and `bert-zoo pretrain` have it)."
            )
        check_vocabulary_fits(model, model_dir)
        return model

    # --- options: the command line and finetune's keywords ------------------------------
    def add_arguments(self, parser):
        """Adds this task's option flags to `bert-zoo finetune NAME`."""
        add_option_flags(parser, self.options)

    def make_layout(self, **values):
        """The data layout (`DataLayout`-like object) of checked option values; None: no layout."""
        return None

    def layout_from_args(self, args):
        """The data layout the flags describe."""
        return self.make_layout(**option_values(self.options, self.name, values_from_args(self.options, args)))

    def layout_from_options(self, layout, **options):
        """`layout` with options given to `finetune(..., **options)` applied (e.g. qa's
        `doc_stride=128`); the layout the options describe when `layout` is None."""
        values = option_values(self.options, self.name, options)  # refuses unknown names
        if layout is None:
            return self.make_layout(**values)
        if not options:
            return layout
        fields = {f.name for f in dataclasses.fields(layout)} if dataclasses.is_dataclass(layout) else set()
        if not set(options) <= fields:
            raise UsageError(
                f"{sorted(set(options) - fields)} cannot be applied to the layout given; give them "
                "without `layout=` (the options describe the whole layout), or set them on the layout."
            )
        return dataclasses.replace(layout, **{name: values[name] for name in options})

    # --- fine-tuning ----------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        """Parses and validates a data file before any training.

        Args:
            path: the file.
            layout: the task's data layout.
            reference: the training examples when reading dev data (label names
                must match); None for the training file.
            max_examples: keep the first N.
        """
        raise NotImplementedError

    def make_preprocessor(self, vocab_dir, sequence_length, layout):
        """The preprocessing layer raw examples go through."""
        from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

        return BertPreprocessor.from_preset(vocab_dir, sequence_length=sequence_length)

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        """The task model from a preset name or checkpoint directory, head sized by the data."""
        raise NotImplementedError

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, batching="auto"):
        """A batched `tf.data.Dataset`: `(features, labels)` when training, features otherwise.

        `batching` is one of the task's `batchings` (`tasks.options.BATCHINGS`)."""
        raise NotImplementedError

    def primary_metric(self, layout):
        """The dev metric that selects checkpoints and is reported first."""
        return "accuracy"

    def score(self, model, examples, dataset):
        """Every metric of `model` on `examples` (whose features `dataset` yields, in order)."""
        raise NotImplementedError

    # --- evaluate / predict ------------------------------------------------------------
    def evaluate(self, model_dir, data_paths, batch_size=64):
        """Metrics of a saved model on data files in its training layout."""
        raise NotImplementedError

    def evaluate_outputs(self, model_dir, data_paths, batch_size=64):
        """`(metrics, files)`: `evaluate`'s metrics plus JSON-able files (`{name: object}`)
        `bert-zoo evaluate --out` writes beside the metrics (e.g. qa's `predictions.json`)."""
        return self.evaluate(model_dir, data_paths, batch_size), {}

    def add_predict_arguments(self, parser):
        """Adds inputs this task's `bert-zoo predict` takes besides `TEXT...` (e.g. qa's `--question`)."""

    def predict_inputs(self, args, model):
        """The inputs `predict` gets from `bert-zoo predict`'s arguments (default: the `TEXT`s)."""
        if getattr(args, "data", None):
            raise UsageError(
                f"`bert-zoo predict --data` does not apply to {self.model_class().__name__} models; "
                "give the texts as arguments."
            )
        if not args.texts:
            raise UsageError("give at least one TEXT to predict on.")
        return list(args.texts)

    def predict(self, model, texts):
        """One JSON-able dict per raw input (`bert-zoo predict`)."""
        raise NotImplementedError(f"`bert-zoo predict` does not handle {self.model_class().__name__} models yet.")

    def format_prediction(self, row):
        """One line of `bert-zoo predict`'s plain-text output."""
        return str(row)
