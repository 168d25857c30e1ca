"""`Task`: what every task model (classifier, tagger, QA, pretrainer) shares.

A task is a Functional `keras.Model` built on a `BertBackbone`, with an optional
`preprocessor` (a Keras layer turning raw inputs into `token_ids`, `segment_ids`,
`padding_mask`, with the contract `preprocessor(x, y=None, sample_weight=None) ->
(x, y, sample_weight)`). With a preprocessor attached, `fit`, `evaluate` and `predict`
accept raw inputs: the preprocessing runs in `tf.data` on the host, and each batch is
padded only to the bucket width it needs (`Task.raw_dataset`, `batch_raw`); each task
names its preprocessor class once (`preprocessor_cls`).

A subclass provides:
- `head_weight_specs()`: `WeightSpec`s of its head (names as in HF checkpoints), so
  `from_preset` can load a head and `save_to_preset` writes one;
- `task_config()`: what `from_preset` needs to rebuild it (stored in `config.json`);
- `hf_architecture`: the HF class name recorded in `config.json`.
"""

import json
import os

import keras
import tensorflow as tf

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.models import loading
from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

__all__ = ["register_default_optimizer", "default_optimizer_factory", "default_optimizer", "label_table", "Task",
           "RAW_INPUT_JIT_COMPILE"]


# --- the optimizer `compile(optimizer="auto")` uses -------------------------------------
# It is `training.BertAdamW`, and training/ sits above the models: it registers its
# factory here on import, as convert/ registers the checkpoint readers with `loading`.
_DEFAULT_OPTIMIZER = {"factory": None}


def register_default_optimizer(factory):
    """Sets `factory() -> optimizer`, what every task's `compile(optimizer="auto")` builds."""
    _DEFAULT_OPTIMIZER["factory"] = factory
    return factory


def default_optimizer_factory():
    """The registered `factory() -> optimizer` (None: none yet; `import keras_bert_zoo` registers
    `training.default_optimizer`)."""
    return _DEFAULT_OPTIMIZER["factory"]


def default_optimizer():
    """A new instance of the registered default optimizer (`training.default_optimizer`)."""
    factory = _DEFAULT_OPTIMIZER["factory"]
    if factory is None:
        raise RuntimeError('no default optimizer is registered; `import keras_bert_zoo` (which imports '
                           'keras_bert_zoo.training) before compile(optimizer="auto"), or pass an optimizer.')
    return factory()


def label_table(names):
    """HF's `id2label` / `label2id` entries for label `names` in id order."""
    return {"id2label": {str(i): n for i, n in enumerate(names)}, "label2id": {n: i for i, n in enumerate(names)}}


