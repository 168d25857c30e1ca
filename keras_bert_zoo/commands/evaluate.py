"""`bert-zoo evaluate --model DIR --data F... [--out metrics.json]`: score a saved task model.

The model directory remembers which task it is (`config.json["keras_bert_zoo"]["task"]`)
and, for fine-tuned models, the data layout and label names it was trained on; the
data file must have that layout. Each task registers its scorer in `EVALUATORS`.
"""

import json

from keras_bert_zoo.commands.common import saved_task, setup_logging, write_metrics

# task class name -> "module:function" taking (model_dir, data_paths, out_path) and
# returning the metrics dict. New tasks (BertTagger, BertSpanQA) add one line here.
EVALUATORS = {
    "BertPretrainer": "keras_bert_zoo.commands.pretrain:evaluate_pretrainer",
    "BertClassifier": "keras_bert_zoo.commands.evaluate:evaluate_classifier",
}


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="directory written by finetune/pretrain")
    parser.add_argument("--data", required=True, nargs="+", help="data file(s) in the layout the model was trained on")
    parser.add_argument("--out", default=None, help="metrics.json path (default: print only)")
    parser.add_argument("--batch-size", type=int, default=64)


def model_task(model_dir):
    """The task class name saved in a model directory, with a clear error otherwise."""
    return saved_task(model_dir, EVALUATORS, "evaluate")


def _resolve(target):
    import importlib

    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


def run(args):
    setup_logging()
    task = model_task(args.model)
    evaluator = _resolve(EVALUATORS[task])
    if task == "BertClassifier":
        metrics = evaluator(args.model, args.data, args.out, batch_size=args.batch_size)
    else:
        metrics = evaluator(args.model, args.data, args.out)
    print(json.dumps(metrics, indent=2, sort_keys=True))
    return 0


def evaluate_classifier(model_dir, data_paths, out_path=None, batch_size=64):
    """Scores a fine-tuned `BertClassifier` on data files of its training layout."""
    import numpy as np

    from keras_bert_zoo.commands.finetune import score
    from keras_bert_zoo.models.classifier import BertClassifier
    from keras_bert_zoo.preprocessing.task_data import DataFormat, Examples, make_dataset, read_examples

    model = BertClassifier.from_preset(model_dir)
    if model.preprocessor is None:
        raise ValueError(f"{model_dir} has no vocab.txt, so raw text cannot be tokenized; "
                         "evaluate a directory written by `bert-zoo finetune classify`.")
    if not model.data_format:
        raise ValueError(f"{model_dir} does not record the data layout it was trained on; "
                         "evaluate a directory written by `bert-zoo finetune classify`.")
    fmt = DataFormat.from_dict(model.data_format)
    # The layout holds the file's label values (e.g. "0"/"1"); the model may show other names.
    parts = [read_examples(p, fmt, label_names=fmt.label_names or model.label_names) for p in data_paths]
    examples = Examples(texts=tuple(sum((list(e.texts[i]) for e in parts), []) for i in range(len(fmt.text_columns))),
                        labels=np.concatenate([e.labels for e in parts]), label_names=model.label_names)
    ds = make_dataset(examples, model.preprocessor, batch_size, with_labels=False)
    metrics, _ = score(model, ds, examples.labels)
    metrics["examples"] = len(examples)
    if out_path:
        write_metrics(metrics, out_path)
    return metrics
