"""`TrainingJob`: the frame `finetune` and `pretrain` share, from `--out` to the staged write.

Every training job does the same five things around its own data, model and metrics:

1. refuses an existing `out` before any work (unless `overwrite`, or `out` is a killed
   run of ours, which resumes) and refuses an XLA setting it cannot run;
2. makes the distribution strategy before any other TensorFlow op (`--replicas`
   creates logical devices, which must exist first) and turns on op determinism;
3. builds and compiles the model in the strategy's scope (`create_optimizer`, the
   static half of the XLA rule);
4. trains with `training.loop.train`: checkpoints in `out/checkpoints/`, resume, the
   XLA choice on the first batch (`choose_jit_compile`), only the chief writing;
5. writes every output into a temporary sibling of `out` that takes `out`'s place
   once complete (`files.output_dir`); the run's TensorBoard logs move along and its
   checkpoints are dropped.

The jobs call these steps in their own order (pretraining builds its data before it
seeds the model's initialisation, fine-tuning after), so the frame is an object with
one method per step rather than a template that calls back.

Examples:
>>> import keras, numpy as np, os, tempfile, tensorflow as tf
>>> from keras_bert_zoo.training.job import TrainingJob
>>> out = os.path.join(tempfile.mkdtemp(), "run")
>>> job = TrainingJob(out, jit_compile=False, verbose=0)
>>> global_batch = job.start(batch_size=4)
>>> job.seed(0)
>>> with job.scope():
...     model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 2)), np.ones((8, 1)))).batch(global_batch)
>>> job.compile(model, learning_rate=1e-2, total_steps=4, loss="mse")
>>> history = job.train(model, ds, epochs=2, steps_per_epoch=2, signature={"lr": 1e-2})
jit_compile: no XLA (jit_compile=False was asked for)
>>> int(model.optimizer.iterations)
4
>>> with job.staged_output() as staged:
...     open(os.path.join(staged, "done.txt"), "w").write("ok")
2
>>> sorted(os.listdir(out))
['done.txt']
"""

import contextlib
import os

from keras_bert_zoo.files import check_output, output_dir, scratch_dir
from keras_bert_zoo.training.checkpointing import (
    keep_run_files,
    prepare_run_directory,
    reruns_without_overwrite,
    run_directory,
)

__all__ = ["TrainingJob"]


