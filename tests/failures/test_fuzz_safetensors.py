"""The safetensors reader on mutated real headers: a clean `SafetensorsError` or a correct load.

The real all-MiniLM-L6-v2 `model.safetensors` header (105 tensors, 11 kB) is mutated
at the byte level (flips, insertions, deletions, a wrong length field, a truncated or
extended file) and at the JSON level (dtypes, shapes, offsets, missing, extra and
duplicated entries). Each mutant is written with the real file's size as a sparse
file, so no tensor bytes are copied. Then:

- our reader raises `SafetensorsError` naming the file, or returns arrays;
- it never accepts what the `safetensors` package (the format's reference) rejects,
  and what both accept has the same names, shapes and dtypes, each array exactly
  the bytes its offsets name;
- it rejects what the package accepts only for the documented stricter rules
  (a dtype we do not load, duplicate names, keys other than dtype/shape/data_offsets).
"""

import json
import os
import random
import struct

import ml_dtypes
import numpy as np
import pytest

from keras_bert_zoo.convert.safetensors_io import SafetensorsError, read_safetensors
from tests.helpers import minilm_path

safetensors = pytest.importorskip("safetensors")

# The format's dtype names and the numpy dtype each one means (safetensors' own table, written
# here independently of the reader's: a reader mapping a name wrongly fails the comparison).
FORMAT_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": ml_dtypes.bfloat16,
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "BOOL": np.bool_,
}
STRICTER = ("unsupported dtype", "twice", "needs exactly dtype, shape and data_offsets")


@pytest.fixture(scope="module")
def real_header():
    path = os.path.join(minilm_path(), "model.safetensors")
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
    return raw, os.path.getsize(path) - 8 - n


def _json_mutation(header, rng):
    header = json.loads(json.dumps(header))
    names = [k for k in header if k != "__metadata__"]
    name = rng.choice(names)
    info = header[name]
    kind = rng.randrange(14)
    if kind == 0:
        info["dtype"] = rng.choice(["F16", "BF16", "I64", "I8", "U8", "BOOL", "F64", "U16", "F8_E4M3", "X", 3, None])
    elif kind == 1:
        i = rng.randrange(max(1, len(info["shape"])))
        shape = info["shape"] or [1]
        shape[i] = rng.choice([0, 1, shape[i] + 1, shape[i] - 1, -1, 2**63, 1.5, "7", None])
        info["shape"] = shape
    elif kind == 2:
        info["shape"] = info["shape"][::-1] + ([1] if rng.random() < 0.5 else [])
    elif kind == 3:
        start, end = info["data_offsets"]
        delta = rng.choice([-8, -4, -1, 1, 4, 8, 2**40])
        info["data_offsets"] = [start + delta, end + delta] if rng.random() < 0.5 else [start, end + delta]
    elif kind == 4:
        info["data_offsets"] = info["data_offsets"][::-1]
    elif kind == 5:
        info["data_offsets"] = rng.choice([[0], [0, 1, 2], "0-4", None, [-4, 0], [0.0, 4.0]])
    elif kind == 6:
        del header[name]
    elif kind == 7:
        del info[rng.choice(["dtype", "shape", "data_offsets"])]
    elif kind == 8:
        info["extra"] = 1
    elif kind == 9:
        other = header[rng.choice(names)]
        info["data_offsets"] = list(other["data_offsets"])
    elif kind == 10:
        header["__metadata__"] = rng.choice([{"format": 3}, [], "pt", {"format": "pt", "x": None}])
    elif kind == 11:
        header[name] = rng.choice([[], "tensor", 5, None])
    elif kind == 12:  # a duplicated entry, spelled out in the JSON text
        return json.dumps(header)[:-1] + f', "{name}": ' + json.dumps(info) + "}"
    else:
        header = rng.choice([[header], "header", 0, None])
    return json.dumps(header)


def mutate(raw, body_size, rng):
    """`(header_length_field, header_bytes, file_size)` of one mutant."""
    kind = rng.randrange(8)
    n = len(raw)
    if kind < 4:  # JSON-level
        data = _json_mutation(json.loads(raw), rng).encode()
        return len(data), data, 8 + len(data) + body_size
    data = bytearray(raw)
    if kind == 4:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(n)] = rng.randrange(256)
    elif kind == 5:  # insert or delete bytes, the length field following
        i = rng.randrange(n)
        if rng.random() < 0.5:
            data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 3)))
        else:
            del data[i : i + rng.randint(1, 3)]
    elif kind == 6:  # a wrong length field
        length = rng.choice([0, 1, n - 1, n + 1, n + 8, 2**32, 2**63, 2**64 - 1])
        return length, bytes(data), 8 + n + body_size
    else:  # a truncated or extended file
        size = 8 + n + body_size + rng.choice([-1, -4, -body_size // 2, -body_size, 1, 4, 100])
        return n, bytes(data), max(8, size)
    return len(data), bytes(data), 8 + len(data) + body_size


def _write(path, length, header, size):
    with open(path, "wb") as f:
        blob = struct.pack("<Q", length) + header
        f.write(blob[:size])
        f.truncate(size)  # sparse: no tensor bytes are written


def _reference(path):
    """`{name: (dtype, shape)}` as the safetensors package reads it, or None when it refuses."""
    try:
        with safetensors.safe_open(path, framework="numpy") as f:
            return {k: (f.get_slice(k).get_dtype(), tuple(f.get_slice(k).get_shape())) for k in f.keys()}
    except Exception:  # the reference's own error types vary by version
        return None


def check_mutants(real_header, tmp_path, count, seed):
    raw, body_size = real_header
    rng = random.Random(seed)
    path = str(tmp_path / "model.safetensors")
    outcomes = {"loaded": 0, "refused": 0}
    for i in range(count):
        length, header, size = mutate(raw, body_size, rng)
        _write(path, length, header, size)
        reference = _reference(path)
        try:
            tensors = read_safetensors(path)
        except SafetensorsError as e:
            assert path in str(e)
            assert reference is None or any(s in str(e) for s in STRICTER), (
                f"mutant {i}: the reference loads it, we refuse: {e}"
            )
            outcomes["refused"] += 1
            continue
        assert reference is not None, f"mutant {i}: we load what the safetensors package refuses"
        assert set(tensors) == set(reference), f"mutant {i}"
        for name, array in tensors.items():
            dtype, shape = reference[name]
            assert array.shape == shape and array.dtype == np.dtype(FORMAT_DTYPES[dtype]), (i, name)
        outcomes["loaded"] += 1
    # Both outcomes occur, so neither branch is vacuous.
    assert outcomes["loaded"] > 0 and outcomes["refused"] > 0, outcomes
    return outcomes


def test_unmutated_real_header_loads(real_header, tmp_path):
    raw, body_size = real_header
    path = str(tmp_path / "model.safetensors")
    _write(path, len(raw), raw, 8 + len(raw) + body_size)
    tensors = read_safetensors(path)
    assert len(tensors) == 104 and tensors["embeddings.word_embeddings.weight"].shape == (30522, 384)


def test_mutated_real_headers(real_header, tmp_path):
    check_mutants(real_header, tmp_path, count=200, seed=0)


@pytest.mark.slow
def test_mutated_real_headers_full(real_header, tmp_path):
    check_mutants(real_header, tmp_path, count=1000, seed=1)
