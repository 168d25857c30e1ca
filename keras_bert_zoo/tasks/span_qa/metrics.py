"""Span QA exact match and F1: SQuAD's official rules (v1.1 and v2.0), or CMRC 2018's.

`rules` picks how answers are compared:

- `"squad"`: the SQuAD scripts' rules below (words split at spaces).
- `"cmrc2018"`: CMRC 2018's official rules for Chinese (`tasks.span_qa.cmrc`): each CJK
  ideograph is a segment, F1 from the longest common run of segments, its own punctuation list.
- `"auto"` (default): `"cmrc2018"` when more than half of the answerable questions have a
  gold answer holding a CJK ideograph, else `"squad"`. A majority, not "any": English SQuAD
  has a few answers such as `元朝`, and its scores must stay SQuAD's.

Everything else (best over golds, missing predictions, v2.0's no-answer questions and
threshold search) is the same under both rules.

SQuAD's rules: answers are normalised as `evaluate-v1.1.py` / `evaluate-v2.0.py` do: lower-case, drop
ASCII punctuation (`string.punctuation`), drop the words a/an/the, collapse whitespace.
A prediction scores the best exact match and the best token F1 over the question's gold
answers. Scores are fractions in [0, 1] (the scripts print percentages).

v2.0 (`version_2_with_negative=True`): a question without gold answers (or whose golds
all normalise to "") has the single gold `""`; F1 between an empty and a non-empty
answer is 0, between two empty ones 1. `HasAns` / `NoAns` splits are reported, and
`find_best_threshold` picks the null-score threshold that maximises a score on dev,
as `evaluate-v2.0.py`'s `find_best_thresh` does.

A question without a prediction scores 0 and counts in the total (v1.1's rule; the
v2.0 script skips it from the overall total, we do not).

Examples:
>>> from keras_bert_zoo.tasks.span_qa.metrics import squad_scores
>>> squad_scores({"q1": "the Eiffel Tower", "q2": "1889"},
...              {"q1": ["Eiffel Tower"], "q2": ["in 1889", "1889"]})["exact_match"]
1.0
>>> round(squad_scores({"q1": "北京天安门"}, {"q1": ["天安门广场"]})["f1"], 4)  # auto: CMRC 2018's rules
0.6
"""

import collections
import re
import string

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.tasks.span_qa import cmrc

__all__ = [
    "RULES",
    "normalize_answer",
    "exact_match",
    "token_f1",
    "choose_rules",
    "per_question_scores",
    "squad_scores",
    "find_best_threshold",
]

RULES = ("squad", "cmrc2018", "auto")

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text):
    """Lower-case, no punctuation, no a/an/the, single spaces (the official `normalize_answer`)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction, gold):
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction, gold):
    """Token-overlap F1 of normalised answers; two empty answers score 1, one empty 0."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return float(pred == ref)
    same = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


# rules -> (exact match, F1, "does this gold answer hold anything once normalised?")
_COMPARE = {
    "squad": (exact_match, token_f1, lambda text: bool(normalize_answer(text))),
    "cmrc2018": (cmrc.exact_match, cmrc.f1, lambda text: bool(cmrc.segments(text))),
}


def choose_rules(gold_answers, rules="auto"):
    """`"squad"` or `"cmrc2018"`: `rules` itself, or for `"auto"` the rules the gold answers call for."""
    if rules not in RULES:
        raise UsageError(f"unknown QA scoring rules {rules!r}; use one of {', '.join(RULES)}.")
    if rules != "auto":
        return rules
    answered = [answers for answers in gold_answers.values() if any(a.strip() for a in answers)]
    chinese = sum(1 for answers in answered if any(cmrc.is_cjk_text(a) for a in answers))
    return "cmrc2018" if 2 * chinese > len(answered) else "squad"


def _golds(answers, version_2_with_negative, has_content):
    if version_2_with_negative:
        answers = [a for a in answers if has_content(a)]
        return answers or [""]
    return list(answers)


def per_question_scores(predictions, gold_answers, version_2_with_negative=False, rules="auto"):
    """`{id: (exact, f1)}` of every question in `gold_answers` (`{id: [texts]}`); missing predictions score 0."""
    exact, f1, has_content = _COMPARE[choose_rules(gold_answers, rules)]
    out = {}
    for qid, answers in gold_answers.items():
        golds = _golds(answers, version_2_with_negative, has_content)
        if qid not in predictions or not golds:
            out[qid] = (0.0, 0.0)
            continue
        pred = predictions[qid]
        out[qid] = (max(exact(pred, g) for g in golds), max(f1(pred, g) for g in golds))
    return out


def squad_scores(predictions, gold_answers, version_2_with_negative=False, rules="auto"):
    """Exact match and F1 of `predictions` (`{id: text}`) against `gold_answers` (`{id: [texts]}`).

    Args:
        rules: `"squad"`, `"cmrc2018"` or `"auto"` (see the module docstring).

    Returns:
        dict: `exact_match`, `f1` (fractions), `total`, `missing`; with v2.0 also
        `has_ans_exact_match`, `has_ans_f1`, `has_ans_total`, `no_ans_exact_match`,
        `no_ans_f1`, `no_ans_total`.
    """
    rules = choose_rules(gold_answers, rules)
    scores = per_question_scores(predictions, gold_answers, version_2_with_negative, rules)
    total = len(scores)
    out = _means(scores, list(scores))
    out.update({"total": total, "missing": sum(1 for q in gold_answers if q not in predictions)})
    if version_2_with_negative:
        has_content = _COMPARE[rules][2]
        has = [q for q, a in gold_answers.items() if any(has_content(x) for x in a)]
        no = [q for q in gold_answers if q not in set(has)]
        for prefix, ids in (("has_ans_", has), ("no_ans_", no)):
            if ids:
                out.update({prefix + k: v for k, v in _means(scores, ids).items()})
            out[prefix + "total"] = len(ids)
    return out


def _means(scores, ids):
    n = max(len(ids), 1)
    return {"exact_match": sum(scores[q][0] for q in ids) / n, "f1": sum(scores[q][1] for q in ids) / n}


def find_best_threshold(predictions, null_odds, gold_answers, rules="auto"):
    """The null-score threshold maximising exact match and F1 (`evaluate-v2.0.py`'s `find_best_thresh`).

    Args:
        predictions: `{id: text}`, the best *non-null* span of each question.
        null_odds: `{id: null score - best span score}`; a question is answered `""`
            when its null odds exceed the threshold.
        gold_answers: `{id: [texts]}` (empty for unanswerable questions).
        rules: `"squad"`, `"cmrc2018"` or `"auto"` (see the module docstring).

    Returns:
        dict `best_exact_match`, `best_exact_match_threshold`, `best_f1`, `best_f1_threshold`.
    """
    rules = choose_rules(gold_answers, rules)
    scores = per_question_scores(predictions, gold_answers, version_2_with_negative=True, rules=rules)
    has_answer = {q: any(_COMPARE[rules][2](x) for x in a) for q, a in gold_answers.items()}
    out = {}
    for k, name in enumerate(("exact_match", "f1")):
        current = best = sum(1 for q in gold_answers if not has_answer[q])  # everything answered ""
        threshold = 0.0
        for qid in sorted(null_odds, key=lambda q: null_odds[q]):
            if qid not in scores:
                continue
            if has_answer[qid]:
                current += scores[qid][k]
            else:
                current += -1 if predictions.get(qid) else 0
            if current > best:
                best, threshold = current, null_odds[qid]
        out[f"best_{name}"] = best / max(len(scores), 1)
        out[f"best_{name}_threshold"] = float(threshold)
    return out
