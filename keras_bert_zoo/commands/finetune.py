"""`bert-zoo finetune {classify,tag,qa}`: fine-tune a checkpoint on task data.

`classify` reads GLUE TSV (`--task sst2|mrpc|rte|...`) or CSV / JSON Lines with named
columns, validates both files before any training, trains with BERT's optimizer
(`keras_bert_zoo.training.create_optimizer`) on length-bucketed batches, scores the
dev file during training, keeps the best dev checkpoint as a preset directory in
`--out`, and writes `metrics.json` and `training_curve.png` there.

Examples:
    bert-zoo finetune classify --model path/to/all-MiniLM-L6-v2 --task sst2 \\
        --train ../shared/data/sst2/train.tsv --dev ../shared/data/sst2/dev.tsv \\
        --max-train-examples 2000 --epochs 1 --out /tmp/sst2
"""

import os
import time

from keras_bert_zoo.commands.common import add_distribution_arguments, setup_logging, write_metrics

TASKS = ("classify", "tag", "qa")


def add_arguments(parser):
    parser.add_argument("task", choices=TASKS, help="what to fine-tune for")
    parser.add_argument("--model", required=True, help="preset name or checkpoint directory (HF, Google or ours)")
    parser.add_argument("--train", required=True, help="training data file")
    parser.add_argument("--dev", required=True, help="dev data file, scored during training")
    parser.add_argument("--out", required=True, help="output directory (becomes a preset directory)")
    parser.add_argument("--task", dest="glue_task", default=None,
                        help="GLUE layout: sst2, mrpc, rte, cola, qqp, stsb, mnli, qnli, wnli")
    parser.add_argument("--text-column", action="append", default=None,
                        help="text column name or index; give it twice for sentence pairs")
    parser.add_argument("--label-column", default=None, help="label column name or index")
    parser.add_argument("--problem-type", choices=("single_label", "multi_label", "regression"),
                        default=None, help="default: from --task, else single_label")
    parser.add_argument("--no-header", action="store_true", help="CSV/TSV files have no header row")
    parser.add_argument("--vocab", default=None,
                        help="vocab.txt (or its directory) when --model is a preset name or has none")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--warmup-ratio", type=float, default=0.1)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--max-train-examples", type=int, default=None)
    parser.add_argument("--max-dev-examples", type=int, default=None)
    parser.add_argument("--eval-every", type=int, default=0,
                        help="also score the dev file every N steps (0: once per epoch)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-bucketing", action="store_true", help="pad every batch to --sequence-length")
    add_distribution_arguments(parser)
    parser.add_argument("--jit-compile", choices=("auto", "true", "false"), default="false",
                        help="XLA compilation of the train step")


def run(args):
    setup_logging()
    if args.task != "classify":
        raise ValueError(
            f"'finetune {args.task}' is not available yet in this version; only 'finetune classify' is. "
            "Token classification and span QA land with BertTagger / BertSpanQA."
        )
    metrics = finetune_classifier(
        model=args.model, train=args.train, dev=args.dev, out=args.out,
        data_format=_data_format(args), vocab=args.vocab, epochs=args.epochs,
        batch_size=args.batch_size, learning_rate=args.learning_rate,
        warmup_ratio=args.warmup_ratio, sequence_length=args.sequence_length,
        max_train_examples=args.max_train_examples, max_dev_examples=args.max_dev_examples,
        eval_every=args.eval_every, seed=args.seed, bucketing=not args.no_bucketing,
        jit_compile={"auto": "auto", "true": True, "false": False}[args.jit_compile],
        strategy=args.strategy, tpu=args.tpu, mixed_precision=args.mixed_precision,
    )
    print(", ".join(f"{k}={v:.4g}" for k, v in sorted(metrics.items())))
    return 0


def _data_format(args):
    from keras_bert_zoo.preprocessing.task_data import DataFormat

    if args.glue_task:
        fmt = DataFormat.for_task(args.glue_task)
        if args.problem_type:
            fmt.problem_type = args.problem_type
        return fmt
    if not args.text_column or args.label_column is None:
        raise ValueError("give --task (a GLUE layout) or both --text-column and --label-column.")
    cols = [int(c) if c.isdigit() and args.no_header else c for c in args.text_column]
    label = int(args.label_column) if args.label_column.isdigit() and args.no_header else args.label_column
    return DataFormat(tuple(cols), label, problem_type=args.problem_type or "single_label",
                      header=not args.no_header)


def _vocab_dir(model, vocab):
    """Directory holding the vocab.txt to use, checked to exist."""
    if vocab:
        path = vocab if os.path.isdir(vocab) else os.path.dirname(os.path.abspath(vocab))
    else:
        path = model if os.path.isdir(str(model)) else None
    if path is None or not os.path.isfile(os.path.join(path, "vocab.txt")):
        raise ValueError(
            f"no vocab.txt for --model {model!r}: a preset name has only an architecture; pass "
            "--vocab path/to/vocab.txt (e.g. the checkpoint's) or a --model directory that has one."
        )
    return path


