"""`finetune(task, ...)`: the fine-tuning job for any registered task, as a Python function.

It validates both data files and the model before the first step, then runs the
steps of `training.job.TrainingJob`: builds the model and optimizer inside the
distribution strategy's scope, trains with `training.loop.train` (`fit`'s train step
in a loop of our own, checkpointed and resumable from `out/checkpoints/`) on the
task's `tf.data` pipeline, scores the dev file every `eval_every` steps and at each
epoch end, and writes `out/` as a preset directory with `metrics.json` and
`training_curve.png`. `bert-zoo finetune` is a thin adapter over it.

The job reads top to bottom in four steps: read the data and build the model
(`_build_model`), make the batches and the optimizer (`_batches_and_optimizer`),
train while scoring dev (`_train`), write the output (`_write_output`). The checks it
runs before all of them are in `tasks.finetuning_checks`.
"""

import os
import tempfile

import numpy as np

from keras_bert_zoo.files import write_metrics
from keras_bert_zoo.locking import locks_output
from keras_bert_zoo.tasks.finetuning_checks import check_lora_rank, check_vocabulary, recipe_of, vocab_dir_for
from keras_bert_zoo.tasks.finetuning_metrics import dev_evaluation, finetuning_metrics, lora_metrics
from keras_bert_zoo.tasks.registry import get_task
from keras_bert_zoo.training import curves  # through the module: failure tests replace its functions
from keras_bert_zoo.training.callbacks import StepLog

# vocab_dir_for and check_vocabulary live in finetuning_checks; this module keeps exporting them.
__all__ = ["vocab_dir_for", "check_vocabulary", "finetune"]


