"""Reads and writes the safetensors format with numpy alone.

The format is an 8-byte little-endian header length, a JSON header
(`{name: {"dtype", "shape", "data_offsets"}}`) and raw little-endian tensor bytes.
Reading it needs no code execution, unlike pickled `pytorch_model.bin` files, which
this package refuses to open.
"""

import json
import os
import struct

import ml_dtypes
import numpy as np

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


class SafetensorsError(ValueError):
    pass


def read_safetensors(path):
    """Returns `{name: np.ndarray}` for every tensor of a `.safetensors` file.

    Arrays are read-only views of a memory map, so a large file costs no copy
    until a tensor is used.
    """
    size = os.path.getsize(path)
    if size < 8:
        raise SafetensorsError(f"{path} is not a safetensors file: it is {size} bytes long.")
    data = np.memmap(path, dtype=np.uint8, mode="r")
    (header_len,) = struct.unpack("<Q", data[:8].tobytes())
    if header_len > data.size - 8:
        raise SafetensorsError(
            f"{path} is not a safetensors file (its header claims {header_len} bytes, "
            f"the file has {data.size})."
        )
    try:
        header = json.loads(data[8 : 8 + header_len].tobytes())
    except ValueError as e:
        raise SafetensorsError(f"{path} has an unreadable safetensors header: {e}") from None
    body = data[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _DTYPES:
            raise SafetensorsError(f"{path}: tensor {name!r} has unsupported dtype {info['dtype']}.")
        start, end = info["data_offsets"]
        dtype = np.dtype(_DTYPES[info["dtype"]])
        shape = tuple(info["shape"])
        if end - start != int(np.prod(shape, dtype=np.int64)) * dtype.itemsize or end > body.size:
            raise SafetensorsError(f"{path}: tensor {name!r} has inconsistent offsets (file truncated?).")
        tensors[name] = body[start:end].view(dtype).reshape(shape)
    return tensors


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
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for array in arrays:
            f.write(array.tobytes())
    os.replace(tmp, path)
