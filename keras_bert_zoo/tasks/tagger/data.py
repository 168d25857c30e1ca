"""Token-tagging (NER) data: CoNLL column files and JSON Lines -> `TaggedExamples`.

`read_tagged` parses and validates a whole file up front, so a line without a tag,
a tag the model does not know or a tag outside the file's scheme fails with a
one-line `file:line` message before any training starts.

Formats (chosen by extension, else by content: a first line starting with `{` is
JSON Lines):
- column files (CoNLL-2000/2003 style): one token a line, whitespace-separated
  columns, the token first and the tag **last** (CoNLL-2003: `token POS chunk NER`);
  blank lines and `-DOCSTART-` lines separate sentences;
- JSON Lines (`.jsonl`, `.json`, `.ndjson`): one `{"tokens": [...], "tags": [...]}`
  object a line.

Schemes: `IOB1` (CoNLL-2003's original files: an entity starts with `I-` and `B-`
only separates two adjacent entities of one type) is converted to `IOB2` on reading
(every entity starts with `B-`); `IOB2` and `BIOES` are kept as they are. The
examples record the scheme they hold (`IOB2` or `BIOES`), which a model saves with
its labels.

Label names: `"O"` first, then every tag the scheme has for each entity type seen
(IOB2: `B-X`, `I-X`; BIOES: `B-X`, `I-X`, `E-X`, `S-X`), sorted. Completing the set
means a dev file with an `I-X` the training file happened not to have still reads,
and `label_all_tokens` always finds the `I-` form of a `B-` tag.

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
"""

import dataclasses
import json
import os

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.files import read_text_file
from keras_bert_zoo.tasks.tagger.metrics import iob1_to_iob2

__all__ = ["SCHEMES", "DOCSTART", "TaggedExamples", "normalize_scheme", "read_tagged", "write_tagged"]

SCHEMES = ("IOB1", "IOB2", "BIOES")
_ALIASES = {"BIO": "IOB2", "IOBES": "BIOES"}
_PREFIXES = {"IOB1": ("B", "I"), "IOB2": ("B", "I"), "BIOES": ("B", "I", "E", "S")}
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
        scheme: `"IOB2"` or `"BIOES"`: the scheme the tags are in.
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


def normalize_scheme(scheme):
    """`"iob1"` -> `"IOB1"`; `"BIO"` -> `"IOB2"`; `"IOBES"` -> `"BIOES"`; None stays None."""
    if scheme is None:
        return None
    key = str(scheme).upper()
    key = _ALIASES.get(key, key)
    if key not in SCHEMES:
        raise UsageError(f"unknown tagging scheme {scheme!r}; use one of {', '.join(SCHEMES)} (or None to detect).")
    return key


def _entity_type(tag):
    return tag[2:]


def _is_tag(tag):
    return tag == "O" or (len(tag) > 2 and tag[1] == "-")


def _detect_scheme(sentences):
    """BIOES if any S-/E- tag; IOB1 if an entity starts with I-; else IOB2."""
    starts_with_i = False
    for _, _, tags in sentences:
        previous = "O"
        for tag in tags:
            if tag.startswith(("S-", "E-")):
                return "BIOES"
            if tag.startswith("I-") and (previous == "O" or previous[2:] != tag[2:]):
                starts_with_i = True
            previous = tag
    return "IOB1" if starts_with_i else "IOB2"


# The fix named when a file's tags do not follow the scheme given: the flag and the
# Python keyword (both exist: `finetune tag --scheme`, `read_tagged(scheme=...)`).
_SCHEME_FIX = (
    "is the file in another scheme? Pass --scheme IOB1/IOB2/BIOES (scheme= in Python), or leave it out to detect"
)


def _check_transitions(path, lines, tags, scheme):
    """Raises on the first tag that breaks `scheme`'s entity grammar.

    IOB2: `I-X` only continues an X entity. BIOES: an entity is `S-X`, or `B-X (I-X)* E-X`;
    every `B-`/`I-` is continued, every `I-`/`E-` continues one of its type. Without this
    check, IOB1 data read as BIOES trains on entities that were never in the file.
    IOB1 accepts any sequence (an `I-X` may start an entity; it is converted to IOB2).
    """
    if scheme == "IOB1":
        return
    open_type, number = None, None  # the type of the entity a B-/I- left open (BIOES)
    previous = "O"
    for number, tag in zip(lines, tags, strict=True):
        prefix, kind = (tag[0], tag[2:]) if tag != "O" else ("O", None)
        if scheme == "IOB2":
            if prefix == "I" and previous[2:] != kind:
                raise InvalidInputError(
                    f"{path}:{number}: tag {tag!r} starts an entity, which IOB2 does not allow "
                    f"(every entity starts with B-); {_SCHEME_FIX}."
                )
        elif prefix in ("I", "E"):
            if open_type != kind:
                raise InvalidInputError(
                    f"{path}:{number}: tag {tag!r} continues no {kind} entity, which BIOES does "
                    f"not allow (an entity is S-X, or B-X ... E-X); {_SCHEME_FIX}."
                )
            open_type = kind if prefix == "I" else None
        else:  # O, B-, S-: the previous entity must have ended
            if open_type is not None:
                raise InvalidInputError(
                    f"{path}:{number}: tag {tag!r} follows an unfinished {open_type} entity "
                    f"(BIOES ends one with E-{open_type}); {_SCHEME_FIX}."
                )
            open_type = kind if prefix == "B" else None
        previous = tag
    if open_type is not None:
        raise InvalidInputError(
            f"{path}:{number}: the sentence ends inside a {open_type} entity (BIOES ends one "
            f"with E-{open_type}); {_SCHEME_FIX}."
        )


