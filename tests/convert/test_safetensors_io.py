import ml_dtypes
import numpy as np
import pytest

from keras_bert_zoo.convert.safetensors_io import SafetensorsError, read_safetensors, write_safetensors

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def sample_tensors():
    rng = np.random.default_rng(0)
    return {
        "a.weight": rng.standard_normal((3, 5)).astype(np.float32),
        "b.bias": rng.standard_normal(7).astype(np.float16),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "scalar": np.array(1.5, dtype=np.float32),
    }


def test_our_files_read_by_the_safetensors_package(tmp_path):
    tensors = sample_tensors()
    write_safetensors(tensors, tmp_path / "x.safetensors")
    loaded = safetensors_numpy.load_file(str(tmp_path / "x.safetensors"))
    assert set(loaded) == set(tensors)
    for k in tensors:
        np.testing.assert_array_equal(loaded[k], tensors[k])
        assert loaded[k].dtype == tensors[k].dtype


def test_safetensors_package_files_read_by_us(tmp_path):
    tensors = sample_tensors()
    safetensors_numpy.save_file(tensors, str(tmp_path / "y.safetensors"))
    loaded = read_safetensors(tmp_path / "y.safetensors")
    for k in tensors:
        np.testing.assert_array_equal(loaded[k], tensors[k])


def test_bfloat16_round_trip(tmp_path):
    x = np.linspace(-2, 2, 10).astype(ml_dtypes.bfloat16)
    write_safetensors({"x": x}, tmp_path / "bf.safetensors")
    np.testing.assert_array_equal(read_safetensors(tmp_path / "bf.safetensors")["x"], x)


@pytest.mark.parametrize(
    "content", [b"", b"\x00" * 4, b"\xff" * 8 + b"{}", b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!"]
)
def test_corrupt_files_give_a_clear_error(tmp_path, content):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(content)
    with pytest.raises(SafetensorsError, match="bad.safetensors"):
        read_safetensors(path)


def test_truncated_file_is_detected(tmp_path):
    write_safetensors(sample_tensors(), tmp_path / "t.safetensors")
    data = (tmp_path / "t.safetensors").read_bytes()
    (tmp_path / "t.safetensors").write_bytes(data[:-10])
    with pytest.raises(SafetensorsError, match="truncated"):
        read_safetensors(tmp_path / "t.safetensors")
