"""Entity-level NER scores against references nobody here wrote.

Two references:

* a small test-local transcription of ``conlleval`` (the CoNLL-2000 shared-task
  evaluation script by Erik Tjong Kim Sang, version 2004-01-26, also the official
  CoNLL-2003 scorer): its ``endOfChunk``/``startOfChunk`` functions and the
  ``$inCorrect`` state machine of its main loop, which counts chunks token by
  token without ever building a list of spans. It is written out below in our
  own words and is independent of the implementation under test;
* seqeval (``classification_report`` and friends), when it is importable.

Real data: the gold tags of CoNLL-2003's English dev set (``eng.testa``, IOB1)
from ../shared/data, against predictions made by corrupting them with a seeded
RNG.
"""

import itertools

import numpy as np
import pytest

from keras_bert_zoo.tasks.tagger import metrics as entities
from keras_bert_zoo.tasks.tagger.metrics import (
    bioes_to_iob2,
    entity_scores,
    entity_spans,
    iob1_to_iob2,
    iob2_to_bioes,
)
from tests.helpers import shared_data

TYPES = ("LOC", "MISC", "ORG", "PER")
TOL = 1e-9

# The published size of the CoNLL-2003 English dev set (Tjong Kim Sang & De Meulder 2003, table 1).
CONLL2003_DEV_SENTENCES = 3250
CONLL2003_DEV_ENTITIES = {"LOC": 1837, "MISC": 922, "ORG": 1341, "PER": 1842}


# ---------------------------------------------------------------------------
# Test-local conlleval reference.
#
# conlleval.pl, endOfChunk(prevTag, tag, prevType, type): a chunk ends between
# the previous and the current word when the (prefix) pair is one of
#   B B, B O, I B, I O, E E, E I, E O
# or when the previous tag is not O (nor ".") and the two types differ.
# startOfChunk: a chunk starts at the current word when the pair is one of
#   B B, I B, O B, O I, E E, E I, O E
# or when the current tag is not O (nor ".") and the two types differ.
# (The "[", "]" and "." tags of its bracket formats never occur here.)
#
# conlleval.pl itself has no S- prefix. The IOBES extension used by the widely
# circulated IOBES versions of conlleval.pl (and by seqeval's default mode) adds
#   ends:   B S, I S, E B, E S, S B, S E, S I, S O, S S
#   starts: S B, E B, B S, I S, O S, S S, E S, S I, S E
# With iobes=False the functions below are exactly the 2004 script's.
# ---------------------------------------------------------------------------

