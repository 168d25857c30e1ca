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
    """`total_steps=None` leaves the length to the first `fit` of a task model
    (`size(total_steps)`), which counts its own batches: length-grouped batches are more
    than `ceil(examples / batch)` (SST-2: 629 against 625), and a schedule sized by that
    formula reached 0 before the last steps. `warmup_ratio` then gives the warm-up."""

    def __init__(self, peak, total_steps, warmup_steps=0, warmup_ratio=None):
        if not float(peak) > 0:  # also NaN: a negative rate would climb the loss without a word
            raise UsageError(f"the peak learning rate must be a positive number, got {peak}.")
        if warmup_ratio is not None and not 0 <= warmup_ratio <= 1:
            raise UsageError(f"warmup_ratio={warmup_ratio} must be within [0, 1].")
        self.peak = float(peak)
        self.warmup_ratio = None if warmup_ratio is None else float(warmup_ratio)
        self.total_steps, self.warmup_steps = None, int(warmup_steps or 0)
        if total_steps is not None:
            self.size(total_steps, warmup_steps if self.warmup_ratio is None else None)

    @property
    def sized(self):
        """Whether the schedule knows its length (False: the next `fit` sizes it)."""
        return self.total_steps is not None

    def size(self, total_steps, warmup_steps=None):
        """Sets the run's length; `warmup_steps=None` takes `round(warmup_ratio * total_steps)`
        (the warm-up given at construction without a ratio)."""
        if isinstance(total_steps, bool) or int(total_steps) != total_steps or total_steps <= 0:
            raise UsageError(f"total_steps must be a positive int, got {total_steps}.")
        if warmup_steps is None:
            warmup_steps = (
                self.warmup_steps if self.warmup_ratio is None else int(round(self.warmup_ratio * total_steps))
            )
        if not 0 <= warmup_steps <= total_steps:
            raise UsageError(f"warmup_steps={warmup_steps} must be within [0, total_steps={total_steps}].")
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def _check_sized(self):
        if self.total_steps is None:
            raise UsageError(
                "this learning-rate schedule has no total_steps yet: the first fit() of a task model "
                "counts its batches and sets it; elsewhere give create_optimizer total_steps= or "
                "dataset=."
            )

    def get_config(self):
        return {
            "peak": self.peak,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
            "warmup_ratio": self.warmup_ratio,
        }


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
        self._check_sized()
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
        self._check_sized()
        step = ops.cast(step, "float32")
        total = float(self.total_steps)
        # = peak * (1 - min(step, total) / total), rounded less near the end in float32.
        decayed = self.peak * (total - ops.minimum(step, total)) / total
        if not self.warmup_steps:
            return decayed
        rising = self.peak * step / float(self.warmup_steps)
        return ops.where(step < self.warmup_steps, rising, decayed)


SCHEDULES = {"linear": LinearWarmupLinearDecay, "bert_original": BertOriginalWarmupDecay}


def make_schedule(name, peak, total_steps, warmup_steps=0, warmup_ratio=None):
    """The schedule called `name` (`"linear"` or `"bert_original"`); `total_steps=None`:
    sized by the first `fit` (see `_WarmupDecay`), warm-up `warmup_ratio` of it."""
    if name not in SCHEDULES:
        raise UsageError(f"Unknown schedule {name!r}; choose one of {', '.join(SCHEDULES)}.")
    return SCHEDULES[name](peak, total_steps, warmup_steps, warmup_ratio=warmup_ratio)
