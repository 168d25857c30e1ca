"""`bert-zoo demo`: the whole BERT life cycle on Python's own documentation.

1. corpus: `pydoc_data.topics` paragraphs, labelled with their documentation chapter,
   split train / dev / test (see `keras_bert_zoo.demo.corpus`);
2. vocabulary: WordPiece learned from the training paragraphs;
3. pretraining: a small BERT from scratch with MLM + NSP (`keras_bert_zoo.pretrain`);
   the held-out MLM loss of the random initialisation and of the trained model are
   measured on the same fixed-seed masks of the dev paragraphs;
4. fine-tuning: chapter classification (`keras_bert_zoo.finetune("classify", ...)`), best
   dev checkpoint kept;
5. export: a SavedModel taking raw strings, then reloaded with
   `tf.saved_model.load` and scored on the *test* paragraphs beside the majority-class
   baseline, and asked about new sentences.

Each step prints what it does, how long it took and the figures it reached; all
outputs land under `out/` (`demo_metrics.json`, the curves as PNG, the SavedModel).
"""

import os
import shutil
import time

import numpy as np

from keras_bert_zoo.demo import corpus
from keras_bert_zoo.demo.budget import (
    BUDGETS,
    FINETUNE_STEP_COST,
    FIXED_STEPS,
    MIN_SCALE,
    PRETRAIN_STEP_COST,
    TIME_LIMITS,
    estimate_seconds,
    fit_to_time,
    time_pretraining_step,
)
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.files import write_metrics

__all__ = [
    "BUDGETS",
    "TIME_LIMITS",
    "MIN_SCALE",
    "PRETRAIN_STEP_COST",
    "FINETUNE_STEP_COST",
    "FIXED_STEPS",
    "QUESTIONS",
    "time_pretraining_step",
    "estimate_seconds",
    "fit_to_time",
    "run_demo",
]  # the budget's names live in `demo.budget`; this module keeps exporting them

# New sentences written for the demo (not from the corpus), one per chapter.
QUESTIONS = [
    ("The while loop runs its suite again and again as long as the condition stays true.", "statements"),
    ("An integer literal may contain underscores between digits to make it easier to read.", "lexical"),
    ("Set a breakpoint at that line and continue until it is reached.", "library"),
    ("A class can define __len__ to return the number of items it holds.", "data_model"),
    ("A name used inside a function is looked up in the enclosing scopes when it is not local.", "execution_model"),
    ("The operands of the + operator are converted to a common type before they are added.", "expressions"),
]
_FILL_MASK = ["the [MASK] statement leaves the innermost loop.", "a string literal is written between [MASK]."]


class _Steps:
    """Prints `[k/n] title` before a step and its time after it."""

    def __init__(self, total):
        self.total, self.k, self.start = total, 0, time.perf_counter()
        self._t = None

    def begin(self, title):
        self.k += 1
        self._t = time.perf_counter()
        print(f"\n[{self.k}/{self.total}] {title}", flush=True)

    def end(self, summary):
        print(f"      {summary}  ({time.perf_counter() - self._t:.0f} s)", flush=True)

    def elapsed(self):
        return time.perf_counter() - self.start


def _majority_baseline(train_labels, test_labels):
    values, counts = np.unique(train_labels, return_counts=True)
    majority = values[np.argmax(counts)]
    return majority, float(np.mean(np.asarray(test_labels) == majority))


def _serve_in_batches(signature, texts, batch_size=64):
    import tensorflow as tf

    outs = [signature(text=tf.constant(texts[i : i + batch_size])) for i in range(0, len(texts), batch_size)]
    return {k: np.concatenate([o[k].numpy() for o in outs]) for k in outs[0]}


