"""`Task`: what every task model (classifier, tagger, QA, pretrainer) shares.

A task is a Functional `keras.Model` built on a `BertBackbone`, with an optional
`preprocessor` (a Keras layer turning raw inputs into `token_ids`, `segment_ids`,
`padding_mask`, with the contract `preprocessor(x, y=None, sample_weight=None) ->
(x, y, sample_weight)`). With a preprocessor attached, `fit`, `evaluate` and `predict`
accept raw inputs: the preprocessing runs in `tf.data` on the host, and each batch is
padded only to the bucket width it needs (`models.raw_inputs.RawInputs`, `batch_raw`);
each task names its preprocessor class once (`preprocessor_cls`).

A subclass provides:
- `head_weight_specs()`: `WeightSpec`s of its head (names as in HF checkpoints), so
  `from_preset` can load a head and `save_to_preset` writes one;
- `task_config()`: what `from_preset` needs to rebuild it (stored in `config.json`);
- `hf_architecture`: the HF class name recorded in `config.json`.
"""

import json
import os

import keras

from keras_bert_zoo import hardware
from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.layers import int8
from keras_bert_zoo.models.raw_inputs import RawInputs
from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

__all__ = ["register_default_optimizer", "default_optimizer_factory", "default_optimizer", "label_table", "Task"]


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
        raise RuntimeError(
            "no default optimizer is registered; `import keras_bert_zoo` (which imports "
            'keras_bert_zoo.training) before compile(optimizer="auto"), or pass an optimizer.'
        )
    return factory()


def label_table(names):
    """HF's `id2label` / `label2id` entries for label `names` in id order."""
    return {"id2label": {str(i): n for i, n in enumerate(names)}, "label2id": {n: i for i, n in enumerate(names)}}


