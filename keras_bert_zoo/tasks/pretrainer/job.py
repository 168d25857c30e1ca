"""Masked-LM + next-sentence pretraining: the `pretrain(...)` job (its output's task, `pretrain`, is in
`tasks/pretrainer/spec.py`).

`pretrain` reads documents (original BERT format, one document per line, or
WikiText), optionally learns a WordPiece vocabulary on the *training* documents,
makes NSP/SOP pairs, masks them anew every pass (dynamic masking) and trains a
`BertPretrainer` with BERT's optimizer for exactly `steps` steps, through the steps of
`training.job.TrainingJob` (its loop, `training.loop.train`, checkpoints and resumes). Every `eval_every`
steps it scores held-out documents (`holdout_every=N` keeps every N-th document out
of training and out of the vocabulary). `out` receives TensorBoard logs (`logs/`),
`metrics.json`, `loss_curves.png` and a preset directory (`config.json`,
`model.safetensors`, `vocab.txt`). Under multi-worker training only the chief writes.

`pretrain` reads top to bottom in four steps: read the data (the vocabulary and the
batches, `tasks.pretrainer.inputs` and `tasks.pretrainer.streams`), build the model
(`_build_model`, compiled by the job), train (`_train`), write the output
(`_write_output`). Its inputs are checked before all of them (`tasks.pretrainer.inputs`).
"""

import os
import sys

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.files import write_metrics
from keras_bert_zoo.locking import locks_output
from keras_bert_zoo.tasks.pretrainer.data import default_max_predictions
from keras_bert_zoo.tasks.pretrainer.inputs import (
    check_arguments,
    check_corpus,
    check_paths,
    is_records,
    learn_vocabulary_file,
    read_vocabulary,
)
from keras_bert_zoo.tasks.pretrainer.streams import record_batches, text_batches
from keras_bert_zoo.training import curves  # through the module: failure tests replace its functions
from keras_bert_zoo.training.callbacks import PeriodicEvaluation, ScalarLogger, StepLog
from keras_bert_zoo.training.loop import evaluate as evaluate_model

# check_corpus and learn_vocabulary_file live in `inputs`; this module keeps exporting them.
__all__ = ["check_corpus", "learn_vocabulary_file", "pretrain"]

_PYTHON_READER = "tpu-compat: the input is read by a Python generator here; on a TPU pass TFRecords as --corpus"


def _build_model(job, preset, model_dir, vocabulary, data_layout, seed, steps, optimizer):
    """The `BertPretrainer` (initialisation and dropout seeded: the same run every time), compiled for `steps`."""
    job.seed(seed)
    with job.scope():
        model = _pretrainer(preset, model_dir, vocabulary, data_layout)
    job.compile(model, total_steps=steps, **optimizer)
    return model


def _pretrainer(preset, model_dir, vocabulary, data_layout):
    """A preset's architecture (random init) or a checkpoint, checked against the vocabulary and the length."""
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer

    if preset is not None:
        if preset not in BACKBONE_PRESETS:
            raise UsageError(
                f"--preset {preset!r} is unknown; choose one of {sorted(BACKBONE_PRESETS)} or pass --model DIR."
            )
        # --preset is pretraining from scratch: the architecture alone, never the name's checkpoint.
        print(
            f"pretraining {preset} from scratch (its architecture, randomly initialised); to continue "
            "from its pretrained checkpoint, convert it once (bert-zoo convert --from NAME --out DIR) and "
            "pass --model DIR",
            file=sys.stderr,
        )
        model = BertPretrainer.from_preset(
            preset, load_weights=False, backbone_kwargs={"vocabulary_size": len(vocabulary)}, data_layout=data_layout
        )
    else:
        model = BertPretrainer.from_preset(model_dir, preprocessor=None, data_layout=data_layout)
        if model.backbone.vocabulary_size != len(vocabulary):
            raise CheckpointError(
                f"the vocabulary has {len(vocabulary)} tokens but {model_dir} was trained with "
                f"{model.backbone.vocabulary_size}; use that checkpoint's own vocab.txt (omit --vocab)."
            )
    if model.backbone.max_sequence_length < data_layout["sequence_length"]:
        raise UsageError(
            f"--sequence-length {data_layout['sequence_length']} exceeds the model's "
            f"{model.backbone.max_sequence_length} positions."
        )
    return model


