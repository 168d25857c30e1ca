"""Distribution strategies and precision policies, by the names the CLI uses.

Models, layers and optimizers in this package create no variables at import time or
outside `build`, so everything can be built and compiled inside `strategy.scope()`:

    strategy = make_strategy("mirrored")
    with strategy.scope():
        model = BertClassifier.from_preset(...)
        model.compile(...)
    model.fit(dataset.batch(global_batch_size(32, strategy)))
"""

import os

import keras
import tensorflow as tf

from keras_bert_zoo.backends import require_tensorflow
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.flags import PRECISIONS, STRATEGIES  # the CLI's names, read there without TensorFlow

__all__ = [
    "STRATEGIES",
    "PRECISIONS",
    "configure_replicas",
    "check_strategy",
    "make_strategy",
    "is_chief",
    "worker_info",
    "global_batch_size",
    "set_precision",
    "distribute_batch",
    "set_determinism",
]


def configure_replicas(replicas):
    """Makes `replicas` local devices for `MirroredStrategy`; returns their names.

    With that many GPUs, the first `replicas` GPUs. Without GPUs, the CPU is split into
    `replicas` logical devices (`tf.config.set_logical_device_configuration`), so the
    multi-replica path (per-replica batches, all-reduce) runs on any machine. It must
    run before TensorFlow initialises its devices (before the first op).
    """
    replicas = int(replicas)
    if replicas < 1:
        raise UsageError(f"--replicas {replicas} must be at least 1.")
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        if replicas > len(gpus):
            raise UsageError(f"--replicas {replicas} but this machine has {len(gpus)} GPU(s); use at most {len(gpus)}.")
        return [f"/gpu:{i}" for i in range(replicas)]
    cpu = tf.config.list_physical_devices("CPU")[0]
    current = tf.config.get_logical_device_configuration(cpu)
    if current is None or len(current) != replicas:
        try:
            tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * replicas)
        except RuntimeError as e:
            raise UsageError(
                f"--replicas {replicas}: TensorFlow has already set up its devices ({e}); call "
                "keras_bert_zoo.training.configure_replicas(n) before running any TensorFlow op."
            ) from None
    return [f"/cpu:{i}" for i in range(replicas)]


def check_strategy(name="default", tpu=None, replicas=None):
    """Raises `UsageError` for strategy flags `make_strategy` cannot use, without touching a device.

    Training jobs call it before any work, so `--tpu` given without `--strategy tpu` (which
    would train on the CPU instead, without a word) fails at once, as the other flag mistakes.

    Examples:
    >>> from keras_bert_zoo.training.strategies import check_strategy
    >>> check_strategy("mirrored", replicas=2)
    >>> check_strategy("default", tpu="local")
    Traceback (most recent call last):
    ...
    keras_bert_zoo.errors.UsageError: --tpu applies to --strategy tpu, not default; add --strategy tpu (or drop --tpu).
    """
    if name not in STRATEGIES:
        raise UsageError(f"Unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}.")
    if replicas is not None and name != "mirrored":
        raise UsageError(f"--replicas applies to --strategy mirrored, not {name}.")
    if tpu and name != "tpu":
        raise UsageError(f"--tpu applies to --strategy tpu, not {name}; add --strategy tpu (or drop --tpu).")
    if name == "tpu" and not tpu:
        raise UsageError("--strategy tpu needs --tpu ADDRESS (or 'local' on a TPU VM).")
    if name == "multi_worker" and "TF_CONFIG" not in os.environ:
        raise UsageError(
            "--strategy multi_worker needs the TF_CONFIG environment variable describing the "
            'cluster, e.g. {"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}.'
        )


def make_strategy(name="default", tpu=None, replicas=None):
    """Returns a `tf.distribute.Strategy`.

    Args:
        name: `"default"` (one device), `"mirrored"` (all local GPUs, or the CPU),
            `"multi_worker"` (reads the cluster from the `TF_CONFIG` environment
            variable), `"tpu"` (needs `tpu`, an address or name for
            `TPUClusterResolver`; `"local"` for a TPU VM).
        tpu: str, the TPU address for `name="tpu"`.
        replicas: int, `"mirrored"` only: that many local devices (GPUs, or logical
            CPU devices, see `configure_replicas`); None: every local GPU, or the CPU.
    """
    require_tensorflow("make_strategy (tf.distribute)")
    check_strategy(name, tpu=tpu, replicas=replicas)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(configure_replicas(replicas) if replicas else None)
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)


def is_chief(strategy=None):
    """True on the worker that writes checkpoints, presets and metrics.

    Under multi-worker training every worker runs the same script; only the chief
    (task type `chief`, or worker 0 when the cluster has no chief) writes, so
    outputs are never written twice or half-written by a racing worker.
    """
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def worker_info(strategy=None):
    """`(num_workers, worker_index)` of a multi-worker cluster; `(1, 0)` otherwise."""
    strategy = strategy or tf.distribute.get_strategy()
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not getattr(resolver, "task_type", None):
        return 1, 0
    spec = resolver.cluster_spec().as_dict()
    order = list(spec.get("chief", [])) + list(spec.get("worker", []))
    index = resolver.task_id + (len(spec.get("chief", [])) if resolver.task_type == "worker" else 0)
    return max(1, len(order)), index


def global_batch_size(per_replica, strategy=None):
    """Global batch = per-replica batch x replicas in sync."""
    strategy = strategy or tf.distribute.get_strategy()
    return per_replica * strategy.num_replicas_in_sync


def set_precision(name):
    """Sets the global Keras dtype policy: `"none"` (float32), `"bf16"`, `"fp16"`.

    Under both mixed policies, variables stay float32 and the BERT layers keep softmax,
    LayerNorm and losses in float32; with `"fp16"` Keras wraps the optimizer in a
    `LossScaleOptimizer` at `compile`, as float16 gradients underflow without it.
    """
    if name not in PRECISIONS:
        raise UsageError(f"Unknown precision {name!r}; choose one of {', '.join(PRECISIONS)}.")
    keras.config.set_dtype_policy(PRECISIONS[name])
    return PRECISIONS[name]


def distribute_batch(strategy, batch):
    """This worker's batch -> per-replica values, rows split in order (uneven if they must be)."""
    if strategy.num_replicas_in_sync == 1:
        return batch
    local = len(strategy.extended.worker_devices)

    def rows(ctx):
        i = ctx.replica_id_in_sync_group % local  # replica ids are worker-major

        def part(t):
            n = tf.shape(t)[0]
            return t[(i * n) // local : ((i + 1) * n) // local]

        return tf.nest.map_structure(part, batch)

    return strategy.experimental_distribute_values_from_function(rows)


def set_determinism(enabled):
    """`enabled`: TensorFlow ops give bit-identical results run to run (slower on some ops).

    `tf.config.experimental.enable_op_determinism()`; seeds are set separately
    (`keras.utils.set_random_seed`). With it, a killed and resumed run ends with
    exactly the weights of an uninterrupted one. It cannot be turned off again in
    the same process.
    """
    if enabled:
        tf.config.experimental.enable_op_determinism()
    return bool(enabled)
