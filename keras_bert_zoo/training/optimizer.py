"""BERT's optimizer: AdamW with the original exclusions and clipping."""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.keras_compat import adam_moments, decays, learning_rate_value
from keras_bert_zoo.models.task import register_default_optimizer
from keras_bert_zoo.training.schedules import SCHEDULES, make_schedule

__all__ = [
    "NO_DECAY_NAMES",
    "RECIPES",
    "BertAdamW",
    "merge_repeated_rows",
    "default_optimizer",
    "create_optimizer",
    "count_batches",
]

# Weight decay regularises weight matrices only: the original code excludes LayerNorm
# scales/offsets and every bias (optimization.py, `exclude_from_weight_decay`).
NO_DECAY_NAMES = ["LayerNorm", "layer_norm", "bias", "gamma", "beta"]

# `recipe` presets of `create_optimizer`; explicit `schedule=` / `bias_correction=` win.
RECIPES = {
    # HF's: torch AdamW (bias-corrected) + `get_linear_schedule_with_warmup`. Default.
    "linear": {"schedule": "linear", "bias_correction": True},
    # google-research/bert optimization.py: AdamWeightDecayOptimizer + its schedule.
    "bert_original": {"schedule": "bert_original", "bias_correction": False},
}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertAdamW(keras.optimizers.AdamW):
    """AdamW whose `global_clipnorm` clips the gradient of the *global* batch, with
    optional Adam bias correction and serialisable weight-decay exclusions.

    With `bias_correction=True` the step is torch's `AdamW` to float rounding:
    `lr * m_hat / (sqrt(v_hat) + epsilon)` with the bias-corrected moments (Keras'
    own Adam adds epsilon before the correction, a larger effective epsilon early on).
    With `bias_correction=False` it is `lr * m / (sqrt(v) + epsilon)`: google-research/
    bert's `AdamWeightDecayOptimizer` (its early steps are larger than Adam's). The
    decoupled decay `lr * weight_decay * param` is the same in both. `amsgrad` is not
    supported.

    `fused_update=True` (default; TensorFlow only) runs each variable's step as TF's
    one-pass Adam kernel (`ResourceApplyAdam`) instead of ~15 element-wise ops: MiniLM's
    optimizer step 92 -> 37 ms, and its graph 2,762 -> 1,183 ops. That kernel forms
    `1 - beta` from the float32 `beta` (0.999 becomes 0.99900001), so the second moment's
    increment differs from torch's by 1.3e-5 relative (after 10 steps of lr 1e-2, weights
    differ by ~2e-6 where the element-wise form differs by < 1e-6; tested). `False` is
    the element-wise form, torch's `AdamW` to float32 rounding.

    `no_decay_names`: variables whose name contains one of these are not decayed
    (Keras' `exclude_from_weight_decay(var_names=...)`, which by itself is not saved
    in the config, so a `.keras` reload would decay LayerNorm and biases again).

    Keras' optimizers clip inside each replica, before gradients are summed across
    replicas, so under `MirroredStrategy`/TPU the clipping norm is that of each
    replica's share and training differs from one device on the same global batch.
    With `clip_after_all_reduce=True` (our default) the gradients are summed first, so
    N replicas train exactly like one device (tested). `False` keeps Keras' per-replica
    clipping, which is also what the original TPU code did (it clipped before
    `CrossShardOptimizer` summed).
    """

    def __init__(
        self, *args, clip_after_all_reduce=True, bias_correction=True, no_decay_names=None, fused_update=True, **kwargs
    ):
        if kwargs.get("amsgrad"):
            raise UsageError("BertAdamW does not support amsgrad=True; use keras.optimizers.AdamW.")
        super().__init__(*args, **kwargs)
        self.clip_after_all_reduce = clip_after_all_reduce
        self.bias_correction = bool(bias_correction)
        self.no_decay_names = list(no_decay_names) if no_decay_names else None
        self.fused_update = bool(fused_update)
        if self.no_decay_names:
            self.exclude_from_weight_decay(var_names=self.no_decay_names)

    @property
    def learning_rate_schedule(self):
        """The `LearningRateSchedule` (or the constant rate), not its current value."""
        return learning_rate_value(self)

    # --- one step: scalars once, then one fused update per variable ------------------------
    # Keras computes AdamW's scalars (bias corrections, the decay factor) inside each
    # variable's update, and runs the update as ~15 element-wise ops, each a full pass
    # over the variable: ~48 graph ops per variable, 5,000 for MiniLM, whose tracing and
    # first run were 3 s of a 1,600-sentence `fit`, and ~90 ms of every step (issue 24).
    # Here the scalars are computed once per step and handed to every variable's update
    # as its `learning_rate` argument (how Keras passes per-step values through a
    # distribution strategy's `update`); on TensorFlow the update is TF's fused Adam
    # kernel (`ResourceApplyAdam`, the legacy optimizers' one pass over var, m, v).
    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        super()._backend_update_step(grads, trainable_variables, self._step_coefficients(learning_rate))

    def _apply_weight_decay(self, variables):
        """Nothing here: `update_step` decays each variable just before its Adam step."""

    def _step_coefficients(self, learning_rate):
        """This step's float32 scalars: `learning_rate`, `beta_1`, `beta_2`, `beta_1_power`
        and `beta_2_power` (0 without bias correction), the `epsilon` that goes where torch puts it, and
        `decay` (lr * weight_decay; absent without weight decay)."""
        learning_rate = ops.cast(learning_rate, "float32")
        epsilon = ops.convert_to_tensor(self.epsilon, "float32")
        if self.bias_correction:
            # torch (HF) adds epsilon to the bias-corrected sqrt(v_hat); Keras' Adam adds
            # it to the raw sqrt(v), in effect 1 / sqrt(1 - beta_2^t) times larger (30x at
            # step 1), which damps the first steps of a short fine-tuning run. torch's step,
            #   lr / c1 * m / (sqrt(v / c2) + eps),   c_i = 1 - beta_i^t,
            # is the fused kernel's form lr * sqrt(c2) / c1 * m / (sqrt(v) + eps')
            # with eps' = eps * sqrt(c2).
            step = ops.cast(self.iterations + 1, "float32")
            beta_1_power = ops.power(ops.cast(self.beta_1, "float32"), step)
            beta_2_power = ops.power(ops.cast(self.beta_2, "float32"), step)
            epsilon = epsilon * ops.sqrt(1 - beta_2_power)
        else:  # google-research/bert AdamWeightDecayOptimizer: no correction
            beta_1_power = beta_2_power = ops.zeros((), "float32")
        coefficients = {
            "learning_rate": learning_rate,
            "beta_1_power": beta_1_power,
            "beta_2_power": beta_2_power,
            "epsilon": epsilon,
            "beta_1": ops.convert_to_tensor(self.beta_1, "float32"),
            "beta_2": ops.convert_to_tensor(self.beta_2, "float32"),
        }
        if self.weight_decay:
            coefficients["decay"] = learning_rate * ops.cast(self.weight_decay, "float32")
        return coefficients

    def update_step(self, gradient, variable, learning_rate):
        """`variable -= decay * variable`, then `variable -= alpha * m / (sqrt(v) + epsilon)`
        with `alpha = lr * sqrt(1 - beta_2_power) / (1 - beta_1_power)`, from this step's
        coefficients (`_step_coefficients`; `learning_rate` is their dict)."""
        if not isinstance(learning_rate, dict):  # called directly with a rate, as Keras' own update_step
            learning_rate = self._step_coefficients(learning_rate)
        dtype = variable.dtype
        c = {k: ops.cast(v, dtype) for k, v in learning_rate.items()}
        m, v = adam_moments(self, variable)
        if "decay" in c and decays(self, variable):
            # torch's form, `param.mul_(1 - lr * weight_decay)`: one multiply whose result
            # becomes the variable's buffer (half the CPU time of subtracting `variable *
            # decay`, 4.9 vs 9.0 ms for MiniLM's word embeddings; a fused
            # `ResourceApplyGradientDescent` copies the variable it reads: 9.5 ms).
            self.assign(variable, ops.multiply(variable, 1 - c["decay"]))
        if self.fused_update and keras.backend.backend() == "tensorflow":
            return _fused_adam(variable, m, v, ops.convert_to_tensor(ops.cast(gradient, dtype)), c)
        gradient = ops.cast(gradient, dtype)
        self.assign_add(m, ops.multiply(ops.subtract(gradient, m), 1 - self.beta_1))
        self.assign_add(v, ops.multiply(ops.subtract(ops.square(gradient), v), 1 - self.beta_2))
        alpha = c["learning_rate"] * ops.sqrt(1 - c["beta_2_power"]) / (1 - c["beta_1_power"])
        self.assign_sub(variable, ops.divide(ops.multiply(m, alpha), ops.add(ops.sqrt(v), c["epsilon"])))

    def _clip_gradients(self, grads):
        # Runs before every update (Keras calls it whether or not clipping is on), so it
        # is where sparse gradients are merged first: see `merge_repeated_rows`.
        grads = [merge_repeated_rows(g) for g in grads]
        if self.global_clipnorm and self.clip_after_all_reduce and keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            context = tf.distribute.get_replica_context()
            replicas = tf.distribute.get_strategy().num_replicas_in_sync
            if context is not None and replicas > 1:
                total = [merge_repeated_rows(g) for g in context.all_reduce(tf.distribute.ReduceOp.SUM, grads)]
                clipped, _ = tf.clip_by_global_norm(total, self.global_clipnorm)
                # The optimizer sums replicas' gradients again after this: hand each
                # replica 1/N of the clipped total so that sum is the clipped total.
                return [_scale(g, 1.0 / replicas) for g in clipped]
        return super()._clip_gradients(grads)

    def get_config(self):
        return {
            **super().get_config(),
            "clip_after_all_reduce": self.clip_after_all_reduce,
            "bias_correction": self.bias_correction,
            "no_decay_names": self.no_decay_names,
            "fused_update": self.fused_update,
        }


