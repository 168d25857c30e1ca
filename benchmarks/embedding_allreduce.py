"""What the word-embedding gradient costs a multi-replica training step.

Under `MirroredStrategy` every replica's gradients are summed each step. The word
embedding matrix (30,522 x hidden) is most of a small BERT's weights (bert_mini:
7.8M of 11.2M), and its gradient is a gather's gradient: rows for the batch's
token ids only (`tf.IndexedSlices`). Our optimizer sums the replicas' gradients,
clips the total, and hands each replica its share, dense (see
`keras_bert_zoo.training.optimizer.BertAdamW`), so the matrix crosses the
all-reduce dense once per step.

Measured here, on 2 logical CPU devices (`--replicas 2`, the path a 2-GPU host takes):
1. the all-reduce alone: a dense [30522, hidden] float32 sum across the replicas,
   and the sparse one of the rows a batch touches (IndexedSlices);
2. the whole train step of backbone + classifier head at batch x 128 (global), with
   the word embeddings trainable and frozen, interleaved: the difference is what the
   embedding gradient costs the step (its compute, clipping, all-reduce and update).

On one host both replicas share memory, so the all-reduce is a copy and an add; across
hosts the dense matrix (31 MB at hidden 256, 94 MB at 768) goes over the network each
step, which is where a sparse reduce would pay (see docs/scaling.md, sizing).

Usage:
    python benchmarks/embedding_allreduce.py [--presets bert_mini_uncased bert_base_uncased]
        [--batch-size 16] [--rounds 5] [--out results.json]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def timed(fn, rounds):
    fn()  # compile / warm up
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def allreduce_seconds(strategy, rows, hidden, touched, rounds):
    import tensorflow as tf

    dense = tf.random.normal([rows, hidden])
    indices = tf.random.uniform([touched], 0, rows, dtype=tf.int32)
    values = tf.random.normal([touched, hidden])

    @tf.function
    def dense_sum():
        return strategy.run(lambda: tf.distribute.get_replica_context().all_reduce("SUM", dense))

    @tf.function
    def sparse_sum():
        def step():
            slices = tf.IndexedSlices(values, indices, dense_shape=tf.constant([rows, hidden]))
            return tf.distribute.get_replica_context().all_reduce("SUM", slices).values
        return strategy.run(step)

    def run(f):
        return lambda: tf.nest.map_structure(lambda t: t.numpy(), strategy.experimental_local_results(f()))

    return timed(run(dense_sum), rounds), timed(run(sparse_sum), rounds)


def step_seconds(strategy, preset, batch_size, length, rounds):
    """Median train-step seconds with the word embeddings trainable and frozen, interleaved."""
    import keras
    import numpy as np

    from keras_bert_zoo import BertBackbone, BertClassifier
    from keras_bert_zoo.models.presets import backbone_config
    from keras_bert_zoo.training import create_optimizer

    rng = np.random.default_rng(0)
    x = {"token_ids": rng.integers(1000, 30000, (batch_size, length)).astype("int32"),
         "segment_ids": np.zeros((batch_size, length), "int32"),
         "padding_mask": np.ones((batch_size, length), "int32")}
    y = rng.integers(0, 2, batch_size).astype("int32")
    models = {}
    for name, trainable in (("trainable", True), ("frozen", False)):
        with strategy.scope():
            backbone = BertBackbone(**backbone_config(preset), dropout=0.0)
            backbone.token_embedding.trainable = trainable
            model = BertClassifier(backbone, num_classes=2, dropout=0.0)
            model.compile(optimizer=create_optimizer(1e-5, total_steps=1000), jit_compile=False)
        model.train_on_batch(x, y)  # build and trace
        models[name] = model
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():
            start = time.perf_counter()
            model.train_on_batch(x, y)
            times[name].append(time.perf_counter() - start)
    keras.backend.clear_session()
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=["bert_mini_uncased", "bert_base_uncased"])
    parser.add_argument("--batch-size", type=int, default=16, help="global batch (both replicas)")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args()

    from keras_bert_zoo.training import make_strategy
    from keras_bert_zoo.models.presets import backbone_config
    from benchmarks.common import now, uptime, write_json

    strategy = make_strategy("mirrored", replicas=2)
    print(f"{strategy.num_replicas_in_sync} replicas: {strategy.extended.worker_devices}; load {uptime()}", flush=True)
    rows = []
    for preset in args.presets:
        config = backbone_config(preset)
        hidden, vocabulary = config["hidden_dim"], config["vocabulary_size"]
        touched = args.batch_size // 2 * args.length  # one replica's token positions
        dense, sparse = allreduce_seconds(strategy, vocabulary, hidden, touched, args.rounds)
        steps = step_seconds(strategy, preset, args.batch_size, args.length, args.rounds)
        row = {"preset": preset, "hidden": hidden, "dense_mb": vocabulary * hidden * 4 / 1e6,
               "dense_allreduce_s": dense, "sparse_allreduce_s": sparse,
               "step_s_embeddings_trainable": steps["trainable"], "step_s_embeddings_frozen": steps["frozen"],
               "load": uptime()}
        row["embedding_share_of_step"] = 1 - steps["frozen"] / steps["trainable"]
        row["dense_allreduce_share_of_step"] = dense / steps["trainable"]
        rows.append(row)
        print(f"{preset}: dense all-reduce of {row['dense_mb']:.0f} MB {dense * 1e3:.1f} ms, sparse "
              f"({touched} rows) {sparse * 1e3:.1f} ms; train step {steps['trainable']:.3f} s with trainable "
              f"word embeddings, {steps['frozen']:.3f} s frozen: the embedding gradient is "
              f"{row['embedding_share_of_step']:.1%} of the step, the dense all-reduce alone "
              f"{row['dense_allreduce_share_of_step']:.1%}; load {row['load']}", flush=True)
    if args.out:
        write_json(args.out, {"benchmark": "embedding_allreduce", "date": now(), "batch_size": args.batch_size,
                              "length": args.length, "rows": rows})


if __name__ == "__main__":
    main()