_PL_ENDS = {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"), ("E", "E"), ("E", "I"), ("E", "O")}
_PL_STARTS = {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"), ("E", "E"), ("E", "I"), ("O", "E")}
_IOBES_ENDS = {("B", "S"), ("I", "S"), ("E", "B"), ("E", "S")} | {("S", t) for t in "BEIOS"}
_IOBES_STARTS = {("S", "B"), ("E", "B"), ("S", "I"), ("S", "E")} | {(t, "S") for t in "BEIOS"}


def ref_end_of_chunk(prev_tag, tag, prev_type, type_, iobes):
    ends = _PL_ENDS | _IOBES_ENDS if iobes else _PL_ENDS
    if (prev_tag, tag) in ends:
        return True
    return prev_tag not in ("O", ".") and prev_type != type_


def ref_start_of_chunk(prev_tag, tag, prev_type, type_, iobes):
    starts = _PL_STARTS | _IOBES_STARTS if iobes else _PL_STARTS
    if (prev_tag, tag) in starts:
        return True
    return tag not in ("O", ".") and prev_type != type_


def ref_split(tag):
    # conlleval.pl: /^([^-]*)-(.*)$/ -> (chunk tag, type); a tag without "-" has type "".
    head, dash, tail = tag.partition("-")
    return (head, tail) if dash else (tag, "")


def ref_chunks(tags, iobes=False):
    """Chunks (type, start, end_exclusive) of one sentence, conlleval's rules token by token."""
    chunks, start = [], None
    prev_tag, prev_type = "O", ""
    for i, full in enumerate(list(tags) + ["O"]):  # the sentence break counts as O
        tag, type_ = ref_split(full)
        if ref_end_of_chunk(prev_tag, tag, prev_type, type_, iobes):
            chunks.append((prev_type, start, i))
        if ref_start_of_chunk(prev_tag, tag, prev_type, type_, iobes):
            start = i
        prev_tag, prev_type = tag, type_
    return chunks


def ref_conlleval_scores(true_seqs, pred_seqs, iobes=False):
    """conlleval's main loop: counts found/guessed/correct chunks with its $inCorrect flag."""
    found_correct, found_guessed, correct_chunk = {}, {}, {}
    in_correct = False
    last_correct, last_correct_type, last_guessed, last_guessed_type = "O", "", "O", ""

    def bump(counter, key):
        counter[key] = counter.get(key, 0) + 1

    lines = []
    for true, pred in zip(true_seqs, pred_seqs, strict=True):
        lines.extend(zip(true, pred, strict=True))
        lines.append(("O", "O"))  # empty line between sentences = boundary, tags O
    for correct_full, guessed_full in lines:
        correct, correct_type = ref_split(correct_full)
        guessed, guessed_type = ref_split(guessed_full)
        end_c = ref_end_of_chunk(last_correct, correct, last_correct_type, correct_type, iobes)
        end_g = ref_end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type, iobes)
        start_c = ref_start_of_chunk(last_correct, correct, last_correct_type, correct_type, iobes)
        start_g = ref_start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type, iobes)
        if in_correct:
            if end_c and end_g and last_guessed_type == last_correct_type:
                in_correct = False
                bump(correct_chunk, last_correct_type)
            elif end_c != end_g or guessed_type != correct_type:
                in_correct = False
        if start_c and start_g and guessed_type == correct_type:
            in_correct = True
        if start_c:
            bump(found_correct, correct_type)
        if start_g:
            bump(found_guessed, guessed_type)
        last_correct, last_correct_type = correct, correct_type
        last_guessed, last_guessed_type = guessed, guessed_type
    if in_correct:
        bump(correct_chunk, last_correct_type)

    def prf(c, g, t):  # conlleval's percentages, as fractions
        precision = 100 * c / g if g > 0 else 0.0
        recall = 100 * c / t if t > 0 else 0.0
        fb1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
        return precision / 100, recall / 100, fb1 / 100

    total_c, total_g, total_t = (sum(d.values()) for d in (correct_chunk, found_guessed, found_correct))
    p, r, f = prf(total_c, total_g, total_t)
    out = {
        "precision": p,
        "recall": r,
        "f1": f,
        "true_entities": total_t,
        "predicted_entities": total_g,
        "correct_entities": total_c,
    }
    for type_ in sorted(set(found_correct) | set(found_guessed)):
        p, r, f = prf(correct_chunk.get(type_, 0), found_guessed.get(type_, 0), found_correct.get(type_, 0))
        out.update(
            {
                f"precision_{type_}": p,
                f"recall_{type_}": r,
                f"f1_{type_}": f,
                f"support_{type_}": found_correct.get(type_, 0),
            }
        )
    return out


def assert_scores_equal(ours, reference):
    assert set(ours) == set(reference)
    for key, value in reference.items():
        if key.startswith("support_") or key.endswith("_entities"):
            assert ours[key] == value and isinstance(ours[key], int), key
        else:
            assert abs(ours[key] - value) <= TOL, (key, ours[key], value)
            assert isinstance(ours[key], float), key


# ---------------------------------------------------------------------------
# Data: CoNLL-2003 dev gold tags and deterministic corrupted "predictions".
# ---------------------------------------------------------------------------


def read_conll_tags(path):
    sentences, current = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                if current:
                    sentences.append(current)
                    current = []
            elif fields[0] != "-DOCSTART-":
                current.append(fields[-1])
    if current:
        sentences.append(current)
    return sentences


_CACHE = {}


def dev_iob1():
    if "dev" not in _CACHE:
        _CACHE["dev"] = read_conll_tags(shared_data("conll2003", "eng.testa"))
    return _CACHE["dev"]