@locks_output("out")  # one run at a time on one --out (a second run refuses, naming the first)
def pretrain(
    corpus,
    out,
    preset=None,
    model=None,
    vocab=None,
    vocab_size=None,
    corpus_format="bert",
    sequence_length=128,
    max_predictions=None,
    batch_size=32,
    steps=1000,
    learning_rate=1e-4,
    warmup_steps=None,
    recipe="linear",
    nsp="nsp",
    whole_word_masking=False,
    max_ngram=1,
    lowercase=True,
    holdout_every=0,
    eval_corpus=None,
    eval_every=200,
    eval_batches=50,
    seed=12345,
    jit_compile="auto",
    strategy="default",
    tpu=None,
    replicas=None,
    mixed_precision="none",
    time_budget=None,
    checkpoint_every=0,
    resume=True,
    deterministic=False,
    check_tpu_compat=False,
    verbose=None,
    overwrite=False,
    input_shards=1,
    callbacks=(),
    whole_word_segmenter="auto",
):
    """MLM + NSP pretraining from a preset architecture or a checkpoint; returns `(model, metrics)`.

    Args:
        corpus: text file(s) (or `.tfrecord` files in the original feature format).
        out: output directory (becomes a preset directory).
        preset: architecture name (random init), or `model`: a checkpoint directory
            to continue pretraining.
        vocab: `vocab.txt` (default: the `model` directory's), or `vocab_size`: learn
            one of that many tokens from the training documents first.
        corpus_format: `"bert"` (sentence per line, blank line between documents),
            `"lines"` (one document per line) or `"wikitext"`.
        sequence_length, max_predictions: default 128 and ceil(0.15 * length).
        batch_size: per replica. steps: exactly this many optimizer steps.
        learning_rate, warmup_steps (default 10% of steps), recipe (`"linear"`: HF's
            AdamW and schedule; `"bert_original"`: google-research/bert's).
        nsp: `"nsp"`, `"sop"` or `"none"`. whole_word_masking, max_ngram: masking units.
        whole_word_segmenter: words of whole-word masking: `"auto"` (jieba on Chinese text,
            else WordPiece), `"wordpiece"` or `"jieba"` (`preprocessing.chinese_words`).
        lowercase: uncased vocabulary and text.
        holdout_every: hold every N-th document out of training (and of the
            vocabulary) for evaluation; or `eval_corpus`: held-out file(s).
        eval_every, eval_batches: held-out evaluation interval and size.
        jit_compile: XLA for the train step; `"auto"` (default): the package's rule
            (`keras_bert_zoo.training.jit`): no XLA where it cannot win or run (multi-worker
            on CPUs, bf16 on a CPU, runs under 1,000 steps), otherwise both are timed on the
            first batch and the faster kept; the choice is printed.
        strategy, tpu, replicas, mixed_precision: see `keras_bert_zoo.training`.
        time_budget: stop after this many seconds of training (benchmarks).
        overwrite: replace an existing `out` once the new one is complete (without it an
            existing `out` is an error). Everything is written to a temporary sibling of
            `out` first, so a failed run leaves `out` as it was.
        input_shards: TFRecord corpora only: read the files as N shards, every batch
            taking an equal share of rows from each; under multi-worker each worker
            reads only its shards' files (N a multiple of the workers), and the run
            equals a one-process run with the same N. See `read_pretraining_records`.
        check_tpu_compat: dry run: the batches are static and every step compiles
            with XLA (`keras_bert_zoo.training.tpu_compat`); returns
            `(model, {"tpu_compat": 1})` without training or writing.
        checkpoint_every, resume, deterministic: checkpoints in `out/checkpoints/`
            every N steps and after each evaluation interval; `resume` continues from
            the newest (same arguments), False starts over; `deterministic` turns on
            TF op determinism (a resumed run then ends bit-identical to an
            uninterrupted one). Text corpora resume by replaying the seeded stream up
            to the checkpoint (a Python generator cannot be serialised); TFRecords
            restore the `tf.data` iterator. See `keras_bert_zoo.training.loop`.
        callbacks: more Keras callbacks, run after the job's own (step log, held-out
            evaluation, TensorBoard) at every step.

    Returns:
        `(model, metrics)`; on non-chief workers `metrics` is empty.

    Examples:
    ```python
    from keras_bert_zoo import pretrain
    model, metrics = pretrain("wiki.train.tokens", "/tmp/mini", preset="bert_mini_uncased",
                              vocab_size=8000, corpus_format="wikitext", steps=2000, holdout_every=10)
    ```
    """
    from keras_bert_zoo.backends import require_tensorflow
    from keras_bert_zoo.training.job import TrainingJob
    from keras_bert_zoo.training.strategies import worker_info

    require_tensorflow("pretrain (the pretraining job)")
    corpus = check_paths(corpus)
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
    records = is_records(corpus)
    data_layout = {
        "sequence_length": sequence_length,
        "max_predictions": max_predictions or default_max_predictions(sequence_length),
        "nsp": nsp,
        "corpus_format": corpus_format,
        "lowercase": lowercase,
        **_masking_units(whole_word_masking, whole_word_segmenter, max_ngram),
        "holdout_every": holdout_every,
    }
    # What names the run, with the data's layout: a checkpoint of another run is not resumed (`signature`).
    run = {"preset": preset, "model": model, "steps": steps, "seed": seed, "input_shards": input_shards}
    check_arguments(
        corpus,
        records,
        data_layout,
        run,
        eval_corpus=eval_corpus,
        batch_size=batch_size,
        eval_every=eval_every,
        eval_batches=eval_batches,
        learning_rate=learning_rate,
        strategy=strategy,
    )
    batch_size = job.start(batch_size)  # the global batch: --batch-size is per replica
    # 1. Read the data: the vocabulary, the training batches and the held-out ones (none from TFRecords).
    vocabulary = read_vocabulary(corpus, records, data_layout, vocab=vocab, vocab_size=vocab_size, model=model)
    if records:
        workers = worker_info(job.distribution)  # multi-worker: each worker reads its own shards
        train, heldout = record_batches(corpus, batch_size, data_layout, seed, input_shards, workers), None
    else:
        train, heldout = text_batches(
            corpus, vocabulary, batch_size, data_layout, seed=seed, eval_corpus=eval_corpus, eval_batches=eval_batches
        )
    # 2. Build the model and its optimizer.
    warmup = warmup_steps if warmup_steps is not None else int(round(0.1 * steps))
    optimizer = {"learning_rate": learning_rate, "warmup_steps": warmup, "recipe": recipe}
    pretrainer = _build_model(job, preset, model, vocabulary, data_layout, seed, steps, optimizer)
    if check_tpu_compat:
        return job.check_tpu_compat(pretrainer, train, note=None if records else _PYTHON_READER)
    # 3. Train: epochs of `interval` steps, the held-out score after each; stops at exactly `steps`.
    signature = {
        "corpus": [os.path.abspath(p) for p in corpus],
        **run,
        "vocabulary_size": len(vocabulary),
        "global_batch": batch_size,
        **optimizer,
        "eval_every": min(eval_every, steps),
        "mixed_precision": mixed_precision,
        **data_layout,
    }
    history, log, evaluation = _train(
        job, pretrainer, train, heldout, signature, time_budget=time_budget, callbacks=callbacks, records=records
    )
    if not job.chief:
        return pretrainer, {}  # only the chief writes the preset and metrics (multi-worker)
    # 4. Write the output.
    metrics = _pretraining_metrics(history, log, evaluation, batch_size, sequence_length)
    _write_output(job, pretrainer, vocabulary, lowercase, metrics, (log, evaluation))
    return pretrainer, metrics


