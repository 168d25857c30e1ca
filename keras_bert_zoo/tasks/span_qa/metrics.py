"""SQuAD exact match and F1, by the official evaluation scripts' rules (v1.1 and v2.0).

Answers are normalised as `evaluate-v1.1.py` / `evaluate-v2.0.py` do: lower-case, drop
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
"""

import collections
import re
import string

__all__ = ["normalize_answer", "exact_match", "token_f1", "per_question_scores", "squad_scores", "find_best_threshold"]

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


def _golds(answers, version_2_with_negative):
    if version_2_with_negative:
        answers = [a for a in answers if normalize_answer(a)]
        return answers or [""]
    return list(answers)


def per_question_scores(predictions, gold_answers, version_2_with_negative=False):
    """`{id: (exact, f1)}` of every question in `gold_answers` (`{id: [texts]}`); missing predictions score 0."""
    out = {}
    for qid, answers in gold_answers.items():
        golds = _golds(answers, version_2_with_negative)
        if qid not in predictions or not golds:
            out[qid] = (0.0, 0.0)
            continue
        pred = predictions[qid]
        out[qid] = (max(exact_match(pred, g) for g in golds), max(token_f1(pred, g) for g in golds))
    return out


def squad_scores(predictions, gold_answers, version_2_with_negative=False):
    """Exact match and F1 of `predictions` (`{id: text}`) against `gold_answers` (`{id: [texts]}`).

    Returns:
        dict: `exact_match`, `f1` (fractions), `total`, `missing`; with v2.0 also
        `has_ans_exact_match`, `has_ans_f1`, `has_ans_total`, `no_ans_exact_match`,
        `no_ans_f1`, `no_ans_total`.
    """
    scores = per_question_scores(predictions, gold_answers, version_2_with_negative)
    total = len(scores)
    out = _means(scores, list(scores))
    out.update({"total": total, "missing": sum(1 for q in gold_answers if q not in predictions)})
    if version_2_with_negative:
        has = [q for q, a in gold_answers.items() if any(normalize_answer(x) for x in a)]
        no = [q for q in gold_answers if q not in set(has)]
        for prefix, ids in (("has_ans_", has), ("no_ans_", no)):
            if ids:
                out.update({prefix + k: v for k, v in _means(scores, ids).items()})
            out[prefix + "total"] = len(ids)
    return out


def _means(scores, ids):
    n = max(len(ids), 1)
    return {"exact_match": sum(scores[q][0] for q in ids) / n, "f1": sum(scores[q][1] for q in ids) / n}


def find_best_threshold(predictions, null_odds, gold_answers):
    """The null-score threshold maximising exact match and F1 (`evaluate-v2.0.py`'s `find_best_thresh`).

    Args:
        predictions: `{id: text}`, the best *non-null* span of each question.
        null_odds: `{id: null score - best span score}`; a question is answered `""`
            when its null odds exceed the threshold.
        gold_answers: `{id: [texts]}` (empty for unanswerable questions).

    Returns:
        dict `best_exact_match`, `best_exact_match_threshold`, `best_f1`, `best_f1_threshold`.
    """
    scores = per_question_scores(predictions, gold_answers, version_2_with_negative=True)
    has_answer = {q: any(normalize_answer(x) for x in a) for q, a in gold_answers.items()}
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