def _file_kind(path):
    if os.path.splitext(path)[1].lower() in _JSONL_EXTENSIONS:
        return "jsonl"
    with open(path, encoding="utf-8-sig") as f:
        for line in f:
            if line.strip():
                return "jsonl" if line.lstrip().startswith("{") else "columns"
    return "columns"


def _read_columns(path, max_examples):
    """[(first line, line numbers, words, tags)] of a column file."""
    sentences = []
    lines, words, tags = [], [], []

    def flush():
        if words:
            sentences.append((lines[0], list(lines), list(words), list(tags)))
        lines.clear(), words.clear(), tags.clear()

    with open(path, encoding="utf-8-sig") as f:
        for number, line in enumerate(f, 1):
            parts = line.split()
            if not parts or parts[0] == DOCSTART:
                flush()
                if max_examples and len(sentences) >= max_examples:
                    break
                continue
            if len(parts) < 2:
                raise InvalidInputError(
                    f"{path}:{number}: one column ({parts[0]!r}) and no tag; a column file needs the "
                    "token first and its tag last, whitespace-separated."
                )
            lines.append(number)
            words.append(parts[0])
            tags.append(parts[-1])
    flush()
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
            sentences.append((number, [number] * len(words), list(words), [t.strip() for t in tags]))
    return sentences


def _label_names(tag_set, scheme):
    types = sorted({_entity_type(t) for t in tag_set if t != "O"})
    prefixes = _PREFIXES[scheme]
    return ["O"] + sorted(f"{p}-{t}" for p in prefixes for t in types)


def read_tagged(path, scheme=None, label_names=None, max_examples=None):
    """Reads and validates a tagged file (CoNLL columns or JSON Lines).

    Args:
        path: the file.
        scheme: the file's scheme: `"IOB1"` (converted to IOB2), `"IOB2"`, `"BIOES"`;
            None detects it (S-/E- tags: BIOES; an entity starting with I-: IOB1;
            else IOB2).
        label_names: the classes the model knows (e.g. the training examples'); a
            tag outside them is an error. None: the file's own, completed (see the
            module docstring).
        max_examples: int, keep the first N sentences.

    Returns:
        `TaggedExamples` (IOB1 converted to IOB2).

    Raises:
        FileNotFoundError: no such file.
        ValueError (`file:line: ...`): a line with no tag column, invalid JSON,
            token/tag count mismatch, a tag outside the scheme or the labels, no sentences.
    """
    path = os.fspath(path)
    read_text_file(path, "data file")  # exists, is a file, is UTF-8 (else one error naming the line)
    scheme = normalize_scheme(scheme)
    kind = _file_kind(path)
    sentences = [
        (lines, words, tags)
        for _, lines, words, tags in (
            _read_jsonl(path, max_examples) if kind == "jsonl" else _read_columns(path, max_examples)
        )
    ]
    if not sentences:
        raise InvalidInputError(f"{path} has no sentences (empty file, or only blank and -DOCSTART- lines).")
    if max_examples:
        sentences = sentences[: int(max_examples)]
    detected = scheme or _detect_scheme(sentences)
    prefixes = _PREFIXES[detected]
    allowed = "the tag O and the prefixes " + ", ".join(p + "-" for p in prefixes)
    for lines, _, tags in sentences:
        for number, tag in zip(lines, tags, strict=True):
            if not _is_tag(tag) or (tag != "O" and tag[0] not in prefixes):
                raise InvalidInputError(f"{path}:{number}: tag {tag!r} does not fit the {detected} scheme ({allowed}).")
        _check_transitions(path, lines, tags, detected)
    if detected == "IOB1":
        sentences = [(lines, words, iob1_to_iob2(tags)) for lines, words, tags in sentences]
    stored = "BIOES" if detected == "BIOES" else "IOB2"
    if label_names is None:
        names = _label_names({t for _, _, tags in sentences for t in tags}, stored)
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