@locks_output("out")  # one run at a time on one --out (a second run refuses, naming the first)
def finetune(
    task,
    model,
    train,
    dev,
    out,
    layout=None,
    vocab=None,
    epochs=None,
    batch_size=32,
    learning_rate=None,
    warmup_ratio=0.1,
    recipe="linear",
    sequence_length=None,
    max_train_examples=None,
    max_dev_examples=None,
    eval_every=0,
    select="final",
    seed=0,
    batching="auto",
    jit_compile="auto",
    strategy="default",
    tpu=None,
    replicas=None,
    mixed_precision="none",
    checkpoint_every=0,
    resume=True,
    deterministic=False,
    check_tpu_compat=False,
    verbose="auto",
    overwrite=False,
    callbacks=(),
    lora_rank=None,
    **task_options,
):
    """Fine-tunes a checkpoint for a task; returns `(model, metrics)`.

    Args:
        task: a registered task name (`"classify"`) or its `TaskSpec`.
        model: preset name or `hf://ORG/NAME[@REV]` (its pretrained checkpoint, through the
            Hub cache), or a checkpoint directory (HF, Google, KerasHub or ours).
        train, dev: data files in the task's formats.
        out: output directory; receives the preset (weights, config, vocabulary),
            `metrics.json` and `training_curve.png`.
        layout: the task's data layout (classification:
            `keras_bert_zoo.tasks.classifier.data.DataLayout`, e.g.
            `DataLayout.for_task("sst2")`).
        vocab: `vocab.txt` or its directory when `model` has none (preset names).
        epochs, batch_size, learning_rate, warmup_ratio: the recipe; `batch_size`
            is per replica; `epochs` and `learning_rate` default to the task's (3, 5e-5).
        recipe: the optimizer recipe: `"linear"` (HF's bias-corrected AdamW and
            warm-up/decay schedule, the default) or `"bert_original"`
            (google-research/bert's); see `keras_bert_zoo.training.create_optimizer`.
        sequence_length: default the task's (128).
        max_train_examples, max_dev_examples: keep the first N of each file.
        eval_every: also score dev every N steps (0: at epoch ends only).
        select: `"final"` keeps and reports the model at the end of training (what
            a fixed recipe gives, and what peers report); `"best"` keeps the
            checkpoint with the best dev score among the evaluations (best-of-dev
            selection: name it as such when comparing).
        seed: initialisation, dropout and shuffling seed.
        batching: how examples become batches, one of the task's `batchings`
            (`keras_bert_zoo.tasks.options.BATCHINGS`): `"auto"` (default) is the task's
            fastest at equal accuracy: classify and choice group training batches by
            length, tag and qa pack random batches into full rows (same loss, see
            `preprocessing.packing`); `"bucketed"` cuts random batches to their longest
            (HF's Trainer), `"by_length"` (classify, choice, tag) groups them by length,
            `"fixed"` pads every batch to `sequence_length`; others raise.
        jit_compile: XLA for the train step; `"auto"` (default): the package's rule
            (`keras_bert_zoo.training.jit`): no XLA for batches of varying widths (each width
            would compile a program per width), multi-worker on CPUs, bf16 on a CPU or runs
            under 1,000 steps; otherwise both are timed on the first batch; the choice is printed.
        strategy, tpu, replicas, mixed_precision: see `keras_bert_zoo.training.make_strategy`
            and `set_precision`; only the chief writes `out`.
        checkpoint_every, resume, deterministic: checkpoints in `out/checkpoints/`
            every N steps and at each epoch end; `resume` continues from the newest
            (same arguments), False starts over; `deterministic` turns on TF op
            determinism (a resumed run then ends bit-identical to an uninterrupted
            one). See `keras_bert_zoo.training.loop`.
        check_tpu_compat: dry run: check the batches are static and every step
            compiles with XLA (`keras_bert_zoo.training.tpu_compat`); returns
            `(model, {"tpu_compat": 1})` without training or writing.
            `strategy="tpu"` trains on the same static batches.
        verbose: Keras `fit` verbosity; `"auto"`: a bar on a terminal, a line per epoch otherwise.
        overwrite: replace an existing `out` (once the new one is complete); without it an
            existing `out` raises `OutputExistsError` before any work. Everything is written
            to a temporary sibling of `out` first, so a failed run leaves `out` as it was.
        callbacks: more Keras callbacks, run after the job's own (step log, dev
            evaluation) at every step.
        lora_rank: train LoRA adapters of this rank instead of the whole model
            (`BertBackbone.enable_lora`: the `query` and `value` projections' adapters and
            biases, and the task head; the rest frozen). LoRA wants a higher learning rate
            than full fine-tuning (2e-3 on SST-2 with MiniLM, `benchmarks/run.py lora`, docs/decisions.md). `out`
            holds the frozen model and the adapters (HF PEFT's files); `from_preset(out)`
            restores both.
        **task_options: the task's layout options, applied to `layout` (e.g. qa's
            `doc_stride=128, stride_mode="overlap"`).

    Returns:
        `(model, metrics)`: the trained task model and the flat dict written to
        `out/metrics.json`: the dev scores of the kept model (`accuracy`, `f1`, ...),
        `best_dev_<metric>` / `best_step` of the evaluations, `selection_best` (1 when
        `select="best"`), timing and sizes.

    Examples:
    ```python
    from keras_bert_zoo import finetune
    from keras_bert_zoo.tasks.classifier.data import DataLayout
    model, metrics = finetune("classify", "path/to/all-MiniLM-L6-v2", "sst2/train.tsv", "sst2/dev.tsv",
                              out="/tmp/sst2", layout=DataLayout.for_task("sst2"), epochs=1)
    metrics["accuracy"]
    ```
    """
    from keras_bert_zoo.backends import require_tensorflow
    from keras_bert_zoo.training.job import TrainingJob

    require_tensorflow("finetune (the fine-tuning job)")
    spec = get_task(task) if isinstance(task, str) else task
    check_lora_rank(lora_rank)
    if vocab is None:  # a preset name or hf://ORG/NAME: its cached checkpoint, vocab.txt included
        from keras_bert_zoo.models import loading

        model = loading.resolve(model)
    job = TrainingJob(
        out,
        overwrite=overwrite,
        resume=resume,
        strategy=strategy,
        tpu=tpu,
        replicas=replicas,
        mixed_precision=mixed_precision,
        jit_compile=jit_compile,
        checkpoint_every=checkpoint_every,
        deterministic=deterministic,
        verbose=verbose,
    )
    plan = recipe_of(
        spec,
        select=select,
        batching=batching,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_ratio=warmup_ratio,
        optimizer=recipe,
        sequence_length=sequence_length,
        layout=layout,
        seed=seed,
        task_options=task_options,
    )
    global_batch = job.start(batch_size)  # before any other TF op: --replicas makes logical devices
    # The model's rule for its raw inputs: "auto" may pack; packed pooled rows need one replica.
    plan.batching = spec.model_class().batching_on_replicas(plan.batching, job.distribution.num_replicas_in_sync)
    # A TPU (and its dry run) needs one XLA program, so fixed shapes and full batches.
    static = check_tpu_compat or strategy == "tpu"
    plan.batching = "fixed" if static else plan.batching

    # 1. Read the data and build the model: everything is validated before the first step.
    train_examples = spec.read_data(train, plan.layout, max_examples=max_train_examples)
    dev_examples = spec.read_data(dev, plan.layout, reference=train_examples, max_examples=max_dev_examples)
    preprocessor, task_model = _build_model(spec, job, model, vocab, train_examples, plan, lora_rank)
    # 2. The batches and the optimizer.
    train_ds, dev_ds, steps_per_epoch = _batches_and_optimizer(
        spec, job, task_model, preprocessor, (train_examples, dev_examples), plan, global_batch, static
    )
    if check_tpu_compat:
        return job.check_tpu_compat(task_model, train_ds)
    # 3. Train, scoring dev.
    signature = _signature(spec, model, train, plan, global_batch, len(train_examples), steps_per_epoch)
    signature["mixed_precision"] = mixed_precision
    if lora_rank:  # only then: checkpoints of runs without LoRA keep their signature
        signature["lora_rank"] = lora_rank
    task_model, metrics, curve = _train(
        spec, job, task_model, preprocessor, train_ds, (dev_examples, dev_ds), plan, signature, eval_every, callbacks
    )
    metrics.update(lora_metrics(task_model, lora_rank))
    # 4. Write the output.
    _write_output(job, task_model, metrics, curve)
    return task_model, metrics