def _masking_units(whole_word_masking, whole_word_segmenter, max_ngram):
    """The masking keys of `data_layout` (words: WordPiece's, or jieba's on Chinese text; n-grams)."""
    return {
        "whole_word_masking": bool(whole_word_masking),
        "whole_word_segmenter": whole_word_segmenter,
        "max_ngram": max_ngram,
    }


def _train(job, pretrainer, train, heldout, signature, *, time_budget, callbacks, records):
    """Trains for exactly `signature["steps"]` steps; returns `(history, step log, held-out evaluation or None)`."""
    steps, interval, input_shards = signature["steps"], signature["eval_every"], signature["input_shards"]
    log = StepLog(max_steps=steps, time_budget=time_budget)
    evaluation = (
        None
        if heldout is None
        else PeriodicEvaluation(lambda: evaluate_model(pretrainer, heldout), prefix="heldout_", label="held-out")
    )
    logger = ScalarLogger(os.path.join(job.run_dir, "logs"), every=max(1, interval // 10)) if job.chief else None
    # A Python generator cannot be serialised: text corpora resume by replaying the seeded stream.
    history = job.train(
        pretrainer,
        train,
        epochs=-(-steps // interval),
        steps_per_epoch=interval,
        max_steps=steps,
        signature=signature,
        callbacks=[c for c in (log, evaluation, logger) if c] + list(callbacks),
        position="iterator" if records and job.workers == 1 else "replay",
        per_worker_input=records and input_shards > 1,
    )
    return history, log, evaluation


def _write_output(job, pretrainer, vocabulary, lowercase, metrics, curve):
    """`out/`: the preset (model and vocabulary), `metrics.json` and `loss_curves.png`."""
    from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

    log, evaluation = curve
    with job.staged_output() as staged:  # the TensorBoard logs (written live) move along
        pretrainer.save_to_preset(staged)
        BertTokenizer(vocabulary, lowercase=lowercase).save_to_preset(staged)
        write_metrics(metrics, os.path.join(staged, "metrics.json"))
        curves.plot_pretraining(
            log.rows, evaluation.history if evaluation else [], os.path.join(staged, "loss_curves.png")
        )


def _pretraining_metrics(history, log, evaluation, batch_size, sequence_length):
    """The flat dict of `metrics.json`: the last train logs, the last held-out score, throughput."""
    last = {k: float(v[-1]) for k, v in history.history.items()}
    metrics = {f"train_{k}": v for k, v in last.items() if not k.startswith("heldout_")}
    metrics.update(
        {
            "steps": log.steps,
            "train_seconds": log.train_seconds,
            # Sequence positions per second (batch x length), after the compiling first
            # steps: the unit of the reference throughput table.
            "tokens_per_second": log.steady_rate(batch_size * sequence_length),
            "sequence_length": sequence_length,
            "batch_size": batch_size,
        }
    )
    if evaluation is not None:
        metrics.update(evaluation.last)
    else:
        metrics.update({k: v for k, v in last.items() if k in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss")})
    return metrics
