"""`bert-zoo export --model DIR --out PATH`: a SavedModel that takes raw strings.

`DIR` is a directory written by `bert-zoo finetune` or `bert-zoo pretrain` (fill-mask);
it must hold its `vocab.txt`. Serve `PATH` with TF Serving or load it with
`tf.saved_model.load` after `import tensorflow_text`.

`--quantize int8` exports the model quantized (`model.quantize("int8")`: int8 weights,
inputs quantized per row; SST-2 accuracy within 0.1 point of float32, predict ~1.3-1.8x
faster on a CPU with VNNI, docs/decisions.md "int8 inference"). A directory saved from a
quantized model is exported quantized without the flag. With `--precision bf16` too, the int8
layers run their int8 product as in float32 and the rest of the graph computes in bfloat16.
Exported on a CPU with VNNI, the int8 layers run oneDNN's int8 kernel and the SavedModel serves
on such CPUs only (TensorFlow runs oneDNN there by default); `--int8-kernel portable` traces the
same numbers through the float32 matmul, for any CPU (an AVX2-only server, say).

Examples:
    bert-zoo export --model /tmp/sst2 --out /tmp/sst2_served
    bert-zoo export --model /tmp/sst2 --out /tmp/sst2_int8 --quantize int8
    bert-zoo export --model /tmp/sst2 --out /tmp/sst2_int8_bf16 --quantize int8 --precision bf16
    saved_model_cli show --dir /tmp/sst2_served --tag_set serve --signature_def serving_default
"""

import dataclasses
import time

from keras_bert_zoo.commands.common import add_overwrite_argument


def serving_options():
    """`(task name, TaskOption)` of every registered task's serving options, the flags of
    this verb (each applies to the models of its task; the others refuse it)."""
    from keras_bert_zoo.tasks.registry import all_tasks

    return [(spec.name, option) for spec in all_tasks() if spec.serving is not None for option in spec.serving.options]


__all__ = ["add_arguments", "run", "serving_options"]


def add_arguments(parser):
    from keras_bert_zoo.tasks.options import add_option_flags

    parser.add_argument("--model", required=True, help="directory written by `bert-zoo finetune` or `pretrain`")
    parser.add_argument("--out", required=True, help="SavedModel directory to write")
    add_overwrite_argument(parser)
    parser.add_argument(
        "--precision",
        choices=["float32", "bf16"],
        default="float32",
        help="bf16: the graph computes in bfloat16 (Keras' mixed_bfloat16; softmax, LayerNorm and "
        "outputs in float32), for hosts with native bf16 (AVX512-BF16, AMX); weights stay float32",
    )
    parser.add_argument(
        "--quantize",
        choices=["int8"],
        default=None,
        help="quantize the model before exporting it (int8 weights and per-row int8 inputs)",
    )
    parser.add_argument(
        "--int8-kernel",
        choices=["auto", "portable"],
        default="auto",
        help="an int8 model's matmuls: auto = oneDNN's int8 kernel where this CPU has VNNI (the "
        "SavedModel then serves on CPUs with VNNI only), portable = the float32 product (any CPU)",
    )
    group = parser.add_argument_group("serving options (given only: each applies to its task's models)")
    # Unset flags stay None, so only the options given reach the exporter, which refuses
    # those the model's serving does not take.
    add_option_flags(
        group,
        [
            dataclasses.replace(option, default=None, help=f"{task}: {option.help}")
            for task, option in serving_options()
        ],
    )


def run(args):
    from keras_bert_zoo.export.saved_model import export_saved_model, read_export_info, signature_summary
    from keras_bert_zoo.files import check_output
    from keras_bert_zoo.keras_compat import all_layers
    from keras_bert_zoo.tasks import task_of_model_dir

    check_output(args.out, args.overwrite)  # before loading the model
    spec = task_of_model_dir(args.model, "export")
    model = spec.load_model(args.model)
    if args.quantize and not any(layer.quantization_mode for layer in all_layers(model)):
        model.quantize(args.quantize)
    options = {
        option.name: getattr(args, option.name)
        for _, option in serving_options()
        if getattr(args, option.name) is not None
    }
    start = time.perf_counter()
    export_saved_model(
        model, args.out, overwrite=args.overwrite, precision=args.precision, int8_kernel=args.int8_kernel, **options
    )
    print(f"wrote {args.out} ({type(model).__name__}, {time.perf_counter() - start:.1f} s)")
    if read_export_info(args.out).get("int8_kernel") == "onednn":
        print(
            "  its int8 layers run oneDNN's VNNI kernel: serve it on CPUs with AVX512-VNNI, AVX-VNNI or AMX "
            "(or export with --int8-kernel portable for any CPU)"
        )
    for name, (inputs, outputs) in sorted(signature_summary(args.out).items()):
        print(f"  {name}({', '.join(inputs)}) -> {', '.join(outputs)}")
    print("load it with: import tensorflow as tf, tensorflow_text; tf.saved_model.load(PATH)")
    return 0
