"""Reading pretraining corpora as a stream of documents (lists of sentences).

Formats:
- `"bert"`: the original BERT format, one sentence per line and a blank line
  between documents (google-research/bert `sample_text.txt`).
- `"lines"`: one document per line; sentences are split by `split_sentences`.
- `"wikitext"`: WikiText's raw files: a line ` = Title = ` (one `=` on each side)
  starts an article, ` = = Section = = ` headings are dropped, every other
  non-blank line is a paragraph split by `split_sentences`.

Files are read line by line, so corpora larger than memory stream through.
"""

import os
import re

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.files import check_text_file

__all__ = ["split_sentences", "read_documents"]

_FORMATS = ("bert", "lines", "wikitext")

# The rule: a sentence ends at `.`, `!` or `?` (optionally followed by closing quotes
# or brackets) when whitespace and then an upper-case letter, a digit or an opening
# quote/bracket follow. It keeps "H. americanus" and "e.g. this" whole and splits
# "... lobster . It is" (WikiText's spaced punctuation) and "... ended. Then".
# It does split after abbreviations such as "Mr. Smith"; for pretraining pairs
# that costs one extra sentence boundary now and then, which is harmless.
_SENTENCE_END = re.compile(r"(?<=[.!?])([\"'\u201d)\]]*)\s+(?=[\"'\u201c(\[]?[A-Z0-9])")
_WIKITEXT_TITLE = re.compile(r"^ ?= [^=].* = ?$")
_WIKITEXT_HEADING = re.compile(r"^ ?(= ){2,}.*( =){2,} ?$")


def split_sentences(text):
    """Splits a paragraph into sentences by the rule above.

    Examples:
    >>> from keras_bert_zoo.tasks.pretrainer.corpus import split_sentences
    >>> split_sentences('It rained. "Gold," he said! H. americanus is a lobster .  It is big')
    ['It rained.', '"Gold," he said!', 'H. americanus is a lobster .', 'It is big']
    """
    text = text.strip()
    if not text:
        return []
    pieces = _SENTENCE_END.split(text)
    # re.split returns [sentence, closing-quotes, sentence, ...]: glue quotes back.
    sentences = []
    for i in range(0, len(pieces), 2):
        sentence = pieces[i] + (pieces[i + 1] if i + 1 < len(pieces) else "")
        if sentence.strip():
            sentences.append(sentence.strip())
    return sentences


def _check_paths(paths):
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths = [os.fspath(p) for p in paths]
    if not paths:
        raise UsageError("no corpus files given; pass one or more text files.")
    for p in paths:
        check_text_file(p, "corpus file")
    return paths


def read_documents(paths, corpus_format="bert"):
    """Yields documents, each a list of sentence strings, from one or more files.

    A document never spans two files. Empty documents are skipped.

    Args:
        paths: a path or a list of paths (UTF-8 text).
        corpus_format: `"bert"`, `"lines"` or `"wikitext"` (see the module doc).

    Examples:
    >>> import os, tempfile
    >>> from keras_bert_zoo.tasks.pretrainer.corpus import read_documents
    >>> path = os.path.join(tempfile.mkdtemp(), "c.txt")
    >>> _ = open(path, "w").write("A one.\\nA two.\\n\\nB one.\\n")
    >>> list(read_documents(path))
    [['A one.', 'A two.'], ['B one.']]
    """
    if corpus_format not in _FORMATS:
        raise UsageError(f"corpus_format must be one of {_FORMATS}, got {corpus_format!r}.")
    for path in _check_paths(paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            if corpus_format == "bert":
                yield from _bert_format(f)
            elif corpus_format == "lines":
                for line in f:
                    sentences = split_sentences(line)
                    if sentences:
                        yield sentences
            else:
                yield from _wikitext_format(f)


def _bert_format(lines):
    document = []
    for line in lines:
        line = line.strip()
        if line:
            document.append(line)
        elif document:
            yield document
            document = []
    if document:
        yield document


def _wikitext_format(lines):
    document = []
    for line in lines:
        if _WIKITEXT_HEADING.match(line.rstrip("\n")):
            continue
        if _WIKITEXT_TITLE.match(line.rstrip("\n")):
            if document:
                yield document
            document = []
            continue
        document.extend(split_sentences(line))
    if document:
        yield document
