"""The backbone is written in keras.ops only: the same preset gives the same outputs on JAX.

(Every task model on JAX and torch, raw inputs included: `test_backends.py`.)"""

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone
from tests.helpers import run_on_backend

pytest.importorskip("jax")

JAX_SCRIPT = """
from keras_bert_zoo import BertBackbone
inputs = {k: np.array(v, "int32") for k, v in ARGS["inputs"].items()}
out = BertBackbone.from_preset(ARGS["preset"])(inputs)
save(**{k: keras.ops.convert_to_numpy(v) for k, v in out.items()})
"""


def test_backbone_on_jax_matches_tensorflow(tmp_path):
    backbone = BertBackbone(
        vocabulary_size=30, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    backbone.save_to_preset(str(tmp_path / "preset"))
    inputs = {
        "token_ids": [[2, 5, 9, 3, 0, 0], [2, 7, 3, 8, 11, 3], [2, 5, 3, 2, 7, 3]],
        "segment_ids": [[0, 0, 0, 0, 0, 0], [0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]],
        # the last row is packed: two sequences, each attending to itself (preprocessing.packing)
        "padding_mask": [[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 1, 1, 2, 2, 2]],
    }
    jax_out = run_on_backend("jax", JAX_SCRIPT, tmp_path, preset=str(tmp_path / "preset"), inputs=inputs)
    tf_out = backbone({k: np.array(v, "int32") for k, v in inputs.items()})
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(jax_out[key], tf_out[key].numpy(), rtol=1e-5, atol=1e-5)