class Task(keras.Model):
    hf_architecture = "BertModel"
    # The one place a task names its preprocessor: `from_preset` builds it from a
    # directory's vocab.txt with the `preprocessor_options` saved in the data layout.
    preprocessor_cls = BertPreprocessor
    preprocessor_options = ("sequence_length",)
    uses_pooler = True  # False: the pooler is neither needed when loading nor written when saving

    # Whether `call` pools each sequence of a packed row itself (`batching="packed"`
    # through `batch_raw`; `BertClassifier`, `BertMultipleChoice`). Preprocessors with their own `raw_dataset`
    # (tagging, QA) pack for token-level heads, which need nothing of the model.
    reads_packed_rows = False
    # Whether `batching="auto"` packs (fit, evaluate and predict) rather than grouping by
    # length / sorting: for a task whose examples are padded even when sorted (a
    # question's choices differ in length), measured faster (`BertMultipleChoice`).
    packs_by_default = False

    def __init__(self, *args, backbone=None, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor

    # --- what subclasses describe -------------------------------------------------
    def head_weight_specs(self):
        return []

    def task_config(self):
        """Constructor arguments other than backbone/preprocessor (JSON-able)."""
        config = self.get_config()
        for key in ("backbone", "preprocessor", "name", "trainable", "dtype"):
            config.pop(key, None)
        return config

    # --- serialization ------------------------------------------------------------
    def get_config(self):
        return {
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)
            if self.preprocessor is not None
            else None,
            "name": self.name,
            "trainable": self.trainable,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for key in ("backbone", "preprocessor"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        return cls(**config)

    # --- presets --------------------------------------------------------------------
    def compile_from_config(self, config):
        """Compiles a reloaded `.keras` model as it was compiled when saved.

        Keras skips this for models whose `compile()` is overridden (every task's is:
        `"auto"` defaults, built-in losses) and warns; the saved config holds the
        resolved optimizer, loss and metrics, which each task's `compile()` accepts.
        """
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if getattr(self, "optimizer", None) is not None and self.built:
            self.optimizer.build(self.trainable_variables)  # so its saved variables load into it

    @classmethod
    def from_preset(cls, name_or_path, load_weights=True, preprocessor="auto", **kwargs):
        """Builds the task from a preset name, a Hub repo or a checkpoint directory.

        A preset *name* (`"bert_base_uncased"`, ...) loads its official pretrained
        checkpoint through `huggingface_hub`'s cache, as `BertBackbone.from_preset`;
        with `load_weights=False` it is the architecture only: random initialisation
        of backbone and head, nothing fetched (a line on stderr says so). From a checkpoint
        directory (or the snapshot a name resolves to): its backbone weights always load; the head
        loads when the checkpoint has it with matching shapes, and is freshly
        initialised otherwise (a note says so). Arguments saved with the preset (e.g.
        `num_classes`, label names) are reused unless given in `**kwargs`. Checkpoint
        tensors the model does not use are named in one line on stderr.

        Args:
            name_or_path: preset name, `hf://ORG/NAME[@REV]`, or directory (HF,
                Google, KerasHub / keras-nlp, or ours).
            load_weights: False builds the architecture only.
            preprocessor: `"auto"` attaches one built from the directory's
                `vocab.txt` when present; `None` attaches none; or a layer.
            **kwargs: task constructor arguments, and backbone overrides under
                `backbone_kwargs={...}`.
        """
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        from keras_bert_zoo.models.backbone import BertBackbone

        backbone_kwargs = kwargs.pop("backbone_kwargs", {})
        if loading.is_preset_name(name_or_path):
            backbone = BertBackbone.from_preset(name_or_path, load_weights=False, **backbone_kwargs)  # says "random"
            if preprocessor == "auto":
                preprocessor = None
            return cls(backbone=backbone, preprocessor=preprocessor, **kwargs)
        checkpoint = loading.open_checkpoint(name_or_path)
        saved = checkpoint.extra.get("task_config", {}) if checkpoint.extra.get("task") == cls.__name__ else {}
        backbone = BertBackbone.from_checkpoint(checkpoint, load_weights=load_weights,
                                                pooler_needed=cls._pooler_needed({**saved, **kwargs}),
                                                **backbone_kwargs)
        if preprocessor == "auto":
            preprocessor = cls._preprocessor_from_checkpoint(checkpoint)
        model = cls(backbone=backbone, preprocessor=preprocessor, **{**saved, **kwargs})
        if load_weights:
            model._load_head(checkpoint)
            # Tensors a task writes for HF (the tied MLM decoder) are accounted for.
            tied = [name for name, _ in model._tied_tensors()]
            loading.report_unused(checkpoint, cls.__name__, accounted=tied)
        return model

    @classmethod
    def _pooler_needed(cls, task_kwargs):
        """Whether a model built with `task_kwargs` reads the pooler (a missing one is warned about)."""
        return cls.uses_pooler

    @classmethod
    def _preprocessor_from_checkpoint(cls, checkpoint):
        """A `preprocessor_cls` from the directory's `vocab.txt` (None without one), with the
        settings (`preprocessor_options`: the sequence length, ...) the model was trained with.
        A checkpoint that carries its own tokenizer settings (a KerasHub preset's
        `tokenizer.json` and `preprocessor.json`) builds it from those."""
        if hasattr(checkpoint, "make_preprocessor"):
            return checkpoint.make_preprocessor()
        if checkpoint.file("vocab.txt") is None or cls.preprocessor_cls is None:
            return None
        extra = checkpoint.extra.get("task_config", {}) if checkpoint.extra else {}
        layout = extra.get("data_layout") or {}
        options = {k: layout[k] for k in cls.preprocessor_options if layout.get(k) is not None}
        if "sequence_length" in options:
            options["sequence_length"] = int(options["sequence_length"])
        return cls.preprocessor_cls.from_preset(checkpoint.path, **options)

    def _load_head(self, checkpoint):
        """Fills the head from `checkpoint` when it has all of it; returns whether it did."""
        specs = self.head_weight_specs()
        if not specs:
            return False
        try:
            loaded = loading.assign_weights(checkpoint, specs, required=False)
        except CheckpointError as e:
            loaded = False
            reason = str(e)
        else:
            missing = loading.missing_tensors(checkpoint, specs) if not loaded else []
            if len(missing) < len(specs):  # part of a head: name what is missing
                reason = f"the checkpoint lacks {', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}"
            else:
                reason = "the checkpoint has no weights for it"
        if not loaded:
            print(f"{type(self).__name__}: head initialised randomly ({reason}).")
        return bool(loaded)

    def save_to_preset(self, path, format="keras_bert_zoo"):
        """Writes weights, config, task arguments and the preprocessor's files to `path`.

        `format="keras_hub"` writes a KerasHub preset instead (`BertBackbone`, and a
        `BertClassifier` / `BertPretrainer` as KerasHub's `BertTextClassifier` /
        `BertMaskedLM`) that KerasHub's own `from_preset(path)` loads.
        """
        if loading.save_as(path, self, format):
            return
        os.makedirs(path, exist_ok=True)
        loading.write_preset(
            path,
            self.backbone,
            head_specs=self.head_weight_specs(),
            architecture=self.hf_architecture,
            extra={"task": type(self).__name__, "task_config": self.task_config()},
            tied=self._tied_tensors(),
            include_pooler=self.uses_pooler,
        )
        extras = self.hf_config_extras()
        if extras:  # what HF's task class reads from config.json (labels, ...)
            config_path = os.path.join(path, "config.json")
            with open(config_path, encoding="utf-8") as f:
                config = json.load(f)
            write_json(config_path, {**config, **extras})
        if self.preprocessor is not None and hasattr(self.preprocessor, "save_to_preset"):
            self.preprocessor.save_to_preset(path)

    def hf_config_extras(self):
        """Entries added to the preset's `config.json` for HF's task class (e.g. `id2label`)."""
        return {}

    def _tied_tensors(self):
        return ()

    # --- raw inputs ----------------------------------------------------------------------
    # Every task's raw inputs go the same way: `batch_raw` (or, for a preprocessor that
    # cuts examples into windows, its own `raw_dataset`) runs the preprocessor in
    # tf.data and pads each batch only to the bucket width it needs.
    def raw_dataset(self, x, y=None, sample_weight=None, batch_size=None, training=False, batching="auto", seed=None):
        """Raw inputs -> the batched `tf.data.Dataset` that `fit/evaluate/predict` use.

        Args:
            x: raw inputs as the preprocessor takes them (strings, pairs, word lists,
                `(contexts, choices)`), or a `tf.data.Dataset` of raw batches.
            y, sample_weight: optional labels and weights, one per example.
            batch_size: default 32.
            training: shuffle every epoch, seeded by `seed` (None: by the global seed,
                `keras.utils.set_random_seed`).
            batching: `"auto"` (grouped by length for training, batches cut to a
                bucket width otherwise; packed for a model that `packs_by_default`, on
                one replica), `"by_length"`, `"bucketed"`, `"fixed"` (full
                `sequence_length`), and `"packed"` (several examples per row) for
                `BertClassifier`, `BertMultipleChoice` and the preprocessors that pack
                rows (tagging, QA);
                see `keras_bert_zoo.batch_raw`.
        """
        if self.preprocessor is None:
            raise UsageError(f"{type(self).__name__} has no preprocessor, so it takes token_ids/segment_ids/"
                             "padding_mask dicts; attach one (preprocessor=...) to feed raw text.")
        if batching == "packed" and not self.reads_packed_rows and \
                getattr(self.preprocessor, "raw_dataset", None) is None:
            raise UsageError(f'batching="packed" needs a model that reads packed rows (BertClassifier, '
                             f'BertMultipleChoice, and the '
                             f'tagger and QA models through their preprocessors); {type(self).__name__} does not: '
                             'use "by_length" or "bucketed".')
        if self.reads_packed_rows and self.distribute_strategy.num_replicas_in_sync > 1:
            if batching == "packed":  # a strategy splits rows and `cls_index` apart, unaligned
                raise UsageError(f'batching="packed" is for one replica: {type(self).__name__} pools each packed '
                                 "sequence by its row, and a distribution strategy splits a batch's rows and "
                                 'examples apart; use batching="by_length" (or "auto").')
        elif batching == "auto" and self.packs_by_default:
            batching = "packed"
        own = getattr(self.preprocessor, "raw_dataset", None)
        if own is not None:
            return own(self, x, y, sample_weight, batch_size=batch_size or 32, training=training, batching=batching,
                       seed=seed)
        from keras_bert_zoo.preprocessing.batching import batch_raw

        return batch_raw(self.preprocessor, x, y, sample_weight, batch_size=batch_size or 32, training=training,
                         batching=batching, seed=seed)

    def _is_raw(self, x):
        if self.preprocessor is None or isinstance(x, dict):
            return False
        if isinstance(x, tf.data.Dataset):
            return tf.nest.flatten(x.element_spec)[0].dtype == tf.string
        return True

    def compile(self, *args, jit_compile=None, **kwargs):
        """Keras' `compile`; `jit_compile=None` takes `RAW_INPUT_JIT_COMPILE` (see there)."""
        super().compile(*args, jit_compile=RAW_INPUT_JIT_COMPILE if jit_compile is None else jit_compile, **kwargs)

    def build_optimizer(self):
        """Creates the optimizer's slot variables now, outside any traced step.

        Keras (without a distribution strategy) leaves them to the first traced train
        step, and a `tf.function` that creates variables is traced twice: for MiniLM that
        second trace was half of a 1,600-sentence `fit` (first step 21 s -> 10 s,
        `benchmarks/fit_speed.py`). `fit` calls it; the jobs' loop does the same. (The
        metrics' state, also created in the first trace, did not cost a second one.)
        """
        optimizer = getattr(self, "optimizer", None)
        if self._distribute_strategy is None and optimizer is not None and not optimizer.built and self.built:
            optimizer.build(self.trainable_variables)  # under a strategy Keras' fit builds it in scope

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, batching="auto", **kwargs):
        """Keras' `fit`; raw inputs go through the preprocessor (`raw_dataset`, which
        shuffles itself, seeded; Keras' own `shuffle` flag then does not apply)."""
        if self._is_raw(x):
            shuffle = kwargs.pop("shuffle", True)
            ds = self.raw_dataset(x, y, sample_weight, batch_size, training=shuffle, batching=batching)
            self.build_optimizer()
            return super().fit(ds, shuffle=False, **kwargs)
        self.build_optimizer()
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, batching="auto", **kwargs):
        """Keras' `evaluate`; raw inputs are sorted by length and batched (`"auto"`), so
        each batch is cut to within a bucket step of its longest."""
        if self._is_raw(x):
            sorted_ = self._sorted_batches(x, y, sample_weight, batch_size, batching)
            ds = sorted_[0] if sorted_ else self.raw_dataset(x, y, sample_weight, batch_size, batching=batching)
            return super().evaluate(ds, **kwargs)
        return super().evaluate(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def predict(self, x, batch_size=None, batching="auto", **kwargs):
        """Keras' `predict`; raw inputs run sorted by length (`"auto"`) and the outputs
        come back in the input order."""
        if self._is_raw(x):
            sorted_ = self._sorted_batches(x, None, None, batch_size, batching)
            if sorted_:
                from keras_bert_zoo.preprocessing.batching import unsort

                self.trace_predict(sorted_[0].element_spec)
                return unsort(super().predict(sorted_[0], **kwargs), sorted_[1])
            ds = self.raw_dataset(x, batch_size=batch_size, batching=batching)
            self.trace_predict(ds.element_spec)
            return super().predict(ds, **kwargs)
        return super().predict(x, batch_size=batch_size, **kwargs)

    def trace_predict(self, element_spec):
        """Traces Keras' predict step once for batches of `element_spec` (a dict of
        `tf.TensorSpec`, widths `None`), so batches of every width run the same trace.

        Keras calls its predict function on each batch's tensors, so batches of new
        widths retrace it (`reduce_retracing` generalises only from the second shape on:
        three traces for SST-2 dev, ~1.5 s). `predict` on raw inputs calls this itself;
        loops that call `predict_function` on batches of varying width
        (`preprocessing.tag_predict`) call it first. A no-op when run eagerly or under a
        distribution strategy (its batches are distributed values).
        """
        if self.run_eagerly or tf.distribute.has_strategy() or self._distribute_strategy is not None:
            return
        self.make_predict_function()
        function = self.predict_function
        if hasattr(function, "get_concrete_function"):
            function.get_concrete_function([element_spec])

    def _sorted_batches(self, x, y, sample_weight, batch_size, batching):
        """`batch_raw_sorted` for in-memory raw inputs with `batching="auto"` (None otherwise,
        and for preprocessors with their own `raw_dataset`)."""
        if (batching != "auto" or isinstance(x, tf.data.Dataset)
                or getattr(self.preprocessor, "raw_dataset", None) is not None
                or self.packs_by_default and self.distribute_strategy.num_replicas_in_sync == 1):
            return None
        from keras_bert_zoo.preprocessing.batching import batch_raw_sorted
        from keras_bert_zoo.preprocessing.bucketing import fine_boundaries

        # Sorted batches differ in width by a position or two. Without XLA one
        # shape-generic step serves every width, so each batch is cut to its own longest
        # (SST-2 dev: 1.20x -> 1.07x its real tokens); XLA compiles a program per width,
        # so under it batches keep the 8-wide buckets.
        step = 8 if self.jit_compile else 1
        bounds = fine_boundaries(int(getattr(self.preprocessor, "sequence_length", 512)), step)
        return batch_raw_sorted(self.preprocessor, x, y, sample_weight, batch_size=batch_size or 32, boundaries=bounds)


# XLA for the steps of `compile()`'s default (Keras' own "auto" is XLA on TensorFlow).
# Raw-input batches come in many widths (every 8 positions), and XLA compiles one
# program per width, while `tf.function` retraces shape-generic after a few
# (`reduce_retracing`; tests/models/test_raw_inputs.py counts the traces). Even at one
# fixed shape the bert_mini train step was faster without XLA on this machine kind
# (1,506 vs 1,812 ms, issue 24). `benchmarks/fit_speed.py --systems ours,ours_xla`
# measures this path: a 1,600-sentence SST-2 `fit` of MiniLM took 26.4 s without XLA
# and 171.9 s with it (AVX-512, 2026-12-02), the compiles of each new width dominating.
# Issue 28's start-up timing (`training.jit.choose_jit_compile`) times one fixed shape,
# which this path does not have, so it is not used here.
RAW_INPUT_JIT_COMPILE = False
