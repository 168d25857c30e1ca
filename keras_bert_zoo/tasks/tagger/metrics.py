"""Entity-level precision, recall and F1 for named-entity recognition (CoNLL-2003).

Pure Python: no TensorFlow, no NumPy needed. Scores are computed over whole
entities (a predicted entity counts only when its type, first and last token all
match a true entity), micro-averaged over the corpus, as in the CoNLL shared
tasks.

Two ways of reading a tag sequence into entities:

* ``mode="conlleval"`` (default) follows the ``startOfChunk``/``endOfChunk`` rules
  of ``conlleval``, the CoNLL-2000 evaluation script also used for CoNLL-2003
  (and reproduced by seqeval's default mode), with the usual IOBES extension
  (``S-`` prefixes, and a chunk always closing after ``E-``/``S-``). Every
  non-``O`` tag belongs to some entity, ill-formed sequences included: between
  two non-``O`` tags a new entity begins exactly when the second tag is ``B-`` or
  ``S-``, or the first is ``E-`` or ``S-``, or their types differ; ``O`` closes
  any open entity. So ``I-X`` after ``O`` starts an entity (as in IOB1), and
  IOB1, IOB2 and IOBES/BIOES are all read with the same rules.
* ``mode="strict"`` counts only chunks that are well formed in the declared
  scheme (seqeval's ``mode="strict"``): in IOB2 an entity is ``B-X (I-X)*`` and an
  ``I-X`` that does not continue a ``B-X``/``I-X`` is ignored; in IOBES/BIOES an
  entity is ``S-X`` or ``B-X (I-X)* E-X``, anything else is ignored.

Tags are ``"O"`` or ``"<prefix>-<type>"`` (the type may itself contain ``-``).
``scheme`` names the prefixes a sequence may use (``IOB1``/``IOB2``: ``B I O``;
``IOBES``/``BIOES``: ``B I O E S``; ``BMES``: ``B M E S O``, the Chinese NER sets' form of
BIOES, whose ``M-`` is read as ``I-``); anything else raises ``InvalidInputError`` (a ``ValueError``).

CoNLL-2003's files are IOB1 (``I-X`` starts an entity unless it follows an ``X``
tag; ``B-X`` only separates two adjacent entities of type ``X``); use
`iob1_to_iob2` to convert them.
"""

from keras_bert_zoo.errors import ArgumentTypeError, BertZooError, InvalidInputError, UsageError

__all__ = [
    "SCHEMES",
    "CHUNK_STARTS",
    "CHUNK_ENDS",
    "PREFIX_CODES",
    "tag_parts",
    "entity_spans",
    "iob1_to_iob2",
    "iob2_to_bioes",
    "bioes_to_iob2",
    "bmes_to_bioes",
    "entity_scores",
]

SCHEMES = {"IOB1": "IOB1", "IOB2": "IOB2", "IOBES": "IOBES", "BIOES": "IOBES", "BMES": "BMES"}
_MODES = ("conlleval", "strict")
_PREFIXES = {"IOB1": "BI", "IOB2": "BI", "IOBES": "BIES", "BMES": "BMES"}
# Schemes whose entities close with E- (or are one S- tag).
_WITH_ENDS = ("IOBES", "BMES")

# The conlleval rule, in one place for both decoders (this module's and the in-graph
# `tasks.tagger.entity_graph`): between two non-O tags a new chunk starts exactly when the
# second tag's prefix is in CHUNK_STARTS, or the first's is in CHUNK_ENDS, or their
# types differ; O closes any open chunk.
CHUNK_STARTS = "BS"
CHUNK_ENDS = "ES"
# A tag's prefix as an int (in-graph tables); BMES's M- is I-.
PREFIX_CODES = {"O": 0, "B": 1, "I": 2, "E": 3, "S": 4, "M": 2}


def _scheme(scheme):
    name = SCHEMES.get(str(scheme).upper())
    if name is None:
        raise UsageError(f"unknown tagging scheme {scheme!r}; expected one of {sorted(SCHEMES)}.")
    return name


def _mode(mode):
    if mode not in _MODES:
        raise UsageError(f"unknown mode {mode!r}; expected one of {_MODES}.")
    return mode


