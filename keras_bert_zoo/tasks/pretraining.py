"""Masked-LM + next-sentence pretraining: the `pretrain(...)` job, its evaluation and fill-mask serving.

`pretrain` reads documents (original BERT format, one document per line, or
WikiText), optionally learns a WordPiece vocabulary on the *training* documents,
makes NSP/SOP pairs, masks them anew every pass (dynamic masking) and trains a
`BertPretrainer` with BERT's optimizer for exactly `steps` steps. Every `eval_every`
steps it scores held-out documents (`holdout_every=N` keeps every N-th document out
of training and out of the vocabulary). `out` receives TensorBoard logs (`logs/`),
`metrics.json`, `loss_curves.png` and a preset directory (`config.json`,
`model.safetensors`, `vocab.txt`). Under multi-worker training only the chief writes.
"""

import math
import os
import sys

from keras_bert_zoo.errors import CheckpointError, InvalidInputError, UsageError
from keras_bert_zoo.export.saved_model import TaskServing, register_serving
from keras_bert_zoo.files import check_input_file, check_output, output_dir, write_metrics
from keras_bert_zoo.locking import locks_output
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.training.checkpointing import (keep_run_files, prepare_run_directory, reruns_without_overwrite,
                                                   run_directory)


def default_max_predictions(sequence_length):
    """ceil(0.15 * length): 20 at 128, the original `max_predictions_per_seq` (round gives 19)."""
    return max(1, math.ceil(0.15 * sequence_length))


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
    from keras_bert_zoo.preprocessing.corpus import read_documents

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
        raise InvalidInputError(f"{shown} has no text (empty, or blank lines only); give a corpus with one "
                                "sentence per line and a blank line between documents.")
    if nsp == "nsp" and documents < 2:
        raise InvalidInputError(
            f"{shown} holds {documents} document ({sentences} sentence(s)) in the {corpus_format!r} format; "
            "next-sentence prediction draws its negatives from other documents: separate documents with a "
            "blank line (--corpus-format bert), or pass --nsp none.")
    if nsp != "none" and sentences < 2:
        raise InvalidInputError(f"{shown} has a single sentence; sentence pairs need at least two "
                                "(add text, or pass --nsp none).")


def learn_vocabulary_file(corpus, size, out_path, corpus_format="bert", lowercase=True, document_filter=None):
    """Learns a WordPiece vocabulary of at most `size` tokens from a corpus into `out_path`.

    `document_filter(index) -> bool` keeps only some documents (the training ones).
    """
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.corpus import read_documents
    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary, save_vocabulary

    if size < 100:
        raise UsageError(f"--vocab-size {size} is too small; use at least a few thousand (e.g. 8000).")
    sentences = [s for i, doc in enumerate(read_documents(corpus, corpus_format))
                 if document_filter is None or document_filter(i) for s in doc]
    if not sentences:
        raise InvalidInputError(f"{corpus} has no training sentences to learn a vocabulary from.")
    vocab = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences), size, lowercase=lowercase)
    if out_path is not None:
        save_vocabulary(vocab, out_path)
    return vocab


def _build_model(preset, model_dir, vocabulary, data_layout):
    from keras_bert_zoo.models.pretrainer import BertPretrainer
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    if preset is not None:
        if preset not in BACKBONE_PRESETS:
            raise UsageError(f"--preset {preset!r} is unknown; choose one of {sorted(BACKBONE_PRESETS)} "
                             "or pass --model DIR.")
        # --preset is pretraining from scratch: the architecture alone, never the name's checkpoint.
        print(f"pretraining {preset} from scratch (its architecture, randomly initialised); to continue "
              "from its pretrained checkpoint, convert it once (bert-zoo convert --from NAME --out DIR) and "
              "pass --model DIR", file=sys.stderr)
        return BertPretrainer.from_preset(preset, load_weights=False,
                                          backbone_kwargs={"vocabulary_size": len(vocabulary)},
                                          data_layout=data_layout)
    model = BertPretrainer.from_preset(model_dir, preprocessor=None, data_layout=data_layout)
    if model.backbone.vocabulary_size != len(vocabulary):
        raise CheckpointError(
            f"the vocabulary has {len(vocabulary)} tokens but {model_dir} was trained with "
            f"{model.backbone.vocabulary_size}; use that checkpoint's own vocab.txt (omit --vocab)."
        )
    return model


