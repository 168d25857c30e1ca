"""Training curves as PNG files (matplotlib, optional), written atomically."""

import os

__all__ = ["plot_finetuning", "plot_pretraining"]


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def _save(fig, plt, path):
    tmp = f"{path}.tmp"
    fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def plot_finetuning(rows, evaluations, metric, path):
    """Training loss per step (Keras' running mean of the epoch) and the dev metric.

    Args:
        rows: `StepLog.rows`.
        evaluations: `[(step, metrics)]`, `PeriodicEvaluation.history`.
        metric: the dev metric drawn.
        path: PNG path. Returns it, or None when matplotlib is missing.
    """
    plt = _pyplot()
    if plt is None:
        print("matplotlib is not installed: no training curve PNG (pip install matplotlib).")
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    losses = [(r["step"], r["loss"]) for r in rows if "loss" in r]
    if losses:
        ax.plot(*zip(*losses, strict=True), color="tab:blue", label="train loss (running mean)")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax2 = ax.twinx()
    points = [(s, m[metric]) for s, m in evaluations if metric in m]
    if points:
        ax2.plot(*zip(*points, strict=True), "o-", color="tab:red", label=f"dev {metric}")
    ax2.set_ylabel(f"dev {metric}")
    fig.legend(loc="center right", bbox_to_anchor=(0.88, 0.5))
    fig.tight_layout()
    return _save(fig, plt, path)


def plot_pretraining(rows, evaluations, path):
    """MLM and NSP loss: training (running mean) and held-out, side by side."""
    plt = _pyplot()
    if plt is None:
        print("matplotlib is not installed: no loss_curves.png (pip install matplotlib).")
        return None
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, name in zip(axes, ("mlm", "nsp"), strict=True):
        train = [(r["step"], r[f"{name}_loss"]) for r in rows if f"{name}_loss" in r]
        held = [(s, m[f"{name}_loss"]) for s, m in evaluations if f"{name}_loss" in m]
        if train:
            ax.plot(*zip(*train, strict=True), label="train (epoch running mean)")
        if held:
            ax.plot(*zip(*held, strict=True), "o-", label="held-out")
        ax.set_xlabel("step")
        ax.set_title(f"{name.upper()} loss")
        ax.legend()
    fig.tight_layout()
    return _save(fig, plt, path)
