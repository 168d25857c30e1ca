"""Chinese word boundaries for whole-word masking: a word segmenter over runs of CJK ideographs.

BERT's tokenizer splits every CJK ideograph into a token of its own, so the WordPiece rule
of whole-word masking (a piece starting with `##` continues the previous word) sees one
word per character on Chinese text: `--whole-word-masking` would be character masking.
HFL's Chinese-BERT-wwm segments the text into words and masks all characters of a chosen
word together (HF: `run_chinese_ref.py` writes which characters continue a word, and
`DataCollatorForWholeWordMask` treats them as `##` pieces). Here the same rule is applied
to the packed token ids inside the input pipeline:

- every maximal run of consecutive single-ideograph tokens (no special token, punctuation,
  digit or Latin piece between them) is joined into a string and cut into words by jieba;
- a character that is not the first of its word continues the word before it;
- every other token keeps the WordPiece rule, so English inside Chinese text (and English
  text) is grouped exactly as before.

Words therefore contain ideographs only, as HF's reference ids (it marks words whose
characters are all Chinese). The segmenter is an optional dependency,
`pip install "keras-bert-zoo[chinese]"` (rjieba, the Rust port of jieba; the pure-Python
jieba is used when it is installed instead: both give the same words), imported only when
Chinese whole-word masking is asked for.

`whole_word_segmenter` (the pipelines' and the CLI's option):
- `"wordpiece"`: the `##` rule alone (character masking on Chinese);
- `"jieba"`: jieba over ideograph runs, the `##` rule elsewhere;
- `"auto"` (the pipelines' default): `"jieba"` when CJK ideographs make up at least
  `AUTO_CJK_SHARE` (5%) of the non-space characters of the first 100,000 characters of
  text, else `"wordpiece"`. English corpora that quote a few Chinese names stay on the
  WordPiece rule and need no segmenter.
"""

import functools
import logging
import re

import numpy as np

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.preprocessing.normalization import CJK

__all__ = [
    "SEGMENTERS",
    "AUTO_CJK_SHARE",
    "INSTALL_HINT",
    "is_cjk_ideograph",
    "cjk_share",
    "load_jieba",
    "resolve_segmenter",
    "JiebaWordBoundaries",
]

SEGMENTERS = ("auto", "wordpiece", "jieba")
AUTO_CJK_SHARE = 0.05
INSTALL_HINT = 'pip install "keras-bert-zoo[chinese]"'
_SAMPLE_CHARS = 100_000

# The tokenizer's own CJK blocks (HF's `is_chinese_char`), read from its regex: one source of truth.
_RANGES = [(int(a, 16), int(b, 16)) for a, b in re.findall(r"\\x\{([0-9A-F]+)\}-\\x\{([0-9A-F]+)\}", CJK)]


def is_cjk_ideograph(char):
    """True for one character of the CJK Unified Ideographs blocks BERT splits on.

    Examples:
    >>> from keras_bert_zoo.preprocessing.chinese_words import is_cjk_ideograph
    >>> is_cjk_ideograph("中"), is_cjk_ideograph("a"), is_cjk_ideograph("。")
    (True, False, False)
    """
    code = ord(char)
    return any(a <= code <= b for a, b in _RANGES)


def cjk_share(texts, max_chars=_SAMPLE_CHARS):
    """The share of CJK ideographs among the non-space characters of the first `max_chars` of `texts`."""
    total = cjk = 0
    for text in texts:
        for char in text:
            if char.isspace():
                continue
            total += 1
            cjk += is_cjk_ideograph(char)
        if total >= max_chars:
            break
    return cjk / total if total else 0.0


def load_jieba(why="whole-word masking of Chinese text"):
    """jieba's cut, `str -> list of str`: rjieba (its Rust port, 17x faster here) when installed, else jieba.

    Both cut with jieba's dictionary and HMM for unknown words; on all 50,289 MSRA NER
    sentences their words are identical. Raises a one-line `UsageError` naming the extra
    when neither is installed.
    """
    try:
        import rjieba

        return functools.partial(rjieba.cut, hmm=True)
    except ImportError:
        pass
    try:
        import jieba
    except ImportError:
        raise UsageError(
            f"{why} segments words with jieba, which is not installed: {INSTALL_HINT} (or pass "
            'whole_word_segmenter="wordpiece" / --whole-word-segmenter wordpiece for character masking).'
        ) from None
    jieba.setLogLevel(logging.WARNING)  # not "Building prefix dict ..." on every run
    jieba.initialize()
    return functools.partial(jieba.lcut, HMM=True)


def resolve_segmenter(option, texts=()):
    """`"wordpiece"` or `"jieba"` for `option` (see the module doc); `texts` decide `"auto"`.

    Raises `UsageError` for an unknown option, and when jieba is chosen but not installed.

    Examples:
    >>> from keras_bert_zoo.preprocessing.chinese_words import resolve_segmenter
    >>> resolve_segmenter("auto", ["the cat sat ."]), resolve_segmenter("auto", ["我们在北京见面。"])
    ('wordpiece', 'jieba')
    """
    if option not in SEGMENTERS:
        raise UsageError(f"whole_word_segmenter must be one of {SEGMENTERS}, got {option!r}.")
    if option == "auto":
        option = "jieba" if cjk_share(texts) >= AUTO_CJK_SHARE else "wordpiece"
    if option == "jieba":
        load_jieba()
    return option


class JiebaWordBoundaries:
    """`(token_ids, candidate) -> continues` over numpy arrays `[batch, seq]`, for `tf.numpy_function`.

    `continues[b, i]` is True when token i continues the word of token i-1: a `##` piece,
    or an ideograph that is not the first character of its jieba word.

    Examples:
    >>> import numpy as np
    >>> from keras_bert_zoo.preprocessing.chinese_words import JiebaWordBoundaries
    >>> vocab = ["[PAD]", "[CLS]", "[SEP]", "我", "们", "在", "北", "京", "play", "##ing"]
    >>> ids = np.array([[1, 3, 4, 5, 6, 7, 8, 9, 2]])
    >>> JiebaWordBoundaries(vocab)(ids, ids > 2).astype(int).tolist()  # 我们 / 在 / 北京 / play ##ing
    [[0, 0, 1, 0, 0, 1, 0, 1, 0]]
    """

    def __init__(self, vocabulary):
        self._cut = load_jieba()
        self._tokens = list(vocabulary)
        self._ideograph = np.array([len(t) == 1 and is_cjk_ideograph(t) for t in self._tokens], bool)
        self._continuation = np.array([t.startswith("##") for t in self._tokens], bool)

    def __call__(self, token_ids, candidate):
        ids = np.clip(np.asarray(token_ids), 0, len(self._tokens) - 1)
        candidate = np.asarray(candidate, bool)
        continues = self._continuation[ids] & candidate
        ideograph = self._ideograph[ids] & candidate
        # Runs of ideographs: where the flag turns on and off along each row.
        edges = np.diff(np.pad(ideograph.astype(np.int8), [(0, 0), (1, 1)]), axis=1)
        for row in range(ids.shape[0]):
            starts, ends = np.flatnonzero(edges[row] == 1), np.flatnonzero(edges[row] == -1)
            for start, end in zip(starts, ends, strict=True):
                if end - start < 2:
                    continue
                position = start
                for word in self._cut("".join(self._tokens[i] for i in ids[row, start:end])):
                    continues[row, position + 1 : position + len(word)] = True
                    position += len(word)
        return continues