def _build_model(spec, job, model, vocab, train_examples, plan, lora_rank):
    """`(preprocessor, task_model)`: the vocabulary checked against the model, the model built in the job's scope."""
    vocab_dir = vocab_dir_for(model, vocab)
    check_vocabulary(model, vocab_dir, plan.sequence_length)
    job.seed(plan.seed)
    preprocessor = spec.make_preprocessor(vocab_dir, plan.sequence_length, plan.layout)
    with job.scope():
        task_model = spec.build_model(model, train_examples, plan.layout, preprocessor, plan.sequence_length)
        if lora_rank:
            task_model.backbone.enable_lora(lora_rank)
    return preprocessor, task_model


def _batches_and_optimizer(spec, job, task_model, preprocessor, examples, plan, global_batch, static):
    """`(train_ds, dev_ds, steps_per_epoch)`; compiles `task_model` for the run's steps."""
    train_ds, dev_ds, steps_per_epoch, fixed_shapes = _datasets(
        spec, *examples, preprocessor, global_batch, seed=plan.seed, batching=plan.batching, static=static
    )
    if static:
        job.jit_compile = True
    job.compile(
        task_model,
        learning_rate=plan.learning_rate,
        total_steps=plan.epochs * steps_per_epoch,
        recipe=plan.optimizer,
        fixed_shapes=fixed_shapes,
        warmup_ratio=plan.warmup_ratio,
    )
    return train_ds, dev_ds, steps_per_epoch


