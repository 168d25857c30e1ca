"""Flags several verbs share."""

__all__ = [
    "outputs_epilog",
    "add_distribution_arguments",
    "jit_flag",
    "add_overwrite_argument",
    "add_checkpoint_arguments",
    "checkpoint_options",
    "MAX_VOCABULARY",
    "batch_int",
    "count_int",
    "float_in",
    "int_in",
    "learning_rate_float",
    "length_int",
    "ratio_float",
    "seed_int",
    "steps_int",
]


def outputs_epilog(files):
    """The `--help` epilog of the training verbs: what `--out` receives and the cache beside it."""
    return (
        f"outputs: --out becomes a preset directory (config.json, model.safetensors, vocab.txt) with {files}; "
        "while training it holds checkpoints/ (rerunning the same command resumes). The XLA choice of "
        "--jit-compile auto is remembered per machine in ~/.cache/keras_bert_zoo/jit_choices.json "
        "(BERT_ZOO_JIT_CACHE=PATH moves it, =off times every run). See docs/outputs.md."
    )


def add_distribution_arguments(parser):
    """`--strategy`, `--tpu` and `--mixed-precision`, shared by the training verbs."""
    parser.add_argument(
        "--strategy", choices=STRATEGIES, default="default", help="tf.distribute strategy; multi_worker reads TF_CONFIG"
    )
    parser.add_argument("--tpu", default=None, help="TPU address for --strategy tpu ('local' on a TPU VM)")
    parser.add_argument(
        "--replicas",
        type=int_in(1, 4096),
        default=None,
        help="--strategy mirrored: use N local devices (GPUs; without GPUs the CPU is split into N logical devices)",
    )
    parser.add_argument(
        "--check-tpu-compat",
        action="store_true",
        help="dry run: check the input has static shapes and every step compiles with XLA "
        "(jit_compile=True), as a TPU needs; trains nothing, writes nothing",
    )
    parser.add_argument(
        "--mixed-precision",
        choices=tuple(PRECISIONS),
        default="none",
        help="bf16 (CPU/TPU/GPU) or fp16 (GPU, with loss scaling)",
    )


def jit_flag(value):
    """`--jit-compile auto|true|false` as `compile(jit_compile=...)` takes it."""
    return {"auto": "auto", "true": True, "false": False}[value]


# Numeric flag types (ranges carried by the type): `keras_bert_zoo.flags`, shared with the tasks' flags.
from keras_bert_zoo.flags import (
    MAX_BATCH,
    MAX_LENGTH,
    MAX_STEPS,
    MAX_VOCABULARY,
    PRECISIONS,  # noqa: E402,F401
    STRATEGIES,
    batch_int,
    count_int,
    float_in,
    int_in,
    learning_rate_float,
    length_int,
    positive_int,
    ratio_float,
    seed_int,
    steps_int,
)


def add_overwrite_argument(parser, what="--out"):
    """`--overwrite`: replace an existing output, once the new one is complete."""
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace an existing {what} (only once the new output is complete)"
    )


def add_checkpoint_arguments(parser):
    """`--checkpoint-every`, `--no-resume` and `--deterministic`, shared by the training verbs."""
    parser.add_argument(
        "--checkpoint-every",
        type=count_int,
        default=0,
        help="also write OUT/checkpoints/ every N steps (always at each epoch end); rerunning "
        "the same command resumes from the newest",
    )
    parser.add_argument("--no-resume", action="store_true", help="delete OUT/checkpoints/ and start over")
    parser.add_argument(
        "--deterministic", action="store_true", help="TensorFlow op determinism: bit-identical runs (and resumed runs)"
    )


def checkpoint_options(args):
    """The `finetune`/`pretrain` keywords of the flags above."""
    return {
        "checkpoint_every": args.checkpoint_every,
        "resume": not args.no_resume,
        "deterministic": args.deterministic,
    }
