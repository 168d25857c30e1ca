"""`train(model, dataset, ...)`: the training loop of `pretrain` and `finetune`, resumable.

Why not `model.fit`: `fit` cannot save where it is in the data. Keras'
`BackupAndRestore` restores the epoch only (a mid-epoch kill replays the epoch from
batch 0 with mid-epoch weights), and `fit` keeps its `tf.data` iterator to itself,
so the iterator position and the shuffle state cannot go into a checkpoint; under
`MultiWorkerMirroredStrategy` `fit` is reported broken since TF 2.16
(keras-team/keras#20585). This loop is `fit`'s own loop (same `train_function`,
same `compile()` losses and metrics, same Keras callbacks and progress bar) with
the iterator in our hands:

- the input is one host-side `tf.data` iterator over `dataset.repeat()`; each
  step takes one global (or, multi-worker, per-worker) batch and hands each local
  replica its rows (`experimental_distribute_values_from_function`);
- every `checkpoint_every` steps and at each epoch end it writes a
  `RunCheckpoints` checkpoint (model, optimizer, seed-generator states, the
  iterator or the count of batches consumed, the callbacks' counters);
- `resume=True` restores the newest checkpoint and continues on the very next
  batch, so a killed and resumed run ends with the weights of an uninterrupted one
  (bit-identical with `tf.config.experimental.enable_op_determinism()`);
- the first non-finite loss stops training with `NonFiniteLossError` (nothing is
  saved after it: the last checkpoint is the last good state).

`position="iterator"` saves the `tf.data` iterator itself (shuffle buffers,
random state): exact for any pipeline made of tf.data ops. `position="replay"`
saves the number of batches consumed and, on resume, skips that many batches of a
freshly built pipeline: needed for pipelines tf.data cannot serialise (a Python
`from_generator`) and for multi-worker runs (only the chief writes, so a
worker's iterator cannot be kept); exact whenever the pipeline is deterministic
(fixed seeds), at the cost of re-reading the skipped input.

Examples:
>>> import keras, numpy as np, tensorflow as tf, tempfile
>>> from keras_bert_zoo.training.loop import train
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 2)), np.ones(8))).batch(2)
>>> _ = train(model, ds, epochs=2, steps_per_epoch=4, checkpoint_dir=tempfile.mkdtemp(), verbose=0)
>>> int(model.optimizer.iterations)
8
"""

import math

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.keras_compat import distribute_strategy, metrics_result, symbolic_build

__all__ = ["NonFiniteLossError", "nonfinite_message", "worker_rows", "train_function", "evaluate", "train"]

_POSITIONS = ("iterator", "replay")


class NonFiniteLossError(FloatingPointError):
    """The training loss became NaN or infinite; the message names the step and likely causes."""


def nonfinite_message(step, loss, learning_rate=None, mixed_precision="none"):
    """The one-line explanation `NonFiniteLossError` carries."""
    causes = []
    if mixed_precision == "fp16":
        causes.append("fp16 overflow (use --mixed-precision bf16, or none)")
    lr = f" {learning_rate:g}" if learning_rate is not None else ""
    causes.append(
        f"a learning rate{lr} too high for this model and batch (lower --learning-rate or lengthen the warm-up)"
    )
    causes.append("bad input values")
    return (
        f"the training loss is {loss} at step {step}; stopped, nothing after the last checkpoint was kept. "
        f"Likely cause: {'; or '.join(causes)}."
    )