def tag_parts(tag, prefixes="BIEMS"):
    """`("B", "PER")` for `"B-PER"`: a tag's prefix (one of `prefixes`) and its type;
    None for `"O"` and for anything else.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import tag_parts
    >>> tag_parts("I-MISC-X"), tag_parts("O"), tag_parts("S-LOC", prefixes="BI")
    (('I', 'MISC-X'), None, None)
    """
    if isinstance(tag, str) and len(tag) >= 3 and tag[1] == "-" and tag[0] in prefixes:
        return tag[0], tag[2:]
    return None


def _parse(tags, scheme):
    """`tags` as a list of (prefix, type) pairs; ("O", "") for O."""
    if isinstance(tags, str):
        raise ArgumentTypeError(f"expected a sequence of tags, got the string {tags!r}.")
    allowed = _PREFIXES[scheme]
    parsed = []
    for position, tag in enumerate(tags):
        if tag == "O":
            parsed.append(("O", ""))
            continue
        if tag_parts(tag, allowed) is None:
            allowed_text = ", ".join(f"{p}-TYPE" for p in allowed)
            raise InvalidInputError(
                f"invalid tag {tag!r} at position {position} for scheme {scheme}: "
                f"expected 'O' or one of {allowed_text}."
            )
        parsed.append(("I" if tag[0] == "M" else tag[0], tag[2:]))  # (only BMES allows M-)
    return parsed


def _conlleval_spans(parsed):
    spans = []
    start = None
    prev_prefix, prev_type = "O", ""
    for i, (prefix, type_) in enumerate(parsed + [("O", "")]):
        if prefix == "O":
            if prev_prefix != "O":  # O closes the open entity
                spans.append((prev_type, start, i))
        elif prev_prefix == "O":  # a non-O tag after O opens one
            start = i
        elif prev_prefix in CHUNK_ENDS or prefix in CHUNK_STARTS or prev_type != type_:
            spans.append((prev_type, start, i))  # endOfChunk and startOfChunk both hold
            start = i
        prev_prefix, prev_type = prefix, type_
    return spans


def _strict_spans(parsed, scheme):
    if scheme == "IOB1":
        raise UsageError(
            "mode='strict' supports the IOB2 and IOBES/BIOES schemes; convert IOB1 tags with "
            "iob1_to_iob2 first (or use mode='conlleval', which reads IOB1 directly)."
        )
    spans = []
    n = len(parsed)
    for i, (prefix, type_) in enumerate(parsed):
        if scheme in _WITH_ENDS and prefix == "S":
            spans.append((type_, i, i + 1))
        elif prefix == "B":
            j = i + 1
            while j < n and parsed[j] == ("I", type_):
                j += 1
            if scheme == "IOB2":
                spans.append((type_, i, j))
            elif j < n and parsed[j] == ("E", type_):  # IOBES, BMES
                spans.append((type_, i, j + 1))
    return spans


def entity_spans(tags, scheme="IOB2", mode="conlleval"):
    """Entities of one sentence as ``(type, start, end)`` tuples, ``end`` exclusive.

    Args:
        tags: the sentence's tags, e.g. ``["B-PER", "I-PER", "O"]``.
        scheme: ``"IOB1"``, ``"IOB2"``, ``"IOBES"`` or ``"BIOES"`` (same thing), or
            ``"BMES"`` (BIOES with ``M-`` for ``I-``).
        mode: ``"conlleval"`` (the CoNLL evaluation script's rules, which read any
            sequence) or ``"strict"`` (only chunks well formed in `scheme`).

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import entity_spans
    >>> entity_spans(["B-PER", "I-PER", "O", "B-LOC"])
    [('PER', 0, 2), ('LOC', 3, 4)]

    ``I-X`` after ``O`` or after another type starts an entity under conlleval
    rules, but not in strict IOB2:

    >>> entity_spans(["O", "I-ORG", "I-ORG", "I-LOC"])
    [('ORG', 1, 3), ('LOC', 3, 4)]
    >>> entity_spans(["O", "I-ORG", "I-ORG", "I-LOC"], mode="strict")
    []

    ``B-X`` right after ``X`` separates two entities (the only use of ``B-`` in IOB1):

    >>> entity_spans(["I-PER", "B-PER", "I-PER"], scheme="IOB1")
    [('PER', 0, 1), ('PER', 1, 3)]

    IOBES/BIOES: in strict mode a ``B-X`` must be closed by ``E-X``:

    >>> bioes = ["S-LOC", "B-PER", "I-PER", "E-PER", "B-ORG", "O"]
    >>> entity_spans(bioes, scheme="BIOES")
    [('LOC', 0, 1), ('PER', 1, 4), ('ORG', 4, 5)]
    >>> entity_spans(bioes, scheme="BIOES", mode="strict")
    [('LOC', 0, 1), ('PER', 1, 4)]

    BMES (MSRA, Resume NER) is BIOES with ``M-``; an ``M-`` continuing no entity starts one,
    as conlleval reads an ill-formed ``I-``:

    >>> entity_spans(["B-LOC", "M-LOC", "E-LOC", "O", "M-PER", "E-PER", "S-ORG"], scheme="BMES")
    [('LOC', 0, 3), ('PER', 4, 6), ('ORG', 6, 7)]
    """
    scheme = _scheme(scheme)
    parsed = _parse(tags, scheme)
    if _mode(mode) == "strict":
        return _strict_spans(parsed, scheme)
    return _conlleval_spans(parsed)


