"""Small things every verb needs."""

import json
import os

from keras_bert_zoo.files import write_json


def setup_logging():
    """Quiets TensorFlow's C++ start-up chatter so progress lines stay readable."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def write_metrics(metrics, path):
    """Writes a flat JSON object of floats and ints, atomically."""
    flat = {k: (int(v) if isinstance(v, (bool, int)) else float(v)) for k, v in metrics.items()}
    write_json(path, flat, sort_keys=True)
    return flat


def add_distribution_arguments(parser):
    """`--strategy`, `--tpu` and `--mixed-precision`, shared by the training verbs."""
    from keras_bert_zoo.training.strategies import PRECISIONS, STRATEGIES

    parser.add_argument("--strategy", choices=STRATEGIES, default="default",
                        help="tf.distribute strategy; multi_worker reads TF_CONFIG")
    parser.add_argument("--tpu", default=None, help="TPU address for --strategy tpu ('local' on a TPU VM)")
    parser.add_argument("--mixed-precision", choices=tuple(PRECISIONS), default="none",
                        help="bf16 (CPU/TPU/GPU) or fp16 (GPU, with loss scaling)")


def saved_task(model_dir, handled, verb):
    """The task class name a `finetune`/`pretrain` directory was saved with.

    Raises a ValueError naming the fix when the directory is not one, or holds a task
    that `verb` does not handle (`handled`: the task names it does).
    """
    path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(path):
        raise ValueError(f"--model {model_dir!r} has no config.json; give a directory written by "
                         "`bert-zoo finetune` or `bert-zoo pretrain`.")
    with open(path, encoding="utf-8") as f:
        task = json.load(f).get("keras_bert_zoo", {}).get("task")
    if task not in handled:
        raise ValueError(f"--model {model_dir!r} holds task {task!r}; {verb} handles "
                         f"{sorted(handled)} directories (fine-tune or pretrain one first).")
    return task
