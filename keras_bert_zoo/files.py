"""Atomic file writes: a reader never sees a half-written vocabulary, config or metrics file."""

import json
import os


def write_text(path, text):
    """Writes `text` (UTF-8) to `path` through a temporary file and a rename."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def write_json(path, obj, **dump_kwargs):
    """Writes `obj` as indented JSON to `path`, atomically."""
    write_text(path, json.dumps(obj, indent=2, **dump_kwargs) + "\n")


def write_metrics(metrics, path):
    """Writes a flat JSON object of floats and ints (`metrics.json`), atomically; returns it."""
    flat = {k: (int(v) if isinstance(v, (bool, int)) else float(v)) for k, v in metrics.items()}
    write_json(path, flat, sort_keys=True)
    return flat


def write_npy(path, array):
    """Writes a numpy array as `.npy` to exactly `path` (no suffix added), atomically."""
    import numpy as np

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            np.save(f, array)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
