"""`finetune(task, ...)`: the fine-tuning job for any registered task, as a Python function.

It validates both data files and the model before the first step, then runs the
steps of `training.job.TrainingJob`: builds the model and optimizer inside the
distribution strategy's scope, trains with `training.loop.train` (`fit`'s train step
in a loop of our own, checkpointed and resumable from `out/checkpoints/`) on the
task's `tf.data` pipeline, scores the dev file every `eval_every` steps and at each
epoch end, and writes `out/` as a preset directory with `metrics.json` and
`training_curve.png`. `bert-zoo finetune` is a thin adapter over it.
"""

import os
import tempfile

import numpy as np

from keras_bert_zoo.errors import CheckpointError, MissingPathError, UsageError
from keras_bert_zoo.files import write_metrics
from keras_bert_zoo.locking import locks_output
from keras_bert_zoo.tasks.registry import get_task
from keras_bert_zoo.training import curves  # through the module: failure tests replace its functions
from keras_bert_zoo.training.callbacks import PeriodicEvaluation, StepLog

__all__ = ["vocab_dir_for", "check_vocabulary", "finetune"]

_SELECTIONS = ("final", "best")


def vocab_dir_for(model, vocab=None):
    """The directory holding the `vocab.txt` to use, checked to exist."""
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    if model not in BACKBONE_PRESETS and not os.path.isdir(str(model)):
        raise MissingPathError(
            f"--model {model!r} is neither a preset name nor a directory; give a checkpoint "
            f"directory or one of {', '.join(sorted(BACKBONE_PRESETS))}."
        )
    if vocab:
        path = vocab if os.path.isdir(vocab) else os.path.dirname(os.path.abspath(vocab))
    else:
        path = model if os.path.isdir(str(model)) else None
    if path is None or not os.path.isfile(os.path.join(path, "vocab.txt")):
        from keras_bert_zoo.convert.keras_hub_format import is_keras_hub_preset

        if path is not None and is_keras_hub_preset(path):
            raise UsageError(
                f"--model {model!r} is a KerasHub preset (its vocabulary is in assets/tokenizer/); "
                f"convert it once (bert-zoo convert --from {model} --out DIR) and pass --model DIR."
            )
        raise UsageError(
            f"no vocab.txt for --model {model!r}: a preset name has only an architecture; pass "
            "--vocab path/to/vocab.txt (e.g. the checkpoint's) or a --model directory that has one."
        )
    return path


def check_vocabulary(model, vocab_dir, sequence_length=None):
    """Raises before training when the vocabulary or the length does not fit the model."""
    from keras_bert_zoo.convert.checkpoint import read_architecture
    from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary

    arch = read_architecture(model)
    size = len(read_vocabulary(os.path.join(vocab_dir, "vocab.txt")))
    if size != arch["vocabulary_size"]:
        raise CheckpointError(
            f"--model {model!r} has vocabulary_size {arch['vocabulary_size']} but "
            f"{os.path.join(vocab_dir, 'vocab.txt')} has {size} entries: the token ids would not match the "
            "embedding table. Use the vocabulary the model was trained with (--vocab) or a matching --model."
        )
    if sequence_length is not None and sequence_length > arch["max_sequence_length"]:
        raise UsageError(
            f"--sequence-length {sequence_length} is longer than the model's {arch['max_sequence_length']} "
            "learned positions; use at most that."
        )


def _batching_hint(batching):
    """Which tasks take a batching the chosen task does not, for its error message."""
    from keras_bert_zoo.tasks.registry import get_task, task_names

    takers = [name for name in task_names(finetunable=True) if batching in get_task(name).batchings]
    if not takers:
        return "."
    return f" ({batching!r} is a batching of {' and '.join(f'`finetune {name}`' for name in takers)})."


@locks_output("out")  # one run at a time on one --out (a second run refuses, naming the first)
def _check_lora_rank(lora_rank):
    if lora_rank is not None and (isinstance(lora_rank, bool) or not isinstance(lora_rank, int) or lora_rank < 1):
        raise UsageError(f"--lora-rank {lora_rank!r} must be a positive integer (4 to 16 is usual).")


