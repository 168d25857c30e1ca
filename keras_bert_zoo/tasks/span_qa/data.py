"""SQuAD v1.1 / v2.0 JSON files -> `SquadExamples`, checked before any training.

The official layout: `{"version": ..., "data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}`.
`answer_start` counts characters (Python `str` indices) of `context`; every answer is
checked to be at its `answer_start` (a non-negative offset inside the context), so a file
with shifted offsets fails here, naming the question, instead of training on wrong labels.
`answers` may also be in the layout Hugging Face `datasets` exports SQuAD with,
`{"text": [...], "answer_start": [...]}` (parallel lists): it is read the same way.

Examples:
>>> import json, os, tempfile
>>> from keras_bert_zoo.tasks.span_qa.data import read_squad
>>> data = {"version": "1.1", "data": [{"title": "t", "paragraphs": [{"context": "Paris is in France.",
...         "qas": [{"id": "q1", "question": "Where is Paris?",
...                  "answers": [{"text": "France", "answer_start": 12}]}]}]}]}
>>> path = os.path.join(tempfile.mkdtemp(), "train-v1.1.json")
>>> with open(path, "w") as f:
...     json.dump(data, f)
>>> examples = read_squad(path)
>>> examples.ids, examples.answer_starts, examples.answers
(['q1'], [12], [['France']])
"""

import dataclasses

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.files import read_json

__all__ = ["SquadExamples", "read_squad"]

# What a v1.1-only reader tells the user about a v2.0 file, per caller: `finetune qa` has the
# flag, `evaluate` and `predict` read the layout saved with the model and do not.
_V2_FLAG_HINT = "pass --version-2-with-negative to train or score v2.0 files"


@dataclasses.dataclass
class SquadExamples:
    """Questions of a SQuAD file, one entry per question (lists of equal length).

    Attributes:
        ids: question ids (the keys of `predictions.json`).
        questions, contexts: raw strings.
        answers: every gold answer text per question (dev files have several; empty
            for unanswerable v2.0 questions).
        answer_starts: character offset of the *first* answer (what training uses,
            as google-research/bert and HF do); -1 for unanswerable questions.
        version_2_with_negative: the file may hold unanswerable questions.
        gold_starts: `answer_start` of every gold answer, as `answers`.
    """

    ids: list
    questions: list
    contexts: list
    answers: list
    answer_starts: list
    version_2_with_negative: bool = False
    gold_starts: list = dataclasses.field(default_factory=list)

    def __len__(self):
        return len(self.ids)

    @property
    def answer_ends(self):
        """Character end (exclusive) of the first answer; -1 for unanswerable questions."""
        return [s + len(a[0]) if s >= 0 else -1 for s, a in zip(self.answer_starts, self.answers, strict=True)]

    @property
    def label_names(self):  # the fine-tuning job passes `reference.label_names` around; QA has none
        return None

    def select(self, count):
        return SquadExamples(
            self.ids[:count],
            self.questions[:count],
            self.contexts[:count],
            self.answers[:count],
            self.answer_starts[:count],
            self.version_2_with_negative,
            self.gold_starts[:count],
        )


def _fail(path, where, message):
    raise InvalidInputError(f"{path}: {where}: {message}")


def _answer_list(answers, path, here):
    """`answers` as a list of `{"text", "answer_start"}`: the official list of objects, or the
    Hugging Face `datasets` layout of two parallel lists (`{"text": [...], "answer_start": [...]}`)."""
    if isinstance(answers, dict) and set(answers) >= {"text", "answer_start"}:
        texts, starts = answers["text"], answers["answer_start"]
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            _fail(
                path,
                here,
                '"answers" in the Hugging Face layout needs lists "text" and "answer_start" of equal length.',
            )
        return [{"text": t, "answer_start": s} for t, s in zip(texts, starts, strict=True)]
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        _fail(
            path,
            here,
            '"answers" must be a list of {"text", "answer_start"} objects (SQuAD) or '
            '{"text": [...], "answer_start": [...]} (Hugging Face datasets).',
        )
    return answers


