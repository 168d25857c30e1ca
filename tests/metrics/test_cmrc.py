"""CMRC 2018 scoring of Chinese span QA (`tasks.span_qa.cmrc`, `metrics.squad_scores(rules=...)`).

Every expected value is worked out by hand in the comments from the official script's rules
(`cmrc2018_evaluate.py`): lower-case and strip; for F1 drop the listed punctuation, make each CJK ideograph a
segment and each other run words, then F1 = 2pr/(p+r) with p = LCS/len(pred), r = LCS/len(gold), LCS the longest
common *contiguous* run of segments; EM = equality after dropping the listed punctuation; best over golds.
The values are chosen where the other plausible rules give other numbers: SQuAD's space tokens (F1 = EM on
Chinese), a bag of characters instead of a contiguous run, every character a segment (digits too), ASCII `.`
dropped although the official list does not hold it.
"""

import json

import pytest

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.tasks.span_qa import cmrc
from keras_bert_zoo.tasks.span_qa.data import read_squad
from keras_bert_zoo.tasks.span_qa.metrics import choose_rules, find_best_threshold, squad_scores
from keras_bert_zoo.tasks.span_qa.spec import TASK
from tests.helpers import shared_data

# (prediction, gold, exact match, F1), each derived in its comment.
CASES = [
    # 北京天安门 / 天安门广场: 5 and 5 segments, common run 天安门 = 3: p = r = 3/5, F1 = 0.6 (SQuAD: 0).
    ("北京天安门", "天安门广场", 0.0, 0.6),
    # 中华人民共和国 / 中国: 中 and 国 are both shared but never next to each other: LCS 1, p = 1/7, r = 1/2,
    # F1 = 2 (1/7)(1/2) / (1/7 + 1/2) = (1/7) / (9/14) = 2/9 (a bag of characters would give 4/9).
    ("中华人民共和国", "中国", 0.0, 2 / 9),
    # 《红楼梦》: 《 and 》 are on the list, dropped by both EM and F1.
    ("《红楼梦》", "红楼梦", 1.0, 1.0),
    # （1998年）: full-width brackets are on the list; 1998 is one word, 年 one ideograph.
    ("（1998年）", "1998年", 1.0, 1.0),
    # ASCII "." is not on the list: EM compares "红楼梦." with "红楼梦" (0); F1 segments 红 楼 梦 . (4) against
    # 红 楼 梦 (3): LCS 3, p = 3/4, r = 1, F1 = 1.5 / 1.75 = 6/7.
    ("红楼梦.", "红楼梦", 0.0, 6 / 7),
    # 2018年 / 2018年6月: [2018, 年] vs [2018, 年, 6, 月]: LCS 2, p = 1, r = 1/2, F1 = 2/3
    # (one segment per character would give [2,0,1,8,年] vs 7: p = 1, r = 5/7, F1 = 5/6).
    ("2018年", "2018年6月", 0.0, 2 / 3),
    # 3.5 stays one word: [3.5, 亿] vs [3.5, 亿, 元]: LCS 2, p = 1, r = 2/3, F1 = 0.8.
    ("3.5亿", "3.5亿元", 0.0, 0.8),
    # Lower-cased; iPhone 6 / iphone 6s: [iphone, 6] vs [iphone, 6s]: LCS 1, p = r = 1/2, F1 = 0.5.
    ("iPhone 6", "iphone 6s", 0.0, 0.5),
    # "-" is on the list and removed before the words are cut: Wi-Fi信号 -> [wifi, 信, 号] vs [wifi]:
    # LCS 1, p = 1/3, r = 1, F1 = 0.5; EM "wifi信号" != "wifi".
    ("Wi-Fi信号", "WiFi", 0.0, 0.5),
    # Spaces separate nothing for F1 ([北, 京, 天, 安, 门] both) but EM keeps inner spaces; ends are stripped.
    ("北京 天安门", "北京天安门", 0.0, 1.0),
    (" 北京天安门。", "北京天安门", 1.0, 1.0),
    # Nothing shared: 0.
    ("上海", "北京", 0.0, 0.0),
]


@pytest.mark.parametrize(("prediction", "gold", "exact", "f1"), CASES)
def test_hand_checked_cases(prediction, gold, exact, f1):
    assert cmrc.exact_match(prediction, gold) == exact
    assert cmrc.f1(prediction, gold) == pytest.approx(f1, abs=1e-12)
    scores = squad_scores({"q": prediction}, {"q": [gold]}, rules="cmrc2018")
    assert (scores["exact_match"], scores["f1"]) == pytest.approx((exact, f1), abs=1e-12)


def test_segments():
    assert cmrc.segments("2018年CMRC比赛") == ["2018", "年", "cmrc", "比", "赛"]
    # "," joins digits (1,000), "." ends a word and is a segment; ·, ： and ， are on the list and dropped.
    assert cmrc.segments("约1,000人。Hello world.") == ["约", "1,000", "人", "hello", "world", "."]
    assert cmrc.segments("李·白：诗人，$5") == ["李", "白", "诗", "人", "$", "5"]


