import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_keras_state():
    """Every test starts with the float32 policy and a fresh name scope.

    Without Keras' `gc.collect()` (`free_memory`): a full collection over everything
    TensorFlow, torch and earlier tests left on the heap cost 1-2 s per test late in
    the run, half of the suite's time; Python's own collector still runs.
    """
    keras.config.set_dtype_policy("float32")
    keras.utils.clear_session(free_memory=False)
    yield
    keras.config.set_dtype_policy("float32")


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty offline HF cache (HF_HOME / HF_HUB_CACHE under tmp_path); returns its hub dir."""
    constants = pytest.importorskip("huggingface_hub.constants")
    home = tmp_path / "hf_home"
    cache = home / "hub"
    cache.mkdir(parents=True)
    for name, value in (("HF_HOME", str(home)), ("HF_HUB_CACHE", str(cache)), ("HF_HUB_OFFLINE", "1")):
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(constants, "HF_HOME", str(home))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache
