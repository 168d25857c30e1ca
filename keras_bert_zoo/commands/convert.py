"""`bert-zoo convert --from PATH --out DIR`: any supported checkpoint into our preset format.

The whole model is converted: a checkpoint with task heads (HF `BertForPreTraining`,
`BertForSequenceClassification`; Google `cls/*` or run_classifier.py's
`output_weights`) becomes the matching task model (`BertPretrainer`, `BertClassifier`),
so `from_preset(DIR)` of that class gives the same outputs. A head no task model here
reads is dropped with one line saying so, and the backbone is kept.
"""

import sys

from keras_bert_zoo.commands.common import add_overwrite_argument

# Tokenizer files copied beside the converted weights.
TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json")


def add_arguments(parser):
    parser.add_argument("--from", dest="source", required=True,
                        help="HF (config.json + model.safetensors) or Google (bert_config.json + bert_model.ckpt) directory")
    parser.add_argument("--out", required=True, help="output preset directory")
    add_overwrite_argument(parser)


def run(args):
    import os
    import shutil

    from keras_bert_zoo.convert.checkpoint import Checkpoint
    from keras_bert_zoo.convert.tasks import detect_task, task_classes
    from keras_bert_zoo.files import check_output, output_dir
    from keras_bert_zoo.models.backbone import BertBackbone

    check_output(args.out, args.overwrite)
    found = detect_task(Checkpoint(args.source))
    if found.task is None:
        if found.dropped:
            print(f"bert-zoo convert: {found.dropped_line()}", file=sys.stderr)
        model = backbone = BertBackbone.from_preset(args.source)
    else:
        model = task_classes()[found.task].from_preset(args.source, preprocessor=None)
        backbone = model.backbone
    with output_dir(args.out, args.overwrite) as staging:  # renamed into place once complete
        model.save_to_preset(staging)
        for name in TOKENIZER_FILES:
            src = os.path.join(args.source, name)
            if os.path.exists(src):
                shutil.copyfile(src, os.path.join(staging, name))
    print(f"wrote {args.out}: {found.task or 'BertBackbone'} from {found.source} "
          f"({model.count_params():,} parameters, {backbone.num_layers} layers, hidden {backbone.hidden_dim})")
    return 0
