"""Tagging schemes of NER files: their names, detection, label names and the check of a file's tags.

Schemes (prefixes before `-TYPE`, plus the tag `O`):
- `IOB1` (`B I`): CoNLL-2003's original files; an entity may start with `I-`, and `B-`
  only separates two adjacent entities of one type. Read as IOB2.
- `IOB2` (`B I`, alias `BIO`): every entity starts with `B-`.
- `BIOES` (`B I E S`, alias `IOBES`): an entity is `S-X`, or `B-X (I-X)* E-X`.
- `BMES` (`B M E S`): the Chinese NER sets' form of BIOES (MSRA, Resume, Weibo NER),
  `M-` where BIOES has `I-`. Kept as its own scheme: labels keep `M-`, so a model
  predicts the tags of its training file, and every entity rule reads `M-` as `I-`.

Detection from the tags (`detect_scheme`): any `M-` tag: BMES; else any `S-`/`E-`:
BIOES; else an entity starting with `I-`: IOB1; else IOB2.

Tags that break the scheme's grammar (an `I-`/`M-`/`E-` that continues no entity of
its type, an entity left unfinished; the real MSRA training file holds 6) are kept as
written and read the way conlleval and seqeval read them (`metrics.entity_spans`):
`check_tags` reports how many there are and where the first is, and refuses the file
when asked to be strict, or when they are most of the file's entities (then the file
is in another scheme, e.g. IOB1 read as BIOES).

Examples:
>>> from keras_bert_zoo.tasks.tagger.schemes import detect_scheme, label_names_for
>>> detect_scheme([["B-LOC", "M-LOC", "E-LOC", "O", "S-PER"]])
'BMES'
>>> label_names_for({"B-LOC", "E-LOC", "O"}, "BMES")
['O', 'B-LOC', 'E-LOC', 'M-LOC', 'S-LOC']
"""

import re

from keras_bert_zoo.errors import InvalidInputError, UsageError

__all__ = [
    "SCHEMES",
    "PREFIXES",
    "SCHEME_FIX",
    "normalize_scheme",
    "detect_scheme",
    "label_names_for",
    "TagCheck",
    "check_tags",
]

SCHEMES = ("IOB1", "IOB2", "BIOES", "BMES")
_ALIASES = {"BIO": "IOB2", "IOBES": "BIOES"}
PREFIXES = {"IOB1": "BI", "IOB2": "BI", "BIOES": "BIES", "BMES": "BMES"}
# The prefix that continues an entity (BMES's `M-` is BIOES's `I-`).
_INSIDE = {"IOB1": "I", "IOB2": "I", "BIOES": "I", "BMES": "M"}
_GRAMMAR = {
    "IOB2": "every entity starts with B-",
    "BIOES": "an entity is S-X, or B-X I-X ... E-X",
    "BMES": "an entity is S-X, or B-X M-X ... E-X",
}
# The fix named when a file's tags do not follow the scheme given: the flag and the
# Python keyword (both exist: `finetune tag --scheme`, `read_tagged(scheme=...)`).
SCHEME_FIX = (
    "is the file in another scheme? Pass --scheme IOB1/IOB2/BIOES/BMES (scheme= in Python), or leave it out to detect"
)


def normalize_scheme(scheme):
    """`"iob1"` -> `"IOB1"`; `"BIO"` -> `"IOB2"`; `"IOBES"` -> `"BIOES"`; None stays None."""
    if scheme is None:
        return None
    key = str(scheme).upper()
    key = _ALIASES.get(key, key)
    if key not in SCHEMES:
        raise UsageError(f"unknown tagging scheme {scheme!r}; use one of {', '.join(SCHEMES)} (or None to detect).")
    return key


def detect_scheme(tag_sentences, tag_set=None):
    """The scheme of sentences of tags: BMES if any `M-`; BIOES if any `S-`/`E-`; IOB1 if
    an entity starts with `I-`; else IOB2. `tag_set`: their distinct tags, if known."""
    if tag_set is None:
        tag_set = set().union(*tag_sentences)
    prefixes = {t[0] for t in tag_set if t != "O"}
    if "M" in prefixes:
        return "BMES"
    if prefixes & {"S", "E"}:
        return "BIOES"
    for tags in tag_sentences:
        previous = "O"
        for tag in tags:
            if tag[0] == "I" and previous[2:] != tag[2:]:
                return "IOB1"
            previous = tag
    return "IOB2"


def label_names_for(tag_set, scheme):
    """`"O"` first, then every tag `scheme` has for each entity type in `tag_set`, sorted
    (IOB2: `B-X`, `I-X`; BIOES: `B E I S`; BMES: `B E M S`). Completing the set means a dev
    file with an `I-X` the training file happened not to have still reads."""
    types = sorted({t[2:] for t in tag_set if t != "O"})
    return ["O"] + sorted(f"{p}-{t}" for p in PREFIXES[scheme] for t in types)