def _write_tags(spans, length, scheme):
    tags = ["O"] * length
    inside = "M" if scheme == "BMES" else "I"
    for type_, start, end in spans:
        if scheme in _WITH_ENDS and end - start == 1:
            tags[start] = f"S-{type_}"
            continue
        tags[start] = f"B-{type_}"
        for k in range(start + 1, end):
            tags[k] = f"{inside}-{type_}"
        if scheme in _WITH_ENDS:
            tags[end - 1] = f"E-{type_}"
    return tags


def iob1_to_iob2(tags):
    """IOB1 tags (CoNLL-2003's files) to IOB2: every entity starts with ``B-``.

    In IOB1 ``I-X`` starts an entity unless the previous tag has type ``X``, and
    ``B-X`` only marks the start of an entity that directly follows another ``X``.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import iob1_to_iob2
    >>> iob1_to_iob2(["I-ORG", "O", "I-PER", "I-PER", "B-PER", "I-LOC"])
    ['B-ORG', 'O', 'B-PER', 'I-PER', 'B-PER', 'B-LOC']
    """
    parsed = _parse(tags, "IOB1")
    out = []
    prev_type = None
    for (prefix, type_), tag in zip(parsed, tags, strict=True):
        if prefix == "I" and type_ != prev_type:
            out.append(f"B-{type_}")
        else:
            out.append(str(tag))
        prev_type = type_ if prefix != "O" else None
    return out


def iob2_to_bioes(tags):
    """IOB2 tags to IOBES/BIOES (``S-`` single-token entities, ``E-`` last tokens).

    Entities are read with the conlleval rules, so an ill-formed ``I-X`` that
    starts an entity becomes ``B-X`` or ``S-X``.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import iob2_to_bioes
    >>> iob2_to_bioes(["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC"])
    ['B-PER', 'I-PER', 'E-PER', 'O', 'S-LOC', 'S-LOC']
    """
    return _write_tags(entity_spans(tags, scheme="IOB2"), len(tags), "IOBES")


def bioes_to_iob2(tags):
    """IOBES/BIOES tags to IOB2 (entities read with the conlleval rules).

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import bioes_to_iob2
    >>> bioes_to_iob2(["B-PER", "I-PER", "E-PER", "O", "S-LOC", "S-LOC"])
    ['B-PER', 'I-PER', 'I-PER', 'O', 'B-LOC', 'B-LOC']
    """
    return _write_tags(entity_spans(tags, scheme="IOBES"), len(tags), "IOB2")


def bmes_to_bioes(tags):
    """BMES tags (``M-`` for ``I-``) as BIOES: the same entities, the tag names other tools
    (seqeval's IOBES) read.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import bmes_to_bioes
    >>> bmes_to_bioes(["B-PER", "M-PER", "E-PER", "O", "S-LOC"])
    ['B-PER', 'I-PER', 'E-PER', 'O', 'S-LOC']
    """
    return [
        f"I-{type_}" if prefix == "I" else tag for (prefix, type_), tag in zip(_parse(tags, "BMES"), tags, strict=True)
    ]