def read_squad(path, version_2_with_negative=False, max_examples=None, require_answers=True, v2_hint=_V2_FLAG_HINT):
    """Reads and validates a SQuAD v1.1 or v2.0 file.

    Args:
        path: the JSON file.
        version_2_with_negative: accept unanswerable questions (`is_impossible`, SQuAD
            v2.0). Without it, a file holding one is refused with the flag to add.
        max_examples: keep the first N questions.
        require_answers: every answerable question needs at least one answer
            (training and scoring); False reads question files without answers.
        v2_hint: the fix named when a v1.1 read meets a v2.0 question (a flag the
            calling verb has).

    Returns:
        `SquadExamples`.
    """
    raw = read_json(path, "SQuAD file", "give a SQuAD v1.1/v2.0 JSON file", expect=dict)
    if not isinstance(raw.get("data"), list):
        raise InvalidInputError(f'{path}: no top-level "data" list; give a SQuAD v1.1/v2.0 JSON file.')
    out = SquadExamples([], [], [], [], [], bool(version_2_with_negative))
    seen = set()
    for a, article in enumerate(raw["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            where = f"data[{a}].paragraphs[{p}]"
            context = paragraph.get("context")
            qas = paragraph.get("qas", [])
            if not isinstance(context, str) or not context.strip():
                if qas:
                    _fail(
                        path,
                        where,
                        f'question {qas[0].get("id")!r} has an empty or missing "context" '
                        "(a passage to find the answer in); fix or remove the paragraph.",
                    )
                continue
            for q in qas:
                qid = str(q.get("id", ""))
                here = f"{where}, question {qid!r}"
                if not qid or qid in seen:
                    _fail(path, here, 'missing or repeated "id"; every question needs a unique id.')
                seen.add(qid)
                question = q.get("question")
                if not isinstance(question, str) or not question.strip():
                    _fail(path, here, 'empty or missing "question".')
                impossible = bool(q.get("is_impossible", False))
                if impossible and not version_2_with_negative:
                    _fail(path, here, f'is unanswerable ("is_impossible": true, SQuAD v2.0); {v2_hint}.')
                golds = [] if impossible else _answer_list(q.get("answers", []), path, here)
                texts, first, gold_starts = [], -1, []
                for k, answer in enumerate(golds):
                    text, start = answer.get("text"), answer.get("answer_start")
                    if not isinstance(text, str) or not text or not isinstance(start, int) or isinstance(start, bool):
                        _fail(path, here, f'answer {k} needs a non-empty "text" and an int "answer_start".')
                    if not 0 <= start <= len(context) - len(text):  # a negative start would index from the end
                        _fail(
                            path,
                            here,
                            f"answer {k} has answer_start {start}, outside the context (0 to "
                            f"{len(context) - len(text)} for this answer); answer_start counts "
                            "characters of the context from 0.",
                        )
                    if context[start : start + len(text)] != text:
                        found = context.find(text)
                        hint = f" (the text is at {found})" if found >= 0 else " (the text is not in the context)"
                        _fail(
                            path,
                            here,
                            f"answer {k} {text!r} is not at answer_start {start}{hint}; "
                            "answer_start counts characters of the context.",
                        )
                    texts.append(text)
                    gold_starts.append(start)
                    if k == 0:
                        first = start
                if not texts and not impossible and require_answers:
                    _fail(
                        path,
                        here,
                        f'has no answers; give at least one, or mark it "is_impossible": true (SQuAD v2.0: {v2_hint}).',
                    )
                out.ids.append(qid)
                out.questions.append(question)
                out.contexts.append(context)
                out.answers.append(texts)
                out.answer_starts.append(first)
                out.gold_starts.append(gold_starts)
                if max_examples is not None and len(out) >= max_examples:
                    return out
    if not len(out):
        raise InvalidInputError(f"{path}: no questions found; give a SQuAD v1.1/v2.0 file.")
    return out