class TagCheck:
    """What `check_tags` found: `entities` (entity starts), `breaks` (tags breaking the grammar)
    and `first` (the first break's `file:line: ...` description, or None)."""

    def __init__(self, entities=0, breaks=0, first=None):
        self.entities, self.breaks, self.first = entities, breaks, first

    def count(self):
        """`"6 tags in 71,817 entities"`."""
        entities = f"{self.entities:,} entit{'y' if self.entities == 1 else 'ies'}"
        return f"{self.breaks} tag{'s' if self.breaks != 1 else ''} in {entities}"

    def summary(self, path, scheme):
        """The one line printed when a file's tags break its scheme and it is read anyway."""
        return (
            f"note: {path}: {self.count()} break the {scheme} scheme ({_GRAMMAR[scheme]}); the first: "
            f"{self.first}. Kept as written and read as conlleval reads them; strict=True (--strict-tags) "
            "refuses such a file."
        )


def _not_a_tag(path, number, tag, scheme):
    allowed = "the tag O and the prefixes " + ", ".join(p + "-" for p in PREFIXES[scheme])
    hint = " (BMES's M- is I-; BIOES uses I-)" if tag[:2] in ("M-", "I-") and scheme in ("BIOES", "BMES") else ""
    return InvalidInputError(f"{path}:{number}: tag {tag!r} does not fit the {scheme} scheme ({allowed}){hint}.")


def _sentence_breaks(path, lines, tags, scheme, found):
    """Adds the sentence's entities and grammar breaks to `found` (a TagCheck).

    IOB2: `I-X` only continues an X entity. BIOES/BMES: an entity is `S-X`, or
    `B-X (I-X)* E-X`; every `B-`/`I-` is continued, every `I-`/`E-` continues one of its
    type. A break that continues no entity starts one, as conlleval reads it.
    """
    inside = _INSIDE[scheme]
    open_type, number = None, None  # the type of the entity the previous tag leaves open
    for number, tag in zip(lines, tags, strict=True):
        prefix, kind = (tag[0], tag[2:]) if tag != "O" else ("O", None)
        problem = None
        if prefix == inside or prefix == "E":
            if open_type != kind:
                problem = f"tag {tag!r} " + ("starts an entity" if scheme == "IOB2" else f"continues no {kind} entity")
                found.entities += 1
        else:
            if open_type is not None and scheme != "IOB2":
                problem = f"tag {tag!r} follows an unfinished {open_type} entity"
            found.entities += prefix != "O"
        # IOB2 leaves every entity tag open; BIOES/BMES close after E- and S-.
        open_type = kind if (prefix in ("B", inside) or scheme == "IOB2") else None
        if problem:
            found.breaks += 1
            found.first = found.first or f"{path}:{number}: {problem}"
    if open_type is not None and scheme != "IOB2":
        found.breaks += 1
        found.first = found.first or f"{path}:{number}: the sentence ends inside a {open_type} entity"


# A sentence's tags, joined by spaces with a space after the last, that follow the grammar
# (the common case, matched in C; only the others are walked tag by tag).
_WELL_FORMED = {
    "IOB2": re.compile(r"(?:O |B-(\S+) (?:I-\1 )*)*"),
    "BIOES": re.compile(r"(?:O |S-\S+ |B-(\S+) (?:I-\1 )*E-\1 )*"),
    "BMES": re.compile(r"(?:O |S-\S+ |B-(\S+) (?:M-\1 )*E-\1 )*"),
}


def check_tags(path, sentences, scheme, strict=False, tag_set=None):
    """Checks `(lines, words, tags)` sentences against `scheme`; returns a `TagCheck`.

    A tag outside the scheme (`X-ORG`, an `M-` in a BIOES file) always raises. Tags that
    break the grammar raise when `strict`, or when they are more than half the entities
    (the file is then in another scheme); otherwise they are counted (IOB1 accepts any
    sequence: nothing to count). `tag_set`: the sentences' distinct tags, if known.

    Raises:
        InvalidInputError: `file:line: ...`, one line, naming the fix.
    """
    prefixes = PREFIXES[scheme]
    if tag_set is None:
        tag_set = set().union(*(tags for _, _, tags in sentences))
    bad = {t for t in tag_set if t != "O" and not (len(t) > 2 and t[1] == "-" and t[0] in prefixes)}
    for lines, _, tags in sentences if bad else ():
        for number, tag in zip(lines, tags, strict=True):
            if tag in bad:
                raise _not_a_tag(path, number, tag, scheme)
    found = TagCheck()
    if scheme == "IOB1":
        return found
    well_formed = _WELL_FORMED[scheme]
    for sentence in sentences:
        joined = " " + " ".join(sentence[2]) + " "
        if well_formed.fullmatch(joined, 1):
            found.entities += joined.count(" B-") + joined.count(" S-")
        else:
            _sentence_breaks(path, sentence[0], sentence[2], scheme, found)
    if found.breaks and (strict or 2 * found.breaks > found.entities):
        if strict:
            fix = "strict=True (--strict-tags) refuses them: fix those lines, or leave strict out to read them as conlleval does"
        else:
            fix = f"too many for noise: {SCHEME_FIX}"
        raise InvalidInputError(
            f"{found.first}, which {scheme} does not allow ({_GRAMMAR[scheme]}); {found.count()} break it, {fix}."
        )
    return found
