"""Task-adaptive pretraining (TAPT, Gururangan et al. 2020) before fine-tuning, measured over seeds.

all-MiniLM-L6-v2 (which ships no MLM head) fine-tuned two ways, with the same recipe, budget and
seeds (one seed fixes the classifier head's init, the batch order and dropout in both arms):

- **direct**: `BertClassifier.from_preset(MiniLM)` + `fit(texts, labels)`;
- **tapt**: first `continue_pretraining` (the package's recipe: the new MLM head alone with the
  backbone frozen, then the whole model) on the task's *unlabelled* text, then the same fine-tuning
  from the adapted backbone.

Data sets:
- **docs**: the demo's Python-documentation chapters (`keras_bert_zoo.demo.corpus`, 6 classes,
  837 training paragraphs, scored on the 181-paragraph test split); TAPT reads the training
  paragraphs without their labels: the text is far from MiniLM's pretraining domain.
- **sst2**: 500 labelled SST-2 training sentences, scored on all 872 dev sentences; TAPT reads
  the *other* training sentences (the next 20,000, as many as its steps reach), labels unused.

Reported per data set: mean +- sd of the end-of-training score per arm, the gain, its standard
error (Welch: sqrt(sd_a^2 / n + sd_b^2 / n)) and whether the gain exceeds twice it; the paired
difference per seed too; the cost (TAPT steps and seconds). Writes
`benchmarks/results/adaptive_pretraining.json` (summary) and `results/detail/` (every run).

Usage:
    python benchmarks/adaptive_pretraining.py                       # both data sets, seeds 0-4
    python benchmarks/adaptive_pretraining.py --datasets sst2 --seeds 0,1
    python benchmarks/adaptive_pretraining.py --smoke               # a minute: the code path only
"""

import argparse
import math
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import RESULTS, machine_line, minilm_path, now, write_json, write_result  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")

# One fine-tuning recipe for both arms (small sets: a few epochs at 1e-4, as for small BERTs). The
# budgets fit 5 seeds x 2 arms x 2 data sets in about an hour on 2 cores; the docs paragraphs are
# longer than SST-2 sentences (52 pieces on average, 5 % cut at 128), so their TAPT reads 50 + 150
# batches of 16, about 4 passes over the 837 paragraphs.
RECIPES = {
    "docs": dict(sequence_length=128, batch_size=16, epochs=3, learning_rate=1e-4,
                 tapt=dict(head_steps=50, steps=150, batch_size=16)),
    "sst2": dict(sequence_length=64, batch_size=16, epochs=4, learning_rate=1e-4,
                 tapt=dict(head_steps=100, steps=200, batch_size=32)),
}
SMOKE = dict(sequence_length=32, batch_size=8, epochs=1, learning_rate=1e-4,
             tapt=dict(head_steps=2, steps=2, batch_size=8))


def load(name, smoke):
    """`(train_texts, train_labels, test_texts, test_labels, unlabelled_texts, num_classes)`."""
    if name == "docs":
        from keras_bert_zoo.demo import corpus

        parts = corpus.split(corpus.labelled_paragraphs(), seed=0)
        index = {label: i for i, label in enumerate(corpus.LABELS)}
        train = [(p, index[label]) for _, label, p in parts["train"]]
        test = [(p, index[label]) for _, label, p in parts["test"]]
        unlabelled = [p for p, _ in train]
        classes = len(corpus.LABELS)
    else:
        from keras_bert_zoo.preprocessing.task_data import DataLayout, read_examples

        layout = DataLayout.for_task("sst2")
        path = os.path.join(DATA, "sst2")
        if not os.path.isdir(path):
            raise SystemExit(f"{path} not found: this benchmark reads ../shared/data/sst2")
        examples = read_examples(os.path.join(path, "train.tsv"), layout)
        dev = read_examples(os.path.join(path, "dev.tsv"), layout)
        texts, labels = examples.texts[0], [int(v) for v in examples.labels]
        train = list(zip(texts[:500], labels[:500]))
        test = list(zip(dev.texts[0], [int(v) for v in dev.labels]))
        unlabelled = list(texts[500:20_500])
        classes = 2
    if smoke:
        train, test, unlabelled = train[:16], test[:16], unlabelled[:16]
    return [t for t, _ in train], [y for _, y in train], [t for t, _ in test], [y for _, y in test], unlabelled, classes


