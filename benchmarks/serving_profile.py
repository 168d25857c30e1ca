"""Where our raw-text serving spends its time: the SavedModel's own signatures timed one by one.

On a SavedModel written by `benchmarks/serving.py` (OUT/TASK/saved_model): `tokenize` alone, the
full-width path (`tokenize` + `predict_token_ids` at the full sequence length: what
`serving_default` cost before it cut padding) and `serving_default` (cut + chunks), at batch 64
(sentences/s) and batch 1 (p50), TensorFlow on 2 intra-op threads and `--inter-op` inter-op threads.

    nice python benchmarks/serving_profile.py --task tag --out /tmp/srv_serving --inter-op 1
"""

import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import serving  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("classify", "tag"), default="classify")
    parser.add_argument("--out", default="/tmp/bert_zoo_serving", help="the --out of benchmarks/serving.py")
    parser.add_argument("--inter-op", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sentences", type=int, default=256, help="sentences timed at batch 64")
    parser.add_argument("--latency-sentences", type=int, default=100)
    args = parser.parse_args(argv)

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer ops)

    tf.config.threading.set_intra_op_parallelism_threads(2)
    tf.config.threading.set_inter_op_parallelism_threads(args.inter_op)
    model = tf.saved_model.load(os.path.join(args.out, args.task, "saved_model"))
    sd, tok, ids = (model.signatures[k] for k in ("serving_default", "tokenize", "predict_token_ids"))
    keys = ("token_ids", "segment_ids", "padding_mask")
    paths = {
        "tokenize only": lambda b: tok(text=tf.constant(b)),
        "full width (tokenize + predict_token_ids)": lambda b: ids(
            **{k: v for k, v in tok(text=tf.constant(b)).items() if k in keys}),
        "serving_default (cut + chunks)": lambda b: sd(text=tf.constant(b)),
    }
    texts = serving.sentences(args.task, max(args.sentences, args.latency_sentences))
    out = {}
    for r in range(args.rounds):
        for name, call in paths.items():
            tp, lat = serving.measure(call, texts[:args.sentences], 64, args.latency_sentences)
            p50 = 1000 * statistics.median(lat)
            out.setdefault(name, []).append({"sentences_per_second": tp, "p50_ms": p50})
            print(f"round {r} | {name} | {tp:.1f} sentences/s at batch 64 | p50 {p50:.2f} ms at batch 1 | "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    print(json.dumps({"task": args.task, "inter_op": args.inter_op, "paths": out}))


if __name__ == "__main__":
    main()