def corrupt(sentences, seed, prefixes="BI", o_rate=0.07, entity_rate=0.25):
    """A model's mistakes on ~10% of CoNLL-2003's tokens (seeded, so deterministic).

    Like a tagger's, most mistakes are on entity tokens (`entity_rate` of them)
    and few on O tokens (`o_rate`).

    Entity tokens: wrong type, lost B-/S- (or the token dropped to O), boundary
    shifted (a token given to its neighbour's entity), swapped with the next
    tag, or any tag; O tokens: a spurious I-X, the previous entity grown by one
    token, or any tag.
    """
    rng = np.random.default_rng(seed)
    out = []
    for tags in sentences:
        tags = list(tags)
        n = len(tags)
        for k in range(n):
            tag = tags[k]
            if rng.random() >= (o_rate if tag == "O" else entity_rate):
                continue
            other_type = str(rng.choice([t for t in TYPES if t != tag[2:]]))
            random_tag = str(rng.choice(list(prefixes))) + "-" + str(rng.choice(TYPES))
            op = int(rng.integers(5))
            if tag == "O":
                if op < 2:  # spurious I-X (ill-formed in IOB2)
                    tags[k] = "I-" + other_type
                elif op < 4 and k > 0 and tags[k - 1] != "O":  # previous entity grows by one token
                    tags[k] = str(rng.choice(list(prefixes))) + "-" + tags[k - 1][2:]
                else:
                    tags[k] = random_tag
            elif op == 0:  # wrong type
                tags[k] = tag[:2] + other_type
            elif op == 1:  # B- (S-) lost, or the entity token dropped
                tags[k] = "I-" + tag[2:] if tag[0] in "BS" else "O"
            elif op == 2 and k + 1 < n and tags[k + 1] != tag:  # boundary shifted right
                tags[k + 1] = tag
            elif op == 3 and k + 1 < n and tags[k + 1] != tag:  # two neighbouring tags swapped
                tags[k], tags[k + 1] = tags[k + 1], tags[k]
            else:
                tags[k] = random_tag if rng.random() < 0.7 else "O"
        out.append(tags)
    return out


def dev_data(scheme, seed):
    gold = dev_iob1()
    if scheme == "IOB1":
        return gold, corrupt(gold, seed, "BI")
    gold = [iob1_to_iob2(tags) for tags in gold]
    if scheme == "IOB2":
        return gold, corrupt(gold, seed, "BI")
    gold = [iob2_to_bioes(tags) for tags in gold]
    return gold, corrupt(gold, seed, "BIES")


def is_valid_iob2(tags):
    prev = "O"
    for tag in tags:
        if tag.startswith("I-") and prev[2:] != tag[2:]:
            return False
        if tag != "O" and tag[:2] not in ("B-", "I-"):
            return False
        prev = tag
    return True


# ---------------------------------------------------------------------------
# Hand cases: every transition.
# ---------------------------------------------------------------------------

