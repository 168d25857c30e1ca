"""`bert-zoo predict --model DIR TEXT...`: the saved task model's answers for raw input.

Classifiers print labels and probabilities (sentence pairs as one argument, the two
sentences separated by a tab or by ` ||| `), taggers entity spans, pretrained models the
top tokens at each `[MASK]`, multiple-choice models the probability of each choice (one
argument per question: `context ||| choice 1 ||| choice 2 ...`). Tasks may take other
inputs (their own flags, e.g. a question and a passage) or a data file (`--data`).
"""

import argparse
import json

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    from keras_bert_zoo.tasks import get_task, task_names

    parser.add_argument("--model", required=True, help="directory written by `bert-zoo finetune` or `pretrain`")
    parser.add_argument(
        "texts",
        nargs="*",
        metavar="TEXT",
        help="raw text; sentence pairs as 'A ||| B' (or tab-separated); multiple choice as "
        "'context ||| choice 1 ||| choice 2 ...'",
    )
    parser.add_argument("--data", default=None, help="a data file in the model's layout, for tasks that read one")
    parser.add_argument("--json", action="store_true", help="print one JSON object per input")
    for name in task_names():
        try:
            get_task(name).add_predict_arguments(parser)
        except argparse.ArgumentError as e:  # two tasks asking for the same flag share it
            if "conflicting" not in str(e):
                raise


def run(args):
    from keras_bert_zoo.tasks import task_of_model_dir

    spec = task_of_model_dir(args.model, "predict")
    # Arguments that are not valid UTF-8 reach Python as lone surrogates; they become U+FFFD,
    # as invalid bytes do everywhere else in the tokenizer.
    args.texts = [t.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for t in args.texts]
    model = spec.load_model(args.model)
    for row in spec.predict(model, spec.predict_inputs(args, model)):
        print(json.dumps(row) if args.json else spec.format_prediction(row))
    return 0