def _handle(x):
    return (x.value if isinstance(x, keras.Variable) else x).handle


def _fused_adam(variable, m, v, gradient, c):
    """TF's one-pass Adam kernel on `variable` and its moments (Keras or tf variables).

    It computes `m += (g - m)(1 - beta_1)`, `v += (g^2 - v)(1 - beta_2)`, `variable -=
    lr * sqrt(1 - beta_2_power) / (1 - beta_1_power) * m / (sqrt(v) + epsilon)`: the
    element-wise form above, in one pass instead of ~15 (92 -> 37 ms per MiniLM step).
    """
    import tensorflow as tf

    return tf.raw_ops.ResourceApplyAdam(
        var=_handle(variable),
        m=_handle(m),
        v=_handle(v),
        beta1_power=c["beta_1_power"],
        beta2_power=c["beta_2_power"],
        lr=c["learning_rate"],
        beta1=c["beta_1"],
        beta2=c["beta_2"],
        epsilon=c["epsilon"],
        grad=gradient,
    )


def merge_repeated_rows(gradient):
    """A TensorFlow `IndexedSlices` gradient with each row id once (repeated ids' rows summed).

    The gradient of an embedding lookup holds one row per *occurrence* of an id: a batch
    with `[CLS]` 32 times has 32 rows for it. The true gradient of that row is their sum.
    Keras' elementwise ops act on the rows as they are, so without this merge Adam's
    second moment gets the sum of squares instead of the square of the sum, and the
    global clipping norm is computed on the unmerged rows (MiniLM on 32 real SQuAD
    windows of 256, before fine-tuning: 1.80 instead of 1.86); torch's dense embedding
    gradient (HF) has neither problem. The
    legacy TF optimizers merged the same way (`_deduplicate_indexed_slices`). Dense
    gradients and other backends pass through unchanged.
    """
    if keras.backend.backend() != "tensorflow":
        return gradient
    import tensorflow as tf

    if not isinstance(gradient, tf.IndexedSlices):
        return gradient
    ids, position = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, position, tf.shape(ids)[0])
    return tf.IndexedSlices(values, ids, gradient.dense_shape)


