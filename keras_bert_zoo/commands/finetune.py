"""`bert-zoo finetune TASK`: fine-tune a checkpoint; flags -> `keras_bert_zoo.finetune`.

Each registered task (`keras_bert_zoo.tasks`) is a sub-command with the common recipe
flags below plus its own data-layout flags.

Examples:
    bert-zoo finetune classify --model path/to/all-MiniLM-L6-v2 --glue sst2 \\
        --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv \\
        --max-train-examples 2000 --epochs 1 --out /tmp/sst2
"""

from keras_bert_zoo.commands.common import (
    add_overwrite_argument,
    batch_int,
    count_int,
    flag_values,
    learning_rate_float,
    length_int,
    ratio_float,
    seed_int,
    steps_int,
)
from keras_bert_zoo.commands.training_flags import (
    add_recipe_argument,
    add_run_arguments,
    checkpoint_options,
    distribution_options,
    outputs_epilog,
)
from keras_bert_zoo.flags import positive_int
from keras_bert_zoo.tasks.options import BATCHINGS

__all__ = ["add_arguments", "run"]

_EPILOG = outputs_epilog("metrics.json (dev scores) and training_curve.png")


def add_arguments(parser):
    from keras_bert_zoo.tasks import get_task, task_names

    parser.epilog = _EPILOG
    sub = parser.add_subparsers(dest="task", metavar="TASK", required=True)
    for name in task_names(finetunable=True):
        spec = get_task(name)
        task_parser = sub.add_parser(name, help=spec.description, description=spec.description, epilog=_EPILOG)
        _add_recipe_arguments(task_parser, spec)
        spec.add_arguments(task_parser)


def _add_recipe_arguments(parser, spec):
    parser.add_argument("--model", required=True, help="preset name or checkpoint directory (HF, Google or ours)")
    parser.add_argument("--train", required=True, help="training data file")
    parser.add_argument("--dev", required=True, help="dev data file, scored during training")
    parser.add_argument("--out", required=True, help="output directory (becomes a preset directory)")
    add_overwrite_argument(parser)
    parser.add_argument(
        "--vocab", default=None, help="vocab.txt (or its directory) when --model is a preset name or has none"
    )
    parser.add_argument("--epochs", type=steps_int, default=spec.default_epochs)
    parser.add_argument("--batch-size", type=batch_int, default=32, help="per replica")
    parser.add_argument("--learning-rate", type=learning_rate_float, default=spec.default_learning_rate)
    parser.add_argument("--warmup-ratio", type=ratio_float, default=0.1)
    add_recipe_argument(parser)
    parser.add_argument("--sequence-length", type=length_int, default=spec.default_sequence_length)
    parser.add_argument("--max-train-examples", type=steps_int, default=None)
    parser.add_argument("--max-dev-examples", type=steps_int, default=None)
    parser.add_argument(
        "--eval-every", type=count_int, default=0, help="also score the dev file every N steps (0: once per epoch)"
    )
    parser.add_argument(
        "--select",
        choices=("final", "best"),
        default="final",
        help="final: keep the model at the end of training; best: the best dev evaluation",
    )
    parser.add_argument("--seed", type=seed_int, default=0)
    parser.add_argument(
        "--batching",
        choices=spec.batchings,
        default="auto",
        help="how examples become batches: " + "; ".join(f"{name}: {BATCHINGS[name]}" for name in spec.batchings),
    )
    parser.add_argument(
        "--lora-rank",
        type=positive_int,
        default=None,
        metavar="R",
        help="train LoRA adapters of rank R on the query and value projections (and the head), "
        "the rest frozen; use a higher --learning-rate (2e-3 measured on SST-2)",
    )
    add_run_arguments(parser, "varying-width batches, multi-worker on CPUs, bf16 on a CPU or short runs")


def run(args):
    from keras_bert_zoo.tasks import get_task
    from keras_bert_zoo.tasks.finetuning import finetune

    spec = get_task(args.task)
    _, metrics = finetune(
        spec,
        layout=spec.layout_from_args(args),
        **flag_values(args, "model", "train", "dev", "out", "vocab", "overwrite", "lora_rank"),
        **flag_values(args, "epochs", "batch_size", "learning_rate", "warmup_ratio", "recipe", "sequence_length"),
        **flag_values(args, "max_train_examples", "max_dev_examples", "eval_every", "select", "seed", "batching"),
        **distribution_options(args),
        **checkpoint_options(args),
    )
    print(", ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items())))
    return 0
