"""CMRC 2018 exact match and F1 for Chinese span QA, by the rules of its official script.

SQuAD's rules split answers at spaces; a Chinese answer has none, so its token F1 is its
exact match. CMRC 2018's evaluation (`cmrc2018_evaluate.py`) scores Chinese answers by
characters instead:

- **Normalise**: lower-case, strip the ends.
- **Punctuation**: the official list, and only it: 11 ASCII characters
  ``- : _ * ^ / \\ ~ ` + =`` and 21 Chinese ones ``，。：？！“”；’《》·、「」（）－～『』``.
  Other ASCII punctuation (``. , ! ? ( ) "``...) is not on the list and stays a segment of
  its own, as the script keeps it; the list's ``……`` never matches (the script compares one
  character at a time), so ``…`` stays too.
- **Segments** (for F1, punctuation removed first, so it does not break a word): each CJK
  ideograph is a segment; each run of other characters is cut into words. The script
  hands such runs to `nltk.word_tokenize`; here a word is a run of letters and digits
  joined by an inner ``.`` or by a ``,`` between digits (``3.5``, ``1,000``, ``a.m``,
  ``ipv6``), and any other non-space character is a segment by itself (a final ``.``,
  ``$``, brackets, as nltk splits them). nltk's contractions (``don't`` -> ``do n't``),
  abbreviations (``e.g.`` before more text) and quote rewriting (``"`` -> two backticks)
  are not copied. CJK ideographs are the blocks BERT's tokenizer isolates
  (`preprocessing.normalization.CJK_RANGES`); the script knows U+4E00-U+9FA5 only, which
  differs on rare ideographs alone.
- **F1**: from the longest common *contiguous* run of segments of the prediction and the
  gold: precision = run / len(prediction), recall = run / len(gold); 0 without a common
  segment. Best over the gold answers.
- **Exact match**: prediction and gold equal after normalising and removing the listed
  punctuation (inner spaces count). Best over the gold answers.

Empty answers (SQuAD v2.0's no-answer) follow SQuAD's rule: two empty answers score 1,
one empty 0 (CMRC 2018 has none).

Examples:
>>> from keras_bert_zoo.tasks.span_qa import cmrc
>>> cmrc.segments("2018年CMRC比赛")
['2018', '年', 'cmrc', '比', '赛']
>>> round(cmrc.f1("北京天安门", "天安门广场"), 4)  # common run 天安门: p = 3/5, r = 3/5
0.6
>>> cmrc.exact_match("《红楼梦》", "红楼梦")
1.0
"""

import re

from keras_bert_zoo.preprocessing.normalization import CJK_RANGES

__all__ = ["PUNCTUATION", "is_cjk_text", "remove_punctuation", "segments", "exact_match", "f1"]

# The official script's `sp_char`, one character each ("……", two characters, matches nothing there).
PUNCTUATION = frozenset("-:_*^/\\~`+=" + "，。：？！“”；’《》·、「」（）－～『』")
_CJK = "".join(f"{chr(first)}-{chr(last)}" for first, last in CJK_RANGES)
_CJK_CHAR = re.compile(f"[{_CJK}]")
# A CJK ideograph, a word (letters/digits joined by an inner "." or a "," between digits), or any other
# non-space character.
_WORD = rf"[^\W{_CJK}]+"
_SEGMENT = re.compile(rf"[{_CJK}]|{_WORD}(?:(?:\.|(?<=\d),(?=\d)){_WORD})*|[^\w\s]")


def is_cjk_text(text):
    """Does `text` hold a CJK ideograph?"""
    return _CJK_CHAR.search(text) is not None


def remove_punctuation(text):
    """Lower-cased, stripped, without the listed punctuation (the official `remove_punctuation`)."""
    return "".join(ch for ch in text.lower().strip() if ch not in PUNCTUATION)


def segments(text):
    """The F1 segments of `text`: punctuation removed, one per CJK ideograph, words elsewhere."""
    return _SEGMENT.findall(remove_punctuation(text))


def _longest_common_run(a, b):
    """Length of the longest contiguous run of items common to lists `a` and `b`."""
    best, previous = 0, [0] * (len(b) + 1)
    for x in a:
        current = [0] * (len(b) + 1)
        for j, y in enumerate(b):
            if x == y:
                current[j + 1] = previous[j] + 1
                best = max(best, current[j + 1])
        previous = current
    return best


def exact_match(prediction, gold):
    return float(remove_punctuation(prediction) == remove_punctuation(gold))


def f1(prediction, gold):
    """F1 of the longest common run of segments; two empty answers score 1, one empty 0."""
    pred, ref = segments(prediction), segments(gold)
    if not pred or not ref:
        return float(pred == ref)
    common = _longest_common_run(pred, ref)
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)
