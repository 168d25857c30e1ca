"""Token-tagging (NER) data: CoNLL column files and JSON Lines -> `TaggedExamples`.

`read_tagged` parses and validates a whole file up front, so a line without a tag,
a tag the model does not know or a tag outside the file's scheme fails with a
one-line `file:line` message before any training starts.

Formats (chosen by extension, else by content: a first line starting with `{` is
JSON Lines):
- column files (CoNLL-2000/2003 style): one token a line, whitespace-separated
  columns, the token first and the tag **last** (CoNLL-2003: `token POS chunk NER`);
  blank lines and `-DOCSTART-` lines separate sentences; LF or CRLF line ends. The
  Chinese NER sets (MSRA, Resume, Weibo NER) are this format with one character a
  line (`char SPACE tag`);
- JSON Lines (`.jsonl`, `.json`, `.ndjson`): one `{"tokens": [...], "tags": [...]}`
  object a line.

Schemes (`tasks.tagger.schemes`; detected from the tags unless named): `IOB1`
(CoNLL-2003's original files: an entity starts with `I-` and `B-` only separates two
adjacent entities of one type) is converted to `IOB2` on reading (every entity starts
with `B-`); `IOB2`, `BIOES` and `BMES` (the Chinese sets' `B- M- E- S-`, `M-` being
BIOES's `I-`) are kept as they are: a BMES model's labels keep `M-`, so it predicts
the tags of its training file. The examples record the scheme they hold (`IOB2`,
`BIOES` or `BMES`), which a model saves with its labels.

Tags that break their scheme (an `M-`/`I-`/`E-` continuing no entity, an entity left
unfinished; the real MSRA training file holds 6) are kept and read as conlleval reads
them; one line on stderr says how many and where the first is. `strict=True`
refuses such a file.

Label names: `"O"` first, then every tag the scheme has for each entity type seen
(IOB2: `B-X`, `I-X`; BIOES: `B-X`, `I-X`, `E-X`, `S-X`; BMES: `M-X` for `I-X`),
sorted. Completing the set means a dev file with an `I-X` the training file happened
not to have still reads, and `label_all_tokens` always finds the inside form of a `B-` tag.

Examples:
>>> import os, tempfile
>>> from keras_bert_zoo.tasks.tagger.data import read_tagged
>>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
>>> _ = open(path, "w").write("-DOCSTART- -X- O O\\n\\nEU NNP I-NP I-ORG\\nrejects VBZ I-VP O\\n")
>>> ex = read_tagged(path)
>>> ex.words, ex.tags, ex.scheme
([['EU', 'rejects']], [['B-ORG', 'O']], 'IOB2')
>>> ex.label_names
['O', 'B-ORG', 'I-ORG']
>>> _ = open(path, "wb").write("北 B-LOC\\r\\n京 E-LOC\\r\\n人 O\\r\\n\\r\\n李 B-PER\\r\\n小 M-PER\\r\\n明 E-PER\\r\\n".encode())
>>> ex = read_tagged(path)
>>> ex.words[0], ex.tags[1], ex.scheme
(['北', '京', '人'], ['B-PER', 'M-PER', 'E-PER'], 'BMES')
"""

import dataclasses
import json
import os
import re
import sys

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.files import read_text_file
from keras_bert_zoo.tasks.tagger.metrics import iob1_to_iob2
from keras_bert_zoo.tasks.tagger.schemes import SCHEMES, check_tags, detect_scheme, label_names_for, normalize_scheme

__all__ = ["SCHEMES", "DOCSTART", "TaggedExamples", "normalize_scheme", "read_tagged", "write_tagged"]

DOCSTART = "-DOCSTART-"
_JSONL_EXTENSIONS = (".jsonl", ".json", ".ndjson")


@dataclasses.dataclass
class TaggedExamples:
    """Sentences of words with one tag each.

    Attributes:
        words: list of sentences, each a list of str words.
        tags: list of sentences, each a list of str tags (same lengths as `words`),
            in `scheme`.
        label_names: the classes, in id order ("O" first).
        scheme: `"IOB2"`, `"BIOES"` or `"BMES"`: the scheme the tags are in.
        path: the file read, or None.
    """

    words: list
    tags: list
    label_names: list
    scheme: str = "IOB2"
    path: str = None

    def __len__(self):
        return len(self.words)

    @property
    def num_words(self):
        return sum(len(s) for s in self.words)

    def label_ids(self, label_names=None):
        """Tag ids per sentence (lists of int) under `label_names` (default: the examples')."""
        names = list(label_names if label_names is not None else self.label_names)
        index = {n: i for i, n in enumerate(names)}
        out = []
        for k, sentence in enumerate(self.tags):
            try:
                out.append([index[t] for t in sentence])
            except KeyError as e:
                raise InvalidInputError(
                    f"{self.path or 'examples'}: sentence {k}: tag {e.args[0]!r} is not among the labels {names}."
                ) from None
        return out