def model_architecture(model):
    """`BertBackbone` arguments of a preset name or checkpoint directory, from its config
    file only (no weights read), so checks before training stay cheap."""
    from keras_bert_zoo.convert.checkpoint import Checkpoint, _backbone_kwargs, _read_json
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS, backbone_config

    if model in BACKBONE_PRESETS:
        return backbone_config(model)
    for name, fmt in (("config.json", "hf"), ("bert_config.json", "google")):
        path = os.path.join(str(model), name)
        if os.path.isfile(path):
            return _backbone_kwargs(_read_json(path), fmt)
    return Checkpoint(model).backbone_kwargs  # raises the checkpoint's own clear error


def check_vocabulary(model, vocab_dir, sequence_length=None):
    """Raises before training when the vocabulary or the length does not fit the model."""
    arch = model_architecture(model)
    with open(os.path.join(vocab_dir, "vocab.txt"), encoding="utf-8") as f:
        size = sum(1 for _ in f)
    if size != arch["vocabulary_size"]:
        raise ValueError(
            f"--model {model!r} has vocabulary_size {arch['vocabulary_size']} but "
            f"{os.path.join(vocab_dir, 'vocab.txt')} has {size} entries: the token ids would not match the "
            "embedding table. Use the vocabulary the model was trained with (--vocab) or a matching --model."
        )
    if sequence_length is not None and sequence_length > arch["max_sequence_length"]:
        raise ValueError(
            f"--sequence-length {sequence_length} is longer than the model's {arch['max_sequence_length']} "
            "learned positions; use at most that."
        )


def _primary_metric(fmt, problem_type, num_classes):
    from keras_bert_zoo.metrics.classification import TASK_METRICS

    if fmt.task in TASK_METRICS:
        return TASK_METRICS[fmt.task][0]
    if problem_type == "regression":
        return "pearson"
    if problem_type == "multi_label":
        return "f1"
    return "accuracy"


def score(model, dataset, labels):
    """Predictions on `dataset` (features only, in order) and every applicable metric."""
    import numpy as np

    from keras_bert_zoo.metrics.classification import classification_metrics

    logits = model.predict(dataset, verbose=0)
    probs = model.logits_to_probabilities(logits)
    if model.problem_type == "single_label":
        pred = np.argmax(probs, axis=-1)
    elif model.problem_type == "multi_label":
        pred = (probs > 0.5).astype(labels.dtype)
    else:
        pred = probs[:, 0]
    return classification_metrics(labels, pred, model.problem_type, model.num_classes), probs


def finetune_classifier(model, train, dev, out, data_format, vocab=None, epochs=3, batch_size=32,
                        learning_rate=5e-5, warmup_ratio=0.1, sequence_length=128,
                        max_train_examples=None, max_dev_examples=None, eval_every=0, seed=0,
                        bucketing=True, jit_compile=False, verbose="auto", strategy="default", tpu=None,
                        mixed_precision="none"):
    """Fine-tunes a `BertClassifier`; returns the flat metrics dict written to `out/metrics.json`.

    Args: as the `bert-zoo finetune classify` flags; `data_format` is a
    `keras_bert_zoo.preprocessing.task_data.DataFormat`. `batch_size` is per replica
    under a `strategy`; only the chief writes `out` (multi-worker).
    """
    import keras
    import numpy as np

    from keras_bert_zoo.models.classifier import BertClassifier
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.preprocessing.task_data import make_dataset, read_examples
    from keras_bert_zoo.training import create_optimizer, global_batch_size, is_chief, make_strategy, set_precision

    # --- validate everything before the first step --------------------------------
    fmt = data_format
    train_ex = read_examples(train, fmt, max_examples=max_train_examples)
    label_names = train_ex.label_names
    dev_ex = read_examples(dev, fmt, label_names=label_names, max_examples=max_dev_examples)
    if fmt.problem_type == "single_label" and len(label_names) < 2:
        raise ValueError(f"{train} has a single label ({label_names}); classification needs at least two.")
    vocab_dir = _vocab_dir(model, vocab)
    check_vocabulary(model, vocab_dir, sequence_length)
    if sequence_length < 8:
        raise ValueError(f"--sequence-length {sequence_length} is too short; use at least 8 (128 is usual).")

    from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

    distribution = make_strategy(strategy, tpu=tpu)
    batch_size = global_batch_size(batch_size, distribution)
    if not is_chief(distribution):
        import tempfile

        out = tempfile.mkdtemp()  # other workers write where nobody reads
    set_precision(mixed_precision)
    keras.utils.set_random_seed(seed)
    preprocessor = BertPreprocessor.from_preset(vocab_dir, sequence_length=sequence_length)
    num_classes = 1 if fmt.problem_type == "regression" else len(label_names)
    layout = fmt.to_dict() | {"label_names": label_names, "sequence_length": sequence_length}
    # The model speaks the display names (SST-2: negative/positive) when the file's labels are codes.
    shown = fmt.display_names if fmt.display_names and len(fmt.display_names) == len(label_names or ()) \
        and list(fmt.label_names or ()) == list(label_names) else label_names
    with distribution.scope():
        classifier = BertClassifier.from_preset(
            model, num_classes=num_classes, problem_type=fmt.problem_type,
            label_names=list(shown) if fmt.problem_type != "regression" else None,
            data_format=layout, preprocessor=preprocessor,
        )

    # --- data -----------------------------------------------------------------------
    train_ds = make_dataset(train_ex, preprocessor, batch_size, shuffle=True, seed=seed, bucket=bucketing)
    dev_ds = make_dataset(dev_ex, preprocessor, batch_size * 2, bucket=bucketing, with_labels=False)
    # Exact batch count (bucketing leaves one partial batch per bucket), so the decay ends at the last step.
    train_ds, steps_per_epoch = with_known_cardinality(train_ds)
    with distribution.scope():
        optimizer = create_optimizer(learning_rate, total_steps=max(1, epochs * steps_per_epoch),
                                     warmup_ratio=warmup_ratio)
        classifier.compile(optimizer=optimizer, jit_compile=jit_compile)

    # --- train, scoring the dev set and keeping the best ---------------------------------
    primary = _primary_metric(fmt, fmt.problem_type, num_classes)
    tracker = _best_checkpoint(classifier, dev_ds, dev_ex.labels, primary, out, eval_every)
    if verbose == "auto":
        verbose = 1 if os.isatty(1) else 2
    print(f"fine-tuning {model} on {len(train_ex)} examples ({len(label_names or [])} labels), "
          f"dev {len(dev_ex)}, {epochs} epoch(s), batch {batch_size}, primary metric {primary}")
    start = time.perf_counter()
    history = classifier.fit(train_ds, epochs=epochs, callbacks=[tracker], verbose=verbose,
                             shuffle=False)  # the dataset shuffles itself, seeded
    total = time.perf_counter() - start
    train_seconds = total - tracker.eval_seconds
    losses = history.history.get("loss", [float("nan")])

    metrics = {f"{k}": v for k, v in tracker.best_metrics.items()}
    metrics.update({
        "best_step": tracker.best_step,
        "epochs": epochs,
        "train_examples": len(train_ex),
        "dev_examples": len(dev_ex),
        "train_seconds": train_seconds,
        "train_examples_per_second": epochs * len(train_ex) / max(train_seconds, 1e-9),
        "final_train_loss": float(losses[-1]),
    })
    write_metrics(metrics, os.path.join(out, "metrics.json"))
    _plot_curve(tracker.step_losses, tracker.evals, primary, os.path.join(out, "training_curve.png"))
    if not np.isfinite(losses[-1]):
        print("warning: the training loss is not finite; lower --learning-rate.")
    return metrics