class TrainingJob:
    """One training run's frame: output checks, strategy, compile, the resumable loop, the staged write.

    Args:
        out: the output directory the job writes (nothing is written before the end
            but `out/checkpoints/` and `out/logs/`, or their hidden sibling when `out`
            is being overwritten; see `checkpointing.run_directory`).
        overwrite: replace an existing `out` once the new one is complete.
        resume: continue from the newest checkpoint; False starts over.
        strategy, tpu, replicas, mixed_precision: see `keras_bert_zoo.training.make_strategy`
            and `set_precision`.
        jit_compile: `True`, `False` or `"auto"` (`keras_bert_zoo.training.jit`).
        checkpoint_every: also checkpoint every N steps (0: at epoch ends only).
        deterministic: TF op determinism (a resumed run then ends bit-identical).
        verbose: Keras progress verbosity; `"auto"` (or None): a bar on a terminal, a
            line per epoch otherwise.
    """

    def __init__(
        self,
        out,
        *,
        overwrite=False,
        resume=True,
        strategy="default",
        tpu=None,
        replicas=None,
        mixed_precision="none",
        jit_compile="auto",
        checkpoint_every=0,
        deterministic=False,
        verbose="auto",
    ):
        from keras_bert_zoo.training.jit import resolve_jit_compile
        from keras_bert_zoo.training.strategies import check_strategy

        # An `out` holding only our checkpoints is this run, killed: it resumes (or, resume=False, starts over).
        check_output(out, overwrite or reruns_without_overwrite(out, resume))
        resolve_jit_compile(jit_compile, mixed_precision, strategy)  # refuses XLA it cannot run, before any work
        check_strategy(strategy, tpu=tpu, replicas=replicas)  # the flags only; the devices come in start()
        self.out, self.resume, self.strategy, self.tpu, self.replicas = out, resume, strategy, tpu, replicas
        self.mixed_precision, self.jit_compile, self.checkpoint_every = mixed_precision, jit_compile, checkpoint_every
        self.deterministic = deterministic
        self.verbose = (1 if os.isatty(1) else 2) if verbose in ("auto", None) else verbose
        self.run_dir = run_directory(out)
        self.checkpoint_dir = os.path.join(self.run_dir, "checkpoints")
        self.distribution, self.chief, self.workers = None, True, 1
        self.total_steps, self.fixed_shapes, self.learning_rate = None, True, None

    def start(self, batch_size):
        """Makes the strategy and turns on determinism; returns the global batch for a per-replica one."""
        # Through the package, where tests replace `is_chief` to play a non-chief worker.
        from keras_bert_zoo.training import global_batch_size, is_chief, make_strategy, set_determinism, worker_info

        self.distribution = make_strategy(self.strategy, tpu=self.tpu, replicas=self.replicas)
        self.chief = is_chief(self.distribution)
        self.workers = worker_info(self.distribution)[0]
        set_determinism(self.deterministic)
        return global_batch_size(batch_size, self.distribution)

    def seed(self, seed):
        """The precision policy and the seed of initialisation, dropout and Keras' shuffles."""
        import keras

        from keras_bert_zoo.training.strategies import set_precision

        set_precision(self.mixed_precision)
        keras.utils.set_random_seed(seed)

    def scope(self):
        """The strategy's scope, in which the model's variables are made."""
        return self.distribution.scope()

    def compile(self, model, *, learning_rate, total_steps, recipe="linear", fixed_shapes=True, loss=None, **schedule):
        """Compiles `model` with BERT's optimizer for a run of `total_steps` steps.

        `fixed_shapes=False` (batches of varying widths) rules XLA out under `"auto"`;
        otherwise `"auto"` is decided by timing the first batch (`train`). `schedule`:
        `warmup_ratio=` or `warmup_steps=` (see `create_optimizer`).
        """
        from keras_bert_zoo.training.jit import resolve_jit_compile
        from keras_bert_zoo.training.optimizer import create_optimizer

        self.total_steps, self.fixed_shapes = total_steps, fixed_shapes
        static_jit = resolve_jit_compile(
            self.jit_compile, self.mixed_precision, self.strategy, steps=total_steps, fixed_shapes=fixed_shapes
        )
        with self.scope():
            optimizer = create_optimizer(learning_rate, total_steps=max(1, total_steps), recipe=recipe, **schedule)
            extra = {} if loss is None else {"loss": loss}
            model.compile(optimizer=optimizer, jit_compile=static_jit is True, **extra)  # "auto": the first batch
        self.learning_rate = learning_rate  # named by the error of a non-finite loss

    def check_tpu_compat(self, model, dataset, note=None):
        """The dry run of `check_tpu_compat=True`: prints the report; returns `(model, {"tpu_compat": 1})`."""
        from keras_bert_zoo.training import tpu_compat

        print(tpu_compat.describe(tpu_compat.check_tpu_compat(model, dataset), dataset), flush=True)
        if note:
            print(note, flush=True)
        return model, {"tpu_compat": 1}

    def train(
        self,
        model,
        dataset,
        *,
        epochs,
        steps_per_epoch,
        signature,
        callbacks=(),
        max_steps=None,
        position=None,
        per_worker_input=False,
    ):
        """`training.loop.train` with this job's checkpoints, resume, writer and XLA choice; returns the History.

        `position`: `"iterator"` or `"replay"` (see `training.loop`); default the
        iterator on one worker and replay under multi-worker (only the chief writes,
        so a worker's iterator cannot be kept).
        """
        from keras_bert_zoo.training.jit import choose_jit_compile
        from keras_bert_zoo.training.loop import train as train_loop

        if self.chief:
            prepare_run_directory(self.run_dir, self.out)
        position = position or ("replay" if self.workers > 1 else "iterator")
        steps = self.total_steps if self.total_steps is not None else epochs * steps_per_epoch
        return train_loop(
            model,
            dataset,
            epochs=epochs,
            steps_per_epoch=steps_per_epoch,
            max_steps=max_steps,
            callbacks=list(callbacks),
            verbose=self.verbose,
            checkpoint_dir=self.checkpoint_dir,
            checkpoint_every=self.checkpoint_every,
            resume=self.resume,
            signature=signature,
            position=position,
            writer=self.chief,
            per_worker_input=per_worker_input,
            nonfinite={"learning_rate": self.learning_rate, "mixed_precision": self.mixed_precision},
            choose_jit=lambda batch: choose_jit_compile(
                model,
                batch,
                self.jit_compile,
                mixed_precision=self.mixed_precision,
                strategy=self.strategy,
                steps=steps,
                fixed_shapes=self.fixed_shapes,
            ),
        )

    @contextlib.contextmanager
    def staged_output(self):
        """The directory every output goes to; it becomes `out` when the block ends without error.

        On the chief: a temporary sibling of `out`, which takes `out`'s place (the
        run's `logs/` move into it, its checkpoints are dropped); on other workers a
        scratch directory nobody reads (they save too, as the chief does, but write nothing that stays).
        """
        with output_dir(self.out, overwrite=True) if self.chief else scratch_dir() as staged:
            yield staged
            if self.chief:
                keep_run_files(self.run_dir, staged)
