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
"""

import math
import os
import sys

from keras_bert_zoo.errors import CheckpointError, InvalidInputError, UsageError
from keras_bert_zoo.files import check_input_file, write_metrics
from keras_bert_zoo.locking import locks_output
from keras_bert_zoo.tasks.pretrainer.data import default_max_predictions, split_documents
from keras_bert_zoo.training import curves  # through the module: failure tests replace its functions
from keras_bert_zoo.training.callbacks import PeriodicEvaluation, ScalarLogger, StepLog
from keras_bert_zoo.training.loop import evaluate as evaluate_model

__all__ = ["check_corpus", "learn_vocabulary_file", "pretrain"]


def _is_records(paths):
    return all(str(p).endswith((".tfrecord", ".tfrecords")) or "tfrecord" in os.path.basename(str(p)) for p in paths)


def _check_paths(paths, flag="--corpus"):
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    for p in paths:
        check_input_file(p, f"{flag} file")
    return paths


def check_corpus(paths, corpus_format, nsp, flag="--corpus"):
    """Raises before training when a text corpus cannot make pretraining pairs.

    Every file is scanned once (binary data, lines over 10 MB), then documents are
    counted until two are found: NSP and SOP need sentence pairs, and NSP draws its
    "random next" sentences from another document.
    """
    from keras_bert_zoo.files import check_text_file
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    for p in paths:
        check_text_file(p, f"{flag} file")
    documents = sentences = 0
    for document in read_documents(paths, corpus_format):
        documents += 1
        sentences += len(document)
        if documents >= 2 and sentences >= 2:
            return
    shown = ", ".join(paths)
    if not sentences:
        raise InvalidInputError(
            f"{shown} has no text (empty, or blank lines only); give a corpus with one "
            "sentence per line and a blank line between documents."
        )
    if nsp == "nsp" and documents < 2:
        raise InvalidInputError(
            f"{shown} holds {documents} document ({sentences} sentence(s)) in the {corpus_format!r} format; "
            "next-sentence prediction draws its negatives from other documents: separate documents with a "
            "blank line (--corpus-format bert), or pass --nsp none."
        )
    if nsp != "none" and sentences < 2:
        raise InvalidInputError(
            f"{shown} has a single sentence; sentence pairs need at least two (add text, or pass --nsp none)."
        )


def learn_vocabulary_file(corpus, size, out_path, corpus_format="bert", lowercase=True, document_filter=None):
    """Learns a WordPiece vocabulary of at most `size` tokens from a corpus into `out_path`.

    `document_filter(index) -> bool` keeps only some documents (the training ones).
    """
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary, save_vocabulary
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    if size < 100:
        raise UsageError(f"--vocab-size {size} is too small; use at least a few thousand (e.g. 8000).")
    sentences = [
        s
        for i, doc in enumerate(read_documents(corpus, corpus_format))
        if document_filter is None or document_filter(i)
        for s in doc
    ]
    if not sentences:
        raise InvalidInputError(f"{corpus} has no training sentences to learn a vocabulary from.")
    vocab = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences), size, lowercase=lowercase)
    if out_path is not None:
        save_vocabulary(vocab, out_path)
    return vocab


def _build_model(preset, model_dir, vocabulary, data_layout):
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
        return BertPretrainer.from_preset(
            preset, load_weights=False, backbone_kwargs={"vocabulary_size": len(vocabulary)}, data_layout=data_layout
        )
    model = BertPretrainer.from_preset(model_dir, preprocessor=None, data_layout=data_layout)
    if model.backbone.vocabulary_size != len(vocabulary):
        raise CheckpointError(
            f"the vocabulary has {len(vocabulary)} tokens but {model_dir} was trained with "
            f"{model.backbone.vocabulary_size}; use that checkpoint's own vocab.txt (omit --vocab)."
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
    from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
    from keras_bert_zoo.training.job import TrainingJob

    require_tensorflow("pretrain (the pretraining job)")
    corpus = _check_paths(corpus)
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
    records = _is_records(corpus)
    _check_arguments(
        corpus,
        records,
        preset=preset,
        model=model,
        eval_corpus=eval_corpus,
        corpus_format=corpus_format,
        nsp=nsp,
        steps=steps,
        batch_size=batch_size,
        eval_every=eval_every,
        eval_batches=eval_batches,
        learning_rate=learning_rate,
        sequence_length=sequence_length,
        input_shards=input_shards,
        strategy=strategy,
        holdout_every=holdout_every,
    )
    max_predictions = max_predictions or default_max_predictions(sequence_length)
    batch_size = job.start(batch_size)  # the global batch: --batch-size is per replica
    # Held-out documents stay out of training and out of the vocabulary.
    train_docs = (lambda i: not split_documents(i, holdout_every)) if holdout_every else None
    vocabulary = _vocabulary(
        corpus,
        records,
        vocab=vocab,
        vocab_size=vocab_size,
        model=model,
        corpus_format=corpus_format,
        lowercase=lowercase,
        train_docs=train_docs,
    )
    data_layout = {
        "sequence_length": sequence_length,
        "max_predictions": max_predictions,
        "nsp": nsp,
        "corpus_format": corpus_format,
        "lowercase": lowercase,
        "whole_word_masking": bool(whole_word_masking),
        "whole_word_segmenter": whole_word_segmenter,
        "max_ngram": max_ngram,
        "holdout_every": holdout_every,
    }
    if records:
        train, heldout = (
            _record_batches(
                job, corpus, batch_size, sequence_length, max_predictions, nsp=nsp, seed=seed, input_shards=input_shards
            ),
            None,
        )
    else:
        train, heldout = _text_batches(
            corpus,
            vocabulary,
            batch_size,
            data_layout,
            seed=seed,
            train_docs=train_docs,
            eval_corpus=eval_corpus,
            eval_batches=eval_batches,
        )

    job.seed(seed)  # initialisation and dropout: the same run every time
    with job.scope():
        pretrainer = _build_model(preset, model, vocabulary, data_layout)
    if pretrainer.backbone.max_sequence_length < sequence_length:
        raise UsageError(
            f"--sequence-length {sequence_length} exceeds the model's "
            f"{pretrainer.backbone.max_sequence_length} positions."
        )
    warmup = warmup_steps if warmup_steps is not None else int(round(0.1 * steps))
    job.compile(pretrainer, learning_rate=learning_rate, total_steps=steps, recipe=recipe, warmup_steps=warmup)
    if check_tpu_compat:
        return job.check_tpu_compat(
            pretrainer,
            train,
            note=None
            if records
            else ("tpu-compat: the input is read by a Python generator here; on a TPU pass TFRecords as --corpus"),
        )

    # --- train: epochs of `interval` steps, the held-out score after each; stops at exactly `steps` ---
    interval = min(eval_every, steps)
    log = StepLog(max_steps=steps, time_budget=time_budget)
    evaluation = (
        None
        if heldout is None
        else PeriodicEvaluation(lambda: evaluate_model(pretrainer, heldout), prefix="heldout_", label="held-out")
    )
    logger = ScalarLogger(os.path.join(job.run_dir, "logs"), every=max(1, interval // 10)) if job.chief else None
    signature = {
        "corpus": [os.path.abspath(p) for p in corpus],
        "preset": preset,
        "model": model,
        "vocabulary_size": len(vocabulary),
        "steps": steps,
        "global_batch": batch_size,
        "learning_rate": learning_rate,
        "warmup_steps": warmup,
        "recipe": recipe,
        "seed": seed,
        "eval_every": interval,
        "mixed_precision": mixed_precision,
        "input_shards": input_shards,
        **data_layout,
    }
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
    if not job.chief:
        return pretrainer, {}  # only the chief writes the preset and metrics (multi-worker)
    metrics = _pretraining_metrics(history, log, evaluation, batch_size, sequence_length)
    with job.staged_output() as staged:  # the TensorBoard logs (written live) move along
        pretrainer.save_to_preset(staged)
        BertTokenizer(vocabulary, lowercase=lowercase).save_to_preset(staged)
        write_metrics(metrics, os.path.join(staged, "metrics.json"))
        curves.plot_pretraining(
            log.rows, evaluation.history if evaluation else [], os.path.join(staged, "loss_curves.png")
        )
    return pretrainer, metrics


def _check_arguments(
    corpus,
    records,
    *,
    preset,
    model,
    eval_corpus,
    corpus_format,
    nsp,
    steps,
    batch_size,
    eval_every,
    eval_batches,
    learning_rate,
    sequence_length,
    input_shards,
    strategy,
    holdout_every,
):
    """Raises `UsageError` / `InvalidInputError` for what would fail later, before any work."""
    if not records:
        check_corpus(corpus, corpus_format, nsp)
    if eval_corpus:
        check_corpus(_check_paths(eval_corpus, "--eval-corpus"), corpus_format, "none", "--eval-corpus")
    if (preset is None) == (model is None):
        raise UsageError("give exactly one of --preset (architecture, random init) and --model (checkpoint).")
    for name, value in (
        ("steps", steps),
        ("batch-size", batch_size),
        ("eval-every", eval_every),
        ("eval-batches", eval_batches),
        ("input-shards", input_shards),
    ):
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"--{name} {value} must be a positive integer.")
    if not (learning_rate > 0 and math.isfinite(learning_rate)):
        raise UsageError(f"--learning-rate {learning_rate} must be a positive number.")
    if sequence_length < 16 or sequence_length > 512:
        raise UsageError(f"--sequence-length {sequence_length} must be within [16, 512].")
    if holdout_every == 1:
        raise UsageError(
            "--holdout-every 1 holds out every document and leaves none to train on; use 2 or more "
            "(every N-th document is held out) or --eval-corpus FILE."
        )
    if input_shards > 1 and not records:
        raise UsageError(
            "--input-shards splits TFRecord files; a text corpus is read as one stream. Write "
            "the records once (keras_bert_zoo.tasks.pretrainer.records.write_pretraining_records)."
        )
    if strategy == "tpu" and not records:
        raise UsageError(
            "--strategy tpu reads TFRecords (a Python generator cannot run on a TPU host): write "
            "them once with keras_bert_zoo.tasks.pretrainer.records.write_pretraining_records and "
            "pass the .tfrecord files as --corpus."
        )


def _vocabulary(corpus, records, *, vocab, vocab_size, model, corpus_format, lowercase, train_docs):
    """The vocabulary as a list: learned from the training documents (`vocab_size`) or read."""
    from keras_bert_zoo.tasks.pretrainer.data import load_vocabulary

    if vocab_size:
        if records:
            raise UsageError("--vocab-size learns from text; TFRecords already hold ids: pass --vocab.")
        return learn_vocabulary_file(corpus, vocab_size, None, corpus_format, lowercase, document_filter=train_docs)
    if vocab is None:
        if model is None:
            raise UsageError("--preset needs a vocabulary: pass --vocab vocab.txt or --vocab-size N.")
        vocab = os.path.join(model, "vocab.txt")
        if not os.path.isfile(vocab):
            raise UsageError(f"{model} has no vocab.txt; pass --vocab.")
    elif os.path.isdir(vocab):
        vocab = os.path.join(vocab, "vocab.txt")
    return load_vocabulary(vocab)


def _record_batches(job, corpus, batch_size, sequence_length, max_predictions, *, nsp, seed, input_shards):
    """Training batches from TFRecords; under multi-worker with `input_shards`, this worker's files only."""
    from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records, worker_files
    from keras_bert_zoo.training.strategies import worker_info

    workers = worker_info(job.distribution)
    train = read_pretraining_records(
        corpus,
        batch_size,
        sequence_length,
        max_predictions,
        use_nsp=nsp != "none",
        shuffle=True,
        repeat=True,
        drop_remainder=True,
        seed=seed,
        input_shards=input_shards,
        num_workers=workers[0],
        worker_index=workers[1],
    )
    if input_shards > 1:
        mine = worker_files(corpus, batch_size, input_shards, *workers)
        print(
            f"worker {workers[1]} of {workers[0]} reads {len(mine)} of {input_shards} input shard files: "
            + ", ".join(os.path.basename(f) for f in mine),
            flush=True,
        )
    return train