@locks_output("out")  # one run at a time on one --out (a second run refuses, naming the first)
def pretrain(corpus, out, preset=None, model=None, vocab=None, vocab_size=None, corpus_format="bert",
             sequence_length=128, max_predictions=None, batch_size=32, steps=1000, learning_rate=1e-4,
             warmup_steps=None, recipe="linear", nsp="nsp", whole_word_masking=False, max_ngram=1,
             lowercase=True, holdout_every=0, eval_corpus=None, eval_every=200, eval_batches=50, seed=12345,
             jit_compile="auto", strategy="default", tpu=None, replicas=None, mixed_precision="none",
             time_budget=None, checkpoint_every=0, resume=True, deterministic=False, check_tpu_compat=False,
             verbose=None, overwrite=False, input_shards=1, callbacks=()):
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
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.preprocessing.pretraining_data import load_vocabulary, pretraining_dataset, split_documents
    from keras_bert_zoo.preprocessing.records import read_pretraining_records, worker_files
    from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
    from keras_bert_zoo.training import (create_optimizer, global_batch_size, is_chief, make_strategy,
                                         resolve_jit_compile, set_determinism, set_precision, worker_info)
    from keras_bert_zoo.training.callbacks import PeriodicEvaluation, ScalarLogger, StepLog
    from keras_bert_zoo.training.jit import choose_jit_compile
    from keras_bert_zoo.training.curves import plot_pretraining
    from keras_bert_zoo.training.loop import evaluate as evaluate_model
    from keras_bert_zoo.training.loop import train as train_loop

    corpus = _check_paths(corpus)
    # An `out` holding only our checkpoints is this run, killed: it resumes (or, --no-resume, starts over).
    check_output(out, overwrite or reruns_without_overwrite(out, resume))
    if not _is_records(corpus):
        check_corpus(corpus, corpus_format, nsp)
    if eval_corpus:
        check_corpus(_check_paths(eval_corpus, "--eval-corpus"), corpus_format, "none", "--eval-corpus")
    if (preset is None) == (model is None):
        raise UsageError("give exactly one of --preset (architecture, random init) and --model (checkpoint).")
    for name, value in (("steps", steps), ("batch-size", batch_size), ("eval-every", eval_every),
                        ("eval-batches", eval_batches)):
        if not isinstance(value, int) or value < 1:
            raise UsageError(f"--{name} {value} must be a positive integer.")
    if not (learning_rate > 0 and math.isfinite(learning_rate)):
        raise UsageError(f"--learning-rate {learning_rate} must be a positive number.")
    if sequence_length < 16 or sequence_length > 512:
        raise UsageError(f"--sequence-length {sequence_length} must be within [16, 512].")
    max_predictions = max_predictions or default_max_predictions(sequence_length)
    static_jit = resolve_jit_compile(jit_compile, mixed_precision, strategy, steps=steps)  # refuses XLA it cannot run
    records = _is_records(corpus)
    if not isinstance(input_shards, int) or input_shards < 1:
        raise UsageError(f"--input-shards {input_shards} must be a positive integer.")
    if input_shards > 1 and not records:
        raise UsageError("--input-shards splits TFRecord files; a text corpus is read as one stream. Write "
                         "the records once (keras_bert_zoo.preprocessing.records.write_pretraining_records).")
    if strategy == "tpu" and not records:
        raise ValueError("--strategy tpu reads TFRecords (a Python generator cannot run on a TPU host): write "
                         "them once with keras_bert_zoo.preprocessing.records.write_pretraining_records and "
                         "pass the .tfrecord files as --corpus.")
    # The strategy comes first: --batch-size is per replica, the data is batched globally.
    distribution = make_strategy(strategy, tpu=tpu, replicas=replicas)
    chief = is_chief(distribution)
    set_determinism(deterministic)
    batch_size = global_batch_size(batch_size, distribution)
    # Held-out documents stay out of training and out of the vocabulary.
    train_docs = (lambda i: not split_documents(i, holdout_every)) if holdout_every else None

    # --- vocabulary (in memory; written with the preset, by the chief only) ---
    if vocab_size:
        if records:
            raise UsageError("--vocab-size learns from text; TFRecords already hold ids: pass --vocab.")
        vocabulary = learn_vocabulary_file(corpus, vocab_size, None, corpus_format, lowercase,
                                           document_filter=train_docs)
    else:
        if vocab is None:
            if model is None:
                raise UsageError("--preset needs a vocabulary: pass --vocab vocab.txt or --vocab-size N.")
            vocab = os.path.join(model, "vocab.txt")
            if not os.path.isfile(vocab):
                raise UsageError(f"{model} has no vocab.txt; pass --vocab.")
        elif os.path.isdir(vocab):
            vocab = os.path.join(vocab, "vocab.txt")
        vocabulary = load_vocabulary(vocab)

    data_layout = {"sequence_length": sequence_length, "max_predictions": max_predictions, "nsp": nsp,
                   "corpus_format": corpus_format, "lowercase": lowercase,
                   "whole_word_masking": bool(whole_word_masking), "max_ngram": max_ngram,
                   "holdout_every": holdout_every}

    # --- data ---
    heldout = None
    if records:
        workers = worker_info(distribution)
        train = read_pretraining_records(corpus, batch_size, sequence_length, max_predictions,
                                         use_nsp=nsp != "none", shuffle=True, repeat=True,
                                         drop_remainder=True, seed=seed, input_shards=input_shards,
                                         num_workers=workers[0], worker_index=workers[1])
        if input_shards > 1:
            mine = worker_files(corpus, batch_size, input_shards, *workers)
            print(f"worker {workers[1]} of {workers[0]} reads {len(mine)} of {input_shards} input shard files: "
                  + ", ".join(os.path.basename(f) for f in mine), flush=True)
    else:
        common = dict(sequence_length=sequence_length, max_predictions=max_predictions, nsp=nsp,
                      whole_word_masking=whole_word_masking, max_ngram=max_ngram, corpus_format=corpus_format,
                      lowercase=lowercase)
        train = pretraining_dataset(corpus, vocabulary, batch_size=batch_size, repeat=True, drop_remainder=True,
                                    seed=seed, document_filter=train_docs, **common)
        if eval_corpus:
            eval_corpus = _check_paths(eval_corpus, "--eval-corpus")
            heldout = pretraining_dataset(eval_corpus, vocabulary, batch_size=batch_size, seed=seed + 1,
                                          **common).take(eval_batches).cache()
        elif holdout_every:
            heldout = pretraining_dataset(corpus, vocabulary, batch_size=batch_size, seed=seed + 1,
                                          document_filter=lambda i: split_documents(i, holdout_every),
                                          **common).take(eval_batches).cache()

    if heldout is not None:
        # A known length: Keras warns "ran out of data" when evaluating a stream of unknown length.
        heldout, _ = with_known_cardinality(heldout)


    # --- model ---
    set_precision(mixed_precision)
    import keras

    keras.utils.set_random_seed(seed)  # initialisation and dropout: the same run every time
    with distribution.scope():
        pretrainer = _build_model(preset, model, vocabulary, data_layout)
        if pretrainer.backbone.max_sequence_length < sequence_length:
            raise UsageError(f"--sequence-length {sequence_length} exceeds the model's "
                             f"{pretrainer.backbone.max_sequence_length} positions.")
        warmup = warmup_steps if warmup_steps is not None else int(round(0.1 * steps))
        pretrainer.compile(optimizer=create_optimizer(learning_rate, total_steps=steps, warmup_steps=warmup,
                                                      recipe=recipe),
                           jit_compile=static_jit is True)  # "auto": decided on the first batch

    if check_tpu_compat:
        from keras_bert_zoo.training import tpu_compat

        print(tpu_compat.describe(tpu_compat.check_tpu_compat(pretrainer, train), train), flush=True)
        if not records:
            print("tpu-compat: the input is read by a Python generator here; on a TPU pass TFRecords as --corpus",
                  flush=True)
        return pretrainer, {"tpu_compat": 1}

    # --- train: epochs of `interval` steps, the held-out score after each; stops at exactly `steps` ---
    interval = min(eval_every, steps)
    run_dir = run_directory(out)  # checkpoints and live logs (see `run_directory`)
    log = StepLog(max_steps=steps, time_budget=time_budget)
    extra_callbacks, callbacks = list(callbacks), [log]
    evaluation = None
    if heldout is not None:
        evaluation = PeriodicEvaluation(lambda: evaluate_model(pretrainer, heldout),
                                        prefix="heldout_", label="held-out")
        callbacks.append(evaluation)
    if chief:
        prepare_run_directory(run_dir, out)
        callbacks.append(ScalarLogger(os.path.join(run_dir, "logs"), every=max(1, interval // 10)))
    callbacks.extend(extra_callbacks)
    if verbose is None:
        verbose = 1 if os.isatty(1) else 2
    signature = {"corpus": [os.path.abspath(p) for p in corpus], "preset": preset, "model": model,
                 "vocabulary_size": len(vocabulary), "steps": steps, "global_batch": batch_size,
                 "learning_rate": learning_rate, "warmup_steps": warmup, "recipe": recipe, "seed": seed,
                 "eval_every": interval, "mixed_precision": mixed_precision, "input_shards": input_shards,
                 **data_layout}
    # A Python generator cannot be serialised: text corpora resume by replaying the seeded stream.
    position = "iterator" if records and worker_info(distribution)[0] == 1 else "replay"
    history = train_loop(pretrainer, train, epochs=-(-steps // interval), steps_per_epoch=interval,
                         max_steps=steps, callbacks=callbacks, verbose=verbose,
                         checkpoint_dir=os.path.join(run_dir, "checkpoints"), checkpoint_every=checkpoint_every,
                         resume=resume, signature=signature, position=position, writer=chief,
                         nonfinite={"learning_rate": learning_rate, "mixed_precision": mixed_precision},
                         per_worker_input=records and input_shards > 1,
                         choose_jit=lambda batch: choose_jit_compile(pretrainer, batch, jit_compile, strategy=strategy,
                                                                     mixed_precision=mixed_precision, steps=steps))

    if not chief:
        return pretrainer, {}  # only the chief writes the preset and metrics (multi-worker)
    last = {k: float(v[-1]) for k, v in history.history.items()}
    metrics = {f"train_{k}": v for k, v in last.items() if not k.startswith("heldout_")}
    metrics.update({
        "steps": log.steps,
        "train_seconds": log.train_seconds,
        # Sequence positions per second (batch x length), after the compiling first
        # steps: the unit of the reference throughput table.
        "tokens_per_second": log.steady_rate(batch_size * sequence_length),
        "sequence_length": sequence_length,
        "batch_size": batch_size,
    })
    if evaluation is not None:
        metrics.update(evaluation.last)
    else:
        metrics.update({k: v for k, v in last.items() if k in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss")})
    # Every output goes to a temporary sibling of `out`, which takes `out`'s place once all is
    # written; the checkpoints and the TensorBoard logs (written live) move along.
    with output_dir(out, overwrite=True) as save_dir:
        pretrainer.save_to_preset(save_dir)
        BertTokenizer(vocabulary, lowercase=lowercase).save_to_preset(save_dir)
        write_metrics(metrics, os.path.join(save_dir, "metrics.json"))
        plot_pretraining(log.rows, evaluation.history if evaluation else [], os.path.join(save_dir, "loss_curves.png"))
        keep_run_files(run_dir, save_dir)
    return pretrainer, metrics


def evaluate_pretrainer(model_dir, data_paths, batch_size=32, max_batches=None):
    """Held-out MLM / NSP scores of a pretrained model directory on a corpus.

    The corpus is prepared as at training time (the `data_layout` saved in the
    directory: sequence length, NSP mode, corpus format) with fixed-seed masks, so
    two evaluations of one model give the same numbers.

    Returns:
        dict with `mlm_accuracy`, `nsp_accuracy`, `mlm_loss`, `nsp_loss`, `loss`, `sequences`.
    """
    from keras_bert_zoo.models.pretrainer import BertPretrainer
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.preprocessing.pretraining_data import pretraining_dataset
    from keras_bert_zoo.preprocessing.records import read_pretraining_records

    data_paths = _check_paths(data_paths, "--data")
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab):
        raise CheckpointError(f"{model_dir} has no vocab.txt, so the corpus cannot be tokenized; "
                         "evaluate a directory written by `bert-zoo pretrain`.")
    model = BertPretrainer.from_preset(model_dir, preprocessor=None)
    model.compile(jit_compile=False)
    cfg = {"sequence_length": 128, "nsp": "nsp", "corpus_format": "bert", "lowercase": True,
           "whole_word_masking": False, "max_ngram": 1, **model.data_layout}
    cfg.setdefault("max_predictions", default_max_predictions(cfg["sequence_length"]))
    if _is_records(data_paths):
        ds = read_pretraining_records(data_paths, batch_size, use_nsp=cfg["nsp"] != "none")
    else:
        ds = pretraining_dataset(
            data_paths, vocab, sequence_length=cfg["sequence_length"], max_predictions=cfg["max_predictions"],
            batch_size=batch_size, nsp=cfg["nsp"], whole_word_masking=cfg["whole_word_masking"],
            max_ngram=cfg["max_ngram"], corpus_format=cfg["corpus_format"], lowercase=cfg["lowercase"], seed=2024,
        )
    if max_batches:
        ds = ds.take(max_batches)
    ds = ds.cache()
    sequences = sum(int(x["token_ids"].shape[0]) for x, _ in ds)
    ds, _ = with_known_cardinality(ds)  # Keras warns "ran out of data" on streams of unknown length
    if sequences == 0:
        raise InvalidInputError(f"{data_paths} produced no pretraining examples; check --data and the corpus format "
                         f"({cfg['corpus_format']!r}).")
    metrics = {k: float(v) for k, v in model.evaluate(ds, return_dict=True, verbose=0).items()}
    metrics["sequences"] = sequences
    return metrics


class PretrainTask(TaskSpec):
    name = "pretrain"
    model_class_name = "BertPretrainer"
    description = "masked-LM + next-sentence pretraining"
    finetunable = False
    default_learning_rate = 1e-4

    def model_class(self):
        from keras_bert_zoo.models.pretrainer import BertPretrainer

        return BertPretrainer

    def evaluate(self, model_dir, data_paths, batch_size=32):
        return evaluate_pretrainer(model_dir, data_paths, batch_size=batch_size)

    def predict(self, model, texts):
        if not any("[MASK]" in t for t in texts):
            raise InvalidInputError("a pretrained model fills in masks: write [MASK] where a word is missing, e.g. "
                             "'The capital of France is [MASK] .'")
        return [{"text": text, "masks": [[{"token": t, "score": round(p, 4)} for t, p in slot] for slot in answer]}
                for text, answer in zip(texts, model.fill_mask(list(texts)))]

    def format_prediction(self, row):
        shown = "  |  ".join(", ".join(f"{c['token']} {c['score']:.3f}" for c in slot) for slot in row["masks"])
        return f"{shown or '(no [MASK])'}\t{row['text']}"

    def serving(self):
        return PretrainerServing


@register_serving("BertPretrainer")
class PretrainerServing(TaskServing):
    """Fill-mask: the top-k tokens at each `[MASK]` of the text (at most `max_masks`).

    Outputs `[batch, max_masks, top_k]` `tokens`, `token_ids`, `scores` (softmax
    probabilities), and `[batch, max_masks]` `mask_positions` and `is_mask` (False on
    padding slots, where the other outputs are meaningless).
    """

    default_signature = "fill_mask"
    options = ("top_k", "max_masks")

    def __init__(self, model, preprocessor, text_pair=False, top_k=5, max_masks=8):
        super().__init__(model, preprocessor, text_pair)
        self.top_k = int(top_k)
        self.max_masks = int(max_masks)
        # Checked here, not left to tf.math.top_k: its error surfaces while the export is being
        # traced, as TensorFlow's traced source code, naming neither the flag nor the vocabulary.
        vocabulary = int(model.backbone.vocabulary_size)
        if not 1 <= self.top_k <= vocabulary:
            raise UsageError(f"--top-k {self.top_k} (top_k= in Python) asks for more tokens than the model's "
                             f"vocabulary of {vocabulary}; use 1 to {vocabulary}.")
        self.mask_id = preprocessor.tokenizer.mask_token_id
        self.vocab_table = None

    def bind(self, module):
        self.vocab_table = module.vocab_table

    def model_inputs(self, features):
        import tensorflow as tf

        is_mask = tf.equal(features["token_ids"], self.mask_id)
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask
        )
        positions = positions[:, : self.max_masks]
        features = dict(features)
        features["mask_positions"] = positions.to_tensor(0, shape=[None, self.max_masks])
        features["is_mask"] = tf.sequence_mask(positions.row_lengths(), self.max_masks)
        return features

    def outputs(self, model_outputs, features):
        import tensorflow as tf

        probs = tf.nn.softmax(tf.cast(model_outputs["mlm_logits"], tf.float32), axis=-1)
        scores, ids = tf.math.top_k(probs, k=self.top_k)
        return {
            "token_ids": ids,
            "tokens": self.vocab_table.lookup(tf.cast(ids, tf.int64)),
            "scores": scores,
            "mask_positions": features["mask_positions"],
            "is_mask": features["is_mask"],
        }

    def info(self):
        return {"top_k": self.top_k, "max_masks": self.max_masks}


TASK = PretrainTask()
