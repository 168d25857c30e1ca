"""`RawInputs`: how a task model takes raw inputs in `fit`, `evaluate` and `predict`.

`Task` inherits it. Every task's raw inputs go the same way: `batch_raw` (or, for a
preprocessor that cuts examples into windows, its own `raw_dataset`) runs the
preprocessor in tf.data and pads each batch only to the bucket width it needs;
`evaluate` and `predict` sort the examples by length first, or pack them for a model
that `packs_by_default`.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import UsageError

__all__ = ["RawInputs", "RAW_INPUT_JIT_COMPILE"]


class RawInputs:
    """The raw-input half of `Task` (a mixin before `keras.Model`): `raw_dataset`, and
    `fit` / `evaluate` / `predict` that take raw inputs through it."""

    # Whether `call` pools each sequence of a packed row itself (`batching="packed"` through
    # `batch_raw`; `BertClassifier`, `BertMultipleChoice`). Preprocessors with their own
    # `raw_dataset` (tagging, QA) pack for token-level heads, which need nothing of the model.
    reads_packed_rows = False
    # Whether `batching="auto"` packs (fit, evaluate and predict) rather than grouping by
    # length / sorting: for a task whose examples are padded even when sorted (a
    # question's choices differ in length), measured faster (`BertMultipleChoice`).
    packs_by_default = False

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
            raise UsageError(
                f"{type(self).__name__} has no preprocessor, so it takes token_ids/segment_ids/"
                "padding_mask dicts; attach one (preprocessor=...) to feed raw text."
            )
        if (
            batching == "packed"
            and not self.reads_packed_rows
            and getattr(self.preprocessor, "raw_dataset", None) is None
        ):
            raise UsageError(
                f'batching="packed" needs a model that reads packed rows (BertClassifier, '
                f"BertMultipleChoice, and the "
                f"tagger and QA models through their preprocessors); {type(self).__name__} does not: "
                'use "by_length" or "bucketed".'
            )
        batching = self.batching_on_replicas(batching, self._replicas())
        own = getattr(self.preprocessor, "raw_dataset", None)
        if own is not None:
            return own(
                self, x, y, sample_weight, batch_size=batch_size or 32, training=training, batching=batching, seed=seed
            )
        from keras_bert_zoo.preprocessing.batching import batch_raw

        return batch_raw(
            self.preprocessor,
            x,
            y,
            sample_weight,
            batch_size=batch_size or 32,
            training=training,
            batching=batching,
            seed=seed,
        )

    @classmethod
    def batching_on_replicas(cls, batching, replicas):
        """The batching this model's raw inputs take on `replicas` (`raw_dataset` and
        `finetune` both ask): `"auto"` packs for a model that `packs_by_default` on one
        replica; packed rows of a pooled head are refused on several, since a strategy
        splits a batch's rows and its `cls_index` apart."""
        if not (cls.reads_packed_rows and replicas > 1):
            return "packed" if batching == "auto" and cls.packs_by_default else batching
        if batching == "packed":
            raise UsageError(
                f'batching "packed" is for one replica: {cls.__name__} pools each packed sequence '
                f"by its row, and {replicas} replicas would get a batch's rows and examples split "
                'apart; use batching "by_length" (or "auto").'
            )
        return batching

    def _replicas(self):
        """Replicas of the model's distribution strategy (1 without one, and on JAX)."""
        strategy = getattr(self, "distribute_strategy", None)  # TensorFlow's trainer only
        return 1 if strategy is None else strategy.num_replicas_in_sync

    def _is_raw(self, x):
        if self.preprocessor is None or isinstance(x, dict):
            return False
        if isinstance(x, tf.data.Dataset):
            return tf.nest.flatten(x.element_spec)[0].dtype == tf.string
        return True

    def compile(self, *args, jit_compile=None, **kwargs):
        """Keras' `compile`; `jit_compile=None` takes `RAW_INPUT_JIT_COMPILE` on TensorFlow (see
        there) and Keras' `"auto"` on the other backends: JAX without `jax.jit` dispatches
        every op on its own (a tiny classifier's first `fit` step took minutes), and torch's
        `"auto"` is eager."""
        if jit_compile is None:
            jit_compile = RAW_INPUT_JIT_COMPILE if keras.backend.backend() == "tensorflow" else "auto"
        super().compile(*args, jit_compile=jit_compile, **kwargs)

    def build_optimizer(self):
        """Creates the optimizer's slot variables now, outside any traced step.

        Keras (without a distribution strategy) leaves them to the first traced train
        step, and a `tf.function` that creates variables is traced twice: for MiniLM that
        second trace was half of a 1,600-sentence `fit` (first step 21 s -> 10 s,
        `benchmarks/run.py fit_speed`). `fit` calls it (with the compiled metrics' state,
        `models.step_state`); the jobs' loop does the same.
        """
        from keras_bert_zoo.models.step_state import build_optimizer

        build_optimizer(self)

    def _build_step_state(self, x, y=None, optimizer=True):
        """The optimizer's (for training) and the compiled metrics' variables, before Keras
        traces a step (`models.step_state`): from a dataset's element spec, or from `y`."""
        from keras_bert_zoo.models.step_state import build_metrics, build_optimizer

        if isinstance(x, tf.data.Dataset):
            spec = x.element_spec
        elif y is not None:
            spec = (
                None,
                tf.nest.map_structure(
                    lambda a: tf.TensorSpec((None,) + np.shape(a)[1:], tf.as_dtype(np.asarray(a).dtype)), y
                ),
            )
        else:
            spec = None
        if optimizer:
            build_optimizer(self)
        if spec is not None:
            build_metrics(self, spec)

    def fit(self, x=None, y=None, batch_size=None, sample_weight=None, batching="auto", **kwargs):
        """Keras' `fit`; raw inputs go through the preprocessor (`raw_dataset`, which
        shuffles itself, seeded; Keras' own `shuffle` flag then does not apply).

        A learning-rate schedule made without a step count (`create_optimizer(lr)`) is
        sized here: `epochs` times the batches this `fit` runs, counted on the batches
        themselves (length-grouped ones are more than `ceil(examples / batch_size)`), so
        its decay ends exactly at the last step."""
        if self._is_raw(x):
            shuffle = kwargs.pop("shuffle", True)
            ds = self.raw_dataset(x, y, sample_weight, batch_size, training=shuffle, batching=batching)
            self._size_schedule(int(ds.cardinality()), kwargs)
            self._build_step_state(ds)
            return super().fit(ds, shuffle=False, **kwargs)
        self._size_schedule(_batches_of(x, batch_size, kwargs.get("validation_split")), kwargs)
        self._build_step_state(x, y)
        return super().fit(x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs)

    def _size_schedule(self, batches, fit_kwargs):
        """Sizes a schedule that waits for its step count (`sized` False) to the run of this `fit`."""
        schedule = getattr(getattr(self, "optimizer", None), "learning_rate_schedule", None)
        if getattr(schedule, "sized", True):
            return
        steps = fit_kwargs.get("steps_per_epoch") or batches
        if steps is None or steps < 0:
            raise UsageError(
                "fit() cannot count the batches of this data to size the learning-rate schedule; "
                "give create_optimizer total_steps= (or dataset=), or fit steps_per_epoch=."
            )
        schedule.size(int(fit_kwargs.get("epochs", 1)) * int(steps))

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, batching="auto", **kwargs):
        """Keras' `evaluate`; raw inputs are sorted by length and batched (`"auto"`), so
        each batch is cut to within a bucket step of its longest."""
        if self._is_raw(x):
            sorted_ = self._sorted_batches(x, y, sample_weight, batch_size, batching)
            ds = sorted_[0] if sorted_ else self.raw_dataset(x, y, sample_weight, batch_size, batching=batching)
            self._build_step_state(ds, optimizer=False)
            return super().evaluate(ds, **kwargs)
        self._build_step_state(x, y, optimizer=False)
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
        (`tasks.tagger.predict`) call it first. A no-op when run eagerly or under a
        distribution strategy (its batches are distributed values).
        """
        from keras_bert_zoo.keras_compat import distribute_strategy, predict_function

        if self.run_eagerly or tf.distribute.has_strategy() or distribute_strategy(self) is not None:
            return
        function = predict_function(self)
        if hasattr(function, "get_concrete_function"):
            function.get_concrete_function([element_spec])

    def _sorted_batches(self, x, y, sample_weight, batch_size, batching):
        """`batch_raw_sorted` for in-memory raw inputs with `batching="auto"` (None otherwise,
        and for preprocessors with their own `raw_dataset`)."""
        if (
            batching != "auto"
            or isinstance(x, tf.data.Dataset)
            or getattr(self.preprocessor, "raw_dataset", None) is not None
            or self.batching_on_replicas(batching, self._replicas()) != "auto"
        ):
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


def _batches_of(x, batch_size, validation_split=None):
    """Batches per epoch Keras' `fit` makes of `x` (a dataset's known cardinality; arrays:
    `ceil(rows / batch_size)` after the validation split), or None when it cannot be told."""
    if isinstance(x, tf.data.Dataset):
        known = int(x.cardinality())
        return known if known >= 0 else None
    if isinstance(x, keras.utils.PyDataset):
        return len(x)
    leaves = tf.nest.flatten(x)
    if not leaves or not hasattr(leaves[0], "__len__"):
        return None  # a generator: only Keras, iterating it, learns its length
    rows = len(leaves[0])
    if validation_split:  # Keras keeps the first ceil(rows * (1 - split)) rows for training
        rows = int(np.ceil(rows * (1.0 - validation_split)))
    return -(-rows // (batch_size or 32))


# XLA for the steps of `compile()`'s default (Keras' own "auto" is XLA on TensorFlow).
# Raw-input batches come in many widths (every 8 positions), and XLA compiles one
# program per width, while `tf.function` retraces shape-generic after a few
# (`reduce_retracing`; tests/models/test_raw_inputs.py counts the traces). Even at one
# fixed shape the bert_mini train step was faster without XLA on this machine kind
# (1,506 vs 1,812 ms, issue 24). `benchmarks/run.py fit_speed --systems ours,ours_xla`
# measures this path: a 1,600-sentence SST-2 `fit` of MiniLM took 26.4 s without XLA
# and 171.9 s with it (AVX-512, 2026-12-02), the compiles of each new width dominating.
# Issue 28's start-up timing (`training.jit.choose_jit_compile`) times one fixed shape,
# which this path does not have, so it is not used here.
RAW_INPUT_JIT_COMPILE = False