def _text_batches(corpus, vocabulary, batch_size, data_layout, *, seed, train_docs, eval_corpus, eval_batches):
    """`(train, heldout)` streams from text: fresh masks every pass; heldout (or None) cached, of known length."""
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset, split_documents

    common = {
        k: data_layout[k]
        for k in (
            "sequence_length",
            "max_predictions",
            "nsp",
            "whole_word_masking",
            "whole_word_segmenter",
            "max_ngram",
            "corpus_format",
            "lowercase",
        )
    }
    train = pretraining_dataset(
        corpus,
        vocabulary,
        batch_size=batch_size,
        repeat=True,
        drop_remainder=True,
        seed=seed,
        document_filter=train_docs,
        **common,
    )
    holdout_every, heldout = data_layout["holdout_every"], None
    if eval_corpus:
        heldout = (
            pretraining_dataset(
                _check_paths(eval_corpus, "--eval-corpus"), vocabulary, batch_size=batch_size, seed=seed + 1, **common
            )
            .take(eval_batches)
            .cache()
        )
    elif holdout_every:
        heldout = (
            pretraining_dataset(
                corpus,
                vocabulary,
                batch_size=batch_size,
                seed=seed + 1,
                document_filter=lambda i: split_documents(i, holdout_every),
                **common,
            )
            .take(eval_batches)
            .cache()
        )
    if heldout is not None:
        # A known length: Keras warns "ran out of data" when evaluating a stream of unknown length.
        heldout, batches = with_known_cardinality(heldout)
        if not batches:  # evaluating nothing: an empty "held-out" line and Keras' "ran out of data"
            raise InvalidInputError(
                _no_heldout_message(corpus, data_layout["corpus_format"], holdout_every, eval_corpus)
            )
    return train, heldout


def _no_heldout_message(corpus, corpus_format, holdout_every, eval_corpus):
    """Why the held-out set is empty, and the flags that fix it."""
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    if eval_corpus:
        return (
            f"--eval-corpus {' '.join(map(str, eval_corpus))} makes no pretraining examples in the "
            f"{corpus_format!r} format; give held-out text with sentences, or check --corpus-format."
        )
    documents = sum(1 for _ in read_documents(corpus, corpus_format))
    if documents < holdout_every:
        return (
            f"--holdout-every {holdout_every} holds out every {holdout_every}th document, but the corpus has "
            f"{documents}, so none is held out and there is nothing to evaluate on; use --holdout-every "
            f"{max(2, documents)} or less, --eval-corpus FILE, or --holdout-every 0 (no held-out evaluation)."
        )
    return (
        f"the documents --holdout-every {holdout_every} holds out make no pretraining examples (too short); "
        "use --eval-corpus FILE or --holdout-every 0 (no held-out evaluation)."
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
