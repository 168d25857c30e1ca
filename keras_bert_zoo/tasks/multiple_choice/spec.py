"""Multiple choice (SWAG): `choice`.

Model `BertMultipleChoice`; data SWAG CSV and JSON Lines `{"context", "choices",
"label"}` (`tasks.multiple_choice.data`); `(context, choice)` pairs packed as
`[CLS] context [SEP] choice [SEP]` (`tasks.multiple_choice.preprocessor`); metric accuracy;
serving `context` `[batch]` + `choices` `[batch, num_choices]` -> `probabilities`,
`best_index`, `best_choice`.
"""

import json

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.multiple_choice.serving import ChoiceServing

__all__ = ["ChoiceTask", "parse_question", "TASK"]

_CHOICE_SEPARATORS = (" ||| ", "\t")


class ChoiceTask(TaskSpec):
    name = "choice"
    model_path = "keras_bert_zoo.tasks.multiple_choice.model.BertMultipleChoice"
    serving = ChoiceServing  # its SavedModel's inputs and outputs (serving.py)
    description = "multiple choice: a context and N choices, pick one (SWAG CSV, JSONL context/choices/label)"
    # "auto": training batches grouped by length; "packed": the (context, choice) pairs of a
    # batch end to end in shared rows (`BertMultipleChoice` reads `cls_index`).
    batchings = ("auto", "by_length", "bucketed", "fixed", "packed")
    # HF only (google-research/bert has no multiple-choice script); an HF config names the class.
    checkpoint_heads = {"hf": ("classifier.weight", "classifier.bias")}
    head_priority = 2

    # --- fine-tuning ------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        from keras_bert_zoo.tasks.multiple_choice.data import read_choices

        examples = read_choices(path, max_examples=max_examples)
        if reference is not None and examples.num_choices != reference.num_choices:
            raise InvalidInputError(
                f"{path} has {examples.num_choices} choices per question but the training file "
                f"{reference.num_choices}; use files with the same number of choices."
            )
        return examples

    def make_preprocessor(self, vocab_dir, sequence_length, layout):
        from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor

        return MultipleChoicePreprocessor.from_preset(vocab_dir, sequence_length=sequence_length)

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        saved_layout = {"sequence_length": sequence_length, "num_choices": train_examples.num_choices}
        return self.model_class().from_preset(model, data_layout=saved_layout, preprocessor=preprocessor)

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, batching="auto"):
        from keras_bert_zoo.tasks.multiple_choice.data import make_choice_dataset

        return make_choice_dataset(
            examples, preprocessor, batch_size, shuffle=training, seed=seed, batching=batching, with_labels=training
        )

    def score(self, model, examples, dataset):
        import numpy as np

        logits = model.predict(dataset, verbose=0)
        return {"accuracy": float(np.mean(np.argmax(logits, axis=-1) == examples.labels))}

    # --- evaluate / predict ---------------------------------------------------------------
    def evaluate(self, model_dir, data_paths, batch_size=64):
        import numpy as np

        from keras_bert_zoo.tasks.multiple_choice.data import ChoiceExamples, read_choices

        model = self.load_model(model_dir)
        parts = [read_choices(p) for p in data_paths]
        if len({p.num_choices for p in parts}) > 1:
            raise InvalidInputError(
                f"{', '.join(data_paths)} have different numbers of choices per question; evaluate them one at a time."
            )
        examples = ChoiceExamples(
            contexts=sum((p.contexts for p in parts), []),
            choices=sum((p.choices for p in parts), []),
            labels=np.concatenate([p.labels for p in parts]),
        )
        metrics = self.score(model, examples, self.dataset(examples, model.preprocessor, batch_size, training=False))
        metrics.update(
            {
                "examples": len(examples),
                "num_choices": examples.num_choices,
                "random_baseline": 1.0 / examples.num_choices,
            }
        )
        return metrics

    def predict(self, model, texts):
        """Each text is `context ||| choice 1 ||| choice 2 ...` (or tab-separated), or a JSON
        object `{"context": ..., "choices": [...]}`."""
        questions = [parse_question(t) for t in texts]
        rows = []
        for count in sorted({len(c) for _, c in questions}):  # one batch shape per number of choices
            ids = [i for i, (_, c) in enumerate(questions) if len(c) == count]
            probs, best = model.predict_choices([questions[i][0] for i in ids], [questions[i][1] for i in ids])
            for i, p, b in zip(ids, probs, best, strict=True):
                context, choices = questions[i]
                rows.append(
                    (
                        i,
                        {
                            "context": context,
                            "choices": choices,
                            "probabilities": [round(float(v), 4) for v in p],
                            "best_index": int(b),
                            "best_choice": choices[int(b)],
                        },
                    )
                )
        return [row for _, row in sorted(rows, key=lambda r: r[0])]

    def format_prediction(self, row):
        shown = "  ".join(f"{i}={p:.3f}" for i, p in enumerate(row["probabilities"]))
        return f"{row['best_index']}\t{shown}\t{row['best_choice']}\t<- {row['context']}"


def parse_question(text):
    """`(context, [choices])` from `context ||| choice ||| choice ...`, tab-separated
    fields, or a JSON object with `context` and `choices`."""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError as e:
            raise InvalidInputError(f"{text[:60]!r} looks like JSON but does not parse ({e}).") from None
        if not isinstance(obj.get("choices"), list) or "context" not in obj:
            raise InvalidInputError(f'{text[:60]!r}: a JSON question needs "context" and a list "choices".')
        context, choices = str(obj["context"]), [str(c) for c in obj["choices"]]
    else:
        for sep in _CHOICE_SEPARATORS:
            if sep in text:
                context, *choices = [part.strip() for part in text.split(sep)]
                break
        else:
            context, choices = text, []
    if len(choices) < 2:
        raise InvalidInputError(
            f"{text[:60]!r}: give a context and at least 2 choices, as 'context ||| choice 1 ||| "
            'choice 2\' or {"context": ..., "choices": [...]}.'
        )
    return context, choices


TASK = ChoiceTask()