def _signature(spec, model, train, plan, global_batch, train_examples, steps_per_epoch):
    """What a checkpoint must match to be resumed: the run's data, recipe and sizes."""
    return {
        "task": spec.name,
        "model": str(model),
        "train": os.path.abspath(train),
        "epochs": plan.epochs,
        "global_batch": global_batch,
        "learning_rate": plan.learning_rate,
        "warmup_ratio": plan.warmup_ratio,
        "recipe": plan.optimizer,
        "sequence_length": plan.sequence_length,
        "train_examples": train_examples,
        "steps_per_epoch": steps_per_epoch,
        "seed": plan.seed,
        "batching": plan.batching,
        "select": plan.select,
    }


def _train(spec, job, task_model, preprocessor, train_ds, dev, plan, signature, eval_every, callbacks):
    """Trains, scoring dev; returns `(the kept model, metrics, the training curve's data)`."""
    dev_examples, dev_ds = dev
    primary = spec.primary_metric(plan.layout)
    # With select="best" the best model so far lives in `out/checkpoints/best` (a killed run
    # resumes with it); non-chief workers (multi-worker) write nowhere that anybody reads.
    best_dir = os.path.join(job.checkpoint_dir, "best") if job.chief else tempfile.mkdtemp(prefix="bert-zoo-worker-")
    steps = StepLog()
    evaluation = dev_evaluation(
        spec,
        lambda: task_model,
        dev_examples,
        dev_ds,
        plan.layout,
        eval_every,
        best_dir if plan.select == "best" else None,
    )
    print(
        f"fine-tuning {signature['model']} for {spec.name} on {signature['train_examples']} examples, "
        f"dev {len(dev_examples)}, {plan.epochs} epoch(s) of {signature['steps_per_epoch']} steps, "
        f"batch {signature['global_batch']}, primary metric {primary}",
        flush=True,
    )
    history = job.train(
        task_model,
        train_ds,
        epochs=plan.epochs,
        steps_per_epoch=signature["steps_per_epoch"],
        signature=signature,
        callbacks=[steps, evaluation, *callbacks],
    )
    if plan.select == "best":  # the returned model is the one saved
        task_model = spec.model_class().from_preset(best_dir, preprocessor=preprocessor)
    metrics = finetuning_metrics(
        evaluation,
        primary,
        plan.select,
        steps,
        history,
        epochs=plan.epochs,
        steps_per_epoch=signature["steps_per_epoch"],
        train_examples=signature["train_examples"],
        dev_examples=len(dev_examples),
    )
    return task_model, metrics, (steps.rows, evaluation.history, primary)


def _write_output(job, task_model, metrics, curve):
    """`out/`: the preset, and on the chief `metrics.json` and `training_curve.png`."""
    with job.staged_output() as staged:
        task_model.save_to_preset(staged)
        if job.chief:
            write_metrics(metrics, os.path.join(staged, "metrics.json"))
            curves.plot_finetuning(*curve, os.path.join(staged, "training_curve.png"))
    if not np.isfinite(metrics["final_train_loss"]):
        print("warning: the training loss is not finite; lower the learning rate.")


def _datasets(spec, train_examples, dev_examples, preprocessor, global_batch, *, seed, batching, static):
    """`(train_ds, dev_ds, steps_per_epoch, fixed_shapes)` for the task's examples."""
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.training import tpu_compat

    train_ds = spec.dataset(train_examples, preprocessor, global_batch, training=True, seed=seed, batching=batching)
    dev_ds = spec.dataset(dev_examples, preprocessor, global_batch * 2, training=False, batching=batching)
    if static:
        train_ds = tpu_compat.static_batches(train_ds, global_batch)
    # Exact batch count (length buckets leave one partial batch per bucket), so the decay ends at the last step.
    train_ds, steps_per_epoch = with_known_cardinality(train_ds)
    # Batches of one width ("fixed", packed rows) can reuse one XLA program.
    fixed_shapes = all(None not in t.shape[1:] for t in tf.nest.flatten(train_ds.element_spec))
    return train_ds, dev_ds, steps_per_epoch, fixed_shapes
