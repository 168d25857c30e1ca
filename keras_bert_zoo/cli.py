"""The `bert-zoo` command.

Each verb lives in its own module under `keras_bert_zoo.commands` with two functions:
`add_arguments(parser)` and `run(args) -> int`. Modules are imported only when their
verb runs, so `bert-zoo --help` is fast and a verb's heavy imports stay its own.
"""

import argparse
import contextlib
import importlib
import os
import signal
import sys

from keras_bert_zoo.errors import exit_code_of, one_line
from keras_bert_zoo.locking import output_lock, writes_output
from keras_bert_zoo.quiet import quiet_command_line

__all__ = ["VERBS", "build_parser", "main"]

VERBS = {
    "demo": "the main job on an embedded corpus, end to end",
    "vocab": "learn a WordPiece vocabulary from text files",
    "pretrain": "MLM + NSP pretraining",
    "finetune": "fine-tune a checkpoint for a task (classify, ...)",
    "evaluate": "score a saved model on a data file",
    "predict": "predictions on raw text",
    "export": "SavedModel with raw-string signatures",
    "embed": "sentence embeddings of a text file (one text per line) into a .npy file",
    "evaluate-embeddings": "unsupervised similarity on STS-B: cosine of embeddings vs gold (Spearman)",
    "convert": "any supported checkpoint into our preset format",
}


def _module(verb):
    return importlib.import_module(f"keras_bert_zoo.commands.{verb.replace('-', '_')}")


class _OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error as one line (and exit code 2) instead of the usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


def build_parser(argv):
    parser = _OneLineParser(prog="bert-zoo", description="BERT end to end in Keras 3.")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error (any position)")
    sub = parser.add_subparsers(dest="verb", metavar="VERB")
    wanted = next((a for a in argv if not a.startswith("-")), None)
    for verb, help_text in VERBS.items():
        verb_parser = sub.add_parser(verb, help=help_text, description=help_text)
        if verb == wanted:
            try:
                _module(verb).add_arguments(verb_parser)
            except ModuleNotFoundError as e:
                if e.name != f"keras_bert_zoo.commands.{verb.replace('-', '_')}":
                    raise
                parser.error(f"'{verb}' is not available in this version.")
    return parser


class _Terminated(KeyboardInterrupt):
    """SIGTERM (a scheduler, `kill`, a container stop) raised as an interrupt, so the same
    clean-up runs as for Ctrl-C: staging directories removed, `--out` left as it was."""

    exit_code = 128 + signal.SIGTERM  # 143, as a shell reports a process ended by SIGTERM


@contextlib.contextmanager
def _sigterm_as_interrupt():
    def terminate(signum, frame):
        raise _Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _interrupted_message(verb, error):
    """The one line for Ctrl-C / SIGTERM: what stopped the run and where rerunning resumes from."""
    what = "terminated (SIGTERM)" if isinstance(error, _Terminated) else "interrupted"
    # Only a training run has checkpoints; importing training/ here would load TensorFlow.
    checkpointing = sys.modules.get("keras_bert_zoo.training.checkpointing")
    point = checkpointing.resume_point() if checkpointing else None
    if point and os.path.isdir(point):
        return f"bert-zoo {verb}: {what}; --out was left as it was. Rerun the same command to resume from {point}."
    return f"bert-zoo {verb}: {what}; outputs were left as they were."


def main(argv=None):
    if argv is None:  # run as a command (not called from Python): filter TensorFlow's chatter
        quiet_command_line()
    argv = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in argv
    argv = [a for a in argv if a != "--debug"]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    del args.debug  # taken from argv above, so it works in any position
    if not args.verb:
        parser.print_help()
        return 2
    try:
        # One writer per --out for every verb that writes one (see keras_bert_zoo.locking).
        out = getattr(args, "out", None) if writes_output(getattr(args, "strategy", "default")) else None
        with _sigterm_as_interrupt(), output_lock(out):
            # The parser was built without TensorFlow; the verb sees the package as a script does.
            importlib.import_module("keras_bert_zoo").import_all()
            return int(_module(args.verb).run(args) or 0)
    except KeyboardInterrupt as e:
        print(_interrupted_message(args.verb, e), file=sys.stderr)
        return getattr(e, "exit_code", 130)  # 130 = 128 + SIGINT, as a shell reports Ctrl-C
    except Exception as e:
        code = exit_code_of(e)
        if code is None or debug:  # a bug (or asked for): the traceback is the report
            raise
        # Our errors name the problem and the fix; a traceback would bury that.
        print(f"bert-zoo {args.verb}: error: {one_line(e)}", file=sys.stderr)
        return code


if __name__ == "__main__":
    sys.exit(main())
