"""Where a tokenizer's files come from: a directory as given, or what a preset name or `hf://` address stands for.

`BertTokenizer.from_preset` and every preprocessor's `from_preset` read a directory. A preset name
(`bert_base_chinese`) or `hf://ORG/NAME[@REV]` stands for a Hub repo, and turning it into a local
directory is `keras_bert_zoo.convert.hub`'s job, the same code `BertBackbone.from_preset` goes
through: a name resolves the same way for both, an existing directory of that name wins for both,
and offline both say the same thing. Preprocessing imports nothing of `convert` or the models (a
task's data half must not reach them), so `convert.hub` registers its resolver here when it is
imported, as it registers the backbone's in `keras_bert_zoo.models.loading`; `import keras_bert_zoo`
imports it.

Examples:
>>> import keras_bert_zoo
>>> from keras_bert_zoo.preprocessing.preset_source import tokenizer_source
>>> tokenizer_source(".")  # a directory comes back as it is, with no preset defaults
('.', {})
"""

import os

__all__ = ["register_tokenizer_resolver", "tokenizer_source"]

_RESOLVER = {"tokenizer": None}


def register_tokenizer_resolver(resolver):
    """Sets `resolver(name_or_path) -> (directory, defaults)`: the local directory holding a tokenizer's
    files, and the `BertTokenizer` options a preset's table entry gives for a repo without
    `tokenizer_config.json` (`{}` for a directory or an `hf://` address)."""
    _RESOLVER["tokenizer"] = resolver
    return resolver


def tokenizer_source(name_or_path):
    """`(directory, defaults)` for a preset name, `hf://` address or directory (see the module docstring).

    Without a registered resolver (`keras_bert_zoo.convert` not imported) only directories are known.
    """
    resolver = _RESOLVER["tokenizer"]
    if resolver is None:
        return os.fspath(name_or_path), {}
    directory, defaults = resolver(name_or_path)
    return os.fspath(directory), dict(defaults)
