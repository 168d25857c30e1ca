"""SQuAD windows: equal to HF's tokenizer windows token for token (overlap mode), labels by
HF run_qa.py's rule, every gold answer covered (step mode) and recovered from our offsets."""

import numpy as np
import pytest

from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_windows
from tests.helpers import minilm_path, shared_data


def hf_reference(tokenizer, questions, contexts, starts, ends, length, stride):
    """HF windows (fast tokenizer, `stride` = overlap) and run_qa.py's labels, on context pieces."""
    enc = tokenizer(
        questions,
        contexts,
        truncation="only_second",
        max_length=length,
        stride=stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding="max_length",
    )
    labels = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        example = enc["overflow_to_sample_mapping"][i]
        seq = enc.sequence_ids(i)
        ctx = [t for t, s in enumerate(seq) if s == 1]
        s_char, e_char = starts[example], ends[example]
        first, last = ctx[0], ctx[-1]
        if s_char < 0 or not (offsets[first][0] <= s_char and offsets[last][1] >= e_char):
            labels.append((0, 0))
            continue
        t = first
        while t <= last and offsets[t][0] <= s_char:
            t += 1
        u = last
        while u >= first and offsets[u][1] >= e_char:
            u -= 1
        labels.append((t - 1, u + 1))
    return enc, labels


def compare_with_hf(questions, contexts, starts, ends, length=384, stride=128, max_query_length=64):
    transformers = pytest.importorskip("transformers")
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    pre = SpanQAPreprocessor.from_preset(
        minilm_path(),
        sequence_length=length,
        doc_stride=stride,
        stride_mode="overlap",
        max_query_length=max_query_length,
    )
    ours = make_qa_windows(pre, questions, contexts, starts, ends)
    enc, labels = hf_reference(tokenizer, questions, contexts, starts, ends, length, stride)
    np.testing.assert_array_equal(ours.example_ids, enc["overflow_to_sample_mapping"])
    np.testing.assert_array_equal(ours.features["token_ids"], enc["input_ids"])
    np.testing.assert_array_equal(ours.features["segment_ids"], enc["token_type_ids"])
    np.testing.assert_array_equal(ours.features["padding_mask"], enc["attention_mask"])
    offsets = np.asarray(enc["offset_mapping"])
    in_ctx = np.array([[s == 1 for s in enc.sequence_ids(i)] for i in range(len(labels))])
    np.testing.assert_array_equal(ours.info["char_start"] >= 0, in_ctx)
    np.testing.assert_array_equal(ours.info["char_start"][in_ctx], offsets[..., 0][in_ctx])
    np.testing.assert_array_equal(ours.info["char_end"][in_ctx], offsets[..., 1][in_ctx])
    np.testing.assert_array_equal(ours.labels["start_positions"], [a for a, _ in labels])
    np.testing.assert_array_equal(ours.labels["end_positions"], [b for _, b in labels])
    return ours


def test_windows_equal_hf_on_accents_cjk_emoji():
    """Offsets are characters (SQuAD's unit), not tensorflow-text's UTF-8 bytes."""
    contexts = [
        "Zürich’s café serves crème brûlée 🍮 daily; the chef, Ångström, smiles 😀 at 東京 guests. " * 9,
        "日本語のテキスト and the answer is Kyōto 🙂 near 大阪.",
        "plain ascii passage without anything special in it at all.",
    ]
    answers = ["Ångström", "Kyōto", "special"]
    starts = [c.index(a) for c, a in zip(contexts, answers, strict=True)]
    starts[0] = contexts[0].index(answers[0], 500)  # an occurrence deep into the passage
    ends = [s + len(a) for s, a in zip(starts, answers, strict=True)]
    ours = compare_with_hf(
        ["Who smiles?", "Which city?", "What is missing?"],
        contexts,
        starts,
        ends,
        length=64,
        stride=16,
        max_query_length=16,
    )
    assert len(ours) > 3  # the long passage takes several windows
    for k, (s, e) in enumerate(zip(ours.labels["start_positions"], ours.labels["end_positions"], strict=True)):
        if s:
            ex = ours.example_ids[k]
            assert contexts[ex][ours.info["char_start"][k, s] : ours.info["char_end"][k, e]] == answers[ex]


