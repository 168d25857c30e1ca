"""`bert-zoo pretrain`: masked-LM + next-sentence pretraining; flags -> `keras_bert_zoo.pretrain`.

Examples:
    bert-zoo pretrain --corpus ../shared/data/pretrain_text/wikitext-2.valid.tokens.txt \\
        --corpus-format wikitext --vocab-size 8000 --preset bert_mini_uncased \\
        --steps 2000 --batch-size 32 --holdout-every 10 --out /tmp/mini
    bert-zoo evaluate --model /tmp/mini --data held_out.txt
"""

from keras_bert_zoo.commands.common import (
    MAX_VOCABULARY,
    add_overwrite_argument,
    batch_int,
    count_int,
    float_in,
    int_in,
    learning_rate_float,
    length_int,
    seed_int,
    steps_int,
)
from keras_bert_zoo.commands.masking_flags import add_masking_arguments
from keras_bert_zoo.commands.training_flags import (
    add_recipe_argument,
    add_run_arguments,
    checkpoint_options,
    jit_flag,
    outputs_epilog,
)

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    parser.epilog = outputs_epilog(
        "metrics.json, loss_curves.png and logs/ (TensorBoard scalars, written as it "
        "trains: tensorboard --logdir OUT/logs)"
    )
    parser.add_argument(
        "--corpus", nargs="+", required=True, help="text files (or .tfrecord files in the original BERT feature format)"
    )
    parser.add_argument(
        "--corpus-format",
        choices=("bert", "lines", "wikitext"),
        default="bert",
        help="bert: sentence per line, blank line between documents; lines: one document "
        "per line; wikitext: ' = Title = ' starts an article",
    )
    vocab = parser.add_mutually_exclusive_group()
    vocab.add_argument("--vocab", default=None, help="vocab.txt (default: the --model directory's)")
    vocab.add_argument(
        "--vocab-size",
        type=int_in(100, MAX_VOCABULARY),
        default=None,
        help="learn a WordPiece vocabulary of N tokens from the training documents first",
    )
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--preset", default=None, help="architecture name, random init (e.g. bert_mini_uncased)")
    model.add_argument("--model", default=None, help="checkpoint directory to continue pretraining (HF, Google, ours)")
    parser.add_argument("--out", required=True, help="output directory (becomes a preset directory)")
    add_overwrite_argument(parser)
    _add_recipe_arguments(parser)
    add_run_arguments(parser, "multi-worker on CPUs, bf16 on a CPU or runs under 1,000 steps")
    parser.add_argument(
        "--time-budget",
        type=float_in(0.0, 1e9),
        default=None,
        help="stop after this many seconds of training (benchmarks)",
    )


def _add_recipe_arguments(parser):
    """The pretraining recipe: lengths, batch, steps, optimizer, masking, held-out evaluation, seed."""
    parser.add_argument("--sequence-length", type=length_int, default=128)
    parser.add_argument(
        "--max-predictions",
        type=int_in(1, 8192),
        default=None,
        help="masked positions per sequence (default ceil(0.15 * length): 20 at 128, as the original)",
    )
    parser.add_argument("--batch-size", type=batch_int, default=32, help="per replica")
    parser.add_argument("--steps", type=steps_int, default=1000, help="optimizer steps (exactly)")
    parser.add_argument("--learning-rate", type=learning_rate_float, default=1e-4)
    parser.add_argument("--warmup-steps", type=count_int, default=None, help="default: 10%% of --steps")
    add_recipe_argument(parser)
    add_masking_arguments(parser)
    parser.add_argument("--no-lowercase", action="store_true", help="cased vocabulary")
    parser.add_argument(
        "--holdout-every", type=count_int, default=0, help="hold out every N-th document for evaluation (0: none)"
    )
    parser.add_argument(
        "--eval-corpus",
        nargs="+",
        default=None,
        help="held-out documents in their own file(s), same format as --corpus",
    )
    parser.add_argument("--eval-every", type=steps_int, default=200, help="steps between held-out evaluations")
    parser.add_argument("--eval-batches", type=steps_int, default=50, help="held-out batches per evaluation")
    parser.add_argument("--seed", type=seed_int, default=12345)
    parser.add_argument(
        "--input-shards",
        type=int_in(1, 4096),
        default=1,
        help="TFRecord corpora: read the files as N shards, each batch taking rows from all; "
        "under --strategy multi_worker each worker reads only its shards' files",
    )


def run(args):
    from keras_bert_zoo.tasks.pretrainer.job import pretrain

    skip = ("verb", "no_lowercase", "jit_compile", "checkpoint_every", "no_resume", "deterministic")
    options = {k: v for k, v in vars(args).items() if k not in skip}
    _, metrics = pretrain(
        **options, lowercase=not args.no_lowercase, jit_compile=jit_flag(args.jit_compile), **checkpoint_options(args)
    )
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    return 0
