"""`bert-zoo pretrain`: masked-LM + next-sentence pretraining on a text corpus.

Reads documents (original BERT format, one document per line, or WikiText),
makes NSP/SOP pairs, masks them anew every pass (dynamic masking) and trains a
`BertPretrainer` with BERT's optimizer. Every `--eval-every` steps it scores the
held-out documents (`--holdout-every N` keeps every N-th document out of
training). `--out` receives TensorBoard logs (`logs/`), `metrics.json`,
`loss_curves.png` and a preset directory (`config.json`, `model.safetensors`,
`vocab.txt`) that `BertPretrainer.from_preset`, HF `BertForPreTraining` and
`bert-zoo evaluate --model OUT --data CORPUS` load.

Examples:
    bert-zoo pretrain --corpus ../shared/data/pretrain_text/wikitext-2.valid.tokens.txt \\
        --corpus-format wikitext --vocab-size 8000 --preset bert_mini_uncased \\
        --steps 2000 --batch-size 32 --holdout-every 10 --out /tmp/mini
    bert-zoo evaluate --model /tmp/mini --data held_out.txt
"""

import math
import os
import time

from keras_bert_zoo.commands.common import add_distribution_arguments, setup_logging, write_metrics


def add_arguments(parser):
    parser.add_argument("--corpus", nargs="+", required=True,
                        help="text files (or .tfrecord files in the original BERT feature format)")
    parser.add_argument("--corpus-format", choices=("bert", "lines", "wikitext"), default="bert",
                        help="bert: sentence per line, blank line between documents; lines: one document "
                             "per line; wikitext: ' = Title = ' starts an article")
    vocab = parser.add_mutually_exclusive_group()
    vocab.add_argument("--vocab", default=None, help="vocab.txt (default: the --model directory's)")
    vocab.add_argument("--vocab-size", type=int, default=None, help="learn a WordPiece vocabulary of N tokens first")
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--preset", default=None, help="architecture name, random init (e.g. bert_mini_uncased)")
    model.add_argument("--model", default=None, help="checkpoint directory to continue pretraining (HF, Google, ours)")
    parser.add_argument("--out", required=True, help="output directory (becomes a preset directory)")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--max-predictions", type=int, default=None,
                        help="masked positions per sequence (default ceil(0.15 * length): 20 at 128, as the original)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--learning-rate", type=float, default=1e-4)
    parser.add_argument("--warmup-steps", type=int, default=None, help="default: 10%% of --steps")
    parser.add_argument("--nsp", choices=("nsp", "sop", "none"), default="nsp")
    parser.add_argument("--whole-word-masking", action="store_true")
    parser.add_argument("--max-ngram", type=int, default=1, help=">1: mask spans of 1..N words/tokens")
    parser.add_argument("--no-lowercase", action="store_true", help="cased vocabulary")
    parser.add_argument("--holdout-every", type=int, default=0,
                        help="hold out every N-th document for evaluation (0: none)")
    parser.add_argument("--eval-corpus", nargs="+", default=None,
                        help="held-out documents in their own file(s), same format as --corpus")
    parser.add_argument("--eval-every", type=int, default=200, help="steps between held-out evaluations")
    parser.add_argument("--eval-batches", type=int, default=50, help="held-out batches per evaluation")
    parser.add_argument("--seed", type=int, default=12345)
    parser.add_argument("--jit-compile", choices=("auto", "true", "false"), default="true",
                        help="XLA compilation of the train step (about 2x faster on CPU)")
    add_distribution_arguments(parser)
    parser.add_argument("--time-budget", type=float, default=None,
                        help="stop after this many seconds of training (benchmarks)")


def run(args):
    setup_logging()
    metrics = pretrain(**{k: v for k, v in vars(args).items() if k != "verb"})
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in metrics.items()})
    return 0


def default_max_predictions(sequence_length):
    """ceil(0.15 * length): 20 at 128, the original `max_predictions_per_seq` (round gives 19)."""
    return max(1, math.ceil(0.15 * sequence_length))


def _is_records(paths):
    return all(str(p).endswith((".tfrecord", ".tfrecords")) or "tfrecord" in os.path.basename(str(p)) for p in paths)


def _check_paths(paths):
    for p in paths:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"--corpus file {p!r} does not exist.")


