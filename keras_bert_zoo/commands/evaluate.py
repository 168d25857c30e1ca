"""`bert-zoo evaluate --model DIR --data F... [--out metrics.json]`: score a saved task model.

The model directory remembers its task (`config.json["keras_bert_zoo"]["task"]`) and,
for fine-tuned models, the data layout and label names it was trained on; the data
file must have that layout. The task's module does the scoring. Files a task produces
besides the metrics (qa: `predictions.json`, `null_odds.json`) are written next to `--out`.
"""

import json
import os

from keras_bert_zoo.commands.common import add_overwrite_argument, batch_int
from keras_bert_zoo.files import check_output, write_json, write_metrics

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="directory written by finetune/pretrain")
    parser.add_argument("--data", required=True, nargs="+", help="data file(s) in the layout the model was trained on")
    parser.add_argument(
        "--out",
        default=None,
        help="metrics.json path (default: print only); task outputs such as predictions.json go in the same directory",
    )
    add_overwrite_argument(parser)
    parser.add_argument("--batch-size", type=batch_int, default=64)


def run(args):
    from keras_bert_zoo.tasks import task_of_model_dir

    if args.out:
        check_output(args.out, args.overwrite, kind="file")  # before the work, not after
    spec = task_of_model_dir(args.model, "evaluate")
    metrics, files = spec.evaluate_outputs(args.model, args.data, batch_size=args.batch_size)
    if args.out:
        folder = os.path.dirname(os.path.abspath(args.out))
        # The task's files beside --out (qa: predictions.json) follow --out's rule: an existing
        # one is replaced only with --overwrite; all are checked before any is written.
        for name in files:
            check_output(os.path.join(folder, name), args.overwrite, kind="file", flag=f"--out's {name}")
        for name, content in files.items():
            write_json(os.path.join(folder, name), content)
        write_metrics(metrics, args.out)  # atomic: a temporary file renamed into place
    elif files:
        print(f"(pass --out DIR/metrics.json to also write {', '.join(sorted(files))})")
    print(json.dumps(metrics, indent=2, sort_keys=True))
    return 0
