"""`BertTokenizer` options of a preset directory: HF's `tokenizer_config.json`, read and written.

HF keys used: `do_lower_case`, `strip_accents`, `tokenize_chinese_chars`. Google's
checkpoint directories hold `bert_config.json` and `vocab.txt` only; the casing is then
inferred, with a warning: from the vocabulary (a cased one has many pieces like "The",
"##A"), else from the directory name as Google's run_*.py do ("uncased" -> lowercase,
"cased" -> keep case), else lowercase.

Examples:
>>> from keras_bert_zoo.preprocessing.tokenizer_options import name_casing
>>> name_casing("uncased_L-2_H-128_A-2"), name_casing("cased_L-12_H-768_A-12"), name_casing("model")
(True, False, None)
"""

import os
import re
import warnings

from keras_bert_zoo.files import read_json
from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary

__all__ = ["vocabulary_casing", "name_casing", "infer_lowercase", "preset_options", "hf_tokenizer_config"]

# Google's run_*.py (`validate_case_matches_checkpoint`): released models whose names
# do not say "cased"/"uncased" but are lowercased.
_GOOGLE_LOWERCASE_MODELS = ("multilingual_L-12_H-768_A-12", "chinese_L-12_H-768_A-12")
_CASE_IN_NAME = re.compile(r"(?:^|[^a-z])(un)?cased(?:[^a-z]|$)")


def vocabulary_casing(tokens):
    """True if a vocabulary is lowercased, False if cased, None if it does not tell.

    Counted over pieces holding a cased letter (bracketed specials like `[CLS]`
    left out): a cased vocabulary has many that lowercasing would change ("The",
    "##A"): at least 3 and 2% means cased. An uncased one, learned from lowercased
    text, has essentially none: at most 0.1% of at least 20 means uncased (the real
    bert-base-uncased vocabulary has 0 of 27,048). Anything else does not tell.
    """
    with_case, changed = 0, 0
    for token in tokens:
        if token.startswith("[") and token.endswith("]"):
            continue
        if any(c.islower() or c.isupper() for c in token):
            with_case += 1
            changed += token != token.lower()
    if changed >= 3 and changed >= 0.02 * with_case:
        return False
    if with_case >= 20 and changed <= 0.001 * with_case:
        return True
    return None


def name_casing(path):
    """True/False from a checkpoint directory's name as Google's run_*.py do ("uncased"
    in it: lowercase; "cased": keep case; their lowercased multilingual and chinese
    models), else None."""
    name = os.path.basename(os.path.normpath(os.path.abspath(path)))
    if name in _GOOGLE_LOWERCASE_MODELS:
        return True
    match = _CASE_IN_NAME.search(name.lower())
    return None if match is None else bool(match.group(1))


def infer_lowercase(path, tokens):
    """`(lowercase, reason)` for a preset directory without `tokenizer_config.json`."""
    from_vocabulary = vocabulary_casing(tokens)
    if from_vocabulary is not None:
        kind = "uncased" if from_vocabulary else "cased"
        return from_vocabulary, f"its vocab.txt looks {kind}"
    from_name = name_casing(path)
    if from_name is not None:
        return from_name, f"the directory name says {'uncased' if from_name else 'cased'} (vocab.txt does not tell)"
    return True, "neither vocab.txt nor the directory name tells (default, as HF)"


def preset_options(path, overrides, defaults=None):
    """`(vocabulary, arguments)` of `BertTokenizer` for preset directory `path`; `overrides` win.

    `defaults` (a preset's table entry, `models.presets.tokenizer_settings`) stand in for a missing
    `tokenizer_config.json`, as HF's defaults do for the repo; the file wins where there is one.
    The vocabulary is `path/vocab.txt`, or its tokens once read to infer the casing.
    """
    vocab_path = os.path.join(path, "vocab.txt")
    config_path = os.path.join(path, "tokenizer_config.json")
    if os.path.exists(config_path):
        hf = read_json(
            config_path,
            "tokenizer_config.json",
            "restore it from the checkpoint's source, or delete it (the casing is then inferred)",
        )
        options = {
            "lowercase": hf.get("do_lower_case", True),
            "strip_accents": hf.get("strip_accents"),
            "tokenize_chinese_chars": hf.get("tokenize_chinese_chars", True),
        }
        return vocab_path, {**options, **overrides}
    overrides = {**(defaults or {}), **overrides}
    if "lowercase" in overrides:
        return vocab_path, dict(overrides)
    vocabulary = read_vocabulary(vocab_path)
    lowercase, reason = infer_lowercase(path, vocabulary)
    warnings.warn(
        f"{path} has no tokenizer_config.json: using lowercase={lowercase} because {reason}; "
        f"pass lowercase=... or write tokenizer_config.json (do_lower_case) to set it.",
        stacklevel=3,  # the caller of BertTokenizer.from_preset
    )
    return vocabulary, {"lowercase": lowercase, **overrides}


def hf_tokenizer_config(tokenizer):
    """The `tokenizer_config.json` dict HF's `BertTokenizer` reads, for a `BertTokenizer`."""
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": tokenizer.lowercase,
        "strip_accents": tokenizer.strip_accents,
        "tokenize_chinese_chars": tokenizer.tokenize_chinese_chars,
        "do_basic_tokenize": True,
        "unk_token": "[UNK]",
        "sep_token": "[SEP]",
        "pad_token": "[PAD]",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
    }
