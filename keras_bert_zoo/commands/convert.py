"""`bert-zoo convert --from SOURCE --out DIR [--to keras-hub]`: any BERT a user has, into a preset.

SOURCE is a preset name (its official checkpoint, through the Hugging Face cache),
`hf://ORG/NAME[@REV]`, or a directory: HF, Google, KerasHub / keras-nlp, or ours. The
whole model is converted: a checkpoint with task heads (HF `BertForPreTraining`,
`BertForSequenceClassification`; Google `cls/*` or run_classifier.py's `output_weights`;
KerasHub `BertTextClassifier`, `BertMaskedLM`) becomes the matching task model
(`BertPretrainer`, `BertClassifier`), so `from_preset(DIR)` of that class gives the same
outputs. A head no task model here reads is dropped with one line saying so, and the
backbone is kept. `--to keras-hub` writes a KerasHub preset instead of ours.
"""

import sys

from keras_bert_zoo.commands.common import add_overwrite_argument

__all__ = ["add_arguments", "run"]

# Tokenizer files copied beside the converted weights.
_TOKENIZER_FILES = ("vocab.txt", "tokenizer_config.json")


def add_arguments(parser):
    parser.add_argument(
        "--from",
        dest="source",
        required=True,
        help="preset name, hf://ORG/NAME[@REV], or a directory: HF (config.json + "
        "model.safetensors or tf_model.h5), Google (bert_config.json + bert_model.ckpt), "
        "KerasHub / keras-nlp (config.json + model.weights.h5) or ours",
    )
    parser.add_argument("--out", required=True, help="output preset directory")
    parser.add_argument(
        "--to",
        choices=("keras-bert-zoo", "keras-hub"),
        default="keras-bert-zoo",
        help="output format: ours (HF layout, the default) or a KerasHub preset that "
        "keras_hub.models.*.from_preset loads",
    )
    add_overwrite_argument(parser)


def run(args):
    import os
    import shutil

    from keras_bert_zoo.convert.checkpoint import open_checkpoint
    from keras_bert_zoo.convert.keras_hub_writer import check_writable, write_keras_hub_files
    from keras_bert_zoo.convert.tasks import detect_task, task_classes
    from keras_bert_zoo.files import check_output, output_dir
    from keras_bert_zoo.models import loading
    from keras_bert_zoo.models.backbone import BertBackbone
    from keras_bert_zoo.preprocessing.vocab_file import check_vocab_txt_fits

    check_output(args.out, args.overwrite)
    source = loading.resolve(args.source)  # a name or hf:// address: the cached snapshot
    checkpoint = open_checkpoint(source)
    check_vocab_txt_fits(source)  # the vocab.txt it copies along must fit the embedding table
    found = detect_task(checkpoint)
    if found.task is None:
        if found.dropped:
            print(f"bert-zoo convert: {found.dropped_line()}", file=sys.stderr)
        model = backbone = BertBackbone.from_preset(source)
    else:
        model = task_classes()[found.task].from_preset(source, preprocessor=None)
        backbone = model.backbone
    # A KerasHub preset keeps its tokenizer options in tokenizer.json; others have the files.
    tokenizer = checkpoint.make_tokenizer() if hasattr(checkpoint, "make_tokenizer") else None
    if tokenizer is None and os.path.isfile(os.path.join(source, "vocab.txt")) and args.to == "keras-hub":
        from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

        tokenizer = BertTokenizer.from_preset(source)
    if args.to == "keras-hub":
        check_writable(model)  # before anything is written
    with output_dir(args.out, args.overwrite) as staging:  # renamed into place once complete
        if args.to == "keras-hub":
            write_keras_hub_files(staging, model, tokenizer)
        else:
            model.save_to_preset(staging)
            if tokenizer is not None:
                tokenizer.save_to_preset(staging)
            for name in _TOKENIZER_FILES if tokenizer is None else ():
                src = os.path.join(source, name)
                if os.path.exists(src):
                    shutil.copyfile(src, os.path.join(staging, name))
    print(
        f"wrote {args.out}: {found.task or 'BertBackbone'} from {found.source} "
        f"({model.count_params():,} parameters, {backbone.num_layers} layers, hidden {backbone.hidden_dim})"
        f"{' as a KerasHub preset' if args.to == 'keras-hub' else ''}"
    )
    return 0
