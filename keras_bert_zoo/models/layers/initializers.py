"""Weight initialisation shared by every BERT layer."""

import keras

__all__ = ["bert_initializer"]


def bert_initializer(stddev=0.02):
    """TruncatedNormal(0.02), the original BERT initialiser for every weight matrix."""
    return keras.initializers.TruncatedNormal(stddev=stddev)
