"""What this machine computes natively: bfloat16 and int8 dot products, read from the CPU's flags.

bf16 and int8 pay only where the hardware has instructions for them (docs/decisions.md, "The
precision rule"): native bfloat16 on CPUs with `avx512_bf16` (AMD Zen 4, Intel Cooper Lake and
later) or `amx_bf16` (Intel Sapphire Rapids and later), and on GPUs and TPUs; int8 dot products
without 16-bit saturation on CPUs with `avx512_vnni`, `avx_vnni` or `amx_int8`. Elsewhere (an
AVX2-only CPU, say) a bfloat16 model runs emulated, slower than float32, and `quantize("int8")`
gains no speed: the library computes the same numbers and says so once, with a warning.

Examples:
>>> from keras_bert_zoo.hardware import cpu_flags, native_bf16_cpu, precision_warning
>>> native_bf16_cpu({"avx2", "avx512f", "avx512_bf16"}), native_bf16_cpu({"avx2", "fma"})
(True, False)
>>> print(precision_warning("bfloat16", flags={"avx2", "fma"}, accelerator=False))  # doctest: +ELLIPSIS
This CPU has no native bfloat16 instructions (neither avx512_bf16 nor amx_bf16): the mixed_bfloat16 ...
>>> precision_warning("int8", flags={"avx2", "avx512_vnni"}) is None
True
"""

import functools
import inspect
import os
import warnings

__all__ = [
    "BF16_FLAGS",
    "INT8_FLAGS",
    "cpu_flags",
    "native_bf16_cpu",
    "native_int8_cpu",
    "has_accelerator",
    "precision_warning",
    "warn_if_emulated",
    "forget_warnings",
]

BF16_FLAGS = ("amx_bf16", "avx512_bf16")
INT8_FLAGS = ("amx_int8", "avx512_vnni", "avx_vnni")


@functools.lru_cache(maxsize=1)
def cpu_flags():
    """The CPU's feature flags from `/proc/cpuinfo` (a frozenset; empty where it cannot be read,
    e.g. off Linux: the checks below then assume nothing is missing and stay quiet)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return frozenset(next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), ()))
    except OSError:
        return frozenset()


def native_bf16_cpu(flags=None):
    """True where the CPU has bfloat16 dot products (`avx512_bf16` or `amx_bf16`)."""
    return bool(set(BF16_FLAGS) & set(cpu_flags() if flags is None else flags))


def native_int8_cpu(flags=None):
    """True where the CPU has 8-bit dot products without 16-bit saturation (AVX512-VNNI, AVX-VNNI
    or AMX-INT8): oneDNN's u8 x s8 kernel is exact and fast there."""
    return bool(set(INT8_FLAGS) & set(cpu_flags() if flags is None else flags))


def has_accelerator():
    """True when Keras' backend sees a GPU or TPU (which compute bfloat16 natively)."""
    import keras

    backend = keras.backend.backend()
    try:
        if backend == "tensorflow":
            import tensorflow as tf

            return any(tf.config.list_logical_devices(kind) for kind in ("GPU", "TPU"))
        if backend == "jax":
            import jax

            return jax.default_backend() != "cpu"
        if backend == "torch":
            import torch

            return torch.cuda.is_available()
    except Exception:  # a device query that fails says nothing either way: assume one, stay quiet
        return True
    return False


def precision_warning(precision, flags=None, accelerator=None):
    """The warning for a model computing in `precision` (`"bfloat16"` or `"int8"`; any other is
    native everywhere) on this machine, or None where the hardware computes it natively, or
    cannot tell (no CPU flags readable)."""
    flags = cpu_flags() if flags is None else flags
    if not flags or precision not in ("bfloat16", "int8"):
        return None
    if precision == "int8":  # `quantize("int8")` runs on the CPU's integer units (TensorFlow's CPU path)
        if native_int8_cpu(flags):
            return None
        return (
            "This CPU has no 8-bit dot-product instructions (neither avx512_vnni, avx_vnni nor amx_int8): an "
            "int8-quantized model computes Keras' int8 numbers here, but more slowly than float32. int8 pays on "
            "CPUs with VNNI or AMX."
        )
    if native_bf16_cpu(flags) or (has_accelerator() if accelerator is None else accelerator):
        return None
    return (
        "This CPU has no native bfloat16 instructions (neither avx512_bf16 nor amx_bf16): the mixed_bfloat16 "
        "policy runs emulated here and is slower than float32. Keep float32 (the default) on this machine; "
        "bf16 pays on CPUs with those instructions, GPUs and TPUs."
    )


_warned = set()


_LIBRARIES = tuple(f"{os.sep}{name}{os.sep}" for name in ("keras_bert_zoo", "keras", "tensorflow"))


def warn_if_emulated(precision):
    """Warns once per process when `precision` runs emulated on this machine (`precision_warning`),
    at the line of the user's code that asked for it."""
    if precision in _warned:
        return
    message = precision_warning(precision)
    if message:
        _warned.add(precision)
        level, frame = 1, inspect.currentframe()
        while frame.f_back is not None and any(part in frame.f_code.co_filename for part in _LIBRARIES):
            frame, level = frame.f_back, level + 1
        warnings.warn(message, UserWarning, stacklevel=level)


def forget_warnings():
    """Lets `warn_if_emulated` warn again (for a notebook after changing the policy, or a test)."""
    _warned.clear()
