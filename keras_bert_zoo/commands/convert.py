"""`bert-zoo convert --from PATH --out DIR`: any supported checkpoint into our preset format."""

from keras_bert_zoo.commands.common import setup_logging


def add_arguments(parser):
    parser.add_argument("--from", dest="source", required=True,
                        help="HF (config.json + model.safetensors) or Google (bert_config.json + bert_model.ckpt) directory")
    parser.add_argument("--out", required=True, help="output preset directory")


def run(args):
    setup_logging()
    import os
    import shutil

    from keras_bert_zoo.models.backbone import BertBackbone

    backbone = BertBackbone.from_preset(args.source)
    backbone.save_to_preset(args.out)
    for name in ("vocab.txt", "tokenizer_config.json"):
        src = os.path.join(args.source, name)
        if os.path.exists(src):
            shutil.copyfile(src, os.path.join(args.out, name))
    print(f"wrote {args.out} ({backbone.count_params():,} parameters, "
          f"{backbone.num_layers} layers, hidden {backbone.hidden_dim})")
    return 0