class Task(RawInputs, keras.Model):
    hf_architecture = "BertModel"
    # The one place a task names its preprocessor: `from_preset` builds it from a
    # directory's vocab.txt with the `preprocessor_options` saved in the data layout.
    preprocessor_cls = BertPreprocessor
    preprocessor_options = ("sequence_length",)
    uses_pooler = True  # False: the pooler is neither needed when loading nor written when saving

    def __init__(self, *args, backbone=None, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.backbone = backbone
        self.preprocessor = preprocessor

    # --- Keras' step functions, retraced when the backbone's LoRA changes ---------------
    # A step traced before `backbone.enable_lora` computes without the adapters (whether a
    # Dense adds them is Python state read while tracing) and trains the old weights.
    def make_train_function(self, force=False):
        return super().make_train_function(force=self._lora_changed("train") or force)

    def make_test_function(self, force=False):
        return super().make_test_function(force=self._lora_changed("test") or force)

    def make_predict_function(self, force=False):
        return super().make_predict_function(force=self._lora_changed("predict") or force)

    def _lora_changed(self, kind):
        layers = getattr(self.backbone, "encoder_layers", None) or ()
        state = tuple(block.lora_state() for block in layers)
        seen = self.__dict__.get("_lora_seen_by_step")
        if seen is None:
            seen = {}
            object.__setattr__(self, "_lora_seen_by_step", seen)  # plain bookkeeping, not tracked by Keras
        changed = kind in seen and seen[kind] != state
        seen[kind] = state
        return changed

    # --- what subclasses describe -------------------------------------------------
    def head_weight_specs(self):
        return []

    def task_config(self):
        """Constructor arguments other than backbone/preprocessor (JSON-able)."""
        config = self.get_config()
        for key in ("backbone", "preprocessor", "name", "trainable", "dtype", "quantization"):
            config.pop(key, None)
        return config

    # --- serialization ------------------------------------------------------------
    def quantize(self, mode=None, config=None, filters=None, **kwargs):
        """Keras' `Model.quantize` on the layers with a quantized form (the backbone's Dense
        and Embedding layers and the head's Dense), without a warning for each of the
        others; see `BertBackbone.quantize`. `get_config` records the layers quantized, so
        `.keras` files reload quantized; `save_to_preset` writes the dequantized weights
        and the mode, and `from_preset` quantizes them again.

        Examples:
        >>> from keras_bert_zoo.tasks.classifier.model import BertClassifier
        >>> model = BertClassifier.from_preset("bert_tiny_uncased", load_weights=False, num_classes=2)
        >>> model.quantize("int8")
        >>> model.classifier.quantization_mode, model.backbone.pooler.quantization_mode
        ('int8', 'int8')
        """
        hardware.warn_if_emulated(mode)
        with int8.one_garbage_collection():
            keras.Model.quantize(self, mode, config=config, filters=int8.quantizable_filter(filters), **kwargs)

    def get_config(self):
        quantization = int8.quantization_config(self)
        return {
            **({"quantization": quantization} if quantization else {}),
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
        quantization = config.pop("quantization", None)
        for key in ("backbone", "preprocessor"):
            if isinstance(config.get(key), dict):
                config[key] = keras.saving.deserialize_keras_object(config[key])
        # The backbone came back quantized (its own config); the head's layers follow.
        return int8.requantize(cls(**config), quantization)

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
        source = name_or_path
        # A preset name or hf:// address becomes the cached snapshot's directory.
        name_or_path = loading.resolve(name_or_path, load_weights)
        from keras_bert_zoo.models.backbone import BertBackbone

        backbone_kwargs = kwargs.pop("backbone_kwargs", {})
        if loading.is_preset_name(name_or_path):
            cls._check_head_arguments(kwargs, source, "a preset name is a backbone architecture")
            backbone = BertBackbone.from_preset(name_or_path, load_weights=False, **backbone_kwargs)  # says "random"
            if preprocessor == "auto":
                preprocessor = None
            return cls(backbone=backbone, preprocessor=preprocessor, **kwargs)
        checkpoint = loading.open_checkpoint(name_or_path)
        saved = checkpoint.extra.get("task_config", {}) if checkpoint.extra.get("task") == cls.__name__ else {}
        cls._check_head_arguments(
            {**saved, **kwargs}, source, f"it holds no {cls.__name__} head or label table that gives it"
        )
        backbone = BertBackbone.from_checkpoint(
            checkpoint,
            load_weights=load_weights,
            pooler_needed=cls._pooler_needed({**saved, **kwargs}),
            **backbone_kwargs,
        )
        if preprocessor == "auto":
            preprocessor = cls._preprocessor_from_checkpoint(checkpoint)
        model = cls(backbone=backbone, preprocessor=preprocessor, **{**saved, **kwargs})
        if load_weights:
            model._load_head(checkpoint)
            # Tensors a task writes for HF (the tied MLM decoder) are accounted for.
            tied = [name for name, _ in model._tied_tensors()]
            loading.report_unused(checkpoint, cls.__name__, accounted=tied)
        # A quantized model's preset holds its dequantized weights: quantizing them again
        # gives back its int8 weights (abs-max of a dequantized channel is its old maximum).
        return int8.requantize(model, checkpoint.extra.get("quantization"))

    @classmethod
    def _check_head_arguments(cls, given, source, why):
        """Raises `UsageError` naming the head's size arguments (`num_classes`, `num_labels`) that
        neither the caller nor the checkpoint gives, before the constructor's bare `TypeError`."""
        import inspect

        required = [
            name
            for name, p in inspect.signature(cls.__init__).parameters.items()
            if name not in ("self", "backbone", "preprocessor")
            and p.default is p.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        ]
        missing = [name for name in required if name not in given]
        if missing:
            example = ", ".join(f"{name}=2" for name in missing)
            raise UsageError(
                f"{cls.__name__}.from_preset({source!r}) needs {' and '.join(missing)}: {why}. Pass "
                f"it, e.g. {cls.__name__}.from_preset({source!r}, {example})."
            )

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
        preprocessor = cls.preprocessor_cls.from_preset(checkpoint.path, **options)
        # A default longer than the checkpoint's positions (span QA's 384 on a 128-position model) would index
        # past the position table once windows fill up; the checkpoint's own limit is the default then.
        limit = checkpoint.backbone_kwargs["max_sequence_length"]
        if "sequence_length" not in options and (getattr(preprocessor, "sequence_length", None) or 0) > limit:
            try:
                preprocessor = cls.preprocessor_cls.from_preset(checkpoint.path, sequence_length=limit, **options)
            except UsageError:
                # The limit leaves no room for the task's other defaults (span QA's 64-piece question on a
                # 64-position toy model): keep the default; such a model needs its options named by the user.
                pass
        return preprocessor

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
            extra={"task": type(self).__name__, "task_config": self.task_config(), **int8.preset_extra(self)},
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
