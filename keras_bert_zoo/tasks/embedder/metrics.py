"""Unsupervised similarity scores: cosine of two embeddings against gold scores (STS)."""

import numpy as np

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.metrics.classification import pearson, spearman

__all__ = ["cosine_similarity", "similarity_correlations"]


def cosine_similarity(a, b):
    """Row-wise cosine similarity of two `[n, d]` arrays (0 for a zero vector).

    Examples:
    >>> from keras_bert_zoo.tasks.embedder.metrics import cosine_similarity
    >>> cosine_similarity([[1.0, 0.0], [1.0, 1.0]], [[2.0, 0.0], [-1.0, -1.0]]).round(4).tolist()
    [1.0, -1.0]
    """
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise InvalidInputError(
            f"cosine_similarity takes two [n, d] arrays of the same shape, got {a.shape} and {b.shape}."
        )
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.where(norms > 0, np.sum(a * b, axis=1) / np.maximum(norms, 1e-300), 0.0)


def similarity_correlations(embeddings1, embeddings2, gold):
    """Spearman and Pearson correlation of the pairs' cosine similarity with the gold
    scores (the STS evaluation of sentence-transformers' `EmbeddingSimilarityEvaluator`).

    Examples:
    >>> from keras_bert_zoo.tasks.embedder.metrics import similarity_correlations
    >>> similarity_correlations([[1, 0], [1, 1], [0, 1]], [[1, 0], [1, 0], [1, 0]], [5.0, 2.5, 0.0])["spearman"]
    1.0
    """
    cosine = cosine_similarity(embeddings1, embeddings2)
    return {"spearman": spearman(gold, cosine), "pearson": pearson(gold, cosine)}
