"""Flags several verbs share."""


def add_distribution_arguments(parser):
    """`--strategy`, `--tpu` and `--mixed-precision`, shared by the training verbs."""
    from keras_bert_zoo.training.strategies import PRECISIONS, STRATEGIES

    parser.add_argument("--strategy", choices=STRATEGIES, default="default",
                        help="tf.distribute strategy; multi_worker reads TF_CONFIG")
    parser.add_argument("--tpu", default=None, help="TPU address for --strategy tpu ('local' on a TPU VM)")
    parser.add_argument("--mixed-precision", choices=tuple(PRECISIONS), default="none",
                        help="bf16 (CPU/TPU/GPU) or fp16 (GPU, with loss scaling)")


def jit_flag(value):
    """`--jit-compile auto|true|false` as `compile(jit_compile=...)` takes it."""
    return {"auto": "auto", "true": True, "false": False}[value]