HAND_CASES = [
    # (tags, scheme, conlleval spans, strict spans or None when strict does not apply)
    ([], "IOB2", [], []),
    (["O", "O"], "IOB2", [], []),
    (["B-PER"], "IOB2", [("PER", 0, 1)], [("PER", 0, 1)]),
    (["B-PER", "I-PER", "O"], "IOB2", [("PER", 0, 2)], [("PER", 0, 2)]),
    (["B-PER", "B-PER"], "IOB2", [("PER", 0, 1), ("PER", 1, 2)], [("PER", 0, 1), ("PER", 1, 2)]),
    # B after I of the same type starts a new entity
    (["B-PER", "I-PER", "B-PER", "I-PER"], "IOB2", [("PER", 0, 2), ("PER", 2, 4)], [("PER", 0, 2), ("PER", 2, 4)]),
    # I after O: an entity for conlleval, nothing in strict IOB2
    (["O", "I-LOC", "I-LOC", "O"], "IOB2", [("LOC", 1, 3)], []),
    (["I-LOC"], "IOB2", [("LOC", 0, 1)], []),
    # I-X after I-Y / B-Y: type change
    (["B-ORG", "I-LOC", "I-LOC"], "IOB2", [("ORG", 0, 1), ("LOC", 1, 3)], [("ORG", 0, 1)]),
    (["I-ORG", "I-LOC"], "IOB2", [("ORG", 0, 1), ("LOC", 1, 2)], []),
    (["B-ORG", "I-ORG", "I-LOC", "I-ORG"], "IOB2", [("ORG", 0, 2), ("LOC", 2, 3), ("ORG", 3, 4)], [("ORG", 0, 2)]),
    # B-X after I-Y, O after B, B at the end
    (
        ["I-MISC", "B-PER", "O", "B-LOC"],
        "IOB2",
        [("MISC", 0, 1), ("PER", 1, 2), ("LOC", 3, 4)],
        [("PER", 1, 2), ("LOC", 3, 4)],
    ),
    # types containing "-"
    (["B-GPE-X", "I-GPE-X", "I-GPE-Y"], "IOB2", [("GPE-X", 0, 2), ("GPE-Y", 2, 3)], [("GPE-X", 0, 2)]),
    # IOB1: I-X starts, B-X separates adjacent same-type entities
    (
        ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"],
        "IOB1",
        [("PER", 0, 2), ("PER", 2, 3), ("LOC", 4, 5), ("ORG", 5, 6)],
        None,
    ),
    (["O", "B-PER", "I-PER"], "IOB1", [("PER", 1, 3)], None),
    # IOBES / BIOES: S, E, and what follows them
    (
        ["S-PER", "S-PER", "B-LOC", "E-LOC", "S-LOC"],
        "BIOES",
        [("PER", 0, 1), ("PER", 1, 2), ("LOC", 2, 4), ("LOC", 4, 5)],
        [("PER", 0, 1), ("PER", 1, 2), ("LOC", 2, 4), ("LOC", 4, 5)],
    ),
    (["B-ORG", "I-ORG", "I-ORG", "E-ORG", "O"], "IOBES", [("ORG", 0, 4)], [("ORG", 0, 4)]),
    (["E-ORG", "B-ORG"], "IOBES", [("ORG", 0, 1), ("ORG", 1, 2)], []),  # E then B of the same type
    (["E-ORG", "E-ORG", "I-ORG"], "IOBES", [("ORG", 0, 1), ("ORG", 1, 2), ("ORG", 2, 3)], []),
    (["S-ORG", "I-ORG", "E-ORG"], "IOBES", [("ORG", 0, 1), ("ORG", 1, 3)], [("ORG", 0, 1)]),
    (["S-ORG", "E-ORG", "O", "E-PER"], "IOBES", [("ORG", 0, 1), ("ORG", 1, 2), ("PER", 3, 4)], [("ORG", 0, 1)]),
    (
        ["B-PER", "S-PER", "I-PER", "S-LOC"],
        "IOBES",
        [("PER", 0, 1), ("PER", 1, 2), ("PER", 2, 3), ("LOC", 3, 4)],
        [("PER", 1, 2), ("LOC", 3, 4)],
    ),
    (["B-PER", "I-PER"], "IOBES", [("PER", 0, 2)], []),  # never closed: strict drops it
    (["B-PER", "I-PER", "E-LOC"], "IOBES", [("PER", 0, 2), ("LOC", 2, 3)], []),
    (["B-PER", "B-PER", "E-PER"], "IOBES", [("PER", 0, 1), ("PER", 1, 3)], [("PER", 1, 3)]),
    (["I-PER", "E-PER", "B-PER", "E-PER"], "IOBES", [("PER", 0, 2), ("PER", 2, 4)], [("PER", 2, 4)]),
    (["B-PER", "E-PER", "E-PER"], "IOBES", [("PER", 0, 2), ("PER", 2, 3)], [("PER", 0, 2)]),
]


def test_hand_cases_against_conlleval_rules():
    for tags, scheme, expected, expected_strict in HAND_CASES:
        assert entity_spans(tags, scheme=scheme) == expected, tags
        assert ref_chunks(tags, iobes=scheme in ("IOBES", "BIOES")) == expected, tags
        if "S" not in [t[0] for t in tags] and ("E", "B") not in [(a[0], b[0]) for a, b in itertools.pairwise(tags)]:
            assert ref_chunks(tags, iobes=False) == expected, tags  # the 2004 script's rules, no extension
        if expected_strict is not None:
            assert entity_spans(tags, scheme=scheme, mode="strict") == expected_strict, tags


def test_hand_cases_iob1_conversion():
    iob1 = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG", "B-ORG", "O", "B-MISC", "I-MISC"]
    iob2 = iob1_to_iob2(iob1)
    assert iob2 == ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG", "B-ORG", "O", "B-MISC", "I-MISC"]
    assert entity_spans(iob1, scheme="IOB1") == entity_spans(iob2) == entity_spans(iob2, mode="strict")
    bioes = iob2_to_bioes(iob2)
    assert bioes == ["B-PER", "E-PER", "S-PER", "O", "S-LOC", "S-ORG", "S-ORG", "O", "B-MISC", "E-MISC"]
    assert bioes_to_iob2(bioes) == iob2
    # ill-formed IOB2 is read with the conlleval rules before conversion
    assert iob2_to_bioes(["O", "I-PER", "I-PER", "I-LOC"]) == ["O", "B-PER", "E-PER", "S-LOC"]


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("scheme", ["IOB2", "BIOES"])
def test_random_short_sequences_against_conlleval_rules(scheme, seed):
    """Every prefix pair, many times: random tags from all prefixes and two types."""
    rng = np.random.default_rng(seed)
    prefixes = "BI" if scheme == "IOB2" else "BIES"
    vocab = ["O"] + [f"{p}-{t}" for p in prefixes for t in ("A", "B")]
    true = [list(rng.choice(vocab, size=int(rng.integers(0, 12)))) for _ in range(2000)]
    pred = [list(rng.choice(vocab, size=len(t))) for t in true]
    iobes = scheme == "BIOES"
    for tags in true:
        assert entity_spans(tags, scheme=scheme) == ref_chunks(tags, iobes=iobes)
    assert_scores_equal(entity_scores(true, pred, scheme=scheme), ref_conlleval_scores(true, pred, iobes=iobes))


