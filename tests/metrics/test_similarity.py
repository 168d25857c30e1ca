"""Cosine similarity and STS correlations against scipy (or numpy written out here)."""

import numpy as np
import pytest

from keras_bert_zoo.metrics.classification import pearson, spearman
from keras_bert_zoo.tasks.embedder.metrics import cosine_similarity, similarity_correlations


def test_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 16)), rng.normal(size=(200, 16))
    gold = np.round(rng.uniform(0, 5, 200), 1)  # ties, as STS-B's scores have
    from scipy.spatial.distance import cosine as cosine_distance

    cosine = np.array([1 - cosine_distance(x, y) for x, y in zip(a, b, strict=True)])
    np.testing.assert_allclose(cosine_similarity(a, b), cosine, atol=1e-12)
    got = similarity_correlations(a, b, gold)
    assert got["spearman"] == pytest.approx(stats.spearmanr(gold, cosine)[0], abs=1e-12)
    assert got["pearson"] == pytest.approx(stats.pearsonr(gold, cosine)[0], abs=1e-12)
    assert spearman(gold, cosine) == pytest.approx(stats.spearmanr(gold, cosine)[0], abs=1e-12)
    assert pearson(gold, cosine) == pytest.approx(stats.pearsonr(gold, cosine)[0], abs=1e-12)


def test_written_out_references_and_edge_cases():
    # Spearman with ties, by hand: ranks of [1, 2, 2, 3] are [1, 2.5, 2.5, 4].
    x, y = [1.0, 2.0, 2.0, 3.0], [10.0, 30.0, 20.0, 40.0]
    rx, ry = np.array([1, 2.5, 2.5, 4]), np.array([1, 3, 2, 4])
    rx, ry = rx - rx.mean(), ry - ry.mean()
    assert spearman(x, y) == pytest.approx((rx @ ry) / np.sqrt((rx @ rx) * (ry @ ry)))
    assert cosine_similarity([[0.0, 0.0]], [[1.0, 0.0]]).tolist() == [0.0]
    with pytest.raises(ValueError, match="same shape"):
        cosine_similarity(np.ones((2, 3)), np.ones((3, 3)))
