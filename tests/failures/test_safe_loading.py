"""Loading untrusted directories runs no code: pickles are refused unopened, `.keras` stays safe."""

import os
import pathlib
import pickle
import re

import keras
import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier
from keras_bert_zoo.errors import CheckpointError, UnsafeFileError

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "keras_bert_zoo"


class Exploit:
    """Unpickling this creates a file."""

    def __init__(self, flag):
        self.flag = flag

    def __reduce__(self):
        return (open, (self.flag, "w"))


@pytest.fixture
def tiny_dir(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    )
    path = tmp_path / "tiny"
    backbone.save_to_preset(str(path))
    return path


@pytest.mark.parametrize("name", ["pytorch_model.bin", "model.pt", "weights.pth", "state.pkl", "model.safetensors"])
@pytest.mark.parametrize("cls", [BertBackbone, BertClassifier])
def test_from_preset_refuses_pickles_unopened(tiny_dir, tmp_path, name, cls):
    """A directory whose only weights are a pickle (or a pickle named model.safetensors)."""
    os.remove(tiny_dir / "model.safetensors")
    flag = tmp_path / "UNPICKLED"
    with open(tiny_dir / name, "wb") as f:
        pickle.dump(Exploit(str(flag)), f, protocol=2 if name.endswith(".bin") else 4)
    with pytest.raises(UnsafeFileError, match="never (loaded|opened)|is a pickle") as info:
        cls.from_preset(str(tiny_dir))
    assert isinstance(info.value, CheckpointError) and isinstance(info.value, ValueError)
    assert name in str(info.value)
    assert not flag.exists(), "the pickle was opened"


def test_torch_zip_named_safetensors_is_refused(tiny_dir, tmp_path):
    torch = pytest.importorskip("torch")
    torch.save({"x": torch.zeros(2)}, str(tiny_dir / "model.safetensors"))
    with pytest.raises(UnsafeFileError, match="is a pickle"):
        BertBackbone.from_preset(str(tiny_dir))


def test_safetensors_beside_a_pickle_loads_the_safetensors(tiny_dir, tmp_path):
    """HF directories often hold both; the pickle is left alone and the weights come from safetensors."""
    flag = tmp_path / "UNPICKLED"
    with open(tiny_dir / "pytorch_model.bin", "wb") as f:
        pickle.dump(Exploit(str(flag)), f)
    expected = BertBackbone.from_preset(str(tiny_dir)).get_weights()
    assert not flag.exists()
    assert all(
        np.array_equal(a, b)
        for a, b in zip(expected, BertBackbone.from_preset(str(tiny_dir)).get_weights(), strict=True)
    )


def test_keras_files_load_in_safe_mode(tmp_path):
    """A `.keras` file with a lambda (arbitrary code) is refused by the default load, which we keep."""
    inputs = keras.Input((2,))
    model = keras.Model(inputs, keras.layers.Lambda(lambda x: x * 2)(inputs))
    path = str(tmp_path / "lambda.keras")
    model.save(path)
    with pytest.raises(ValueError, match="safe_mode"):
        keras.saving.load_model(path)


def test_no_code_path_turns_safety_off():
    """Nothing in the package unpickles or loads `.keras` files unsafely."""
    unsafe = re.compile(
        r"safe_mode\s*=\s*False|allow_pickle\s*=\s*True|pickle\.loads?\(|torch\.load\(|"
        r"joblib\.load|dill\.|enable_unsafe_deserialization"
    )
    offenders = [
        f"{p.relative_to(PACKAGE)}:{i}"
        for p in PACKAGE.rglob("*.py")
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if unsafe.search(line)
    ]
    assert not offenders, offenders
