"""`bert-zoo export --model DIR --out PATH`: a SavedModel that takes raw strings.

`DIR` is a directory written by `bert-zoo finetune` (classifier) or `bert-zoo
pretrain` (fill-mask); it must hold its `vocab.txt`. Serve `PATH` with TF Serving or
load it with `tf.saved_model.load` after `import tensorflow_text`.

Examples:
    bert-zoo export --model /tmp/sst2 --out /tmp/sst2_served
    saved_model_cli show --dir /tmp/sst2_served --tag_set serve --signature_def serving_default
"""

import os

from keras_bert_zoo.commands.common import saved_task, setup_logging

# config.json's "keras_bert_zoo.task" -> "module:class" of the task model.
TASK_CLASSES = {
    "BertClassifier": "keras_bert_zoo.models.classifier:BertClassifier",
    "BertPretrainer": "keras_bert_zoo.models.pretrainer:BertPretrainer",
}


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="directory written by `bert-zoo finetune` or `pretrain`")
    parser.add_argument("--out", required=True, help="SavedModel directory to write (replaced if it exists)")
    parser.add_argument("--top-k", type=int, default=5, help="fill-mask (pretrainer): tokens per [MASK]")
    parser.add_argument("--max-masks", type=int, default=8, help="fill-mask (pretrainer): [MASK]s per text")


def load_task_model(model_dir):
    """The task model saved in `model_dir`, with its preprocessor; clear errors otherwise."""
    import importlib

    task = saved_task(model_dir, TASK_CLASSES, "export")
    if not os.path.isfile(os.path.join(model_dir, "vocab.txt")):
        raise ValueError(f"--model {model_dir!r} has no vocab.txt, so the SavedModel could not take raw "
                         "text; copy the vocabulary the model was trained with into it.")
    module, name = TASK_CLASSES[task].split(":")
    cls = getattr(importlib.import_module(module), name)
    if task == "BertClassifier":
        return cls.from_preset(model_dir)
    from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

    return cls.from_preset(model_dir, preprocessor=BertPreprocessor.from_preset(model_dir))


def signature_summary(path):
    """`{signature: ([inputs], [outputs])}` of a SavedModel, read back with TensorFlow."""
    import tensorflow as tf

    loaded = tf.saved_model.load(path)
    summary = {}
    for name, fn in loaded.signatures.items():
        summary[name] = (sorted(fn.structured_input_signature[1]), sorted(fn.structured_outputs))
    return summary


def run(args):
    setup_logging()
    import time

    from keras_bert_zoo.export.saved_model import export_saved_model

    model = load_task_model(args.model)
    start = time.perf_counter()
    export_saved_model(model, args.out, top_k=args.top_k, max_masks=args.max_masks)
    print(f"wrote {args.out} ({type(model).__name__}, {time.perf_counter() - start:.1f} s)")
    for name, (inputs, outputs) in sorted(signature_summary(args.out).items()):
        print(f"  {name}({', '.join(inputs)}) -> {', '.join(outputs)}")
    print("load it with: import tensorflow as tf, tensorflow_text; tf.saved_model.load(PATH)")
    return 0