def _dev():
    data = read_squad(shared_data("squad", "dev.json"))
    return data.questions, data.contexts, data.answer_starts, data.answer_ends


def test_windows_equal_hf_on_every_dev_question():
    """All 1,423 dev questions at the SQuAD recipe (384, overlap 128)."""
    transformers = pytest.importorskip("transformers")
    questions, contexts, starts, ends = _dev()
    tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_path())
    long_questions = [q for q in questions if len(tokenizer(q)["input_ids"]) - 2 > 64]
    assert not long_questions  # HF does not cut questions at 64 pieces; none of these needs it
    compare_with_hf(questions, contexts, starts, ends, length=384, stride=128)


@pytest.mark.slow
def test_windows_equal_hf_on_every_dev_question_in_many_windows():
    """Length 128, overlap 32: most passages take several windows."""
    questions, contexts, starts, ends = _dev()
    ours = compare_with_hf(questions, contexts, starts, ends, length=128, stride=32)
    assert len(ours) > 2 * len(questions)


def _step_mode_coverage(path, length, stride):
    data = read_squad(path)
    pre = SpanQAPreprocessor.from_preset(minilm_path(), sequence_length=length, doc_stride=stride)
    golds = [
        (q, c, s, s + len(a))
        for q, c, texts, s0 in zip(data.questions, data.contexts, data.answers, data.answer_starts, strict=True)
        for a, s in [(texts[0], s0)]
    ]
    windows = make_qa_windows(pre, *zip(*golds, strict=True))
    covered = np.zeros(len(golds), bool)
    exact = set()
    starts, ends = windows.labels["start_positions"], windows.labels["end_positions"]
    for k in np.flatnonzero(starts > 0):
        ex = windows.example_ids[k]
        covered[ex] = True
        q, c, s, e = golds[ex]
        a, b = windows.info["char_start"][k, starts[k]], windows.info["char_end"][k, ends[k]]
        assert a <= s and b >= e  # the labelled pieces cover the answer
        if c[a:b] == c[s:e]:
            exact.add(ex)
    return data, covered, len(exact)


@pytest.mark.parametrize("name", ["dev.json", "train.json"])
def test_step_mode_every_answer_in_a_window_and_recovered_from_offsets(name):
    """Default (step) mode, short recipe 128/64: every gold answer lies in a window, and the
    labelled pieces' character offsets give back exactly the gold text."""
    data, covered, exact = _step_mode_coverage(shared_data("squad", name), 128, 64)
    assert covered.all(), np.flatnonzero(~covered)[:5]
    cut = pieces_cut_by(data)
    # Every gold answer of the file (all of them, not only the first): cut from the passage by
    # our offsets, the answer's pieces give the gold text exactly, except golds that begin or end
    # inside a word piece ("pharma" of the one piece "pharmacy"), which no piece span can give;
    # those are few, and HF's offsets (equal to ours, test above) cut the same pieces.
    total = sum(len(a) for a in data.answers)
    assert len(cut) < 0.02 * total, (len(cut), total, cut[:5])
    first_cut = {qid for qid, k, *_ in cut if k == 0}
    assert exact == len(data) - len(first_cut)
    print(f"{name}: {total} gold answers, {total - len(cut)} recovered exactly, {len(cut)} cut a word piece")


def pieces_cut_by(data):
    """Gold answers whose text is not recovered from our character offsets, with the reason."""
    from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

    tok = BertTokenizer.from_preset(minilm_path())
    unique = list(dict.fromkeys(data.contexts))
    _, starts, ends = tok.tokenize_with_offsets(unique)
    spans = {c: (s.numpy(), e.numpy()) for c, s, e in zip(unique, starts, ends, strict=True)}
    bad = []
    for context, texts, golds, qid in zip(data.contexts, data.answers, data.gold_starts, data.ids, strict=True):
        s_off, e_off = spans[context]
        for k, (text, begin) in enumerate(zip(texts, golds, strict=True)):
            end = begin + len(text)
            first = np.flatnonzero(e_off > begin)[0]  # the first piece reaching into the answer
            last = np.flatnonzero(s_off < end)[-1]  # the last piece starting inside it
            got = context[s_off[first] : e_off[last]]
            if got != text:
                assert text.strip() in got  # the pieces cover the answer; only a piece boundary differs
                bad.append((qid, k, text, got))
    return bad
