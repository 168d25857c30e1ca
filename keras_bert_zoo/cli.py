"""The `bert-zoo` command.

Each verb lives in its own module under `keras_bert_zoo.commands` with two functions:
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when their
verb runs, so `bert-zoo --help` is fast and a verb's heavy imports stay its own.
"""

import argparse
import importlib
import sys

from keras_bert_zoo.quiet import quiet_command_line

VERBS = {
    "demo": "the main job on an embedded corpus, end to end",
    "vocab": "learn a WordPiece vocabulary from text files",
    "pretrain": "MLM + NSP pretraining",
    "finetune": "fine-tune a checkpoint for a task (classify, ...)",
    "evaluate": "score a saved model on a data file",
    "predict": "predictions on raw text",
    "export": "SavedModel with raw-string signatures",
    "convert": "any supported checkpoint into our preset format",
}


def _module(verb):
    return importlib.import_module(f"keras_bert_zoo.commands.{verb}")


def build_parser(argv):
    parser = argparse.ArgumentParser(prog="bert-zoo", description="BERT end to end in Keras 3.")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for verb, help_text in VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == wanted:
            try:
                _module(verb).add_arguments(verb_parser)
            except ModuleNotFoundError as e:
                if e.name != f"keras_bert_zoo.commands.{verb}":
                    raise
                parser.error(f"'{verb}' is not available in this version.")
    return parser


def main(argv=None):
    if argv is None:  # run as a command (not called from Python): filter TensorFlow's chatter
        quiet_command_line()
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not args.verb:
        parser.print_help()
        return 2
    try:
        return int(_module(args.verb).run(args) or 0)
    except (ValueError, FileNotFoundError, FloatingPointError) as e:
        # Our errors name the problem and the fix; a traceback would bury that. FloatingPointError:
        # a non-finite training loss (training.loop.NonFiniteLossError).
        print(f"bert-zoo {args.verb}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
