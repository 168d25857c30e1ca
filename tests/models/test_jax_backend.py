"""The backbone is written in keras.ops only: the same preset gives the same outputs on JAX."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from tests.helpers import REPO_ROOT

pytest.importorskip("jax")

JAX_SCRIPT = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
from keras_bert_zoo import BertBackbone
assert keras.backend.backend() == "jax"
preset, inputs_path = sys.argv[1], sys.argv[2]
inputs = {k: np.array(v, "int32") for k, v in json.load(open(inputs_path)).items()}
out = BertBackbone.from_preset(preset)(inputs)
print(json.dumps({k: np.asarray(v).tolist() for k, v in out.items()}))
"""


def test_backbone_on_jax_matches_tensorflow(tmp_path):
    backbone = BertBackbone(vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=8)
    backbone.save_to_preset(str(tmp_path / "preset"))
    inputs = {"token_ids": [[2, 5, 9, 3, 0, 0], [2, 7, 3, 8, 11, 3], [2, 5, 3, 2, 7, 3]],
              "segment_ids": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]],
              # the last row is packed: two sequences, each attending to itself (preprocessing.packing)
              "padding_mask": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 2, 2, 2]]}
    (tmp_path / "inputs.json").write_text(json.dumps(inputs))
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO_ROOT}
    result = subprocess.run([sys.executable, "-c", JAX_SCRIPT, str(tmp_path / "preset"), str(tmp_path / "inputs.json")],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    jax_out = json.loads(result.stdout.strip().splitlines()[-1])
    tf_out = backbone({k: np.array(v, "int32") for k, v in inputs.items()})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.array(jax_out[key]), tf_out[key].numpy(), rtol=1e-5, atol=1e-5)



RAW_CHOICE_SCRIPT = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
from keras_bert_zoo import BertMultipleChoice
assert keras.backend.backend() == "jax"
preset, questions_path = sys.argv[1], sys.argv[2]
x = tuple(json.load(open(questions_path)))
model = BertMultipleChoice.from_preset(preset)  # its preprocessor from the preset's vocab.txt
model.compile()
scores = model.predict(x, batch_size=2, verbose=0)  # raw inputs: packed pairs (the default)
loss = model.fit(x, [0, 1, 1], batch_size=3, verbose=0, shuffle=False).history["loss"][0]
print(json.dumps({"scores": np.asarray(scores).tolist(), "loss": loss}))
"""


def test_raw_inputs_fit_and_predict_on_jax(tmp_path):
    """The raw-input path (`Task.raw_dataset`, packed choice rows, `fit`) runs on JAX, and the
    scores of a saved model equal TensorFlow's."""
    from keras_bert_zoo import BertMultipleChoice, MultipleChoicePreprocessor
    from tests.helpers import minilm_path

    backbone = BertBackbone(vocabulary_size=30522, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16,
                            max_sequence_length=64, initializer_range=0.5)
    model = BertMultipleChoice(backbone, dropout=0.0, data_layout={"sequence_length": 32},
                               preprocessor=MultipleChoicePreprocessor.from_preset(minilm_path(), sequence_length=32))
    model.save_to_preset(str(tmp_path / "choice"))
    x = (["a quiet film", "the sun rose", "he sat down"],
         [["and it was good", "bad"], ["then it set", "and rained hard all day"], ["and read", "the moon"]])
    (tmp_path / "questions.json").write_text(json.dumps(x))
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": REPO_ROOT}
    result = subprocess.run([sys.executable, "-c", RAW_CHOICE_SCRIPT, str(tmp_path / "choice"),
                             str(tmp_path / "questions.json")], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    jax_out = json.loads(result.stdout.strip().splitlines()[-1])
    tf_scores = model.predict(x, batch_size=2, verbose=0)
    assert np.abs(tf_scores[:, 0] - tf_scores[:, 1]).max() > 1e-4  # the choices score differently
    np.testing.assert_allclose(np.array(jax_out["scores"]), tf_scores, rtol=1e-5, atol=1e-5)
    assert np.isfinite(jax_out["loss"])
