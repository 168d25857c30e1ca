"""`LoraDense`: Keras' `Dense`, whose LoRA adapters are saved as they are.

Keras' `Dense.enable_lora(rank)` adds `lora_kernel_a` `[in, rank]` and `lora_kernel_b`
`[rank, out]` and freezes the kernel; the layer computes `x @ (kernel + alpha / rank *
a @ b) + bias`. When it saves (`.keras`, `save_weights`), Keras' `Dense` writes the
*merged* kernel and, on loading, sets both adapters to zero. A reloaded model then
predicts the same, but its adapters can no longer learn (with `a` and `b` both zero,
each one's gradient is zero), and resuming a LoRA run from a checkpoint would restart it
from a merged model. This subclass saves the frozen kernel, the bias and the two
adapters unmerged, so a LoRA model reloads as it was: same outputs, same trainable
weights, training continues. Without LoRA it saves and loads exactly as `Dense`.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.models.layers.lora_dense import LoraDense
>>> layer = LoraDense(4)
>>> layer.build((None, 8))
>>> layer.enable_lora(2)
>>> [v.name for v in layer.trainable_weights]
['bias', 'lora_kernel_a', 'lora_kernel_b']
"""

import keras

from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.keras_compat import dense_kernel_variable

__all__ = ["LoraDense"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class LoraDense(keras.layers.Dense):
    """`keras.layers.Dense` that keeps its LoRA adapters apart when saved (see the module)."""

    @property
    def kernel_variable(self):
        """The kernel's own variable (frozen under LoRA); `kernel` is then the merged tensor."""
        return dense_kernel_variable(self)

    def _lora_state(self):
        return [
            v for v in (dense_kernel_variable(self), self.bias, self.lora_kernel_a, self.lora_kernel_b) if v is not None
        ]

    def save_own_variables(self, store):
        if not self.lora_enabled or self.quantization_mode:
            return super().save_own_variables(store)
        for i, variable in enumerate(self._lora_state()):
            store[str(i)] = variable

    def load_own_variables(self, store):
        if not self.lora_enabled or self.quantization_mode:
            return super().load_own_variables(store)
        state = self._lora_state()
        if len(store.keys()) != len(state):
            raise CheckpointError(
                f"layer {self.path!r} has LoRA (rank {self.lora_rank}) and expects {len(state)} saved tensors "
                f"(kernel, bias, lora_kernel_a, lora_kernel_b), the file has {len(store.keys())}: it was saved "
                "from a model with another LoRA setting. Load it into a model built the same way."
            )
        for i, variable in enumerate(state):
            variable.assign(store[str(i)])