def learn_vocabulary_file(corpus, size, out_path, corpus_format="bert", lowercase=True):
    """Learns a WordPiece vocabulary of at most `size` tokens from a corpus into `out_path`."""
    import tensorflow as tf

    from keras_bert_zoo.preprocessing.corpus import read_documents
    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary, save_vocabulary

    if size < 100:
        raise ValueError(f"--vocab-size {size} is too small; use at least a few thousand (e.g. 8000).")
    sentences = [s for doc in read_documents(corpus, corpus_format) for s in doc]
    vocab = learn_vocabulary(tf.data.Dataset.from_tensor_slices(sentences), size, lowercase=lowercase)
    save_vocabulary(vocab, out_path)
    return vocab


def _build_model(preset, model_dir, vocabulary, dropout_kwargs=None, data_config=None):
    from keras_bert_zoo.models.pretrainer import BertPretrainer
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    if preset is not None:
        if preset not in BACKBONE_PRESETS:
            raise ValueError(f"--preset {preset!r} is unknown; choose one of {sorted(BACKBONE_PRESETS)} "
                             "or pass --model DIR.")
        return BertPretrainer.from_preset(preset, backbone_kwargs={"vocabulary_size": len(vocabulary)},
                                          data_config=data_config)
    model = BertPretrainer.from_preset(model_dir, preprocessor=None, data_config=data_config)
    if model.backbone.vocabulary_size != len(vocabulary):
        raise ValueError(
            f"the vocabulary has {len(vocabulary)} tokens but {model_dir} was trained with "
            f"{model.backbone.vocabulary_size}; use that checkpoint's own vocab.txt (omit --vocab)."
        )
    return model