def test_best_over_golds_and_averaging():
    golds = {"a": ["北京天安门广场", "天安门"], "b": ["1998年"], "c": ["中国"]}
    predictions = {"a": "天安门", "b": "1998", "c": "中华人民共和国"}
    scores = squad_scores(predictions, golds, rules="cmrc2018")
    # a: EM 1, F1 1 (second gold); b: [1998] vs [1998, 年]: p = 1, r = 1/2, F1 2/3; c: 2/9 (above).
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx((1 + 2 / 3 + 2 / 9) / 3)
    # Under SQuAD's rules the Chinese answers are single "words": F1 is exact match.
    squad = squad_scores(predictions, golds, rules="squad")
    assert squad["f1"] == squad["exact_match"] == pytest.approx(1 / 3)


def test_auto_picks_cmrc_for_chinese_golds_only():
    chinese = {"a": ["天安门"], "b": ["1998年"], "c": ["iPhone"]}
    assert choose_rules(chinese) == "cmrc2018"
    assert squad_scores({"a": "北京天安门"}, {"a": ["天安门广场"]})["f1"] == pytest.approx(0.6)  # auto by default
    english = {"a": ["Denver Broncos"], "b": ["1889"]}
    assert choose_rules(english) == "squad"
    # A minority of Chinese golds (English SQuAD has `元朝`) keeps SQuAD's rules.
    assert choose_rules({**english, "c": ["Yuán Cháo", "元朝"]}) == "squad"
    assert choose_rules(chinese, rules="squad") == "squad"
    with pytest.raises(UsageError, match="unknown QA scoring rules 'cmrc'"):
        squad_scores({}, {}, rules="cmrc")


def test_english_squad_scores_unchanged():
    path = shared_data("squad", "dev.json")
    data = read_squad(path)
    golds = dict(zip(data.ids, data.answers, strict=True))
    assert any(cmrc.is_cjk_text(a) for answers in golds.values() for a in answers)  # yet auto stays SQuAD
    # Predictions that overlap partly: each question's first gold answer without its first word.
    predictions = {q: " ".join(a[0].split()[1:]) or a[0] for q, a in golds.items()}
    assert squad_scores(predictions, golds) == squad_scores(predictions, golds, rules="squad")
    assert squad_scores(predictions, golds) != squad_scores(predictions, golds, rules="cmrc2018")


def test_v2_no_answer_questions_under_cmrc_rules():
    golds = {"a": ["天安门"], "b": [], "c": []}
    predictions = {"a": "北京天安门", "b": "", "c": "上海"}
    scores = squad_scores(predictions, golds, version_2_with_negative=True, rules="cmrc2018")
    # a: [北,京,天,安,门] vs [天,安,门]: p = 3/5, r = 1, F1 = 1.2/1.6 = 0.75; b: "" vs "" = 1; c: 0.
    assert scores["has_ans_f1"] == pytest.approx(0.75)
    assert scores["no_ans_exact_match"] == scores["no_ans_f1"] == pytest.approx(0.5)
    best = find_best_threshold(predictions, {"a": -1.0, "b": 2.0, "c": 1.0}, golds, rules="cmrc2018")
    # Answer "" when the odds exceed the threshold. At -1.0: a answered (0.75), b and c "" (1 each) = 2.75/3;
    # at 1.0 c answers 上海 (0): 1.75/3; everything "" : 2/3. Best: 2.75/3 at -1.0.
    assert best["best_f1"] == pytest.approx(2.75 / 3)
    assert best["best_f1_threshold"] == -1.0


class _AnsweringModel:
    """Stands in for a fine-tuned model: answers each question from a table."""

    def __init__(self, answers):
        self.answers = answers

    def predict_answers(self, questions, contexts, batch_size=64):
        return [{"answer": self.answers[q]} for q in questions]


def test_finetune_and_evaluate_score_chinese_with_cmrc_rules(tmp_path):
    # The scoring step `bert-zoo finetune qa` (dev) and `bert-zoo evaluate` share: QATask.answer_and_score.
    context = "张三住在北京天安门。李四住在上海。"
    qas = [
        {"id": "q1", "question": "张三住在哪里？", "answers": [{"text": "北京天安门", "answer_start": 4}]},
        {"id": "q2", "question": "李四住在哪里？", "answers": [{"text": "上海", "answer_start": 14}]},
    ]
    path = tmp_path / "cmrc.json"
    data = {"version": "v1.0", "data": [{"title": "", "paragraphs": [{"context": context, "qas": qas}]}]}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    examples = read_squad(str(path))
    metrics, _ = TASK.answer_and_score(
        _AnsweringModel({"张三住在哪里？": "天安门", "李四住在哪里？": "上海"}), examples
    )
    # q1: [天,安,门] vs [北,京,天,安,门]: p = 1, r = 3/5, F1 = 0.75; q2 exact.
    assert metrics["exact_match"] == pytest.approx(0.5)
    assert metrics["f1"] == pytest.approx((0.75 + 1) / 2)