# ---------------------------------------------------------------------------
# Real data: CoNLL-2003 dev.
# ---------------------------------------------------------------------------


def test_conll2003_dev_entity_counts_are_the_published_ones():
    gold = dev_iob1()
    assert len(gold) == CONLL2003_DEV_SENTENCES
    scores = entity_scores(gold, gold, scheme="IOB1")
    assert scores["true_entities"] == sum(CONLL2003_DEV_ENTITIES.values()) == 5942
    assert {t: scores[f"support_{t}"] for t in TYPES} == CONLL2003_DEV_ENTITIES
    assert scores["precision"] == scores["recall"] == scores["f1"] == 1.0
    iob2 = [iob1_to_iob2(tags) for tags in gold]
    for mode in ("conlleval", "strict"):
        scores = entity_scores(iob2, iob2, mode=mode)
        assert {t: scores[f"support_{t}"] for t in TYPES} == CONLL2003_DEV_ENTITIES


def test_iob1_to_iob2_on_conll2003_dev():
    gold = dev_iob1()
    changed = 0
    for tags in gold:
        iob2 = iob1_to_iob2(tags)
        assert len(iob2) == len(tags)
        assert is_valid_iob2(iob2), (tags, iob2)
        spans = ref_chunks(tags)  # IOB1 read by conlleval's rules
        assert entity_spans(tags, scheme="IOB1") == spans
        assert entity_spans(iob2) == spans
        assert ref_chunks(iob2) == spans
        assert entity_spans(iob2, mode="strict") == spans
        bioes = iob2_to_bioes(iob2)
        assert entity_spans(bioes, scheme="BIOES", mode="strict") == spans
        assert ref_chunks(bioes, iobes=True) == spans
        assert bioes_to_iob2(bioes) == iob2
        changed += iob2 != tags
    assert changed > 2000  # most sentences have an entity whose I- became B-


@pytest.mark.parametrize("scheme", ["IOB1", "IOB2", "BIOES"])
def test_conll2003_dev_corrupted_against_conlleval(scheme):
    gold, pred = dev_data(scheme, seed=2003)
    assert len(gold) >= 3000
    flipped = sum(a != b for g, p in zip(gold, pred, strict=True) for a, b in zip(g, p, strict=True)) / sum(
        map(len, gold)
    )
    assert 0.05 < flipped < 0.15
    iobes = scheme == "BIOES"
    ours = entity_scores(gold, pred, scheme=scheme)
    assert_scores_equal(ours, ref_conlleval_scores(gold, pred, iobes=iobes))
    assert_scores_equal(entity_scores(pred, gold, scheme=scheme), ref_conlleval_scores(pred, gold, iobes=iobes))
    assert 0.4 < ours["f1"] < 0.9  # a realistic, imperfect prediction
    for tags in pred:
        assert entity_spans(tags, scheme=scheme) == ref_chunks(tags, iobes=iobes)


# ---------------------------------------------------------------------------
# seqeval, when installed.
# ---------------------------------------------------------------------------


def seqeval_scores(true, pred, **kwargs):
    seqeval_metrics = pytest.importorskip("seqeval.metrics")
    report = seqeval_metrics.classification_report(true, pred, output_dict=True, zero_division=0, **kwargs)
    micro = report["micro avg"]
    out = {"precision": micro["precision"], "recall": micro["recall"], "f1": micro["f1-score"]}
    for key in (("precision", "precision_score"), ("recall", "recall_score"), ("f1", "f1_score")):
        direct = getattr(seqeval_metrics, key[1])(true, pred, zero_division=0, **kwargs)
        assert abs(direct - out[key[0]]) <= TOL
    for type_, row in report.items():
        if type_.endswith(" avg"):
            continue
        out.update(
            {
                f"precision_{type_}": row["precision"],
                f"recall_{type_}": row["recall"],
                f"f1_{type_}": row["f1-score"],
                f"support_{type_}": int(row["support"]),
            }
        )
    return out, int(micro["support"])


