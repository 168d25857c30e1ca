"""Keras callbacks of the training jobs: step log and limits, periodic evaluation, TensorBoard.

Ordinary `keras.callbacks.Callback`s: a user's own `model.fit` can take them too.

Examples:
>>> import keras, numpy as np
>>> from keras_bert_zoo.training.callbacks import StepLog
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> log = StepLog(max_steps=3)
>>> _ = model.fit(np.zeros((40, 2)), np.zeros(40), batch_size=4, epochs=5, callbacks=[log], verbose=0)
>>> log.steps, int(model.optimizer.iterations)
(3, 3)
"""

import time

import keras

__all__ = ["StepLog", "PeriodicEvaluation", "ScalarLogger"]

_MAX_SAVED_ROWS = 2000  # step rows a checkpoint keeps for the curves (thinned evenly beyond that)


class StepLog(keras.callbacks.Callback):
    """Per-step logs and timing; stops training after `max_steps` or `time_budget` seconds.

    Keras runs whole epochs; with `max_steps` the run ends on exactly that step even
    in the middle of an epoch (so `--steps N` trains N steps, not a multiple of the
    evaluation interval).

    Attributes:
        rows: one dict per step (`step` plus the logged values) and per evaluation.
        steps: optimizer steps taken.
        train_seconds: time inside train steps; `steady_seconds` the same without the
            first `warmup_steps` steps (tracing and compiling).
    """

    def __init__(self, max_steps=None, time_budget=None, warmup_steps=3):
        super().__init__()
        self.max_steps, self.time_budget, self.warmup_steps = max_steps, time_budget, warmup_steps
        self.rows, self.steps = [], 0
        self.steady_steps, self._steps_here = 0, 0  # steps in this process (a resumed run compiles again)
        self.train_seconds = self.steady_seconds = 0.0
        self._t = None

    def on_train_batch_begin(self, batch, logs=None):
        self._t = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        elapsed = time.perf_counter() - self._t
        self.train_seconds += elapsed
        self.steps += 1
        self._steps_here += 1
        if self._steps_here > self.warmup_steps:
            self.steady_seconds += elapsed
            self.steady_steps += 1
        self.rows.append({"step": self.steps, **{k: float(v) for k, v in (logs or {}).items()}})
        if (self.max_steps and self.steps >= self.max_steps) or (
            self.time_budget and self.train_seconds >= self.time_budget
        ):
            self.model.stop_training = True

    def resume_state(self):
        """Counters and the step rows (thinned to at most `_MAX_SAVED_ROWS`) for a checkpoint."""
        keep = max(1, -(-len(self.rows) // _MAX_SAVED_ROWS))
        return {
            "steps": self.steps,
            "train_seconds": self.train_seconds,
            "steady_seconds": self.steady_seconds,
            "steady_steps": self.steady_steps,
            "rows": self.rows[::keep],
        }

    def load_resume_state(self, state):
        self.steps, self.rows = state["steps"], list(state["rows"])
        self.train_seconds, self.steady_seconds = state["train_seconds"], state["steady_seconds"]
        self.steady_steps = state["steady_steps"]

    def steady_rate(self, items_per_step):
        """Items (examples, tokens) per second after the compiling first steps."""
        return self.steady_steps * items_per_step / max(self.steady_seconds, 1e-9)


class PeriodicEvaluation(keras.callbacks.Callback):
    """Calls `evaluate()` (-> dict of floats) every `every_steps` steps and at each epoch end.

    The results are added to the epoch's logs with `prefix` (so `History` and
    TensorBoard see them), kept in `history` as `(step, metrics)`, and passed to
    `on_result(step, metrics)` (e.g. to keep the best checkpoint).

    Args:
        evaluate: callable returning a dict of floats.
        every_steps: int, 0 evaluates at epoch ends only.
        prefix: str put before the names in the logs (`"heldout_"`, `"dev_"`).
        on_result: optional callable `(step, metrics) -> str | None`; a string is
            appended to the printed line.
        label: what the printed line calls the data (`"dev"`, `"held-out"`).
        shown: the metric names printed and put in the logs (None: all); `history`
            keeps them all.
    """

    def __init__(self, evaluate, every_steps=0, prefix="", on_result=None, label="dev", shown=None):
        super().__init__()
        self.evaluate, self.every_steps, self.prefix, self.shown = evaluate, every_steps, prefix, shown
        self.on_result, self.label = on_result, label
        self.history, self.step, self.eval_seconds = [], 0, 0.0

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.every_steps and self.step % self.every_steps == 0:
            self._run()

    def on_epoch_end(self, epoch, logs=None):
        if not self.history or self.history[-1][0] != self.step:
            self._run()
        if logs is not None:
            logs.update(
                {f"{self.prefix}{k}": v for k, v in self.history[-1][1].items() if not self.shown or k in self.shown}
            )

    def _run(self):
        start = time.perf_counter()
        metrics = {k: v if isinstance(v, int) else float(v) for k, v in self.evaluate().items()}
        self.history.append((self.step, metrics))
        note = self.on_result(self.step, metrics) if self.on_result else None
        self.eval_seconds += time.perf_counter() - start
        keys = self.shown or sorted(metrics)
        shown = ", ".join(f"{k} {metrics[k]:.4f}" for k in keys if k in metrics)
        print(f"step {self.step}: {self.label} {shown}" + (f"  ({note})" if note else ""), flush=True)

    def resume_state(self):
        return {"step": self.step, "history": self.history, "eval_seconds": self.eval_seconds}

    def load_resume_state(self, state):
        self.step, self.eval_seconds = state["step"], state["eval_seconds"]
        self.history = [(step, metrics) for step, metrics in state["history"]]

    @property
    def last(self):
        return self.history[-1][1] if self.history else {}


class ScalarLogger(keras.callbacks.Callback):
    """Writes TensorBoard scalars: `train/*` every `every` steps, `<prefix>*` evaluations per epoch.

    Uses `tf.summary.write` from TensorFlow core, so logs are written even when the
    `tensorboard` package (needed by `keras.callbacks.TensorBoard`) is not installed;
    `tensorboard --logdir DIR` shows them.
    """

    def __init__(self, log_dir, every=10, eval_prefix="heldout_"):
        super().__init__()
        self.log_dir, self.every, self.eval_prefix = log_dir, max(1, int(every)), eval_prefix
        self.step, self._writer = 0, None

    def _write(self, group, logs):
        import tensorflow as tf
        from tensorflow.core.framework import summary_pb2

        if self._writer is None:  # created on first use: nothing is written by a run that never steps
            self._writer = tf.summary.create_file_writer(self.log_dir)
        metadata = summary_pb2.SummaryMetadata(
            plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
        )
        with self._writer.as_default():
            for k, v in logs.items():
                tf.summary.write(f"{group}/{k}", tf.constant(float(v)), step=self.step, metadata=metadata)

    def on_train_batch_end(self, batch, logs=None):
        self.step += 1
        if self.step % self.every == 0:
            self._write("train", logs or {})

    def resume_state(self):
        return {"step": self.step}

    def load_resume_state(self, state):
        self.step = state["step"]

    def on_epoch_end(self, epoch, logs=None):
        evals = {k[len(self.eval_prefix) :]: v for k, v in (logs or {}).items() if k.startswith(self.eval_prefix)}
        if evals:
            self._write(self.eval_prefix.rstrip("_"), evals)
        if self._writer is not None:
            self._writer.flush()

    def on_train_end(self, logs=None):
        if self._writer is not None:
            self._writer.flush()
