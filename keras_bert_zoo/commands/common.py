"""Small things every verb needs."""

import json
import os


def setup_logging():
    """Quiets TensorFlow's C++ start-up chatter so progress lines stay readable."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def write_metrics(metrics, path):
    """Writes a flat JSON object of floats and ints, atomically."""
    flat = {k: (int(v) if isinstance(v, (bool, int)) else float(v)) for k, v in metrics.items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(flat, f, indent=2, sort_keys=True)
    os.replace(tmp, path)
    return flat