def _scale(gradient, factor):
    import tensorflow as tf

    # Sparse (embedding) gradients are made dense: after an all-reduce an id seen on
    # two replicas has two rows, and a dense sum is the simple way to merge them.
    return tf.convert_to_tensor(gradient) * factor


@register_default_optimizer
def default_optimizer():
    """The optimizer a task's `compile(optimizer="auto")` uses: AdamW at 5e-5, constant.

    Keras' `AdamW` hyper-parameters (weight decay 0.004, epsilon 1e-7, no clipping) in
    `BertAdamW`, so sparse embedding gradients are merged before the update (Keras' own
    optimizers would give Adam a sum of squares for every id a batch repeats) and
    epsilon sits where torch puts it. `create_optimizer` gives BERT's recipe instead.

    >>> from keras_bert_zoo.training import default_optimizer
    >>> optimizer = default_optimizer()
    >>> type(optimizer).__name__, round(float(optimizer.learning_rate), 8), optimizer.weight_decay
    ('BertAdamW', 5e-05, 0.004)
    """
    return BertAdamW(learning_rate=5e-5)


def create_optimizer(
    learning_rate,
    total_steps=None,
    warmup_steps=None,
    warmup_ratio=0.1,
    weight_decay=0.01,
    epsilon=1e-6,
    clipnorm=1.0,
    clip_after_all_reduce=True,
    schedule=None,
    bias_correction=None,
    recipe="linear",
    fused_update=True,
    dataset=None,
    epochs=1,
):
    """AdamW (epsilon 1e-6, weight decay 0.01 not on LayerNorm or biases), a linear
    warm-up then linear decay to zero, and global gradient clipping at norm 1.0.

    Two recipes carry the name "BERT's optimizer"; `recipe` picks one:
    - `"linear"` (default): HF's, the one fine-tuning results are usually compared
      with: bias-corrected AdamW (torch's `AdamW`) and the `linear` schedule
      (`get_linear_schedule_with_warmup`: decay from the end of warm-up).
    - `"bert_original"`: google-research/bert `optimization.py`: Adam without bias
      correction (`AdamWeightDecayOptimizer`) and its schedule (decay from step 0).
    `schedule=` and `bias_correction=` override the recipe's part each: e.g.
    `schedule="bert_original"` alone changes the schedule only.

    The schedule must know the run's step count, and length-grouped batches (what `fit`
    makes of raw inputs) are more than `ceil(examples / batch)` (SST-2: 629 against 625;
    MRPC over 3 epochs: 360 against 345), so counting them by that formula ends the decay
    early and the last steps run at rate 0. Either leave `total_steps` out and let the
    first `fit` of a task model count its own batches, or pass the `dataset` it will
    train on (e.g. `model.raw_dataset(x, y, batch_size, training=True)`) with `epochs`.

    Args:
        learning_rate: float, peak learning rate.
        total_steps: int, optimizer steps of the whole run (the decay reaches 0 there);
            None: `epochs` times the batches of `dataset`, or without `dataset` set by
            the first `fit` of a task model (`epochs` times the batches it counts).
        warmup_steps: int, warm-up steps; defaults to `warmup_ratio * total_steps`.
        warmup_ratio: float, used when `warmup_steps` is None.
        weight_decay: float.
        epsilon: float, Adam's epsilon (1e-6 as in the original; Keras' default is 1e-7).
        clipnorm: float or None, global norm over all gradients.
        clip_after_all_reduce: bool, under a multi-replica strategy, clip the summed
            gradient (True: same result as one device) or each replica's (False: Keras'
            default and the original TPU code). See `BertAdamW`.
        schedule: `"linear"` or `"bert_original"` (see `keras_bert_zoo.training.schedules`);
            None takes the recipe's.
        bias_correction: bool, Adam's bias correction; None takes the recipe's.
        recipe: `"linear"` or `"bert_original"`.
        fused_update: bool, TF's one-pass Adam kernel (default) or the element-wise
            form, torch's `AdamW` to float32 rounding (see `BertAdamW`).
        dataset: `tf.data.Dataset` of the training batches (a finite one), instead of
            `total_steps`.
        epochs: int, passes over `dataset`.

    Examples:
    >>> from keras_bert_zoo.training import create_optimizer
    >>> optimizer = create_optimizer(5e-5, total_steps=1000)
    >>> float(optimizer.learning_rate)  # step 0 of the warm-up
    0.0
    >>> original = create_optimizer(1e-4, total_steps=1000, recipe="bert_original")
    >>> type(original.learning_rate_schedule).__name__, original.bias_correction
    ('BertOriginalWarmupDecay', False)
    >>> import tensorflow as tf
    >>> batches = tf.data.Dataset.range(10).batch(4)
    >>> create_optimizer(5e-5, dataset=batches, epochs=3).learning_rate_schedule.total_steps
    9
    >>> create_optimizer(5e-5).learning_rate_schedule.sized  # the first fit() sizes it
    False
    """
    if recipe not in RECIPES:
        raise UsageError(f"Unknown recipe {recipe!r}; choose one of {', '.join(RECIPES)}.")
    if schedule is None:
        schedule = RECIPES[recipe]["schedule"]
    if bias_correction is None:
        bias_correction = RECIPES[recipe]["bias_correction"]
    if schedule not in SCHEDULES:
        raise UsageError(f"Unknown schedule {schedule!r}; choose one of {', '.join(SCHEDULES)}.")
    if dataset is not None:
        if total_steps is not None:
            raise UsageError("give create_optimizer total_steps= or dataset=, not both.")
        total_steps = epochs * count_batches(dataset)
    ratio = None
    if warmup_steps is None:
        ratio = warmup_ratio if total_steps is None else None
        warmup_steps = 0 if total_steps is None else int(round(warmup_ratio * total_steps))
    return BertAdamW(
        learning_rate=make_schedule(schedule, learning_rate, total_steps, warmup_steps, warmup_ratio=ratio),
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=epsilon,
        global_clipnorm=clipnorm,
        clip_after_all_reduce=clip_after_all_reduce,
        bias_correction=bias_correction,
        no_decay_names=NO_DECAY_NAMES,
        fused_update=fused_update,
    )


def count_batches(dataset):
    """Batches in one pass over `dataset`: its cardinality, or counted once when tf.data
    cannot know it (length buckets). An endless dataset is a `UsageError`.

    >>> import tensorflow as tf
    >>> from keras_bert_zoo.training.optimizer import count_batches
    >>> count_batches(tf.data.Dataset.range(10).batch(4))
    3
    """
    import tensorflow as tf

    known = int(dataset.cardinality())
    if known == tf.data.INFINITE_CARDINALITY:
        raise UsageError(
            "the dataset repeats forever, so its batches cannot size the schedule; give "
            "create_optimizer total_steps= instead."
        )
    if known >= 0:
        return known
    return int(dataset.reduce(0, lambda count, _: count + 1))