def _best_checkpoint(*args, **kwargs):
    """`_BestCheckpoint` callback; keras is imported only when a run starts, so `--help` stays fast."""
    import keras

    class _BestCheckpoint(keras.callbacks.Callback):
        """Scores the dev set every `eval_every` steps and at each epoch end; saves the preset on improvement."""

        def __init__(self, classifier, dev_ds, dev_labels, primary, out, eval_every=0):
            super().__init__()
            self.classifier, self.dev_ds, self.dev_labels = classifier, dev_ds, dev_labels
            self.primary, self.out, self.eval_every = primary, out, eval_every
            self.best_metrics, self.best_step, self.best_value = {}, -1, -float("inf")
            self.step, self.step_losses, self.evals, self.eval_seconds = 0, [], [], 0.0

        def on_train_batch_end(self, batch, logs=None):
            self.step += 1
            if logs and "loss" in logs:
                self.step_losses.append(float(logs["loss"]))
            if self.eval_every and self.step % self.eval_every == 0:
                self._evaluate()

        def on_epoch_end(self, epoch, logs=None):
            if not self.evals or self.evals[-1][0] != self.step:
                self._evaluate()

        def _evaluate(self):
            start = time.perf_counter()
            metrics, _ = score(self.classifier, self.dev_ds, self.dev_labels)
            value = metrics[self.primary]
            self.evals.append((self.step, value))
            improved = value > self.best_value
            if improved:
                self.best_value, self.best_step = value, self.step
                self.best_metrics = metrics
                self.classifier.save_to_preset(self.out)
            self.eval_seconds += time.perf_counter() - start
            shown = ", ".join(f"{k} {v:.4f}" for k, v in metrics.items())
            print(f"\nstep {self.step}: dev {shown}" + ("  (best, saved)" if improved else ""), flush=True)

    return _BestCheckpoint(*args, **kwargs)


def _plot_curve(step_losses, evals, primary, path):
    """Training loss per step and the dev metric, written atomically as PNG."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no training_curve.png (pip install matplotlib).")
        return
    fig, ax = plt.subplots(figsize=(7, 4))
    # Keras reports the running mean of the epoch's loss; that is what is drawn.
    ax.plot(range(1, len(step_losses) + 1), step_losses, color="tab:blue", label="train loss (running mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax2 = ax.twinx()
    if evals:
        ax2.plot([s for s, _ in evals], [v for _, v in evals], "o-", color="tab:red", label=f"dev {primary}")
    ax2.set_ylabel(f"dev {primary}")
    fig.legend(loc="center right", bbox_to_anchor=(0.88, 0.5))
    fig.tight_layout()
    tmp = path + ".tmp"
    fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
