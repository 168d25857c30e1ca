"""int8 inference against float32, ours and HF's, on one fine-tuned SST-2 model.

The issue's script: all-MiniLM-L6-v2 `BertClassifier` + `BertPreprocessor` (length 128), fit
in float32 on the first 1,600 SST-2 training sentences (batch 32, one epoch, seed 0), saved
once as a preset (HF layout). Then, each system in its own process, rounds interleaved:

- `float32`: `BertClassifier.from_preset(saved)`, `predict(dev texts, batch_size=32)` twice
  (first call: tracing included; second call: the steady rate);
- `int8`: the same after `model.quantize("int8")` (its time recorded too);
- `int8_keras`: the same with Keras' own int8 call in every layer (`Int8Dense`'s kernel path off:
  TensorFlow's int8 `MatMul`), what `quantize("int8")` computed before `Int8Dense`, on any CPU;
- `hf_float32` / `hf_int8`: HF's `BertForSequenceClassification.from_pretrained(saved)` (the
  same weights), the dev texts through its tokenizer in batches of 32 (dynamic padding) under
  `torch.no_grad`, twice; `hf_int8` first runs HF's usual int8 path,
  `torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)`;
  torch on 2 threads;
- `int8_export` (once): the quantized model through `export_saved_model`, loaded back with
  `tf.saved_model.load` and served the raw dev strings (batches of 32 in file order): its
  probabilities and labels against the quantized model's `predict` (all 872 at once: sorted by
  length, so other batches and widths) and against `predict` on the server's own batches, and,
  for scale, the same model's `predict` at batch 16 against batch 32.

Ratios are medians of per-round ratios. Dev accuracy on all 872 dev sentences.

    python benchmarks/run.py int8 --rounds 3
    python benchmarks/run.py int8 --smoke        # 64 sentences, 1 round, no record: a check

Writes `benchmarks/results/int8.HOSTKIND.json` (summary) and `benchmarks/results/detail/int8.HOSTKIND.json` (runs).
"""

import argparse
import os
import statistics
import time

import common
from suite import fit_speed_systems

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

SAVED = os.path.join("/tmp", "bert_zoo_int8_sst2")
TRAIN_EXAMPLES, DEV_EXAMPLES, BATCH = 1600, None, 32  # --smoke: 64, 64 and its own saved model
SYSTEMS = ("float32", "int8", "int8_keras", "hf_float32", "hf_int8")


def _data(train=False):
    files = fit_speed_systems.FILES["classify"]
    if train:
        return fit_speed_systems.read("classify", files[0], TRAIN_EXAMPLES)
    return fit_speed_systems.read("classify", files[1], DEV_EXAMPLES)  # the dev file (all 872, or --smoke's first 64)


def finetune(seed=0):
    import keras

    from keras_bert_zoo import BertClassifier, BertPreprocessor

    x, y, _ = _data(train=True)
    keras.utils.set_random_seed(seed)
    minilm = common.minilm_path()
    model = BertClassifier.from_preset(
        minilm, num_classes=2, preprocessor=BertPreprocessor.from_preset(minilm, sequence_length=128)
    )
    model.compile()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    model.save_to_preset(SAVED)
    return {"train_examples": len(y)}


def _accuracy(labels, logits):
    import numpy as np

    return float(np.mean(np.argmax(logits, -1) == np.asarray(labels)))


def run_ours(quantized, export=False, keras_int8=False):
    from keras_bert_zoo import BertClassifier

    if keras_int8:  # every int8 layer takes Keras' own call
        common.lib("Int8Dense").int8_kernel_path = lambda self, inputs: None

    texts, labels, _ = _data()
    model = BertClassifier.from_preset(SAVED)
    out = {}
    if quantized:
        t = time.perf_counter()
        model.quantize("int8")
        out["quantize_s"] = time.perf_counter() - t
    for call in ("first", "second"):
        t = time.perf_counter()
        logits = model.predict(texts, batch_size=BATCH, verbose=0)
        out[f"predict_{call}_s"] = time.perf_counter() - t
    out["dev_accuracy"] = _accuracy(labels, logits)
    if export:
        out.update(_export_check(model, texts, logits))
    return out