def worker_rows(dataset, num_workers, index):
    """Each global batch -> this worker's rows of it (worker `index` of `num_workers`).

    The workers together take exactly the global batch a single process would, so N
    workers train like one process on the same global batch. The batches are cheap
    to form when the pipeline caches its expensive part (fine-tuning tokenizes once
    into memory); a stream that does its work per batch (pretraining on text) is
    then computed by every worker; see docs/scaling.md.
    """
    import tensorflow as tf

    if num_workers == 1:
        return dataset

    def rows(*batch):
        def part(t):
            n = tf.shape(t)[0]
            return t[(index * n) // num_workers : ((index + 1) * n) // num_workers]

        batch = batch[0] if len(batch) == 1 else batch
        return tf.nest.map_structure(part, batch)

    return dataset.map(rows)


def train_function(model, element_spec=None):
    """The one-step function: Keras' own, except on one device and under multi-worker.

    On one device (no distribution strategy), given the dataset's `element_spec`, the step is
    `model.train_step` traced once for that spec (widths `None`) before the first batch, so every
    step of every run executes the same graph. Keras' step, called on each batch's tensors,
    traces the first width on its own and a shape-generic graph from the second on
    (`reduce_retracing`), and TensorFlow optimises a graph of known shapes differently: a run
    resumed at step 11 ran steps 11-12 (and later batches of their widths) through graphs the
    uninterrupted run never used, and ended 6e-8 away from it (all-MiniLM-L6-v2 on 1,600 SST-2
    sentences, `--deterministic`). One trace is also one fewer before the first step.

    Keras 3.15 reduces the step's logs across workers with
    `strategy.reduce("MEAN", v, axis=0)`, which fails on the scalar metrics
    ("Invalid reduction dimension 0 for input with 0 dimensions"; part of
    keras-team/keras#20585); here they are averaged over replicas instead, as
    Keras does on one host.
    """
    import tensorflow as tf

    from keras_bert_zoo.training.strategies import worker_info

    strategy = model.distribute_strategy
    if worker_info(strategy)[0] == 1:
        if element_spec is not None and distribute_strategy(model) is None and not model.run_eagerly:
            step = tf.function(model.train_step, reduce_retracing=True, jit_compile=bool(model.jit_compile))
            step.get_concrete_function(element_spec)
            return step
        model.make_train_function()
        return lambda batch: model.train_function([batch])

    def one_step(batch):
        outputs = strategy.run(model.train_step, args=(batch,))
        return tf.nest.map_structure(lambda v: strategy.reduce("MEAN", v, axis=None), outputs)

    return tf.function(one_step, reduce_retracing=True, jit_compile=bool(model.jit_compile))


def evaluate(model, dataset):
    """`model.evaluate(dataset)` as a dict of floats, also under multi-worker.

    Keras' `evaluate` fails under `MultiWorkerMirroredStrategy` in Keras 3.15 (it
    cannot rebuild from the distributed batch); there each worker scores its rows
    of every batch with the model's `test_step` and the metrics are read across
    workers.
    """
    import tensorflow as tf

    from keras_bert_zoo.training.strategies import distribute_batch, worker_info

    strategy = model.distribute_strategy
    workers = worker_info(strategy)
    if workers[0] == 1:
        return {k: float(v) for k, v in model.evaluate(dataset, return_dict=True, verbose=0).items()}
    step = tf.function(lambda batch: strategy.run(model.test_step, args=(batch,)))
    model.reset_metrics()
    for batch in worker_rows(dataset, *workers):
        step(distribute_batch(strategy, batch))
    return {k: float(v) for k, v in model.get_metrics_result().items()}


def _resumable(callbacks):
    return [cb for cb in callbacks if hasattr(cb, "resume_state")]


def _resume(checkpoints, callbacks, job_state, total, steps_per_epoch):
    """Restores the newest checkpoint, the callbacks' counters and the job's state; returns its step (0: none)."""
    latest, meta = checkpoints.restore_newest()  # a damaged newest one: the older intact one, said so
    if not latest:
        return 0
    start = meta["step"]
    # Not strict: a caller's own callbacks are not part of the signature, so a run may resume with more
    # or fewer resumable ones than it saved; the job's own (step log, evaluation) come first and pair up.
    for cb, state in zip(_resumable(callbacks), meta["state"].get("callbacks", []), strict=False):
        cb.load_resume_state(state)
    if job_state and "job" in meta["state"]:
        job_state[1](meta["state"]["job"])
    where = (
        "the end"
        if start >= total
        else f"epoch {start // steps_per_epoch + 1}, batch {start % steps_per_epoch} of {steps_per_epoch}"
    )
    print(f"resumed from {latest}: step {start} of {total} ({where})", flush=True)
    return start


def _resume_state(callbacks, job_state):
    """What a checkpoint keeps besides the variables: the callbacks' counters and the job's state."""
    state = {"callbacks": [cb.resume_state() for cb in _resumable(callbacks)]}
    if job_state:
        state["job"] = job_state[0]()
    return state


def _build_state(model, element_spec):
    """The model's metric and optimizer variables, made before the first step from the batches' spec."""
    from keras_bert_zoo.models.step_state import build_metrics

    if distribute_strategy(model) is not None:  # create metric/optimizer variables in the scope, as fit does
        # From the element spec, not a batch: a second iterator would advance a reshuffling
        # dataset's seed, and the run would then see another order than a one-device run.
        with model.distribute_strategy.scope():
            symbolic_build(model, element_spec)
    else:  # the compiled metrics' state before the first trace: one trace of the step (models.step_state)
        build_metrics(model, element_spec)


def _callback_list(model, callbacks, *, verbose, epochs, steps):
    """`callbacks` as a Keras `CallbackList` with `fit`'s history and progress bar (a given list is kept)."""
    import keras

    if isinstance(callbacks, keras.callbacks.CallbackList):
        return callbacks
    return keras.callbacks.CallbackList(
        list(callbacks),
        add_history=True,
        add_progbar=verbose != 0,
        verbose=verbose,
        epochs=epochs,
        steps=steps,
        model=model,
    )


def _open_checkpoints(
    model, checkpoint_dir, iterator, *, signature, writer, resume, callbacks, job_state, total, steps_per_epoch
):
    """`(checkpoints, start)`: the run's `RunCheckpoints` (None without `checkpoint_dir`) and its first step.

    The optimizer is built first, so that a restore finds its slots to fill.
    """
    from keras_bert_zoo.training.checkpointing import RunCheckpoints

    checkpoints = None
    if checkpoint_dir:
        checkpoints = RunCheckpoints(checkpoint_dir, model, iterator=iterator, signature=signature, writer=writer)
        if not resume:
            checkpoints.clear()
    with model.distribute_strategy.scope():
        if model.optimizer is not None and not model.optimizer.built:
            model.optimizer.build(model.trainable_variables)
    if checkpoints is None or not resume:
        return checkpoints, 0
    return checkpoints, _resume(checkpoints, callbacks, job_state, total, steps_per_epoch)


def train(
    model,
    dataset,
    *,
    epochs,
    steps_per_epoch,
    max_steps=None,
    callbacks=(),
    verbose=2,
    checkpoint_dir=None,
    checkpoint_every=0,
    resume=True,
    signature=None,
    position="iterator",
    writer=True,
    job_state=None,
    nonfinite=None,
    per_worker_input=False,
    choose_jit=None,
):
    """Trains a compiled model on `dataset` like `fit`, with checkpoints and resume.

    Args:
        model: a compiled Keras model (built in the strategy's scope if any).
        dataset: `tf.data.Dataset` of global batches, repeated as needed; under
            multi-worker each worker keeps its rows of each (`worker_rows`).
        epochs, steps_per_epoch: the run is `epochs * steps_per_epoch` steps (or
            `max_steps` if smaller); epoch ends run the epoch callbacks and save.
        callbacks: Keras callbacks; those with `resume_state()` /
            `load_resume_state(state)` have their counters saved and restored.
        verbose: as `fit`'s.
        checkpoint_dir: `OUT/checkpoints`, or None for no checkpoints.
        checkpoint_every: also save every N steps (0: at epoch ends only).
        resume: continue from the newest checkpoint in `checkpoint_dir`; False
            deletes them and starts over.
        signature: dict that must match the checkpoint's (the run's flags).
        position: `"iterator"` or `"replay"` (see the module docstring).
        writer: False on non-chief workers (they never write `checkpoint_dir`).
        job_state: optional `(get, set)` callables saving the caller's own JSON state.
        nonfinite: dict of `nonfinite_message` keywords (learning_rate, mixed_precision).
        per_worker_input: `dataset` already holds only this worker's rows of each
            global batch (a sharded reader); otherwise each worker slices its rows.
        choose_jit: optional `callable(batch) -> bool` given the first batch of the
            run before its first step (`keras_bert_zoo.training.jit.choose_jit_compile`);
            the train step is compiled with XLA when it answers True. The batch is then
            trained on as usual.

    Returns:
        the `History` callback, as `fit` returns.

    Raises:
        NonFiniteLossError: at the first step whose loss is NaN or infinite.
    """
    import keras

    if position not in _POSITIONS:
        raise UsageError(f"position={position!r}; use one of {_POSITIONS}.")
    from keras_bert_zoo.training.strategies import distribute_batch, worker_info

    strategy = model.distribute_strategy
    if not per_worker_input:
        dataset = worker_rows(dataset, *worker_info(strategy))
    total = epochs * steps_per_epoch if max_steps is None else min(max_steps, epochs * steps_per_epoch)
    repeated = dataset.repeat()
    iterator = iter(repeated) if position == "iterator" else None
    _build_state(model, dataset.element_spec)

    checkpoints, start = _open_checkpoints(
        model,
        checkpoint_dir,
        iterator,
        signature=signature,
        writer=writer,
        resume=resume,
        callbacks=callbacks,
        job_state=job_state,
        total=total,
        steps_per_epoch=steps_per_epoch,
    )
    if iterator is None:
        iterator = iter(repeated.skip(start))  # replay: the same deterministic stream, `start` batches on

    def save(step):
        if checkpoints is not None:
            checkpoints.save(step, _resume_state(callbacks, job_state))

    callback_list = _callback_list(model, callbacks, verbose=verbose, epochs=epochs, steps=steps_per_epoch)
    model.stop_training = False
    pending = None  # the first batch, read early for `choose_jit` and trained on first
    if choose_jit is not None and start < total:
        pending = next(iterator)
        model.jit_compile = bool(choose_jit(pending))
        model.train_function = None  # made again with the choice
    step_function = train_function(model, dataset.element_spec)
    callback_list.on_train_begin()
    step, logs, epoch_logs, saved = start, {}, {}, start
    for epoch in range(start // steps_per_epoch, epochs):
        if step >= total:
            break
        model.reset_metrics()
        callback_list.on_epoch_begin(epoch)
        for batch in range(step - epoch * steps_per_epoch, steps_per_epoch):
            callback_list.on_train_batch_begin(batch)
            batch_data, pending = (next(iterator) if pending is None else pending), None
            logs = step_function(distribute_batch(strategy, batch_data))
            step += 1
            loss = float(logs["loss"]) if "loss" in logs else 0.0
            if not math.isfinite(loss):
                raise NonFiniteLossError(nonfinite_message(step, loss, **(nonfinite or {})))
            callback_list.on_train_batch_end(batch, logs)
            if checkpoint_every and step % checkpoint_every == 0:
                save(step)
                saved = step
            if model.stop_training or step >= total:
                break
        epoch_logs = metrics_result(model, logs)
        callback_list.on_epoch_end(epoch, epoch_logs)
        if saved != step:
            save(step)
            saved = step
        if model.stop_training:
            break
    if isinstance(model.optimizer, keras.optimizers.Optimizer):
        model.optimizer.finalize_variable_values(model.trainable_weights)
    callback_list.on_train_end(logs=epoch_logs)
    return model.history