def _prf(correct, predicted, true):
    precision = correct / predicted if predicted else 0.0
    recall = correct / true if true else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return float(precision), float(recall), float(f1)


def entity_scores(true_tag_sequences, pred_tag_sequences, scheme="IOB2", mode="conlleval"):
    """Entity-level micro precision/recall/F1, overall and per entity type.

    Args:
        true_tag_sequences: one list of gold tags per sentence.
        pred_tag_sequences: one list of predicted tags per sentence, same lengths.
        scheme, mode: as in `entity_spans`.

    Returns:
        A flat dict: ``precision``, ``recall``, ``f1`` (0.0 when undefined),
        ``true_entities``, ``predicted_entities``, ``correct_entities`` (ints), and
        for every type ``X`` found in either side ``precision_X``, ``recall_X``,
        ``f1_X`` and ``support_X`` (the number of true ``X`` entities).

    Raises:
        InvalidInputError (a ValueError): on a different number of sentences, a
            sentence whose two sequences have different lengths (its index is in the
            message), or a tag the scheme does not allow; UsageError for an unknown
            `scheme` or `mode`.

    Examples:
    >>> from keras_bert_zoo.tasks.tagger.metrics import entity_scores
    >>> true = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    >>> pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
    >>> scores = entity_scores(true, pred)
    >>> scores["precision"], scores["recall"], scores["correct_entities"]
    (0.6666666666666666, 0.6666666666666666, 2)
    >>> scores["f1_PER"], scores["f1_LOC"], scores["support_LOC"], scores["precision_ORG"]
    (1.0, 0.0, 1, 0.5)
    >>> entity_scores([["B-PER", "O"]], [["B-PER"]])
    Traceback (most recent call last):
    ...
    keras_bert_zoo.errors.InvalidInputError: sentence 0: 2 true tags but 1 predicted tags; give a tag per token.
    """
    scheme = _scheme(scheme)
    _mode(mode)
    true_tag_sequences = list(true_tag_sequences)
    pred_tag_sequences = list(pred_tag_sequences)
    if len(true_tag_sequences) != len(pred_tag_sequences):
        raise InvalidInputError(
            f"{len(true_tag_sequences)} true sentences but {len(pred_tag_sequences)} predicted sentences."
        )
    true_entities, pred_entities = set(), set()
    for index, (true_tags, pred_tags) in enumerate(zip(true_tag_sequences, pred_tag_sequences, strict=True)):
        try:
            if isinstance(true_tags, str) or isinstance(pred_tags, str):
                raise ArgumentTypeError("expected a list of tags per sentence, got a string.")
            if len(true_tags) != len(pred_tags):
                raise InvalidInputError(
                    f"{len(true_tags)} true tags but {len(pred_tags)} predicted tags; give a tag per token."
                )
            true_spans = entity_spans(true_tags, scheme, mode)
            pred_spans = entity_spans(pred_tags, scheme, mode)
        except BertZooError as error:  # the same class, with the sentence that holds the problem
            raise type(error)(f"sentence {index}: {error}") from None
        true_entities.update((index,) + span for span in true_spans)
        pred_entities.update((index,) + span for span in pred_spans)
    correct_entities = true_entities & pred_entities

    def count_by_type(entities):
        counts = {}
        for entity in entities:
            counts[entity[1]] = counts.get(entity[1], 0) + 1
        return counts

    n_true, n_pred, n_correct = map(count_by_type, (true_entities, pred_entities, correct_entities))
    precision, recall, f1 = _prf(len(correct_entities), len(pred_entities), len(true_entities))
    scores = {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "true_entities": len(true_entities),
        "predicted_entities": len(pred_entities),
        "correct_entities": len(correct_entities),
    }
    for type_ in sorted(set(n_true) | set(n_pred)):
        support = n_true.get(type_, 0)
        p, r, f = _prf(n_correct.get(type_, 0), n_pred.get(type_, 0), support)
        scores[f"precision_{type_}"] = p
        scores[f"recall_{type_}"] = r
        scores[f"f1_{type_}"] = f
        scores[f"support_{type_}"] = support
    return scores
