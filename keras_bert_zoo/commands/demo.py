"""`bert-zoo demo`: the main job end to end on Python's documentation text.

Learns a WordPiece vocabulary, pretrains a small BERT (MLM + NSP), fine-tunes it to
tell which documentation chapter a paragraph comes from, exports a SavedModel that
takes raw strings, reloads it and answers new sentences. See
`keras_bert_zoo.demo.pipeline`.

Examples:
    bert-zoo demo                          # full budget, < 10 minutes on 2 CPU cores
    bert-zoo demo --budget small --out /tmp/demo   # CI: about 2 minutes
"""

from keras_bert_zoo.flags import seed_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    parser.add_argument("--out", default="bert_zoo_demo", help="output directory (default ./bert_zoo_demo)")
    parser.add_argument(
        "--budget",
        choices=("small", "full"),
        default="full",
        help="small: reduced CI run (~2 min); full: the README's run (< 10 min on 2 cores; on a machine "
        "too slow for it, scaled down to fit, as it prints)",
    )
    parser.add_argument("--seed", type=seed_int, default=0)


def run(args):
    from keras_bert_zoo.demo.pipeline import run_demo

    run_demo(out=args.out, budget=args.budget, seed=args.seed)
    return 0
