"""SQuAD EM/F1 equal the official evaluation scripts, written out here as the reference
(evaluate-v1.1.py and evaluate-v2.0.py, abridged to their scoring functions)."""

import collections
import random
import re
import string

import pytest

from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.metrics import find_best_threshold, squad_scores
from tests.helpers import shared_data


# --- the official code (v1.1), verbatim but for print statements ----------------------------
def normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def f1_score(prediction, ground_truth):
    prediction_tokens = normalize_answer(prediction).split()
    ground_truth_tokens = normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def exact_match_score(prediction, ground_truth):
    return normalize_answer(prediction) == normalize_answer(ground_truth)


def metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def evaluate_v11(dataset, predictions):
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue  # "Unanswered question ... will receive score 0."
                ground_truths = list(map(lambda x: x["text"], qa["answers"]))
                prediction = predictions[qa["id"]]
                exact_match += metric_max_over_ground_truths(exact_match_score, prediction, ground_truths)
                f1 += metric_max_over_ground_truths(f1_score, prediction, ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# --- the official code (v2.0) -------------------------------------------------------------
def get_tokens(s):
    if not s:
        return []
    return normalize_answer(s).split()


def compute_exact(a_gold, a_pred):
    return int(normalize_answer(a_gold) == normalize_answer(a_pred))


def compute_f1(a_gold, a_pred):
    gold_toks = get_tokens(a_gold)
    pred_toks = get_tokens(a_pred)
    common = collections.Counter(gold_toks) & collections.Counter(pred_toks)
    num_same = sum(common.values())
    if len(gold_toks) == 0 or len(pred_toks) == 0:
        return int(gold_toks == pred_toks)
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred_toks)
    recall = 1.0 * num_same / len(gold_toks)
    return (2 * precision * recall) / (precision + recall)


def get_raw_scores(dataset, preds):
    exact_scores, f1_scores = {}, {}
    for article in dataset:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                qid = qa["id"]
                gold_answers = [a["text"] for a in qa["answers"] if normalize_answer(a["text"])]
                if not gold_answers:
                    gold_answers = [""]
                if qid not in preds:
                    continue
                a_pred = preds[qid]
                exact_scores[qid] = max(compute_exact(a, a_pred) for a in gold_answers)
                f1_scores[qid] = max(compute_f1(a, a_pred) for a in gold_answers)
    return exact_scores, f1_scores


def find_best_thresh(preds, scores, na_probs, qid_to_has_ans):
    num_no_ans = len([k for k in qid_to_has_ans if not qid_to_has_ans[k]])
    cur_score = num_no_ans
    best_score = cur_score
    best_thresh = 0.0
    qid_list = sorted(na_probs, key=lambda k: na_probs[k])
    for qid in qid_list:
        if qid not in scores:
            continue
        if qid_to_has_ans[qid]:
            diff = scores[qid]
        else:
            diff = -1 if preds[qid] else 0
        cur_score += diff
        if cur_score > best_score:
            best_score = cur_score
            best_thresh = na_probs[qid]
    return 100.0 * best_score / len(scores), best_thresh


# --- predictions of a real (weak) system: the SQuAD paper's sliding-window baseline ----------
def sentence_baseline(question, context):
    """The passage sentence sharing most words with the question, minus the question's words."""
    q_words = set(normalize_answer(question).split())
    sentences = re.split(r"(?<=[.!?])\s+", context)
    best = max(sentences, key=lambda s: len(q_words & set(normalize_answer(s).split())))
    kept = [w for w in best.split() if normalize_answer(w) not in q_words]
    return " ".join(kept[:4])