def pretrain(corpus, out, preset=None, model=None, vocab=None, vocab_size=None, corpus_format="bert",
             sequence_length=128, max_predictions=None, batch_size=32, steps=1000, learning_rate=1e-4,
             warmup_steps=None, nsp="nsp", whole_word_masking=False, max_ngram=1, no_lowercase=False,
             holdout_every=0, eval_corpus=None, eval_every=200, eval_batches=50, seed=12345, jit_compile="true",
             strategy="default", tpu=None, mixed_precision="none", time_budget=None, verbose=None):
    """The `bert-zoo pretrain` job as a function; returns the metrics it writes."""

    from keras_bert_zoo.preprocessing.pretraining_data import load_vocabulary, pretraining_dataset, split_documents
    from keras_bert_zoo.preprocessing.records import read_pretraining_records
    from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
    from keras_bert_zoo.training import create_optimizer, global_batch_size, is_chief, make_strategy, set_precision

    corpus = list(corpus) if not isinstance(corpus, str) else [corpus]
    _check_paths(corpus)
    if steps < 1 or batch_size < 1:
        raise ValueError("--steps and --batch-size must be positive.")
    if sequence_length < 16 or sequence_length > 512:
        raise ValueError(f"--sequence-length {sequence_length} must be within [16, 512].")
    max_predictions = max_predictions or default_max_predictions(sequence_length)
    lowercase = not no_lowercase
    os.makedirs(out, exist_ok=True)
    records = _is_records(corpus)
    # The strategy comes first: --batch-size is per replica, the data is batched globally.
    distribution = make_strategy(strategy, tpu=tpu)
    batch_size = global_batch_size(batch_size, distribution)

    # --- vocabulary ---
    if vocab_size:
        if records:
            raise ValueError("--vocab-size learns from text; TFRecords already hold ids: pass --vocab.")
        vocab = os.path.join(out, "vocab.txt")
        learn_vocabulary_file(corpus, vocab_size, vocab, corpus_format, lowercase)
    elif vocab is None:
        if model is None:
            raise ValueError("--preset needs a vocabulary: pass --vocab vocab.txt or --vocab-size N.")
        vocab = os.path.join(model, "vocab.txt")
        if not os.path.isfile(vocab):
            raise ValueError(f"{model} has no vocab.txt; pass --vocab.")
    elif os.path.isdir(vocab):
        vocab = os.path.join(vocab, "vocab.txt")
    vocabulary = load_vocabulary(vocab)

    data_config = {"sequence_length": sequence_length, "max_predictions": max_predictions, "nsp": nsp,
                   "corpus_format": corpus_format, "lowercase": lowercase,
                   "whole_word_masking": bool(whole_word_masking), "max_ngram": max_ngram,
                   "holdout_every": holdout_every}

    # --- data ---
    if records:
        train = read_pretraining_records(corpus, batch_size, sequence_length, max_predictions,
                                         use_nsp=nsp != "none", shuffle=True, repeat=True,
                                         drop_remainder=True, seed=seed)
        heldout = None
    else:
        keep = (lambda i: not split_documents(i, holdout_every)) if holdout_every else None
        common = dict(sequence_length=sequence_length, max_predictions=max_predictions, nsp=nsp,
                      whole_word_masking=whole_word_masking, max_ngram=max_ngram, corpus_format=corpus_format,
                      lowercase=lowercase)
        train = pretraining_dataset(corpus, vocabulary, batch_size=batch_size, repeat=True, drop_remainder=True,
                                    seed=seed, document_filter=keep, **common)
        heldout = None
        if eval_corpus:
            eval_corpus = [eval_corpus] if isinstance(eval_corpus, str) else list(eval_corpus)
            _check_paths(eval_corpus)
            heldout = pretraining_dataset(eval_corpus, vocabulary, batch_size=batch_size, seed=seed + 1,
                                          **common).take(eval_batches).cache()
        elif holdout_every:
            heldout = pretraining_dataset(corpus, vocabulary, batch_size=batch_size, seed=seed + 1,
                                          document_filter=lambda i: split_documents(i, holdout_every),
                                          **common).take(eval_batches).cache()

    # --- model ---
    set_precision(mixed_precision)
    with distribution.scope():
        pretrainer = _build_model(preset, model, vocabulary, data_config=data_config)
        if pretrainer.backbone.max_sequence_length < sequence_length:
            raise ValueError(f"--sequence-length {sequence_length} exceeds the model's "
                             f"{pretrainer.backbone.max_sequence_length} positions.")
        warmup = warmup_steps if warmup_steps is not None else int(round(0.1 * steps))
        pretrainer.compile(optimizer=create_optimizer(learning_rate, total_steps=steps, warmup_steps=warmup),
                           jit_compile={"auto": "auto", "true": True, "false": False}[jit_compile])

    # --- train ---
    log = _CurveLogger(heldout, eval_every, time_budget)
    interval = max(1, min(eval_every, steps))
    epochs = -(-steps // interval)
    callbacks = [log, _scalar_logger(os.path.join(out, "logs"), every=max(1, interval // 10))]
    if verbose is None:
        verbose = 1 if os.isatty(1) else 2
    history = pretrainer.fit(train, steps_per_epoch=interval, epochs=epochs, callbacks=callbacks, verbose=verbose)
    train_seconds = log.train_seconds

    # --- results ---
    if not is_chief(distribution):
        return {}  # only the chief writes the preset and metrics (multi-worker)
    pretrainer.save_to_preset(out)
    BertTokenizer(vocabulary, lowercase=lowercase).save_to_preset(out)
    last = {k: float(v[-1]) for k, v in history.history.items()}
    trained_steps = log.steps
    metrics = {f"train_{k}": v for k, v in last.items() if not k.startswith("heldout_")}
    steady_steps = max(trained_steps - log.warmup_steps, 0)
    metrics.update({
        "steps": trained_steps,
        "train_seconds": train_seconds,
        # Sequence positions per second (batch x length), after the compiling first
        # steps: the unit of the reference throughput table.
        "tokens_per_second": steady_steps * batch_size * sequence_length / max(log.steady_seconds, 1e-9),
        "sequence_length": sequence_length,
        "batch_size": batch_size,
    })
    if heldout is not None:
        final = pretrainer.evaluate(heldout, return_dict=True, verbose=0)
        metrics.update({k: float(v) for k, v in final.items()})
    else:
        metrics.update({k: v for k, v in last.items() if k in ("mlm_accuracy", "nsp_accuracy", "mlm_loss", "nsp_loss")})
    write_metrics(metrics, os.path.join(out, "metrics.json"))
    write_curves(log.rows, os.path.join(out, "loss_curves.png"))
    return metrics


class _CurveLogger:
    """Keras callback: per-step losses, timing, held-out scores; stops at a time budget."""

    def __new__(cls, *args, **kwargs):
        import keras

        class Logger(keras.callbacks.Callback):
            def __init__(self, heldout, eval_every, time_budget):
                super().__init__()
                self.heldout, self.eval_every, self.time_budget = heldout, eval_every, time_budget
                self.rows = []  # dicts: step, mlm_loss, nsp_loss, (heldout_*)
                self.steps = 0
                self.train_seconds = 0.0
                self.steady_seconds = 0.0
                self.warmup_steps = 3
                self._t = None

            def on_train_batch_begin(self, batch, logs=None):
                self._t = time.perf_counter()

            def on_train_batch_end(self, batch, logs=None):
                elapsed = time.perf_counter() - self._t
                self.train_seconds += elapsed
                self.steps += 1
                if self.steps > self.warmup_steps:  # the first steps trace and compile
                    self.steady_seconds += elapsed
                logs = logs or {}
                self.rows.append({"step": self.steps, **{k: float(v) for k, v in logs.items()}})
                if self.time_budget and self.train_seconds >= self.time_budget:
                    self.model.stop_training = True

            def on_epoch_end(self, epoch, logs=None):
                if self.heldout is None:
                    return
                scores = self.model.evaluate(self.heldout, return_dict=True, verbose=0)
                if logs is not None:
                    logs.update({f"heldout_{k}": float(v) for k, v in scores.items()})
                self.rows.append({"step": self.steps, **{f"heldout_{k}": float(v) for k, v in scores.items()}})
                print(f"step {self.steps}: held-out " + ", ".join(f"{k} {v:.4f}" for k, v in sorted(scores.items())),
                      flush=True)

        return Logger(*args, **kwargs)


def _scalar_logger(log_dir, every=10):
    """Keras callback writing TensorBoard scalars (`train/*`, `heldout/*`).

    Uses `tf.summary.write` from TensorFlow core, so logs are written even when the
    `tensorboard` package (needed by `keras.callbacks.TensorBoard`) is not installed;
    `tensorboard --logdir OUT/logs` shows them.
    """
    import keras
    import tensorflow as tf
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars"))

    class ScalarLogger(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.writer = tf.summary.create_file_writer(log_dir)
            self.step = 0

        def _write(self, prefix, logs):
            with self.writer.as_default():
                for k, v in (logs or {}).items():
                    tf.summary.write(f"{prefix}/{k}", tf.constant(float(v)), step=self.step, metadata=metadata)

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if self.step % every == 0:
                self._write("train", logs)

        def on_epoch_end(self, epoch, logs=None):
            self._write("heldout", {k[len("heldout_"):]: v for k, v in (logs or {}).items()
                                    if k.startswith("heldout_")})
            self.writer.flush()

        def on_train_end(self, logs=None):
            self.writer.flush()

    return ScalarLogger()


def write_curves(rows, path):
    """Training (running mean, as Keras logs it) and held-out loss curves, as a PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no loss_curves.png (pip install matplotlib).")
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, name in zip(axes, ("mlm", "nsp")):
        train = [(r["step"], r[f"{name}_loss"]) for r in rows if f"{name}_loss" in r]
        held = [(r["step"], r[f"heldout_{name}_loss"]) for r in rows if f"heldout_{name}_loss" in r]
        if train:
            ax.plot(*zip(*train), label="train (epoch running mean)")
        if held:
            ax.plot(*zip(*held), "o-", label="held-out")
        ax.set_xlabel("step")
        ax.set_title(f"{name.upper()} loss")
        ax.legend()
    fig.tight_layout()
    tmp = f"{path}.tmp"
    fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def evaluate_pretrainer(model_dir, data_paths, out_path=None, batch_size=32, max_batches=None):
    """Held-out MLM / NSP scores of a pretrained model directory on a corpus.

    The corpus is prepared as at training time (the `data_config` saved in the
    directory: sequence length, NSP mode, corpus format) with fixed-seed masks, so
    two evaluations of one model give the same numbers.

    Args:
        model_dir: directory written by `bert-zoo pretrain` (or any BertPretrainer preset
            with a `vocab.txt`).
        data_paths: text files (or original-format `.tfrecord` files).
        out_path: optional `metrics.json` path.

    Returns:
        dict with `mlm_accuracy`, `nsp_accuracy`, `mlm_loss`, `nsp_loss`, `loss`, `sequences`.
    """
    from keras_bert_zoo.models.pretrainer import BertPretrainer
    from keras_bert_zoo.preprocessing.pretraining_data import pretraining_dataset
    from keras_bert_zoo.preprocessing.records import read_pretraining_records

    data_paths = [data_paths] if isinstance(data_paths, str) else list(data_paths)
    _check_paths(data_paths)
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab):
        raise ValueError(f"{model_dir} has no vocab.txt, so the corpus cannot be tokenized; "
                         "evaluate a directory written by `bert-zoo pretrain`.")
    model = BertPretrainer.from_preset(model_dir, preprocessor=None)
    model.compile(jit_compile=False)
    cfg = {"sequence_length": 128, "nsp": "nsp", "corpus_format": "bert", "lowercase": True,
           "whole_word_masking": False, "max_ngram": 1, **model.data_config}
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
    sequences = 0
    for x, _ in ds:
        sequences += int(x["token_ids"].shape[0])
    if sequences == 0:
        raise ValueError(f"{data_paths} produced no pretraining examples; check --data and the corpus format "
                         f"({cfg['corpus_format']!r}).")
    metrics = {k: float(v) for k, v in model.evaluate(ds, return_dict=True, verbose=0).items()}
    metrics["sequences"] = sequences
    if out_path:
        write_metrics(metrics, out_path)
    return metrics