def _corpus(steps, data_dir, seed, metrics):
    """Step 1: the labelled paragraphs, split and written; `(parts, task files, pretraining corpora)`."""
    steps.begin("corpus: Python's documentation (pydoc_data.topics), labelled by chapter")
    parts = corpus.split(corpus.labelled_paragraphs(), seed=seed)
    paths = {
        name: corpus.write_task_file(rows, os.path.join(data_dir, f"{name}.jsonl")) for name, rows in parts.items()
    }
    pretrain_text = corpus.write_pretraining_corpus(parts["train"], os.path.join(data_dir, "pretrain_train.txt"))
    heldout_text = corpus.write_pretraining_corpus(parts["dev"], os.path.join(data_dir, "pretrain_dev.txt"))
    counts = {name: len(rows) for name, rows in parts.items()}
    words = sum(len(p.split()) for _, _, p in parts["train"])
    metrics.update({f"{k}_paragraphs": v for k, v in counts.items()})
    steps.end(
        f"{sum(counts.values())} paragraphs, {len(corpus.LABELS)} chapters ({', '.join(corpus.LABELS)}); "
        f"train {counts['train']} / dev {counts['dev']} / test {counts['test']}; {words:,} training words"
    )
    return parts, paths, pretrain_text, heldout_text


def _pretraining_gain(steps, pre_dir, init_dir, heldout_text, seed, metrics):
    """Step 4: did pretraining help? The same held-out masks scored on the random initialisation."""
    import keras

    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
    from keras_bert_zoo.tasks.pretrainer.spec import evaluate_pretrainer

    steps.begin("held-out MLM/NSP loss: random initialisation vs pretrained (same fixed-seed masks)")
    keras.utils.set_random_seed(seed)
    init = BertPretrainer.from_preset(pre_dir, load_weights=False, preprocessor=None)
    init.save_to_preset(init_dir)
    for name in ("vocab.txt", "tokenizer_config.json"):
        shutil.copyfile(os.path.join(pre_dir, name), os.path.join(init_dir, name))
    before = evaluate_pretrainer(init_dir, [heldout_text], max_batches=20)
    after = evaluate_pretrainer(pre_dir, [heldout_text], max_batches=20)
    shutil.rmtree(init_dir, ignore_errors=True)
    metrics.update(
        {
            "heldout_mlm_loss_init": before["mlm_loss"],
            "heldout_mlm_loss": after["mlm_loss"],
            "heldout_mlm_accuracy_init": before["mlm_accuracy"],
            "heldout_mlm_accuracy": after["mlm_accuracy"],
            "heldout_nsp_accuracy": after.get("nsp_accuracy", float("nan")),
        }
    )
    steps.end(
        f"MLM loss {before['mlm_loss']:.3f} -> {after['mlm_loss']:.3f}, MLM accuracy "
        f"{before['mlm_accuracy']:.3f} -> {after['mlm_accuracy']:.3f}, NSP accuracy "
        f"{before.get('nsp_accuracy', float('nan')):.3f} -> {after.get('nsp_accuracy', float('nan')):.3f}"
    )


def _export_and_serve(steps, classifier, parts, pre_dir, out, budget, metrics):
    """Step 6: a raw-string SavedModel, reloaded, scored on the test split and asked new sentences."""
    import tensorflow as tf

    from keras_bert_zoo.export.saved_model import export_saved_model
    from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer

    steps.begin("export a raw-string SavedModel, reload it with tf.saved_model.load, score the test split")
    saved = export_saved_model(classifier, os.path.join(out, "saved_model"), overwrite=True)
    served = tf.saved_model.load(saved)
    signature = served.signatures["serving_default"]
    test_texts = [p for _, _, p in parts["test"]]
    test_labels = [label for _, label, _ in parts["test"]]
    answers = _serve_in_batches(signature, test_texts)
    predicted = [s.decode() for s in answers["labels"]]
    accuracy = float(np.mean(np.array(predicted) == np.array(test_labels)))
    majority, baseline = _majority_baseline([label for _, label, _ in parts["train"]], test_labels)
    keras_probs = classifier.logits_to_probabilities(classifier.predict(test_texts, verbose=0))
    parity = float(np.abs(answers["probabilities"] - keras_probs).max())
    metrics.update({"test_accuracy": accuracy, "test_majority_baseline": baseline, "savedmodel_max_abs_diff": parity})
    steps.end(
        f"test accuracy {accuracy:.3f}  vs  majority-class baseline {baseline:.3f} (always {str(majority)!r}); "
        f"SavedModel vs Keras max |diff| {parity:.1e}"
    )
    print("\n      raw sentences (new, not from the corpus) -> the reloaded SavedModel says:")
    answers = _serve_in_batches(signature, [q for q, _ in QUESTIONS])
    hits = 0
    for (question, expected), label, probs in zip(QUESTIONS, answers["labels"], answers["probabilities"], strict=True):
        label = label.decode()
        hits += label == expected
        print(f"      {label:>15} {probs.max():.2f}  (chapter: {expected})  {question}")
    metrics["questions_correct"] = hits
    if budget == "full":
        fill = export_saved_model(
            BertPretrainer.from_preset(pre_dir, preprocessor=BertPreprocessor.from_preset(pre_dir)),
            os.path.join(out, "saved_model_fill_mask"),
            top_k=3,
            overwrite=True,
        )
        got = tf.saved_model.load(fill).signatures["fill_mask"](text=tf.constant(_FILL_MASK))
        for text, tokens, scores in zip(_FILL_MASK, got["tokens"].numpy(), got["scores"].numpy(), strict=True):
            shown = ", ".join(f"{t.decode()} {s:.2f}" for t, s in zip(tokens[0], scores[0], strict=True))
            print(f"      fill-mask: {text}  ->  {shown}")


