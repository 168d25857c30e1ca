"""int8 predict with the zero-point correction cached (this tree) against recomputed per call (`--old`).

`Int8Dense` shifts int8 activations by +128 for oneDNN's u8 x s8 kernel and takes the shift
back with a bias of -128 x each column's sum of the int8 kernel. It used to sum the kernel in
every call; it now holds the sums as a weight computed at `quantize` / load. The model:
`benchmarks/int8.py`'s fine-tuned MiniLM `BertClassifier` (its `/tmp/bert_zoo_int8_sst2` preset,
made by that script), `from_preset` + `quantize("int8")`, `predict` of the 872 SST-2 dev
sentences at batch 32, twice (first call: tracing included). Each side in its own process,
rounds interleaved; wall and CPU seconds (the process's user + system) of each call, and the
largest logit difference between the two sides.

    python benchmarks/int8_zero_point.py --old /tmp/loose_old --rounds 3

`--old` is a directory holding the previous `keras_bert_zoo` package (`git archive OLD keras_bert_zoo
| tar -x -C DIR`). Writes `benchmarks/results/int8_zero_point.json`.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
SAVED = os.path.join("/tmp", "bert_zoo_int8_sst2")
BATCH = 32


def worker(logits_path):
    import numpy as np

    import keras_bert_zoo
    from keras_bert_zoo import BertClassifier
    from int8 import _data

    texts, labels, _ = _data()
    model = BertClassifier.from_preset(SAVED)
    model.quantize("int8")
    out = {"package": os.path.dirname(keras_bert_zoo.__file__)}
    for call in ("first", "second"):
        wall, cpu = time.perf_counter(), time.process_time()
        logits = model.predict(texts, batch_size=BATCH, verbose=0)
        out[f"{call}_wall_s"], out[f"{call}_cpu_s"] = time.perf_counter() - wall, time.process_time() - cpu
    out["dev_accuracy"] = float(np.mean(np.argmax(logits, -1) == np.asarray(labels)))
    np.save(logits_path, logits)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--old", help="directory holding the previous keras_bert_zoo package")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--worker", default=None, help="(internal) logits file to write")
    args = parser.parse_args(argv)
    if args.worker:
        import json

        print("RESULT " + json.dumps(worker(args.worker)), flush=True)
        return None
    import numpy as np

    started, host = common.now(), common.machine_line()
    print(host, flush=True)
    trees = {"cached": common.REPO, "per_call": os.path.abspath(args.old)}
    scratch = tempfile.mkdtemp()
    runs = []
    for round_ in range(args.rounds):
        run = {}
        for side in (("cached", "per_call") if round_ % 2 == 0 else ("per_call", "cached")):
            env = {**os.environ, "PYTHONPATH": trees[side]}
            path = os.path.join(scratch, f"{side}_{round_}.npy")
            run[side] = common.run_worker([sys.executable, os.path.abspath(__file__), "--worker", path], side, env=env)
            run[side]["logits"] = path
            print(round_, side, {k: v for k, v in run[side].items() if k.endswith("_s")}, flush=True)
        runs.append(run)
    gap = max(float(np.abs(np.load(r["cached"]["logits"]) - np.load(r["per_call"]["logits"])).max()) for r in runs)
    rows = []
    for call in ("second", "first"):
        for clock in ("wall", "cpu"):
            key = f"{call}_{clock}_s"
            rows.append(dict(what=f"int8 SST-2 dev predict ({call} call, {clock} s): zero-point correction cached vs "
                                  "recomputed per call", unit="s", higher_is_better=False,
                             ours=statistics.median(r["cached"][key] for r in runs),
                             peer=statistics.median(r["per_call"][key] for r in runs), peer_name="recomputed per call",
                             note=f"median per-round ratio {statistics.median(r['per_call'][key] / r['cached'][key] for r in runs):.3f}x"))
    rows.append(dict(what="int8 SST-2 dev logits: cached vs per-call correction, largest difference", unit="abs",
                     ours=gap, peer=0.0, peer_name="identical", higher_is_better=False,
                     note=f"dev accuracy {runs[0]['cached']['dev_accuracy']:.4f} vs {runs[0]['per_call']['dev_accuracy']:.4f}"))
    for r in runs:
        for side in r.values():
            side.pop("logits")
    common.write_json(os.path.join(common.RESULTS, "detail", "int8_zero_point.json"), {"runs": runs, "host": host})
    command = "python benchmarks/int8_zero_point.py " + " ".join(argv if argv is not None else sys.argv[1:])
    result = common.write_result("int8_zero_point", rows, command, source="benchmarks/results/detail/int8_zero_point.json",
                                 started=started)
    for row in rows:
        print(row["what"], row["ours"], row["peer"], row.get("note", ""))
    return result


if __name__ == "__main__":
    main()
