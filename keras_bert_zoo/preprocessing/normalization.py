"""HF-compatible BERT text normalisation and pre-tokenisation, in TensorFlow ops.

This mirrors `tokenizers`' `BertNormalizer` + `BertPreTokenizer` (the reference the
checkpoints were trained with), not tensorflow-text's bert normaliser, which differs
on control characters (HF removes every Cc/Cf/Co character but keeps tab, newline
and carriage return as spaces), on the micro sign (tf-text case-folds U+00B5 to Greek
mu, HF lowercases it to itself) and on a few other code points.

Steps, in HF's order:
1. clean: drop NUL, U+FFFD and "other" characters (Cc except \\t\\n\\r, Cf, Co, Cs;
   unassigned code points are kept, as HF keeps them);
2. CJK ideographs become their own words (done by the splitter here);
3. strip accents (defaults to `lowercase`): NFD then drop nonspacing marks (Mn);
4. lowercase: full Unicode lowercase per character (no final-sigma rule);
5. split on Unicode whitespace and isolate punctuation (ASCII punctuation + Unicode P*).

Special tokens written in the raw text (`[MASK]`, `[SEP]`, ...) are matched on the raw
text before any of this, like HF's added tokens. They are replaced by a *marker*
(a noncharacter U+FDD0 + k) followed by filler noncharacters (U+FDEF), so the text keeps
its length in characters (offsets stay exact); the splitter isolates the marker as a
word and the filler is removed with the other unassigned characters.
"""

import re

import tensorflow as tf
import tensorflow_text as tf_text

__all__ = [
    "MARKER_BASE",
    "CJK",
    "CJK_RANGES",
    "REMOVE",
    "SPECIAL_TOKEN_SEARCH",
    "to_valid_utf8",
    "mark_special_tokens",
    "normalize",
    "split_words",
    "normalize_and_split",
]

MARKER_BASE = 0xFDD0
_FILLER = "\ufdef"
_MAX_SPECIAL_TOKENS = 16  # U+FDD0..U+FDDF are markers; U+FDE0..U+FDEF fillers

# Rust `char::is_whitespace` (White_Space property) minus what `clean` already removed.
_WHITESPACE = r"\t\n\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}"
# HF `is_bert_punc`: ASCII punctuation (which includes $+<=>^`|~) or Unicode P*.
_PUNCTUATION = r"!-/:-@\[-`{-~\p{P}"
# HF `is_chinese_char`: the CJK Unified Ideographs blocks, not Hiragana/Katakana/Hangul.
# As (first, last) code points, for Python code that needs them without TensorFlow's regex syntax.
CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
# The same ranges in RE2's syntax, for a character class.
CJK = "".join(f"\\x{{{first:X}}}-\\x{{{last:X}}}" for first, last in CJK_RANGES)
_MARKERS = r"\x{FDD0}-\x{FDDF}"
_FILLERS = r"\x{FDE0}-\x{FDEF}"
# HF keeps unassigned (Cn) code points; our fillers go with the removed characters.
REMOVE = rf"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\p{{Cf}}\p{{Co}}\p{{Cs}}\x{{FFFD}}{_FILLERS}]"
# Does a text hold one of the special tokens (any line, any position)?
SPECIAL_TOKEN_SEARCH = r"(?s).*\[(?:PAD|UNK|CLS|SEP|MASK)\].*"
_SPLIT_DELIM = rf"[{_WHITESPACE}]+|[{_PUNCTUATION}{CJK}{_MARKERS}]"
_SPLIT_KEEP = rf"[{_PUNCTUATION}{CJK}{_MARKERS}]"


def to_valid_utf8(text):
    """Replaces invalid UTF-8 bytes by U+FFFD (which `clean` then drops, as HF drops it)."""
    return tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD, replace_control_characters=False
    )


def mark_special_tokens(text, special_tokens):
    """Replaces each special token in raw text by a marker + fillers of the same length."""
    # Noncharacters the user wrote become another unassigned code point (U+0378): HF
    # treats both alike (a letter-like character no vocabulary has), and they can no
    # longer be confused with our markers.
    text = tf.strings.regex_replace(text, r"[\x{FDD0}-\x{FDEF}]", "\u0378")
    for k, token in enumerate(special_tokens):
        marker = chr(MARKER_BASE + k) + _FILLER * (len(token) - 1)
        text = tf.strings.regex_replace(text, re.escape(token), marker)
    return text


def normalize(text, lowercase=True, strip_accents=None):
    """HF `BertNormalizer` on a string tensor of any shape (whole texts or single characters)."""
    if strip_accents is None:
        strip_accents = lowercase
    text = tf.strings.regex_replace(text, REMOVE, "")
    if strip_accents:
        text = tf_text.normalize_utf8(text, "NFD")
        text = tf.strings.regex_replace(text, r"\p{Mn}", "")
    if lowercase:
        # ICU lowercases a word-final capital sigma to final sigma; HF maps each
        # character on its own (always small sigma), so take sigma out of context first.
        text = tf.strings.regex_replace(text, "\u03a3", "\u03c3")
        text = tf.strings.lower(text, encoding="utf-8")
    return text


def split_words(text, tokenize_chinese_chars=True, with_offsets=False):
    """HF `BertPreTokenizer` (+ CJK isolation) on normalised text: ragged words [..., words].

    With `with_offsets`, also returns the byte offsets of each word in `text`.
    """
    delim, keep = _SPLIT_DELIM, _SPLIT_KEEP
    if not tokenize_chinese_chars:
        delim, keep = delim.replace(CJK, ""), keep.replace(CJK, "")
    if with_offsets:
        return tf_text.regex_split_with_offsets(text, delim, keep)
    return tf_text.regex_split(text, delim, keep)


def normalize_and_split(text, lowercase=True, strip_accents=None, tokenize_chinese_chars=True):
    """Raw text -> the words WordPiece sees (what vocabulary learning counts)."""
    text = normalize(to_valid_utf8(text), lowercase, strip_accents)
    return split_words(text, tokenize_chinese_chars)