def run_demo(out="bert_zoo_demo", budget="full", seed=0, verbose=None):
    """Runs the demo end to end; returns the metrics written to `out/demo_metrics.json`.

    Args:
        out: output directory (created; earlier demo outputs in it are replaced).
        budget: `"small"` (CI, about 2 minutes) or `"full"` (README, under 10
            minutes on 2 CPU cores; scaled down to fit on a slower machine, see
            `fit_to_time`).
        seed: int, data split, initialisation and masking seed.
        verbose: Keras `fit` verbosity; None: progress bar on a terminal, a line per
            epoch otherwise.

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.demo import run_demo
    >>> out = os.path.join(tempfile.mkdtemp(), "demo")
    >>> metrics = run_demo(out, budget="small", verbose=0)  # minutes: it prints its progress
    estimated time on this machine: ...
    >>> metrics["heldout_mlm_loss"] < metrics["heldout_mlm_loss_init"]  # pretraining learned the corpus
    True
    >>> sorted(os.listdir(out))
    ['classifier', 'data', 'demo_metrics.json', 'pretrained', 'saved_model']
    """
    if budget not in BUDGETS:
        raise UsageError(f"budget {budget!r} is unknown; use one of {sorted(BUDGETS)}.")
    import keras

    os.makedirs(out, exist_ok=True)
    data_dir, pre_dir, init_dir, cls_dir = (os.path.join(out, d) for d in ("data", "pretrained", "init", "classifier"))
    for d in (pre_dir, init_dir, cls_dir):
        shutil.rmtree(d, ignore_errors=True)
    os.makedirs(data_dir, exist_ok=True)
    steps = _Steps(5)
    cfg, metrics = _plan(budget, seed)
    keras.utils.set_random_seed(seed)

    parts, paths, pretrain_text, heldout_text = _corpus(steps, data_dir, seed, metrics)  # 1.
    _pretrain(steps, cfg, pretrain_text, heldout_text, pre_dir, seed, verbose, metrics)  # 2 + 3.
    _pretraining_gain(steps, pre_dir, init_dir, heldout_text, seed, metrics)  # 4.
    classifier = _finetune(steps, cfg, paths, pre_dir, cls_dir, seed, verbose, metrics)  # 5.
    _export_and_serve(steps, classifier, parts, pre_dir, out, budget, metrics)  # 6.

    metrics["total_seconds"] = steps.elapsed()
    write_metrics(metrics, os.path.join(out, "demo_metrics.json"))
    print(
        f"\ndone in {metrics['total_seconds']:.0f} s (estimated {metrics['estimated_seconds']:.0f} s). Outputs in "
        f"{out}/: demo_metrics.json, pretrained/loss_curves.png, classifier/training_curve.png, saved_model/ "
        f"(serve it: tf.saved_model.load after `import tensorflow_text`)."
    )
    return metrics