def fine_tune_and_score(model_dir, data, recipe, seed):
    """The recipe both arms share; returns `(test accuracy, seconds)`."""
    import keras

    from keras_bert_zoo import BertClassifier, BertPreprocessor
    from keras_bert_zoo.training import create_optimizer

    train_x, train_y, test_x, test_y, _, classes = data
    start = time.perf_counter()
    keras.utils.set_random_seed(seed)
    model = BertClassifier.from_preset(
        model_dir, num_classes=classes,
        preprocessor=BertPreprocessor.from_preset(model_dir, sequence_length=recipe["sequence_length"]))
    steps = recipe["epochs"] * -(-len(train_x) // recipe["batch_size"])
    model.compile(optimizer=create_optimizer(recipe["learning_rate"], total_steps=steps))
    model.fit(train_x, train_y, batch_size=recipe["batch_size"], epochs=recipe["epochs"], verbose=0)
    accuracy = model.evaluate(test_x, test_y, batch_size=64, return_dict=True, verbose=0)["accuracy"]
    return float(accuracy), time.perf_counter() - start


def adapt(base_dir, texts, recipe, seed, out_dir):
    """TAPT from `base_dir` into the preset `out_dir`; returns `continue_pretraining`'s figures."""
    import keras

    from keras_bert_zoo import BertPreprocessor, BertPretrainer, continue_pretraining

    keras.utils.set_random_seed(seed)
    preprocessor = BertPreprocessor.from_preset(base_dir, sequence_length=recipe["sequence_length"])
    pretrainer = BertPretrainer.from_preset(base_dir, preprocessor=preprocessor)
    figures = continue_pretraining(pretrainer, texts, seed=seed, verbose=0, **recipe["tapt"])
    pretrainer.backbone.save_to_preset(out_dir)
    preprocessor.save_to_preset(out_dir)
    return figures


def summarise(direct, tapt):
    n = len(direct)
    mean_d, mean_t = statistics.mean(direct), statistics.mean(tapt)
    sd_d = statistics.stdev(direct) if n > 1 else float("nan")
    sd_t = statistics.stdev(tapt) if n > 1 else float("nan")
    gain = mean_t - mean_d
    se = math.sqrt(sd_d ** 2 / n + sd_t ** 2 / n) if n > 1 else float("nan")
    diffs = [t - d for t, d in zip(tapt, direct)]
    paired_se = statistics.stdev(diffs) / math.sqrt(n) if n > 1 else float("nan")
    return {"n": n, "direct_mean": mean_d, "direct_sd": sd_d, "tapt_mean": mean_t, "tapt_sd": sd_t,
            "gain": gain, "gain_se": se, "significant": bool(n > 1 and abs(gain) > 2 * se),
            "paired_gain_se": paired_se, "paired_significant": bool(n > 1 and abs(gain) > 2 * paired_se)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", default="docs,sst2")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="tiny data and budget: the code path only")
    parser.add_argument("--out", default=os.path.join(RESULTS, "detail", "adaptive_pretraining.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    base = args.model or minilm_path()
    seeds = [int(s) for s in args.seeds.split(",")]
    started, machine_before, loads = now(), machine_line(), [os.getloadavg()[0]]
    print(machine_before, flush=True)
    record = {"started": started, "machine_before": machine_before, "seeds": seeds, "model": base,
              "command": "python benchmarks/adaptive_pretraining.py " + " ".join(argv or sys.argv[1:]),
              "datasets": {}}
    for name in args.datasets.split(","):
        recipe = SMOKE if args.smoke else RECIPES[name]
        data = load(name, args.smoke)
        print(f"{name}: {len(data[0])} labelled, {len(data[2])} test, {len(data[4])} unlabelled; "
              f"recipe {recipe}", flush=True)
        runs = []
        for seed in seeds:
            direct, direct_s = fine_tune_and_score(base, data, recipe, seed)
            with tempfile.TemporaryDirectory() as adapted:
                figures = adapt(base, data[4], recipe, seed, adapted)
                tapt, tapt_s = fine_tune_and_score(adapted, data, recipe, seed)
            loads.append(os.getloadavg()[0])
            runs.append({"seed": seed, "direct": direct, "tapt": tapt, "tapt_figures": figures,
                         "fine_tune_seconds": [direct_s, tapt_s], "load": loads[-1]})
            print(f"{name} seed {seed}: direct {direct:.4f}, tapt {tapt:.4f} ({tapt - direct:+.4f}); TAPT "
                  f"{figures['head_steps']}+{figures['steps']} steps in {figures['seconds']:.0f} s, MLM accuracy "
                  f"head {figures['head_mlm_accuracy']:.3f} then {figures['mlm_accuracy']:.3f}; fine-tuning "
                  f"{direct_s:.0f} s / {tapt_s:.0f} s; load {loads[-1]:.2f}", flush=True)
        summary = summarise([r["direct"] for r in runs], [r["tapt"] for r in runs])
        summary["tapt_seconds_mean"] = statistics.mean(r["tapt_figures"]["seconds"] for r in runs)
        record["datasets"][name] = {"recipe": recipe, "runs": runs, "summary": summary}
        print(f"{name}: direct {summary['direct_mean']:.4f} +- {summary['direct_sd']:.4f}, tapt "
              f"{summary['tapt_mean']:.4f} +- {summary['tapt_sd']:.4f}, gain {summary['gain']:+.4f} "
              f"(se {summary['gain_se']:.4f}; > 2 se: {summary['significant']}; paired se "
              f"{summary['paired_gain_se']:.4f})", flush=True)
    record["machine_after"] = machine_line()
    record["loads"] = loads
    print(record["machine_after"], flush=True)
    if not args.smoke:
        write_json(args.out, record)
        rows = [{"what": f"{name}: test accuracy after TAPT (mean of {s['summary']['n']} seeds; gain "
                         f"{s['summary']['gain']:+.4f}, se {s['summary']['gain_se']:.4f})",
                 "unit": "accuracy", "ours": s["summary"]["tapt_mean"], "peer": s["summary"]["direct_mean"],
                 "peer_name": "fine-tuned directly", "higher_is_better": True,
                 "note": f"sd {s['summary']['tapt_sd']:.4f} vs {s['summary']['direct_sd']:.4f}"}
                for name, s in record["datasets"].items()]
        write_result("adaptive_pretraining", rows, record["command"], source=args.out, started=started,
                     load=[min(loads), max(loads)])
    return record


if __name__ == "__main__":
    main()
