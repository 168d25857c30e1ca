import numpy as np
import pytest
import scipy.stats
from sklearn import metrics as skm

from keras_bert_zoo.metrics import classification as m


@pytest.mark.parametrize("seed", range(5))
def test_against_sklearn_and_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    y_true = rng.integers(0, 2, n)
    y_pred = np.where(rng.random(n) < 0.7, y_true, 1 - y_true)
    assert m.accuracy(y_true, y_pred) == pytest.approx(skm.accuracy_score(y_true, y_pred))
    assert m.f1_score(y_true, y_pred) == pytest.approx(skm.f1_score(y_true, y_pred))
    assert m.matthews_corrcoef(y_true, y_pred) == pytest.approx(skm.matthews_corrcoef(y_true, y_pred))
    k3_true, k3_pred = rng.integers(0, 3, n), rng.integers(0, 3, n)
    assert m.matthews_corrcoef(k3_true, k3_pred) == pytest.approx(skm.matthews_corrcoef(k3_true, k3_pred))
    x = rng.normal(size=n)
    y = x + rng.normal(size=n)
    ties = np.round(y * 2) / 2  # many ties, to exercise average ranks
    assert m.pearson(x, y) == pytest.approx(scipy.stats.pearsonr(x, y)[0])
    assert m.spearman(x, ties) == pytest.approx(scipy.stats.spearmanr(x, ties)[0])


def test_degenerate_cases_match_sklearn():
    # Undefined F1 / MCC: sklearn returns 0 (with a warning); so do we.
    assert m.f1_score([0, 0, 0], [0, 0, 0]) == 0.0
    assert m.matthews_corrcoef([1, 1, 1], [1, 1, 1]) == skm.matthews_corrcoef([1, 1, 1], [1, 1, 1])


def test_bad_input():
    with pytest.raises(ValueError, match="y_true has 2 values but y_pred has 3"):
        m.accuracy([0, 1], [0, 1, 1])
    with pytest.raises(ValueError, match="no examples"):
        m.f1_score([], [])


def test_classification_metrics_multi_label():
    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, 2, (50, 4)), rng.integers(0, 2, (50, 4))
    out = m.classification_metrics(y_true, y_pred, "multi_label", 4)
    assert out["f1"] == pytest.approx(skm.f1_score(y_true, y_pred, average="micro"))
    assert out["accuracy"] == pytest.approx(skm.accuracy_score(y_true, y_pred))
