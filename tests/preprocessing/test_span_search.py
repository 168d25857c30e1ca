"""The answer search equals google-research/bert run_squad.py's `write_predictions`, written
out here in plain Python as the reference, on real dev passages cut into many windows."""

import math

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_windows
from keras_bert_zoo.tasks.span_qa.span_search import SpanSearch
from tests.helpers import minilm_path, shared_data


def get_best_indexes(logits, n_best_size):
    index_and_score = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [i for i, _ in index_and_score[:n_best_size]]


def write_predictions_reference(
    windows, start_logits, end_logits, contexts, n_best_size=20, max_answer_length=30, version_2=False, threshold=0.0
):
    """run_squad.py's search; `token_to_orig_map` / `token_is_max_context` read from the windows,
    answer text cut from the passage by the pieces' character offsets."""
    out = []
    for example in range(len(contexts)):
        prelim, null = [], math.inf
        for w in np.flatnonzero(windows.example_ids == example):
            n_tokens = int(windows.features["padding_mask"][w].sum())
            starts, ends = start_logits[w][:n_tokens], end_logits[w][:n_tokens]
            char_start, char_end = windows.info["char_start"][w], windows.info["char_end"][w]
            null = min(null, starts[0] + ends[0])
            for s in get_best_indexes(starts, n_best_size):
                for e in get_best_indexes(ends, n_best_size):
                    if char_start[s] < 0 or char_start[e] < 0:  # not in token_to_orig_map
                        continue
                    if not windows.info["max_context"][w][s]:
                        continue
                    if e < s or e - s + 1 > max_answer_length:
                        continue
                    prelim.append((float(starts[s]) + float(ends[e]), int(char_start[s]), int(char_end[e])))
        prelim.sort(key=lambda x: x[0], reverse=True)
        seen, nbest = set(), []
        for score, a, b in prelim:
            text = contexts[example][a:b]
            if text in seen:
                continue
            seen.add(text)
            nbest.append((text, a, b, score))
            if len(nbest) >= n_best_size:
                break
        best = nbest[0] if nbest else ("", -1, -1, 0.0)
        answer = best[0]
        diff = null - best[3]
        if version_2 and diff > threshold:
            answer = ""
        out.append({"answer": answer, "best": best, "nbest": nbest, "diff": diff})
    return out


@pytest.fixture(scope="module")
def dev_windows():
    data = read_squad(shared_data("squad", "dev.json"), max_examples=120)
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=96, doc_stride=24)
    windows = make_qa_windows(pre, data.questions, data.contexts)
    assert len(windows) > 4 * len(data)  # many windows per passage: max-context matters
    return data, windows


@pytest.mark.parametrize("version_2", [False, True])
def test_search_equals_run_squad(dev_windows, version_2):
    data, windows = dev_windows
    rng = np.random.default_rng(0)
    shape = windows.features["token_ids"].shape
    start_logits = rng.normal(size=shape).astype("float32") * 3
    end_logits = rng.normal(size=shape).astype("float32") * 3
    real = windows.features["padding_mask"] > 0
    start_logits[~real] = end_logits[~real] = -1e4  # padding never competes for a top-20 slot
    if version_2:  # a strong [CLS] in every window of some questions: those answer ""
        strong = np.isin(windows.example_ids, rng.choice(len(data), len(data) // 3, replace=False))
        start_logits[strong, 0] += 6
        end_logits[strong, 0] += 6
    ref = write_predictions_reference(windows, start_logits, end_logits, data.contexts, version_2=version_2)
    search = SpanSearch(version_2_with_negative=version_2)
    info = {**windows.info, "padding_mask": windows.features["padding_mask"], "example_ids": windows.example_ids}
    got = search(start_logits, end_logits, info, tf.constant(data.contexts))
    answers = [a.decode() for a in got["answer"].numpy()]
    assert answers == [r["answer"] for r in ref]
    if version_2:
        assert 0 < sum(a == "" for a in answers) < len(answers)  # both outcomes occur
        np.testing.assert_allclose(got["null_score_diff"].numpy(), [r["diff"] for r in ref], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(got["score"].numpy(), [r["best"][3] for r in ref], rtol=1e-5, atol=1e-4)
    spans = [r["best"][1:3] for r in ref]
    assert [
        (a[0], b[0]) for a, b in zip(got["n_best_start"].to_list(), got["n_best_end"].to_list(), strict=True)
    ] == spans
    texts, scores, probs = (got[k].to_list() for k in ("n_best_text", "n_best_score", "n_best_probability"))
    for i, r in enumerate(ref):
        # Ours merges equal character spans, run_squad.py equal texts: compare after merging texts.
        seen, merged = set(), []
        for t, s in zip(texts[i], scores[i], strict=True):
            if t.decode() not in seen:
                seen.add(t.decode())
                merged.append((t.decode(), s))
        k = min(len(merged), len(r["nbest"]))
        assert [m[0] for m in merged[:k]] == [n[0] for n in r["nbest"][:k]]
        np.testing.assert_allclose([m[1] for m in merged[:k]], [n[3] for n in r["nbest"][:k]], rtol=1e-5, atol=1e-4)
        assert len(texts[i]) == 20 and abs(sum(probs[i]) - 1) < 1e-5
        if len(merged) == len(texts[i]):  # no equal texts: the n-best probabilities are run_squad.py's softmax
            e = np.exp(np.array([n[3] for n in r["nbest"]]) - r["nbest"][0][3])
            np.testing.assert_allclose(probs[i], e / e.sum(), atol=1e-5)
    # Every answer is the passage's own characters at the reported span.
    for c, a, s, e in zip(data.contexts, answers, got["start"].numpy(), got["end"].numpy(), strict=True):
        assert a == (c[s:e] if s >= 0 else "")


def test_no_passage_no_span():
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=32, doc_stride=8, max_query_length=8)
    windows = make_qa_windows(pre, ["who?", "who?"], ["", "Anna."])
    info = {**windows.info, "padding_mask": windows.features["padding_mask"], "example_ids": windows.example_ids}
    logits = np.zeros(windows.features["token_ids"].shape, "float32")
    got = SpanSearch()(logits, logits, info, tf.constant(["", "Anna."]))
    assert [a.decode() for a in got["answer"].numpy()] == ["", "Anna"]
    assert got["start"].numpy().tolist() == [-1, 0] and got["end"].numpy().tolist() == [-1, 4]
