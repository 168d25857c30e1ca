"""The max-context rule, written once: which window's prediction a piece takes.

Documents longer than a window are cut into overlapping windows, so a piece can sit in
several. google-research/bert's run_squad.py (`_check_is_max_context`) takes the window
where the piece has the most context: the largest `min(pieces to its left, pieces to its
right) + 0.01 * window length`, the earliest window on ties. SQuAD answers
(`tasks.span_qa.preprocessor`) and NER tags (`tasks.tagger.windows`, in numpy and in TF)
use this one score.

Examples:
>>> import numpy as np
>>> from keras_bert_zoo.preprocessing.max_context import max_context_score
>>> max_context_score(np.array([0, 5, 9]), np.array([9, 4, 0]), 10).tolist()   # ends lose to the middle
[10, 410, 10]
"""

import numpy as np
import tensorflow as tf

__all__ = ["max_context_score"]


def max_context_score(left, right, window_length):
    """The piece's score in a window, `100 * min(left, right) + window_length`.

    run_squad.py's `min(left, right) + 0.01 * length` times 100: the same order and the
    same ties, in integers (no float rounding decides a tie). Numpy arrays in, numpy out;
    TF tensors (in a graph too) in, a tensor out.

    Args:
        left, right: int, pieces of the window before and after the piece.
        window_length: int, pieces in the window (broadcast against `left`).
    """
    if isinstance(left, np.ndarray):
        return 100 * np.minimum(left, right) + window_length
    return 100 * tf.minimum(left, right) + window_length
