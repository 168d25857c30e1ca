"""Prediction, the default batching against `batching="packed"`, per task, as a user calls it.

The default of `predict_tags`, `predict_answers` and `encode` is whatever was faster at the
same outputs; this measures the choice (docs/benchmarks.md). Each system runs in its own
process, rounds interleaved; the ratios are medians of per-round ratios; the outputs of
every system are compared with `ours`' (tags, answers, embeddings).

- `tag`: `BertTagger` (all-MiniLM-L6-v2, a seeded random head: speed, not F1) + a
  `TaggingPreprocessor` at 128, `predict_tags` on every CoNLL-2003 testa sentence, batch 64;
- `qa`: `BertSpanQA` (MiniLM, seeded random head) + a `SpanQAPreprocessor` at 384 / stride
  128, `predict_answers` on the first `--examples` SQuAD v1.1 dev questions, batch 64;
- `embed`: `BertSentenceEmbedder.from_preset(minilm).encode` on every STS-B dev sentence,
  batch 32; `ours_buckets` is what `encode` ran before it went through `predict`
  (coarse length buckets, 16/32/64/96/128..., one `predict` per bucket), and `st` is
  sentence-transformers' own `encode` (batch 32, 2 threads), the peer.

    python benchmarks/packed_predict.py --task tag --rounds 2
    python benchmarks/packed_predict.py --task qa --rounds 2 --examples 400
    python benchmarks/packed_predict.py --task embed --systems ours,ours_packed,ours_buckets,st --rounds 2

Writes `benchmarks/results/packed_predict_TASK.json` (or `--out`) and prints a table.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
DATA = os.path.join(common.REPO, "..", "shared", "data")


def read(task, n):
    if task == "tag":
        from keras_bert_zoo.preprocessing.tagging_data import read_tagged

        return read_tagged(os.path.join(DATA, "conll2003", "eng.testa"))
    if task == "qa":
        from keras_bert_zoo.preprocessing.squad_data import read_squad

        return read_squad(os.path.join(DATA, "squad", "dev.json"), max_examples=n)
    from keras_bert_zoo.preprocessing.sts import read_sts

    pairs = read_sts(os.path.join(DATA, "stsb", "sts-dev.csv"))
    return list(pairs.sentences1) + list(pairs.sentences2)


def run_ours(task, n, batching):
    """`(seconds, outputs)` of the user's prediction call."""
    import keras
    import numpy as np

    from keras_bert_zoo import BertSentenceEmbedder, BertSpanQA, BertTagger, SpanQAPreprocessor, TaggingPreprocessor

    minilm = common.minilm_path()
    data = read(task, n)
    keras.utils.set_random_seed(0)
    if task == "tag":
        model = BertTagger.from_preset(minilm, num_labels=len(data.label_names), label_names=data.label_names,
                                       preprocessor=TaggingPreprocessor.from_preset(minilm, sequence_length=128))
        t = time.perf_counter()
        out = model.predict_tags(data.words, batch_size=64, batching=batching)
        return time.perf_counter() - t, out
    if task == "qa":
        pre = SpanQAPreprocessor.from_preset(minilm, sequence_length=384, doc_stride=128)
        model = BertSpanQA.from_preset(minilm, preprocessor=pre)
        t = time.perf_counter()
        rows = model.predict_answers(data.questions, data.contexts, batch_size=64, batching=batching)
        return time.perf_counter() - t, [[r["start"], r["end"], r["score"]] for r in rows]
    model = BertSentenceEmbedder.from_preset(minilm)
    t = time.perf_counter()
    if batching == "buckets":
        vectors = encode_in_buckets(model, data)
    else:
        vectors = model.encode(data, batch_size=32, batching=batching)
    return time.perf_counter() - t, np.asarray(vectors).tolist()


def encode_in_buckets(model, texts, batch_size=32):
    """`encode` before it ran through `predict`: chunks of texts, each grouped by coarse length
    bucket (`bucketing.in_memory_buckets`) and predicted bucket by bucket."""
    import numpy as np
    import tensorflow as tf

    from keras_bert_zoo.preprocessing import bucketing

    out = np.zeros((len(texts), model.output_shape[-1]), "float32")
    chunk = batch_size * 64
    for start in range(0, len(texts), chunk):
        part = texts[start:start + chunk]
        features = {k: np.asarray(v) for k, v in model.preprocessor(tf.constant(part, tf.string)).items()}
        for rows, _, ds in bucketing.in_memory_buckets(features, batch_size):
            out[start + rows] = model.predict(ds, verbose=0)
    return out


