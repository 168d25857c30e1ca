"""`bert-zoo predict --model DIR TEXT...`: label names and probabilities for raw text.

For sentence-pair models, give each pair as one argument with the two sentences
separated by a tab or by ` ||| `.
"""

import json

from keras_bert_zoo.commands.common import setup_logging

PAIR_SEPARATORS = ("\t", " ||| ")


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="directory written by `bert-zoo finetune`")
    parser.add_argument("texts", nargs="+", metavar="TEXT",
                        help="text to classify; pairs as 'A ||| B' (or tab-separated)")
    parser.add_argument("--json", action="store_true", help="print one JSON object per input")


def _split_pair(text):
    for sep in PAIR_SEPARATORS:
        if sep in text:
            a, b = text.split(sep, 1)
            return a.strip(), b.strip()
    raise ValueError(f"this model classifies sentence pairs; write {text!r} as 'first sentence ||| second sentence'.")


def run(args):
    setup_logging()
    from keras_bert_zoo.commands.evaluate import model_task

    task = model_task(args.model)
    if task != "BertClassifier":
        raise ValueError(f"predict handles fine-tuned classifiers; {args.model} holds a {task}.")
    from keras_bert_zoo.models.classifier import BertClassifier

    model = BertClassifier.from_preset(args.model)
    if model.preprocessor is None:
        raise ValueError(f"{args.model} has no vocab.txt, so raw text cannot be tokenized.")
    pairs = len((model.data_format or {}).get("text_columns", [None])) == 2
    inputs = [_split_pair(t) for t in args.texts] if pairs else list(args.texts)
    labels, probs = model.predict_labels(inputs, verbose=0)
    names = model.label_names or [str(i) for i in range(model.num_classes)]
    for text, label, row in zip(args.texts, labels, probs):
        scores = {n: round(float(p), 4) for n, p in zip(names, row)}
        if args.json:
            print(json.dumps({"text": text, "label": label, "probabilities": scores}))
        else:
            shown = "  ".join(f"{n}={p:.3f}" for n, p in scores.items())
            print(f"{label}\t{shown}\t{text}")
    return 0