def _lora_metrics(task_model, lora_rank):
    """`lora_rank` and the model's total and trainable parameter counts, for metrics.json (none without LoRA)."""
    if not lora_rank:
        return {}
    return dict(
        lora_rank=lora_rank,
        parameters=task_model.count_params(),
        trainable_parameters=sum(int(np.prod(w.shape)) for w in task_model.trainable_weights),
    )


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
    _check_lora_rank(lora_rank)
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
    epochs, learning_rate, layout, sequence_length = _recipe_of(
        spec,
        select=select,
        batching=batching,
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        warmup_ratio=warmup_ratio,
        sequence_length=sequence_length,
        layout=layout,
        task_options=task_options,
    )
    global_batch = job.start(batch_size)  # before any other TF op: --replicas makes logical devices
    # The model's rule for its raw inputs: "auto" may pack; packed pooled rows need one replica.
    batching = spec.model_class().batching_on_replicas(batching, job.distribution.num_replicas_in_sync)
    # --- validate everything before the first step ------------------------------------
    train_examples = spec.read_data(train, layout, max_examples=max_train_examples)
    dev_examples = spec.read_data(dev, layout, reference=train_examples, max_examples=max_dev_examples)
    vocab_dir = vocab_dir_for(model, vocab)
    check_vocabulary(model, vocab_dir, sequence_length)
    job.seed(seed)
    preprocessor = spec.make_preprocessor(vocab_dir, sequence_length, layout)
    with job.scope():
        task_model = spec.build_model(model, train_examples, layout, preprocessor, sequence_length)
        if lora_rank:
            task_model.backbone.enable_lora(lora_rank)

    # --- data: a TPU (and its dry run) needs one XLA program, so fixed shapes and full batches --
    static = check_tpu_compat or strategy == "tpu"
    batching = "fixed" if static else batching
    train_ds, dev_ds, steps_per_epoch, fixed_shapes = _datasets(
        spec, train_examples, dev_examples, preprocessor, global_batch, seed=seed, batching=batching, static=static
    )
    if static:
        job.jit_compile = True
    job.compile(
        task_model,
        learning_rate=learning_rate,
        total_steps=epochs * steps_per_epoch,
        recipe=recipe,
        fixed_shapes=fixed_shapes,
        warmup_ratio=warmup_ratio,
    )
    if check_tpu_compat:
        return job.check_tpu_compat(task_model, train_ds)

    # --- train, scoring dev ---------------------------------------------------------------
    primary = spec.primary_metric(layout)
    # With select="best" the best model so far lives in `out/checkpoints/best` (a killed run
    # resumes with it); non-chief workers (multi-worker) write nowhere that anybody reads.
    best_dir = os.path.join(job.checkpoint_dir, "best") if job.chief else tempfile.mkdtemp(prefix="bert-zoo-worker-")
    steps = StepLog()
    evaluation = _dev_evaluation(
        spec, lambda: task_model, dev_examples, dev_ds, layout, eval_every, best_dir if select == "best" else None
    )
    print(
        f"fine-tuning {model} for {spec.name} on {len(train_examples)} examples, dev {len(dev_examples)}, "
        f"{epochs} epoch(s) of {steps_per_epoch} steps, batch {global_batch}, primary metric {primary}",
        flush=True,
    )
    signature = {
        "task": spec.name,
        "model": str(model),
        "train": os.path.abspath(train),
        "epochs": epochs,
        "global_batch": global_batch,
        "learning_rate": learning_rate,
        "warmup_ratio": warmup_ratio,
        "recipe": recipe,
        "sequence_length": sequence_length,
        "train_examples": len(train_examples),
        "steps_per_epoch": steps_per_epoch,
        "seed": seed,
        "batching": batching,
        "select": select,
        "mixed_precision": mixed_precision,
    }
    if lora_rank:  # only then: checkpoints of runs without LoRA keep their signature
        signature["lora_rank"] = lora_rank
    history = job.train(
        task_model,
        train_ds,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        signature=signature,
        callbacks=[steps, evaluation, *callbacks],
    )
    if select == "best":  # the returned model is the one saved
        task_model = spec.model_class().from_preset(best_dir, preprocessor=preprocessor)
    metrics = _finetuning_metrics(
        evaluation,
        primary,
        select,
        steps,
        history,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        train_examples=len(train_examples),
        dev_examples=len(dev_examples),
    )
    metrics.update(_lora_metrics(task_model, lora_rank))
    with job.staged_output() as staged:
        task_model.save_to_preset(staged)
        if job.chief:
            write_metrics(metrics, os.path.join(staged, "metrics.json"))
            curves.plot_finetuning(steps.rows, evaluation.history, primary, os.path.join(staged, "training_curve.png"))
    if not np.isfinite(metrics["final_train_loss"]):
        print("warning: the training loss is not finite; lower the learning rate.")
    return task_model, metrics


