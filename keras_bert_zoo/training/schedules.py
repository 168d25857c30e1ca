"""Learning-rate schedules."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class LinearWarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """BERT's schedule: linear warm-up from 0 to `peak` over `warmup_steps`, then
    linear decay to 0 at `total_steps` (and 0 after).

    Examples:
    >>> from keras_bert_zoo.training import LinearWarmupLinearDecay
    >>> schedule = LinearWarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 6) for s in (0, 5, 10, 55, 100)]
    [0.0, 5e-05, 0.0001, 5e-05, 0.0]
    """

    def __init__(self, peak, total_steps, warmup_steps=0):
        if total_steps <= 0:
            raise ValueError(f"total_steps must be positive, got {total_steps}.")
        if not 0 <= warmup_steps <= total_steps:
            raise ValueError(f"warmup_steps={warmup_steps} must be within [0, total_steps={total_steps}].")
        self.peak = float(peak)
        self.total_steps = int(total_steps)
        self.warmup_steps = int(warmup_steps)

    def __call__(self, step):
        step = ops.cast(step, "float32")
        warmup = ops.cast(max(self.warmup_steps, 1), "float32")
        decay_span = ops.cast(max(self.total_steps - self.warmup_steps, 1), "float32")
        rising = self.peak * step / warmup
        falling = self.peak * ops.maximum(0.0, (self.total_steps - step) / decay_span)
        return ops.where(step < self.warmup_steps, rising, falling)

    def get_config(self):
        return {"peak": self.peak, "total_steps": self.total_steps, "warmup_steps": self.warmup_steps}