def run_st(task, n):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(2)
    texts = read(task, n)
    model = SentenceTransformer(common.minilm_path(), device="cpu")
    t = time.perf_counter()
    vectors = model.encode(texts, batch_size=32)
    return time.perf_counter() - t, vectors.tolist()


SYSTEMS = {"ours": lambda task, n: run_ours(task, n, "auto"),
           "ours_packed": lambda task, n: run_ours(task, n, "packed"),
           "ours_buckets": lambda task, n: run_ours(task, n, "buckets"),
           "st": run_st}


def worker(args):
    load = os.getloadavg()
    seconds, outputs = SYSTEMS[args.worker](args.task, args.examples)
    with open(args.outputs, "w") as f:
        json.dump(outputs, f)
    print("RESULT " + json.dumps(dict(system=args.worker, seconds=seconds, items=len(outputs),
                                      loadavg_before=list(load), loadavg_after=list(os.getloadavg()))), flush=True)


def run_one(system, task, n, outputs):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", system, "--task", task, "--examples", str(n),
           "--outputs", outputs]
    return common.run_worker(cmd, system)


def agreement(task, ours, theirs):
    """How far a system's outputs are from `ours`': the share of identical tags / answer spans, or the
    largest embedding difference."""
    import numpy as np

    if task == "tag":
        pairs = [(a, b) for x, y in zip(ours, theirs) for a, b in zip(x, y)]
        return {"identical_tags": sum(a == b for a, b in pairs) / max(len(pairs), 1)}
    if task == "qa":
        same = [a[:2] == b[:2] for a, b in zip(ours, theirs)]
        return {"identical_spans": sum(same) / max(len(same), 1),
                "max_score_difference": float(max(abs(a[2] - b[2]) for a, b in zip(ours, theirs)))}
    return {"max_embedding_difference": float(np.abs(np.asarray(ours) - np.asarray(theirs)).max())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=("tag", "qa", "embed"), default="tag")
    parser.add_argument("--systems", default="ours,ours_packed")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--examples", type=int, default=400, help="qa: SQuAD dev questions")
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--outputs", default=None)
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    systems = args.systems.split(",")
    if systems[0] != "ours":
        parser.error("--systems must start with ours (the others are compared with it)")
    started, info_before, runs, scratch = common.now(), common.machine_line(), [], tempfile.mkdtemp()
    for r in range(args.rounds):
        outputs = {}
        for system in systems:
            path = os.path.join(scratch, f"{system}.json")
            result = run_one(system, args.task, args.examples, path)
            with open(path) as f:
                outputs[system] = json.load(f)
            result.update(round=r, **agreement(args.task, outputs["ours"], outputs[system]))
            runs.append(result)
            print(f"round {r} {system}: {result['seconds']:.2f} s for {result['items']} items", flush=True)
    summary = {}
    for system in systems:
        mine = [x for x in runs if x["system"] == system]
        ratios = [x["seconds"] / o["seconds"] for x in mine for o in runs
                  if o["system"] == "ours" and o["round"] == x["round"]]
        summary[system] = dict(median_seconds=statistics.median(x["seconds"] for x in mine),
                               seconds_over_ours=statistics.median(ratios),
                               **{k: v for k, v in mine[-1].items() if k.startswith(("identical", "max_"))})
    record = dict(task=args.task, examples=args.examples,
                  command="python benchmarks/packed_predict.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  started=started, finished=common.now(), machine_before=info_before,
                  machine_after=common.machine_line(), commit=common.git_commit(),
                  versions=common.versions("tensorflow", "keras", "torch", "sentence-transformers"),
                  runs=runs, summary=summary)
    out = args.out or os.path.join(common.REPO, "benchmarks", "results", f"packed_predict_{args.task}.json")
    common.write_json(out, record)
    print(f"\n| system | median s | time / ours' | agreement with ours |\n|---|---|---|---|")
    for system, s in summary.items():
        agree = ", ".join(f"{k} {v:.4g}" for k, v in s.items() if k.startswith(("identical", "max_")))
        print(f"| {system} | {s['median_seconds']:.2f} | {s['seconds_over_ours']:.3f} | {agree} |")


if __name__ == "__main__":
    main()
