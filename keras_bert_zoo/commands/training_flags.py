"""Flags the training verbs (`finetune`, `pretrain`) share, and the job keywords they become."""

from keras_bert_zoo.commands.common import count_int, int_in
from keras_bert_zoo.flags import PRECISIONS, STRATEGIES

__all__ = [
    "outputs_epilog",
    "add_recipe_argument",
    "jit_flag",
    "distribution_options",
    "checkpoint_options",
    "add_run_arguments",
]


def outputs_epilog(files):
    """The `--help` epilog of the training verbs: what `--out` receives and the cache beside it."""
    return (
        f"outputs: --out becomes a preset directory (config.json, model.safetensors, vocab.txt) with {files}; "
        "while training it holds checkpoints/ (rerunning the same command resumes). The XLA choice of "
        "--jit-compile auto is remembered per machine in ~/.cache/keras_bert_zoo/jit_choices.json "
        "(BERT_ZOO_JIT_CACHE=PATH moves it, =off times every run). See docs/outputs.md."
    )


def add_recipe_argument(parser):
    """`--recipe`: the optimizer recipe (`keras_bert_zoo.training.create_optimizer`)."""
    parser.add_argument(
        "--recipe",
        choices=("linear", "bert_original"),
        default="linear",
        help="optimizer recipe: linear = HF's AdamW and warm-up/decay schedule; "
        "bert_original = google-research/bert's (no Adam bias correction)",
    )


def _add_jit_argument(parser, no_xla):
    """`--jit-compile auto|true|false`; `no_xla`: where the verb's "auto" rule takes no XLA."""
    parser.add_argument(
        "--jit-compile",
        choices=("auto", "true", "false"),
        default="auto",
        help=f"XLA compilation of the train step; auto: no XLA for {no_xla}, else the faster of both timed on "
        "the first batch (see docs/scaling.md)",
    )


def jit_flag(value):
    """`--jit-compile auto|true|false` as `compile(jit_compile=...)` takes it."""
    return {"auto": "auto", "true": True, "false": False}[value]


def _add_distribution_arguments(parser):
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


def distribution_options(args):
    """The `finetune`/`pretrain` keywords of `_add_distribution_arguments`' flags and `--jit-compile`."""
    return {
        "strategy": args.strategy,
        "tpu": args.tpu,
        "replicas": args.replicas,
        "check_tpu_compat": args.check_tpu_compat,
        "mixed_precision": args.mixed_precision,
        "jit_compile": jit_flag(args.jit_compile),
    }


def _add_checkpoint_arguments(parser):
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


def add_run_arguments(parser, no_xla):
    """How a training job runs: `--jit-compile` (`no_xla` as in `_add_jit_argument`), the distribution
    and the checkpoint flags."""
    _add_jit_argument(parser, no_xla)
    _add_distribution_arguments(parser)
    _add_checkpoint_arguments(parser)
