"""`bert-zoo predict --model DIR TEXT...`: the saved task model's answers for raw text.

Classifiers print labels and probabilities (sentence pairs as one argument, the two
sentences separated by a tab or by ` ||| `), taggers entity spans, pretrained models the
top tokens at each `[MASK]`.
"""

import json


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="directory written by `bert-zoo finetune` or `pretrain`")
    parser.add_argument("texts", nargs="+", metavar="TEXT",
                        help="raw text; sentence pairs as 'A ||| B' (or tab-separated)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per input")


def run(args):
    from keras_bert_zoo.tasks import task_of_model_dir

    spec = task_of_model_dir(args.model, "predict")
    # Arguments that are not valid UTF-8 reach Python as lone surrogates; they become U+FFFD,
    # as invalid bytes do everywhere else in the tokenizer.
    texts = [t.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for t in args.texts]
    for row in spec.predict(spec.load_model(args.model), texts):
        print(json.dumps(row) if args.json else spec.format_prediction(row))
    return 0