def assert_matches_seqeval(true, pred, scheme, mode):
    kwargs = {}
    if mode == "strict":
        seqeval_scheme = pytest.importorskip("seqeval.scheme")
        kwargs = {"mode": "strict", "scheme": {"IOB2": seqeval_scheme.IOB2, "BIOES": seqeval_scheme.IOBES}[scheme]}
    reference, support = seqeval_scores(true, pred, **kwargs)
    ours = entity_scores(true, pred, scheme=scheme, mode=mode)
    assert ours["true_entities"] == support
    ours = {k: v for k, v in ours.items() if not k.endswith("_entities")}
    assert_scores_equal(ours, reference)


@pytest.mark.parametrize(
    "scheme,mode",
    [("IOB1", "conlleval"), ("IOB2", "conlleval"), ("BIOES", "conlleval"), ("IOB2", "strict"), ("BIOES", "strict")],
)
def test_conll2003_dev_corrupted_against_seqeval(scheme, mode):
    pytest.importorskip("seqeval")
    gold, pred = dev_data(scheme, seed=17)
    assert_matches_seqeval(gold, pred, scheme, mode)
    assert_matches_seqeval(pred, gold, scheme, mode)


@pytest.mark.parametrize(
    "scheme,mode", [("IOB2", "conlleval"), ("BIOES", "conlleval"), ("IOB2", "strict"), ("BIOES", "strict")]
)
def test_hand_and_random_cases_against_seqeval(scheme, mode):
    pytest.importorskip("seqeval")
    group = ("IOB2",) if scheme == "IOB2" else ("IOBES", "BIOES")
    cases = [tags for tags, s, _, strict in HAND_CASES if s in group and (mode == "conlleval" or strict is not None)]
    rng = np.random.default_rng(5)
    prefixes = "BI" if scheme == "IOB2" else "BIES"
    vocab = ["O"] + [f"{p}-{t}" for p in prefixes for t in ("A", "B")]
    cases += [list(rng.choice(vocab, size=int(rng.integers(1, 10)))) for _ in range(3000)]
    cases = [[str(t) for t in tags] for tags in cases if tags]
    pred = [list(reversed(tags)) for tags in cases]
    assert_matches_seqeval(cases, pred, scheme, mode)


# ---------------------------------------------------------------------------
# Scores, errors, docs.
# ---------------------------------------------------------------------------


def test_zero_division_gives_zero():
    scores = entity_scores([["B-PER", "O"]], [["O", "O"]])
    assert (scores["precision"], scores["recall"], scores["f1"]) == (0.0, 0.0, 0.0)
    assert scores["support_PER"] == 1 and scores["predicted_entities"] == 0
    scores = entity_scores([["O"]], [["B-LOC"]])
    assert (scores["precision_LOC"], scores["recall_LOC"], scores["support_LOC"]) == (0.0, 0.0, 0)
    assert entity_scores([["O"]], [["O"]])["f1"] == 0.0


def test_errors():
    with pytest.raises(ValueError, match="sentence 2: 3 true tags but 2 predicted tags"):
        entity_scores([["O"], ["B-PER"], ["O", "O", "O"]], [["O"], ["B-PER"], ["O", "O"]])
    with pytest.raises(ValueError, match="2 true sentences but 1 predicted"):
        entity_scores([["O"], ["O"]], [["O"]])
    with pytest.raises(ValueError, match="sentence 1: invalid tag 'S-PER' at position 0 for scheme IOB2"):
        entity_scores([["O"], ["S-PER"]], [["O"], ["O"]])
    with pytest.raises(ValueError, match="invalid tag 'PER'"):
        entity_spans(["PER"])
    with pytest.raises(ValueError, match="string"):
        entity_scores(["B-PER", "O"], ["B-PER", "O"])
    with pytest.raises(ValueError, match="iob1_to_iob2"):
        entity_spans(["I-PER"], scheme="IOB1", mode="strict")
    with pytest.raises(ValueError, match="unknown tagging scheme"):
        entity_spans(["O"], scheme="BILOU")
    with pytest.raises(ValueError, match="unknown mode"):
        entity_spans(["O"], mode="lenient")
    with pytest.raises(ValueError, match="invalid tag 'E-PER'"):
        iob1_to_iob2(["E-PER"])


def test_module_is_pure_python():
    source = open(entities.__file__, encoding="utf-8").read()
    assert "import tensorflow" not in source and "import keras" not in source