def _file_kind(path):
    if os.path.splitext(path)[1].lower() in _JSONL_EXTENSIONS:
        return "jsonl"
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            if line.strip():
                return "jsonl" if line.lstrip().startswith("{") else "columns"
    return "columns"


# A run of lines that all hold exactly two columns (`token tag`, MSRA's and Resume NER's
# layout): such a sentence is read with one `str.split` instead of one per line.
_TWO_COLUMNS = re.compile(r"(?:[^\S\n]*\S+[^\S\n]+\S+[^\S\n]*(?:\n|\Z))+")
# The sentences of a column file: runs of lines that are not blank.
_NONBLANK_RUN = re.compile(r"[^\S\n]*\S[^\n]*(?:\n[^\S\n]*\S[^\n]*)*")


def _read_lines(path, block, first, sentences):
    """Sentences of a run of non-blank lines starting at line `first`, line by line
    (any number of columns, `-DOCSTART-` lines)."""
    words, tags, start = [], [], first
    for number, line in enumerate(block.split("\n"), first):
        parts = line.split()
        if parts[0] == DOCSTART:
            if words:
                sentences.append((range(start, start + len(words)), words, tags))
            words, tags = [], []
            continue
        if len(parts) < 2:
            raise InvalidInputError(
                f"{path}:{number}: one column ({parts[0]!r}) and no tag; a column file needs the "
                "token first and its tag last, whitespace-separated."
            )
        if not words:
            start = number
        words.append(parts[0])
        tags.append(parts[-1])
    if words:
        sentences.append((range(start, start + len(words)), words, tags))