def perturb(text, rng):
    """Forms the normalisation must see through (case, punctuation, articles, spaces)."""
    choice = rng.randrange(6)
    return [text.upper(), f"The {text}.", f"  {text} ,", f"an {text}!", text[: len(text) // 2], text][choice]


@pytest.fixture(scope="module")
def dev():
    import json

    path = shared_data("squad", "dev.json")
    with open(path, encoding="utf-8") as f:
        return json.load(f)["data"], read_squad(path)


def test_v11_scores_equal_the_official_script(dev):
    raw, data = dev
    rng = random.Random(0)
    predictions = {}
    for qid, q, c, golds in zip(data.ids, data.questions, data.contexts, data.answers, strict=True):
        kind = rng.random()
        if kind < 0.05:
            continue  # missing: scores 0
        predictions[qid] = perturb(rng.choice(golds), rng) if kind < 0.5 else sentence_baseline(q, c)
    ours = squad_scores(predictions, dict(zip(data.ids, data.answers, strict=True)))
    ref = evaluate_v11(raw, predictions)
    assert ours["exact_match"] == pytest.approx(ref["exact_match"] / 100, abs=1e-12)
    assert ours["f1"] == pytest.approx(ref["f1"] / 100, abs=1e-12)
    assert ours["total"] == len(data) and ours["missing"] == len(data) - len(predictions)
    assert 0.2 < ours["exact_match"] < 0.6  # a mix of hits and misses, not a degenerate case


def test_v20_scores_and_best_threshold_equal_the_official_script(dev):
    """Half the dev questions made unanswerable (answers removed), as v2.0 files have them."""
    raw, data = dev
    import copy

    rng = random.Random(1)
    raw = copy.deepcopy(raw)
    golds, preds, null_odds = {}, {}, {}
    for article in raw:
        for p in article["paragraphs"]:
            for qa in p["qas"]:
                if rng.random() < 0.5:
                    qa["answers"], qa["is_impossible"] = [], True
                golds[qa["id"]] = [a["text"] for a in qa["answers"]]
                span = (
                    perturb(qa["answers"][0]["text"], rng)
                    if qa["answers"] and rng.random() < 0.6
                    else sentence_baseline(qa["question"], p["context"])
                )
                null_odds[qa["id"]] = rng.gauss(0, 1) + (1.0 if not qa["answers"] else 0.0)
                preds[qa["id"]] = span
    answered = {q: ("" if null_odds[q] > 0.0 else preds[q]) for q in preds}
    ours = squad_scores(answered, golds, version_2_with_negative=True)
    exact, f1 = get_raw_scores(raw, answered)
    has = {q: bool(g) for q, g in golds.items()}
    assert ours["exact_match"] == pytest.approx(sum(exact.values()) / len(exact), abs=1e-12)
    assert ours["f1"] == pytest.approx(sum(f1.values()) / len(f1), abs=1e-12)
    for prefix, wanted in (("has_ans_", True), ("no_ans_", False)):
        ids = [q for q in has if has[q] == wanted]
        assert ours[prefix + "total"] == len(ids)
        assert ours[prefix + "exact_match"] == pytest.approx(sum(exact[q] for q in ids) / len(ids), abs=1e-12)
        assert ours[prefix + "f1"] == pytest.approx(sum(f1[q] for q in ids) / len(ids), abs=1e-12)
    assert ours["no_ans_f1"] == ours["no_ans_exact_match"]  # empty vs empty is 1, anything else 0
    # find_best_thresh works on the un-thresholded predictions and their raw scores.
    raw_exact, raw_f1 = get_raw_scores(raw, preds)
    best = find_best_threshold(preds, null_odds, golds)
    for name, scores in (("exact_match", raw_exact), ("f1", raw_f1)):
        value, threshold = find_best_thresh(preds, scores, null_odds, has)
        assert best[f"best_{name}"] == pytest.approx(value / 100, abs=1e-12)
        assert best[f"best_{name}_threshold"] == threshold


def test_normalisation_cases():
    golds = {"a": ["The Eiffel Tower"], "b": ["1889"], "c": ["Denver Broncos"]}
    ours = squad_scores({"a": "eiffel tower!", "b": "in 1889", "c": "Carolina"}, golds)
    assert ours["exact_match"] == pytest.approx(1 / 3)
    assert ours["f1"] == pytest.approx((1 + 2 * 0.5 * 1 / 1.5 + 0) / 3)