def _plan(budget, seed):
    """`(cfg, metrics)`: the budget fitted to this machine's time (printed), and the first metrics."""
    step_seconds = time_pretraining_step(BUDGETS[budget])
    cfg, scale = fit_to_time(budget, step_seconds)
    estimate = estimate_seconds(budget, step_seconds, cfg)
    print(
        f"estimated time on this machine: {estimate / 60:.1f} minutes (one pretraining step takes "
        f"{1000 * step_seconds:.0f} ms here now; load {os.getloadavg()[0]:.1f})",
        flush=True,
    )
    if scale < 1.0:
        whole = BUDGETS[budget]
        print(
            f"the whole budget ({whole['pretrain_steps']} pretraining steps, {whole['finetune_epochs']} "
            f"fine-tuning epochs) would take {estimate_seconds(budget, step_seconds) / 60:.1f} minutes here: "
            f"scaled to {cfg['pretrain_steps']} steps and {cfg['finetune_epochs']} epochs to fit "
            f"{TIME_LIMITS[budget] / 60:.0f} minutes (the figures printed will be lower than the README's)",
            flush=True,
        )
    metrics = {
        "seed": seed,
        "estimated_seconds": estimate,
        "pretrain_step_seconds_at_start": step_seconds,
        "budget_scale": scale,
        "finetune_epochs": cfg["finetune_epochs"],
    }
    return cfg, metrics


def _pretrain(steps, cfg, pretrain_text, heldout_text, pre_dir, seed, verbose, metrics):
    """Steps 2 and 3: a WordPiece vocabulary learned from the training paragraphs, and MLM/NSP pretraining."""
    from keras_bert_zoo.tasks.pretrainer.job import pretrain

    steps.begin(
        f"WordPiece vocabulary (at most {cfg['vocab_size']}) + MLM/NSP pretraining of {cfg['preset']} "
        f"for {cfg['pretrain_steps']} steps (batch {cfg['batch_size']} x {cfg['sequence_length']})"
    )
    _, pre_metrics = pretrain(
        corpus=[pretrain_text],
        out=pre_dir,
        preset=cfg["preset"],
        vocab_size=cfg["vocab_size"],
        sequence_length=cfg["sequence_length"],
        batch_size=cfg["batch_size"],
        steps=cfg["pretrain_steps"],
        learning_rate=cfg["pretrain_lr"],
        eval_corpus=[heldout_text],
        eval_every=cfg["eval_every"],
        eval_batches=20,
        seed=seed + 1,
        verbose=verbose,
    )
    with open(os.path.join(pre_dir, "vocab.txt"), encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    steps.end(
        f"vocabulary {vocab_size} tokens; {pre_metrics['tokens_per_second']:,.0f} tokens/s; "
        f"held-out MLM acc {pre_metrics.get('mlm_accuracy', float('nan')):.3f}, "
        f"NSP acc {pre_metrics.get('nsp_accuracy', float('nan')):.3f}"
    )
    metrics.update(
        {
            "vocabulary_size": vocab_size,
            "pretrain_steps": int(pre_metrics["steps"]),
            "pretrain_tokens_per_second": pre_metrics["tokens_per_second"],
        }
    )


def _finetune(steps, cfg, paths, pre_dir, cls_dir, seed, verbose, metrics):
    """Step 5: chapter classification fine-tuned from the pretrained model, the best dev epoch kept."""
    from keras_bert_zoo.tasks.classifier.data import DataLayout
    from keras_bert_zoo.tasks.finetuning import finetune

    steps.begin(f"fine-tune chapter classification for {cfg['finetune_epochs']} epochs (best dev kept)")
    layout = DataLayout(("text",), "label", label_names=corpus.LABELS)
    classifier, ft = finetune(
        "classify",
        model=pre_dir,
        train=paths["train"],
        dev=paths["dev"],
        out=cls_dir,
        layout=layout,
        select="best",
        epochs=cfg["finetune_epochs"],
        batch_size=cfg["batch_size"],
        learning_rate=cfg["finetune_lr"],
        sequence_length=cfg["sequence_length"],
        max_train_examples=cfg["max_train_examples"],
        seed=seed,
        verbose=verbose,
    )
    metrics.update({"dev_accuracy": ft["accuracy"], "finetune_seconds": ft["train_seconds"]})
    steps.end(
        f"dev accuracy {ft['accuracy']:.3f} (best of {cfg['finetune_epochs']} epochs), "
        f"{ft['train_examples_per_second']:.0f} examples/s"
    )
    return classifier