def _read_columns(path, max_examples):
    """[(line numbers, words, tags)] of a column file (LF or CRLF line ends).

    A sentence's lines are consecutive (a blank line ends it), so its line numbers are a
    `range`. Sentences of two-column lines are split at once: MSRA's 2.2 M lines read in
    about a second.
    """
    with open(path, encoding="utf-8-sig") as f:  # universal newlines: CRLF and CR lines are LF lines
        text = f.read()
    sentences = []
    number, at = 1, 0  # the line number of position `at` in `text`
    for run in _NONBLANK_RUN.finditer(text):
        number += text.count("\n", at, run.start())
        at = run.start()
        block = run.group()
        if DOCSTART not in block and _TWO_COLUMNS.fullmatch(block):
            parts = block.split()
            sentences.append((range(number, number + len(parts) // 2), parts[0::2], parts[1::2]))
        else:
            _read_lines(path, block, number, sentences)
        if max_examples and len(sentences) >= max_examples:
            break
    return sentences


def _read_jsonl(path, max_examples):
    sentences = []
    with open(path, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            if max_examples and len(sentences) >= max_examples:
                break
            try:
                obj = json.loads(line)
            except ValueError as e:
                raise InvalidInputError(
                    f"{path}:{number}: not valid JSON ({e}); JSON Lines needs one object per line."
                ) from None
            if not isinstance(obj, dict):
                raise InvalidInputError(
                    f"{path}:{number}: a JSON {type(obj).__name__}, expected an object "
                    '{"tokens": [...], "tags": [...]}.'
                )
            for key in ("tokens", "tags"):
                if key not in obj:
                    raise InvalidInputError(
                        f"{path}:{number}: no key {key!r}; the object has {sorted(obj)} "
                        '(expected {"tokens": [...], "tags": [...]}).'
                    )
                values = obj[key]
                if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                    raise InvalidInputError(
                        f"{path}:{number}: {key!r} must be a list of strings"
                        f"{' (tag names, not ids)' if key == 'tags' else ''}, got {str(values)[:60]}."
                    )
            words, tags = obj["tokens"], obj["tags"]
            if len(words) != len(tags):
                raise InvalidInputError(
                    f"{path}:{number}: {len(words)} tokens but {len(tags)} tags; give one tag per token."
                )
            if not words:
                raise InvalidInputError(f"{path}:{number}: a sentence with no tokens.")
            bad = next((w for w in words if not w.strip()), None)
            if bad is not None:
                raise InvalidInputError(f"{path}:{number}: token {bad!r} is empty or whitespace; tokens must be words.")
            sentences.append(([number] * len(words), list(words), [t.strip() for t in tags]))
    return sentences


def read_tagged(path, scheme=None, label_names=None, max_examples=None, strict=False):
    """Reads and validates a tagged file (CoNLL columns or JSON Lines).

    Args:
        path: the file.
        scheme: the file's scheme: `"IOB1"` (converted to IOB2), `"IOB2"` (`"BIO"`),
            `"BIOES"` (`"IOBES"`), `"BMES"`; None detects it (`M-` tags: BMES; `S-`/`E-`:
            BIOES; an entity starting with `I-`: IOB1; else IOB2).
        label_names: the classes the model knows (e.g. the training examples'); a
            tag outside them is an error. None: the file's own, completed (see the
            module docstring).
        max_examples: int, keep the first N sentences.
        strict: refuse a file whose tags break its scheme (an `I-`/`M-`/`E-` that
            continues no entity, an unfinished entity). False: keep them (conlleval reads
            them as entities) and print one line naming how many and the first file:line.

    Returns:
        `TaggedExamples` (IOB1 converted to IOB2).

    Raises:
        FileNotFoundError: no such file.
        ValueError (`file:line: ...`): a line with no tag column, invalid JSON,
            token/tag count mismatch, a tag outside the scheme or the labels, tags
            breaking the scheme (with `strict`, or when they are most of the
            entities: the file is then in another scheme), no sentences.
    """
    path = os.fspath(path)
    read_text_file(path, "data file")  # exists, is a file, is UTF-8 (else one error naming the line)
    scheme = normalize_scheme(scheme)
    kind = _file_kind(path)
    sentences = (_read_jsonl if kind == "jsonl" else _read_columns)(path, max_examples)
    if not sentences:
        raise InvalidInputError(f"{path} has no sentences (empty file, or only blank and -DOCSTART- lines).")
    if max_examples:
        sentences = sentences[: int(max_examples)]
    tag_set = set().union(*(tags for _, _, tags in sentences))
    detected = scheme or detect_scheme([tags for _, _, tags in sentences], tag_set)
    found = check_tags(path, sentences, detected, strict=strict, tag_set=tag_set)
    if found.breaks:
        print(found.summary(path, detected), file=sys.stderr, flush=True)
    if detected == "IOB1":
        sentences = [(lines, words, iob1_to_iob2(tags)) for lines, words, tags in sentences]
    stored = "IOB2" if detected == "IOB1" else detected
    if label_names is None:
        names = label_names_for(tag_set, stored)  # (the types are all it reads: IOB1's are IOB2's)
    else:
        names = [str(n) for n in label_names]
        known = set(names)
        for lines, _, tags in sentences:
            for number, tag in zip(lines, tags, strict=True):
                if tag not in known:
                    raise InvalidInputError(f"{path}:{number}: tag {tag!r} is not among the model's labels {names}.")
    return TaggedExamples(
        words=[w for _, w, _ in sentences],
        tags=[t for _, _, t in sentences],
        label_names=names,
        scheme=stored,
        path=path,
    )


def write_tagged(path, words, tags):
    """Writes sentences as JSON Lines (`.jsonl`, `.json`, `.ndjson`) or as a `token tag`
    column file (anything else; a blank line after each sentence). `read_tagged` reads
    it back unchanged."""
    from keras_bert_zoo.files import write_text

    path = os.fspath(path)
    if len(words) != len(tags):
        raise InvalidInputError(
            f"{len(words)} sentences of words but {len(tags)} of tags; give one tag list per sentence."
        )
    for k, (w, t) in enumerate(zip(words, tags, strict=True)):
        if len(w) != len(t):
            raise InvalidInputError(f"sentence {k}: {len(w)} words but {len(t)} tags; give one tag per word.")
        bad = next((x for x in w if not x or any(c.isspace() for c in x)), None)
        if bad is not None and os.path.splitext(path)[1].lower() not in _JSONL_EXTENSIONS:
            raise InvalidInputError(
                f"sentence {k}: word {bad!r} is empty or holds whitespace; a column file cannot "
                "store it (write .jsonl instead)."
            )
    if os.path.splitext(path)[1].lower() in _JSONL_EXTENSIONS:
        text = "".join(
            json.dumps({"tokens": list(w), "tags": list(t)}, ensure_ascii=False) + "\n"
            for w, t in zip(words, tags, strict=True)
        )
    else:
        text = "".join(
            "".join(f"{x} {y}\n" for x, y in zip(w, t, strict=True)) + "\n" for w, t in zip(words, tags, strict=True)
        )
    write_text(path, text)
