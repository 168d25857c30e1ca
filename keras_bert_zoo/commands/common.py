"""Flags several verbs share."""


def add_distribution_arguments(parser):
    """`--strategy`, `--tpu` and `--mixed-precision`, shared by the training verbs."""
    from keras_bert_zoo.training.strategies import PRECISIONS, STRATEGIES

    parser.add_argument("--strategy", choices=STRATEGIES, default="default",
                        help="tf.distribute strategy; multi_worker reads TF_CONFIG")
    parser.add_argument("--tpu", default=None, help="TPU address for --strategy tpu ('local' on a TPU VM)")
    parser.add_argument("--replicas", type=int, default=None,
                        help="--strategy mirrored: use N local devices (GPUs; without GPUs the CPU is split "
                             "into N logical devices)")
    parser.add_argument("--check-tpu-compat", action="store_true",
                        help="dry run: check the input has static shapes and every step compiles with XLA "
                             "(jit_compile=True), as a TPU needs; trains nothing, writes nothing")
    parser.add_argument("--mixed-precision", choices=tuple(PRECISIONS), default="none",
                        help="bf16 (CPU/TPU/GPU) or fp16 (GPU, with loss scaling)")


def jit_flag(value):
    """`--jit-compile auto|true|false` as `compile(jit_compile=...)` takes it."""
    return {"auto": "auto", "true": True, "false": False}[value]


# --- numeric flags: checked by the parser, so a bad value is a usage error (exit code 2) ---
# The upper bounds catch typos (an extra digit) long before they exhaust memory or time.
MAX_STEPS = 10**9
MAX_BATCH = 65_536
MAX_LENGTH = 8_192
MAX_VOCABULARY = 1_000_000


def int_in(low, high):
    """An argparse `type`: an int within [low, high]."""
    import argparse

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; use {low} to {high:,}")
        return value

    parse.__name__ = "integer"
    return parse


def float_in(low, high, low_open=True):
    """An argparse `type`: a finite float within (low, high] (or [low, high])."""
    import argparse
    import math

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"{text} is out of range; use a number in {bracket}{low:g}, {high:g}]")
        return value

    parse.__name__ = "number"
    return parse


positive_int = int_in(1, MAX_STEPS)
steps_int = int_in(1, MAX_STEPS)
count_int = int_in(0, MAX_STEPS)
batch_int = int_in(1, MAX_BATCH)
length_int = int_in(8, MAX_LENGTH)
learning_rate_float = float_in(0.0, 1.0)
ratio_float = float_in(0.0, 1.0, low_open=False)


def add_overwrite_argument(parser, what="--out"):
    """`--overwrite`: replace an existing output, once the new one is complete."""
    parser.add_argument("--overwrite", action="store_true",
                        help=f"replace an existing {what} (only once the new output is complete)")


def add_checkpoint_arguments(parser):
    """`--checkpoint-every`, `--no-resume` and `--deterministic`, shared by the training verbs."""
    parser.add_argument("--checkpoint-every", type=count_int, default=0,
                        help="also write OUT/checkpoints/ every N steps (always at each epoch end); rerunning "
                             "the same command resumes from the newest")
    parser.add_argument("--no-resume", action="store_true", help="delete OUT/checkpoints/ and start over")
    parser.add_argument("--deterministic", action="store_true",
                        help="TensorFlow op determinism: bit-identical runs (and resumed runs)")


def checkpoint_options(args):
    """The `finetune`/`pretrain` keywords of the flags above."""
    return {"checkpoint_every": args.checkpoint_every, "resume": not args.no_resume,
            "deterministic": args.deterministic}
