"""Learning-rate schedules: linear warm-up, then linear decay to zero.

Two formulas go by "BERT's schedule"; both are here under their own names:

- `linear` (`LinearWarmupLinearDecay`, our default): HF's `get_linear_schedule_with_warmup`
  (`transformers`' default, `Trainer`'s `lr_scheduler_type="linear"`). The decay starts
  at the end of warm-up: `peak * (total - step) / (total - warmup)`.
- `bert_original` (`BertOriginalWarmupDecay`): google-research/bert `optimization.py`.
  The decay is counted from step 0, `peak * (1 - step / total)`, and warm-up overrides
  it while `step < warmup`, so the rate drops from `peak` to `peak * (1 - warmup / total)`
  when warm-up ends.

`linear` is the default because it is the one users compare with: HF's `Trainer` and
example scripts use it, and KerasHub ships no warm-up schedule of its own. Step
`t` (0-based, Keras' `optimizer.iterations` before the update) gets `schedule(t)` in
both, as in the references: the first update of a warm-up uses 0.
"""

import keras
from keras import ops

from keras_bert_zoo.errors import UsageError

__all__ = ["LinearWarmupLinearDecay", "BertOriginalWarmupDecay", "SCHEDULES", "make_schedule"]


class _WarmupDecay(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, peak, total_steps, warmup_steps=0):
        if not float(peak) > 0:  # also NaN: a negative rate would climb the loss without a word
            raise UsageError(f"the peak learning rate must be a positive number, got {peak}.")
        if total_steps <= 0:
            raise UsageError(f"total_steps must be positive, got {total_steps}.")
        if not 0 <= warmup_steps <= total_steps:
            raise UsageError(f"warmup_steps={warmup_steps} must be within [0, total_steps={total_steps}].")
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def get_config(self):
        return {"peak": self.peak, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class LinearWarmupLinearDecay(_WarmupDecay):
    """The `linear` schedule (our default), HF's `get_linear_schedule_with_warmup`:
    linear warm-up from 0 to `peak` over `warmup_steps`, then linear decay from `peak`
    at the end of warm-up to 0 at `total_steps` (and 0 after).

    For google-research/bert's own formula see `BertOriginalWarmupDecay`.

    Examples:
    >>> from keras_bert_zoo.training import LinearWarmupLinearDecay
    >>> schedule = LinearWarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    """

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = ops.cast(max(self.warmup_steps, 1), "float32")
        decay_span = ops.cast(max(self.total_steps - self.warmup_steps, 1), "float32")
        rising = self.peak * step / warmup
        falling = self.peak * ops.maximum(0.0, (self.total_steps - step) / decay_span)
        return ops.where(step < self.warmup_steps, rising, falling)


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertOriginalWarmupDecay(_WarmupDecay):
    """The `bert_original` schedule, google-research/bert `optimization.py`:
    `polynomial_decay(peak, step, total_steps, end_learning_rate=0, power=1)`, i.e.
    `peak * (1 - min(step, total) / total)` counted from step 0, replaced by
    `peak * step / warmup_steps` while `step < warmup_steps`.

    Examples:
    >>> from keras_bert_zoo.training import BertOriginalWarmupDecay
    >>> schedule = BertOriginalWarmupDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 9, 10, 55, 100)]
    [0.0, 5e-05, 9e-05, 9e-05, 4.5e-05, 0.0]
    """

    def __call__(self, step):
        step = ops.cast(step, "float32")
        total = float(self.total_steps)
        # = peak * (1 - min(step, total) / total), rounded less near the end in float32.
        decayed = self.peak * (total - ops.minimum(step, total)) / total
        if not self.warmup_steps:
            return decayed
        rising = self.peak * step / float(self.warmup_steps)
        return ops.where(step < self.warmup_steps, rising, decayed)


SCHEDULES = {"linear": LinearWarmupLinearDecay, "bert_original": BertOriginalWarmupDecay}


def make_schedule(name, peak, total_steps, warmup_steps=0):
    """The schedule called `name` (`"linear"` or `"bert_original"`)."""
    if name not in SCHEDULES:
        raise UsageError(f"Unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}.")
    return SCHEDULES[name](peak, total_steps, warmup_steps)
