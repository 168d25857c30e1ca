"""`keras_bert_zoo.hardware`: which precisions this CPU computes natively, and the one warning where not.

The flag sets are /proc/cpuinfo's of the three host kinds we run on (AMD EPYC with AVX512-BF16,
Intel Sapphire Rapids with AMX, an AVX2-only EPYC) and what the kernel calls each feature.
"""

import warnings

import keras
import pytest

from keras_bert_zoo import BertBackbone, hardware

AVX2 = {"fpu", "sse4_2", "avx", "avx2", "fma", "f16c"}
AVX512_BF16 = AVX2 | {"avx512f", "avx512bw", "avx512_vnni", "avx512_bf16"}
AMX = AVX2 | {"avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}
AVX_VNNI_ONLY = AVX2 | {"avx_vnni"}  # Intel Alder Lake: int8 dot products, no bf16


@pytest.mark.parametrize(
    "flags, bf16, int8",
    [(AVX2, False, False), (AVX512_BF16, True, True), (AMX, True, True), (AVX_VNNI_ONLY, False, True)],
)
def test_native_precisions_from_cpu_flags(flags, bf16, int8):
    assert hardware.native_bf16_cpu(flags) is bf16
    assert hardware.native_int8_cpu(flags) is int8
    assert (hardware.precision_warning("bfloat16", flags, accelerator=False) is None) is bf16
    assert (hardware.precision_warning("int8", flags, accelerator=False) is None) is int8


def test_no_warning_for_float32_an_accelerator_or_unknown_flags():
    assert hardware.precision_warning("float32", AVX2, accelerator=False) is None
    assert hardware.precision_warning("bfloat16", AVX2, accelerator=True) is None  # a GPU / TPU computes bf16
    assert hardware.precision_warning("bfloat16", frozenset(), accelerator=False) is None  # no /proc/cpuinfo
    assert "slower than float32" in hardware.precision_warning("bfloat16", AVX2, accelerator=False)
    assert "more slowly than float32" in hardware.precision_warning("int8", AVX2, accelerator=False)


def test_cpu_flags_read_this_machine():
    flags = hardware.cpu_flags()
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        assert ("avx2" in flags) is (" avx2 " in f.read())


@pytest.fixture
def emulated(monkeypatch):
    """This process on an AVX2-only CPU without an accelerator, nothing warned yet."""
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset(AVX2))
    monkeypatch.setattr(hardware, "has_accelerator", lambda: False)
    hardware.forget_warnings()
    yield
    hardware.forget_warnings()


def _tiny_backbone():
    return BertBackbone(
        vocabulary_size=30, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )


def test_a_bf16_model_warns_once_at_the_users_line(emulated):
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _tiny_backbone()
            _tiny_backbone()
    finally:
        keras.config.set_dtype_policy(previous)
    assert len(caught) == 1, [str(w.message) for w in caught]
    assert "no native bfloat16" in str(caught[0].message)
    assert caught[0].filename == __file__  # this test's line, not one inside Keras or the package


def test_quantize_int8_warns_once_and_float32_models_not(emulated):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backbone = _tiny_backbone()
        assert not [w for w in caught if "CPU" in str(w.message)]  # float32: nothing to say
        backbone.quantize("int8")
        _tiny_backbone().quantize("int8")
    said = [w for w in caught if "8-bit dot-product" in str(w.message)]
    assert len(said) == 1 and said[0].filename == __file__
