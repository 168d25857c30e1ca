"""Reads and writes the safetensors format with numpy alone.

The format is an 8-byte little-endian header length, a JSON header
(`{name: {"dtype", "shape", "data_offsets"}}`) and raw little-endian tensor bytes.
Reading it needs no code execution, unlike pickled `pytorch_model.bin` files, which
this package refuses to open.
"""

import json
import math
import os
import struct

import ml_dtypes
import numpy as np

from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.files import output_file

__all__ = ["SAFE_FILE_FIXES", "SafetensorsError", "read_safetensors", "write_safetensors"]

# How to get a safe file for a repo or directory that holds only `pytorch_model.bin` (many older Hub
# repos, e.g. some of HFL's Chinese models): the Hub's safetensors conversion opens a pull request
# with model.safetensors, which loads as a revision; or transformers converts it once, locally.
SAFE_FILE_FIXES = (
    "Get a safe file: load the Hub's safetensors conversion pull request as a revision "
    "(hf://ORG/NAME@refs/pr/N; the Space safetensors/convert opens one if the repo has none), or convert "
    "once where you trust the file: load it with the transformers class it was saved from (config.json's "
    "architectures, e.g. BertForMaskedLM), save_pretrained(DIR, safe_serialization=True), copy vocab.txt and "
    "tokenizer_config.json beside it, and pass DIR."
)

_DTYPES = {
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
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}


# A header is a few kB per hundred tensors; the safetensors package refuses more than 100 MB.
_MAX_HEADER_BYTES = 100 * 2**20


class SafetensorsError(CheckpointError):
    """A `.safetensors` file that is not valid; the message names the file and the fault."""


def read_safetensors(path):
    """Returns `{name: np.ndarray}` for every tensor of a `.safetensors` file.

    The whole header is validated before any tensor is touched, as the safetensors
    package does: the header length fits the file, the header is a JSON object of
    unique names, each with a known dtype, a shape of non-negative ints and
    `data_offsets` `[start, end]` with `end - start = prod(shape) * itemsize`; sorted
    by offset the tensors tile the data section exactly (no gap, no overlap, nothing
    past the end). Arrays are read-only views of a memory map, so a large file costs
    no copy until a tensor is used.

    Raises:
        SafetensorsError (a `CheckpointError`): naming the file and the first fault.
    """
    path = os.fspath(path)
    size = os.path.getsize(path)
    if size < 8:
        raise SafetensorsError(f"{path} is not a safetensors file: it is {size} bytes long.")
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        if header_len > min(size - 8, _MAX_HEADER_BYTES):
            raise SafetensorsError(
                f"{path} is not a safetensors file, or is truncated: its header claims {header_len} bytes, "
                f"the file has {size}. Download it again."
            )
        raw = f.read(header_len)
    header = _parse_header(raw, path)
    body_size = size - 8 - header_len
    entries = _check_entries(header, body_size, path)
    if not entries:
        return {}
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len, shape=(body_size,))
    return {name: data[start:end].view(dtype).reshape(shape) for name, dtype, shape, start, end in entries}


def _fail(path, message):
    raise SafetensorsError(f"{path}: {message}; the file is damaged or not a safetensors file (download it again).")


def _parse_header(raw, path):
    def unique(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                _fail(path, f"the header names tensor {key!r} twice")
            seen[key] = value
        return seen

    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=unique)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        if isinstance(e, SafetensorsError):
            raise
        raise SafetensorsError(
            f"{path} has an unreadable safetensors header ({e}); the file is damaged or not a safetensors file."
        ) from None
    if not isinstance(header, dict):
        _fail(path, f"the header is a JSON {type(header).__name__}, not an object")
    metadata = header.get("__metadata__", {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        _fail(path, "__metadata__ must map names to strings")
    return header


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _check_entries(header, body_size, path):
    """`[(name, dtype, shape, start, end)]` sorted by offset, every rule of the format checked."""
    entries = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            _fail(path, f"tensor {name!r} needs exactly dtype, shape and data_offsets")
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            _fail(path, f"tensor {name!r} has unsupported dtype {dtype!r} (known: {', '.join(_DTYPES)})")
        if not isinstance(shape, list) or not all(_is_int(d) for d in shape):
            _fail(path, f"tensor {name!r} has shape {shape!r}; a shape is a list of non-negative ints")
        if not isinstance(offsets, list) or len(offsets) != 2 or not all(_is_int(o) for o in offsets):
            _fail(path, f"tensor {name!r} has data_offsets {offsets!r}; expected [start, end]")
        start, end = offsets
        itemsize = np.dtype(_DTYPES[dtype]).itemsize
        expected = math.prod(shape) * itemsize  # Python ints: no overflow on absurd shapes
        if end < start or end - start != expected:
            _fail(
                path,
                f"tensor {name!r} of dtype {dtype} and shape {shape} needs {expected} bytes, "
                f"its data_offsets {offsets} hold {end - start}",
            )
        entries.append((name, np.dtype(_DTYPES[dtype]), tuple(shape), start, end))
    entries.sort(key=lambda e: (e[3], e[4]))
    position = 0
    for name, _, _, start, end in entries:
        if start < position:
            _fail(path, f"tensor {name!r} (bytes {start}-{end}) overlaps the tensor before it")
        if start > position:
            _fail(path, f"bytes {position}-{start} of the data section belong to no tensor")
        position = end
    if position != body_size:
        what = (
            "the tensors end past the end of the file (truncated?)"
            if position > body_size
            else f"the data section has {body_size - position} bytes after the last tensor"
        )
        _fail(path, what)
    return entries


def write_safetensors(tensors, path, metadata=None):
    """Writes `{name: array}` to `path` atomically (a temporary file, then rename)."""
    header = {}
    offset = 0
    arrays = []
    for name, array in tensors.items():
        array = np.ascontiguousarray(array)
        if array.dtype not in _NAMES:
            raise SafetensorsError(f"tensor {name!r} has unsupported dtype {array.dtype}.")
        header[name] = {
            "dtype": _NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + array.nbytes],
        }
        offset += array.nbytes
        arrays.append(array)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    header_bytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    header_bytes += b" " * (-len(header_bytes) % 8)  # body starts 8-byte aligned
    with output_file(path, overwrite=True) as tmp, open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for array in arrays:
            f.write(array.tobytes())