def _export_check(model, texts, logits):
    import tempfile

    import numpy as np
    import tensorflow as tf

    from keras_bert_zoo import export_saved_model

    path = export_saved_model(model, os.path.join(tempfile.mkdtemp(), "served"))
    served = tf.saved_model.load(path).signatures["serving_default"]
    batches = [texts[i : i + BATCH] for i in range(0, len(texts), BATCH)]
    probs = np.concatenate([served(text=tf.constant(b))["probabilities"].numpy() for b in batches])
    expected = model.logits_to_probabilities(logits)
    # The same batches through `predict` (each padded as the server pads it): equal up to float rounding.
    same_batches = np.concatenate([model.logits_to_probabilities(model.predict(b, verbose=0)) for b in batches])
    # The same model at another batch size: how far int8 answers move when only the float
    # rounding before each row's quantization changes (a flipped int8 rounding is a 1/127 step).
    other = model.logits_to_probabilities(model.predict(texts, batch_size=BATCH // 2, verbose=0))
    return {
        "export_max_abs_diff": float(np.abs(probs - expected).max()),
        "export_same_batches_max_abs_diff": float(np.abs(probs - same_batches).max()),
        "batch16_vs_batch32_max_abs_diff": float(np.abs(other - expected).max()),
        "export_same_labels": int(np.sum(probs.argmax(-1) == expected.argmax(-1))),
        "export_examples": len(texts),
    }


def run_hf(quantized, threads=2):
    import torch
    import transformers

    torch.set_num_threads(threads)
    texts, labels, _ = _data()
    tokenizer = transformers.AutoTokenizer.from_pretrained(common.minilm_path())
    model = transformers.BertForSequenceClassification.from_pretrained(SAVED).eval()
    out = {"threads": threads}
    if quantized:
        t = time.perf_counter()
        model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        out["quantize_s"] = time.perf_counter() - t
    for call in ("first", "second"):
        t = time.perf_counter()
        logits = []
        with torch.no_grad():
            for i in range(0, len(texts), BATCH):
                batch = tokenizer(
                    texts[i : i + BATCH], padding=True, truncation=True, max_length=128, return_tensors="pt"
                )
                logits.append(model(**batch).logits.numpy())
        out[f"predict_{call}_s"] = time.perf_counter() - t
    import numpy as np

    out["dev_accuracy"] = _accuracy(labels, np.concatenate(logits))
    return out


WORKERS = {
    "finetune": lambda: finetune(),
    "float32": lambda: run_ours(False),
    "int8": lambda: run_ours(True),
    "int8_keras": lambda: run_ours(True, keras_int8=True),
    "int8_export": lambda: run_ours(True, export=True),
    "hf_float32": lambda: run_hf(False),
    "hf_int8": lambda: run_hf(True),
}


def _run(system):
    smoke = ["--smoke"] if DEV_EXAMPLES else []
    return common.run_worker([*common.self_cmd("int8"), "--worker", system, *smoke], system)


def _median_ratio(runs, a, b, key):
    return statistics.median(r[b][key] / r[a][key] for r in runs)


def summarize(runs, export, finetuned, started, command):
    dev = len(_data()[0])
    first = runs[0]

    def rate(system, key):
        return dev / statistics.median(r[system][key] for r in runs)

    rows = []
    for call in ("second", "first"):
        key = f"predict_{call}_s"
        rows.append(
            dict(
                what=f"SST-2 dev predict, {call} call: int8 vs float32 (ours)",
                unit="sentences/s",
                ours=rate("int8", key),
                peer=rate("float32", key),
                peer_name="ours float32",
                higher_is_better=True,
                note=f"median per-round speed-up {_median_ratio(runs, 'int8', 'float32', key):.2f}x",
            )
        )
        rows.append(
            dict(
                what=f"SST-2 dev predict, {call} call: int8 vs Keras' own int8 call",
                unit="sentences/s",
                ours=rate("int8", key),
                peer=rate("int8_keras", key),
                peer_name="Keras int8 (TF int8 MatMul)",
                higher_is_better=True,
                note=f"median per-round speed-up {_median_ratio(runs, 'int8', 'int8_keras', key):.2f}x",
            )
        )
        rows.append(
            dict(
                what=f"SST-2 dev predict, {call} call: int8, ours vs HF quantize_dynamic",
                unit="sentences/s",
                ours=rate("int8", key),
                peer=rate("hf_int8", key),
                peer_name="HF int8 (quantize_dynamic)",
                higher_is_better=True,
                note=f"HF float32 {rate('hf_float32', key):.1f} sentences/s",
            )
        )
    rows.append(
        dict(
            what="SST-2 dev accuracy: int8 vs float32 (ours)",
            unit="accuracy",
            ours=first["int8"]["dev_accuracy"],
            peer=first["float32"]["dev_accuracy"],
            peer_name="ours float32",
            higher_is_better=True,
        )
    )
    rows.append(
        dict(
            what="SST-2 dev accuracy: int8, ours vs HF quantize_dynamic (same weights)",
            unit="accuracy",
            ours=first["int8"]["dev_accuracy"],
            peer=first["hf_int8"]["dev_accuracy"],
            peer_name="HF int8 (quantize_dynamic)",
            higher_is_better=True,
            note=f"HF float32 {first['hf_float32']['dev_accuracy']:.4f}",
        )
    )
    detail = dict(runs=runs, export=export, finetune=finetuned)
    path = common.record_path("int8", directory=os.path.join(common.RESULTS, "detail"))
    common.write_json(path, detail)
    return common.write_result("int8", rows, command, source=os.path.relpath(path, common.REPO), started=started)


def main(argv=None):
    global TRAIN_EXAMPLES, DEV_EXAMPLES, SAVED
    parser = argparse.ArgumentParser(prog="run.py int8", description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reuse", action="store_true", help="keep an already fine-tuned model in " + SAVED)
    parser.add_argument("--smoke", action="store_true", help="64 training and dev sentences, 1 round, no record")
    parser.add_argument("--worker", default=None)
    args = parser.parse_args(argv)
    if args.smoke:
        TRAIN_EXAMPLES, DEV_EXAMPLES, SAVED, args.rounds = 64, 64, SAVED + "_smoke", 1
    if args.worker:
        import json

        print("RESULT " + json.dumps(WORKERS[args.worker]()), flush=True)
        return None
    started = common.now()
    print(common.machine_line(), flush=True)
    finetuned = {"reused": True} if args.reuse and os.path.isdir(SAVED) else _run("finetune")
    runs = []
    for round_ in range(args.rounds):
        runs.append({system: _run(system) for system in SYSTEMS})
        print(
            f"round {round_ + 1}: "
            + ", ".join(
                f"{s} {r['predict_second_s']:.2f} s / acc {r['dev_accuracy']:.4f}" for s, r in runs[-1].items()
            ),
            flush=True,
        )
    export = _run("int8_export")
    print(
        f"export: max |p_served - p_model| {export['export_max_abs_diff']:.2e} (same batches: "
        f"{export['export_same_batches_max_abs_diff']:.2e}; model at batch 16 vs 32: "
        f"{export['batch16_vs_batch32_max_abs_diff']:.2e}), "
        f"same label {export['export_same_labels']}/{export['export_examples']}",
        flush=True,
    )
    if args.smoke:
        return print("smoke run: no record")
    command = common.command_line("int8", argv)
    path = summarize(runs, export, finetuned, started, command.strip())
    print(f"wrote {path}")
    for row in common.read_json(path)["rows"]:
        print(f"| {row['what']} | {row['ours']:.4g} | {row['peer']:.4g} ({row['peer_name']}) | {row.get('note', '')} |")
    return path


if __name__ == "__main__":
    main()