def _recipe_of(
    spec, *, select, batching, epochs, batch_size, learning_rate, warmup_ratio, sequence_length, layout, task_options
):
    """The run's recipe with the task's defaults filled in, every value checked: `(epochs, lr, layout, length)`."""
    if select not in _SELECTIONS:
        raise UsageError(f"select={select!r}; use one of {_SELECTIONS}.")
    learning_rate = spec.default_learning_rate if learning_rate is None else learning_rate
    epochs = spec.default_epochs if epochs is None else epochs
    layout = spec.layout_from_options(layout, **task_options)
    sequence_length = sequence_length or spec.default_sequence_length
    _check_recipe(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        sequence_length=sequence_length,
        warmup_ratio=warmup_ratio,
    )
    if not isinstance(batching, str) or batching not in spec.batchings:
        raise UsageError(
            f"batching={batching!r} is not a batching of task {spec.name!r}; use one of "
            f"{', '.join(map(repr, spec.batchings))}" + _batching_hint(batching)
        )
    return epochs, learning_rate, layout, sequence_length


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


def _dev_evaluation(spec, current_model, dev_examples, dev_ds, layout, eval_every, best_dir):
    """The dev scoring callback; with a `best_dir` (select="best") each new best model is saved there."""
    primary = spec.primary_metric(layout)

    def on_result(step, metrics):  # evaluation.history holds every result so far (restored on resume)
        if metrics[primary] > max((m[primary] for _, m in evaluation.history[:-1]), default=-np.inf):
            if best_dir is not None:
                current_model().save_to_preset(best_dir)
                return "best, saved"
            return "best so far"
        return None

    evaluation = PeriodicEvaluation(
        lambda: spec.score(current_model(), dev_examples, dev_ds),
        eval_every,
        prefix="dev_",
        on_result=on_result,
        label="dev",
        shown=spec.shown_metrics,
    )
    return evaluation


def _finetuning_metrics(
    evaluation, primary, select, steps, history, *, epochs, steps_per_epoch, train_examples, dev_examples
):
    """The flat dict of `metrics.json`: the kept model's dev scores, the best evaluation, timing and sizes."""
    # The first evaluation with the highest score (on_result's rule).
    best_step, best_metrics = max(evaluation.history, key=lambda r: (r[1][primary], -r[0]))
    losses = history.history.get("loss", [float("nan")])
    metrics = dict(best_metrics if select == "best" else evaluation.last)
    metrics.update(
        {
            f"best_dev_{primary}": best_metrics[primary],
            "best_step": best_step,
            "selection_best": int(select == "best"),
            "steps": steps.steps,
            "epochs": epochs,
            "train_examples": train_examples,
            "dev_examples": dev_examples,
            "train_seconds": steps.train_seconds,
            "train_examples_per_second": train_examples
            * steps.steps
            / max(steps_per_epoch, 1)
            / max(steps.train_seconds, 1e-9),
            "final_train_loss": float(losses[-1]),
        }
    )
    return metrics


def _check_recipe(**values):
    """Positive, finite numbers, with a message naming the flag."""
    for name, value in values.items():
        bad = value is None or not np.isfinite(value) or value < 0 or (value == 0 and name != "warmup_ratio")
        if bad or (name == "warmup_ratio" and value > 1):
            allowed = "within [0, 1]" if name == "warmup_ratio" else "positive"
            raise UsageError(f"--{name.replace('_', '-')} {value} must be {allowed}.")
    if values["sequence_length"] < 8:
        raise UsageError(f"--sequence-length {values['sequence_length']} is too short; use at least 8 (128 is usual).")
