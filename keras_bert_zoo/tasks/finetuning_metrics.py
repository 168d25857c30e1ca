"""The fine-tuning job's scores: dev evaluation during training and the dict of `metrics.json`.

`finetune` (`tasks.finetuning`) scores the dev file through `dev_evaluation` (every
`eval_every` steps and at each epoch end) and writes what `finetuning_metrics` and
`lora_metrics` return.

Examples:
>>> from keras_bert_zoo.tasks.finetuning_metrics import lora_metrics
>>> lora_metrics(task_model=None, lora_rank=None)  # without LoRA metrics.json has no LoRA keys
{}
"""

import numpy as np

from keras_bert_zoo.training.callbacks import PeriodicEvaluation

__all__ = ["dev_evaluation", "finetuning_metrics", "lora_metrics"]


def dev_evaluation(spec, current_model, dev_examples, dev_ds, layout, eval_every, best_dir):
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


def finetuning_metrics(
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


def lora_metrics(task_model, lora_rank):
    """`lora_rank` and the model's total and trainable parameter counts, for metrics.json (none without LoRA)."""
    if not lora_rank:
        return {}
    return dict(
        lora_rank=lora_rank,
        parameters=task_model.count_params(),
        trainable_parameters=sum(int(np.prod(w.shape)) for w in task_model.trainable_weights),
    )
