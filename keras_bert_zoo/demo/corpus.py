"""The demo's data: Python's own documentation text, shipped with every Python.

`pydoc_data.topics` holds the text `help("if")` prints: 79 topics from the Language
Reference and the Library Reference. The demo pretrains on it and fine-tunes on a
task derived from it: **which chapter of the Python documentation does this
paragraph come from?** The label of a topic is the chapter its text sits in (for
example "if" is in Reference chapter 8, "Compound statements"), so every label is a
fact about the documentation, not a guess about the text. Paragraphs are
de-duplicated (several topics repeat others' text) before a stratified
train / dev / test split, so no paragraph is in two splits.
"""

import json
import random
import re

from keras_bert_zoo.files import write_text
from keras_bert_zoo.tasks.pretrainer.corpus import split_sentences

__all__ = ["LABELS", "TOPIC_LABEL", "labelled_paragraphs", "split", "write_pretraining_corpus", "write_task_file"]

# Topic -> chapter (Python Language Reference chapters 2-8; "library" is the Library
# Reference: built-in types, string formatting, pdb).
_CHAPTERS = {
    "lexical": "floating id-classes identifiers imaginary integers numbers strings",
    "data_model": "async attribute-access callable-types context-managers customization numeric-types "
    "objects sequence-types specialnames types",
    "execution_model": "dynamic-features exceptions execmodel naming",
    "expressions": "atom-identifiers atom-literals attribute-references await binary bitwise booleans calls "
    "comparisons conversions dict exprlists in lambda lists operator-summary power shifting "
    "slicings subscriptions unary",
    "statements": "assert assignment augassign break class compound continue del else for function global if "
    "import nonlocal pass raise return try while with yield",
    "library": "bltin-code-objects bltin-ellipsis-object bltin-null-object bltin-type-objects debugger "
    "formatstrings specialattrs string-methods truth typesfunctions typesmapping typesmethods "
    "typesmodules typesseq typesseq-mutable",
}
LABELS = tuple(_CHAPTERS)
TOPIC_LABEL = {topic: label for label, topics in _CHAPTERS.items() for topic in topics.split()}


def _is_prose(paragraph):
    """Running text of at least 8 words: no code examples, grammar rules or tables."""
    if len(paragraph.split()) < 8 or paragraph.startswith((">>>", "...")) or "::=" in paragraph:
        return False
    letters = sum(c.isalpha() or c == " " for c in paragraph)
    return letters / len(paragraph) >= 0.85


def labelled_paragraphs(topics=None):
    """`[(topic, label, paragraph)]`, each paragraph once (first topic that has it wins).

    Args:
        topics: dict topic -> text; defaults to `pydoc_data.topics.topics`.
    """
    if topics is None:
        from pydoc_data.topics import topics
    unknown = sorted(set(topics) - set(TOPIC_LABEL))
    if unknown:
        # A newer Python may add topics: they are left out rather than guessed.
        print(f"demo: topics without a chapter are left out: {', '.join(unknown)}")
    seen, rows = set(), []
    for topic in sorted(topics):
        if topic not in TOPIC_LABEL:
            continue
        for block in re.split(r"\n\s*\n", topics[topic]):
            paragraph = " ".join(block.split())
            if paragraph in seen or not _is_prose(paragraph):
                continue
            seen.add(paragraph)
            rows.append((topic, TOPIC_LABEL[topic], paragraph))
    return rows


def split(rows, dev_fraction=0.15, test_fraction=0.15, seed=0):
    """Stratified by label: `{"train": rows, "dev": rows, "test": rows}`."""
    rng = random.Random(seed)
    parts = {"train": [], "dev": [], "test": []}
    for label in LABELS:
        group = [r for r in rows if r[1] == label]
        rng.shuffle(group)
        n_dev = max(1, round(dev_fraction * len(group)))
        n_test = max(1, round(test_fraction * len(group)))
        parts["test"] += group[:n_test]
        parts["dev"] += group[n_test : n_test + n_dev]
        parts["train"] += group[n_test + n_dev :]
    for rows_ in parts.values():
        rng.shuffle(rows_)
    return parts


def write_pretraining_corpus(rows, path):
    """BERT format: one sentence per line, a blank line between documents (one per topic)."""
    documents = {}
    for topic, _, paragraph in rows:
        documents.setdefault(topic, []).extend(split_sentences(paragraph))
    write_text(path, "\n\n".join("\n".join(sentences) for sentences in documents.values()) + "\n")
    return path


def write_task_file(rows, path):
    """JSON Lines `{"text": ..., "label": ...}` (quotes and tabs in the text stay intact)."""
    write_text(
        path, "".join(json.dumps({"text": p, "label": label}, ensure_ascii=False) + "\n" for _, label, p in rows)
    )
    return path
