"""GLUE classification and regression metrics, in NumPy.

Computed once over a whole dev set (F1 and Matthews correlation do not average
over batches), from labels and predictions as arrays.
"""

import numpy as np

from keras_bert_zoo.errors import InvalidInputError

__all__ = ["accuracy", "f1_score", "matthews_corrcoef", "pearson", "spearman", "TASK_METRICS", "classification_metrics"]


def _pair(y_true, y_pred):
    y_true = np.asarray(y_true).reshape(-1)
    y_pred = np.asarray(y_pred).reshape(-1)
    if y_true.shape != y_pred.shape:
        raise InvalidInputError(
            f"y_true has {y_true.size} values but y_pred has {y_pred.size}; give one prediction per example."
        )
    if y_true.size == 0:
        raise InvalidInputError("no examples to score; give at least one label and its prediction.")
    return y_true, y_pred


def accuracy(y_true, y_pred):
    """Fraction of exact matches.

    Examples:
    >>> from keras_bert_zoo.metrics.classification import accuracy
    >>> accuracy([0, 1, 1, 0], [0, 1, 0, 0])
    0.75
    """
    y_true, y_pred = _pair(y_true, y_pred)
    return float(np.mean(y_true == y_pred))


def f1_score(y_true, y_pred, positive=1):
    """Binary F1 of the `positive` class (GLUE's MRPC/QQP metric); 0 when undefined.

    Examples:
    >>> from keras_bert_zoo.metrics.classification import f1_score
    >>> round(f1_score([1, 1, 0, 0], [1, 0, 1, 0]), 3)
    0.5
    """
    y_true, y_pred = _pair(y_true, y_pred)
    tp = np.sum((y_pred == positive) & (y_true == positive))
    fp = np.sum((y_pred == positive) & (y_true != positive))
    fn = np.sum((y_pred != positive) & (y_true == positive))
    denom = 2 * tp + fp + fn
    return float(2 * tp / denom) if denom else 0.0


def matthews_corrcoef(y_true, y_pred):
    """Matthews correlation, multi-class form (Gorodkin 2004; CoLA's metric); 0 when undefined.

    Examples:
    >>> from keras_bert_zoo.metrics.classification import matthews_corrcoef
    >>> matthews_corrcoef([0, 1, 1, 0], [0, 1, 1, 0])
    1.0
    """
    y_true, y_pred = _pair(y_true, y_pred)
    classes, inverse = np.unique(np.concatenate([y_true, y_pred]), return_inverse=True)
    k = len(classes)
    t, p = inverse[: y_true.size], inverse[y_true.size :]
    confusion = np.zeros((k, k), dtype=np.float64)
    np.add.at(confusion, (t, p), 1)
    t_sum, p_sum = confusion.sum(axis=1), confusion.sum(axis=0)
    n, correct = confusion.sum(), np.trace(confusion)
    cov_ytyp = correct * n - np.dot(t_sum, p_sum)
    cov_ypyp = n * n - np.dot(p_sum, p_sum)
    cov_ytyt = n * n - np.dot(t_sum, t_sum)
    if cov_ypyp * cov_ytyt == 0:
        return 0.0
    return float(cov_ytyp / np.sqrt(cov_ytyt * cov_ypyp))


def pearson(x, y):
    """Pearson correlation (STS-B).

    Examples:
    >>> from keras_bert_zoo.metrics.classification import pearson
    >>> round(pearson([1, 2, 3], [2, 4, 7]), 4)
    0.9934
    """
    x, y = _pair(x, y)
    x = x.astype(np.float64) - np.mean(x)
    y = y.astype(np.float64) - np.mean(y)
    denom = np.sqrt(np.sum(x * x) * np.sum(y * y))
    return float(np.sum(x * y) / denom) if denom else 0.0


def _rank(a):
    """Ranks from 1, ties get their average rank (as scipy.stats.rankdata)."""
    a = np.asarray(a)
    order = np.argsort(a, kind="mergesort")
    sorted_a = a[order]
    # Start of each run of equal values, then the mean rank of the run.
    starts = np.concatenate([[True], sorted_a[1:] != sorted_a[:-1]])
    run_id = np.cumsum(starts) - 1
    run_start = np.flatnonzero(starts)
    run_end = np.append(run_start[1:], a.size)
    mean_rank = (run_start + run_end + 1) / 2.0
    ranks = np.empty(a.size, dtype=np.float64)
    ranks[order] = mean_rank[run_id]
    return ranks


def spearman(x, y):
    """Spearman rank correlation (Pearson of the ranks, ties averaged).

    Examples:
    >>> from keras_bert_zoo.metrics.classification import spearman
    >>> spearman([1, 2, 3], [2, 4, 70])
    1.0
    """
    x, y = _pair(x, y)
    return pearson(_rank(x), _rank(y))


# GLUE's metrics per task; the first is the one the best checkpoint is chosen by.
TASK_METRICS = {
    "cola": ("matthews_corrcoef", "accuracy"),
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "qqp": ("f1", "accuracy"),
    "stsb": ("pearson", "spearman"),
    "mnli": ("accuracy",),
    "mnli_mismatched": ("accuracy",),
    "qnli": ("accuracy",),
    "rte": ("accuracy",),
    "wnli": ("accuracy",),
}


def classification_metrics(y_true, y_pred, problem_type="single_label", num_classes=2):
    """Every metric that applies, as a flat dict of floats.

    Args:
        y_true: int labels `[n]` (single-label), multi-hot `[n, k]` (multi-label) or
            float targets `[n]` (regression).
        y_pred: predictions in the same form (class ids, 0/1 matrix or scores).
        problem_type: `"single_label"`, `"multi_label"` or `"regression"`.
        num_classes: int; F1 is added for binary single-label problems.
    """
    if problem_type == "regression":
        y_true = np.asarray(y_true, dtype=np.float64).reshape(-1)
        y_pred = np.asarray(y_pred, dtype=np.float64).reshape(-1)
        return {
            "pearson": pearson(y_true, y_pred),
            "spearman": spearman(y_true, y_pred),
            "mse": float(np.mean((y_true - y_pred) ** 2)),
        }
    if problem_type == "multi_label":
        y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
        tp = np.sum((y_true == 1) & (y_pred == 1))
        denom = 2 * tp + np.sum(y_true != y_pred)
        return {
            "accuracy": float(np.mean(np.all(y_true == y_pred, axis=-1))),  # exact match
            "f1": float(2 * tp / denom) if denom else 0.0,  # micro F1
        }
    out = {
        "accuracy": accuracy(y_true, y_pred),
        "matthews_corrcoef": matthews_corrcoef(y_true, y_pred),
    }
    if num_classes == 2:
        out["f1"] = f1_score(y_true, y_pred)
    return out
