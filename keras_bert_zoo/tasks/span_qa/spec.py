"""Extractive question answering (SQuAD v1.1 / v2.0): `qa`.

Model `BertSpanQA`; data SQuAD JSON (`tasks.span_qa.data`); windows over long
passages with character offsets (`tasks.span_qa.preprocessor`); answer search as
google-research/bert's run_squad.py (`tasks.span_qa.span_search`); official EM/F1
(`tasks.span_qa.metrics`); serving `(question, context)` -> answer, character span, score and
n-best alternatives, all in the graph.
"""

import dataclasses

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.flags import MAX_LENGTH
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.options import TaskOption
from keras_bert_zoo.tasks.span_qa.serving import QAServing

__all__ = ["QALayout", "QATask", "TASK"]


@dataclasses.dataclass
class QALayout:
    """How SQuAD files are read and cut into windows (saved with the model)."""

    doc_stride: int = 128
    stride_mode: str = "step"
    max_query_length: int = 64
    version_2_with_negative: bool = False
    null_threshold: float = 0.0

    def to_dict(self):
        return dataclasses.asdict(self)


class QATask(TaskSpec):
    name = "qa"
    model_path = "keras_bert_zoo.tasks.span_qa.model.BertSpanQA"
    serving = QAServing  # its SavedModel's inputs and outputs (serving.py)
    shown_metrics = ("exact_match", "f1")
    # "auto" packs the training batches; "bucketed" pads each to its bucket with the softmax over
    # the padded row, as the original; evaluation batches are bucketed under both.
    batchings = ("auto", "packed", "bucketed", "fixed")
    options = (
        TaskOption("doc_stride", int, 128, "see --stride-mode (default 128)", low=1, high=MAX_LENGTH),
        TaskOption(
            "stride_mode",
            str,
            "step",
            "step (default, google-research/bert): --doc-stride pieces between "
            "window starts; overlap (HF's `stride`): --doc-stride pieces shared by neighbouring windows",
            choices=("step", "overlap"),
        ),
        TaskOption("max_query_length", int, 64, "question pieces kept (64)", low=1, high=MAX_LENGTH),
        TaskOption("version_2_with_negative", bool, False, "SQuAD v2.0: questions may have no answer"),
        TaskOption(
            "null_threshold",
            float,
            0.0,
            "v2.0: answer '' when null score - best span score exceeds this",
            low=-1e6,
            high=1e6,
        ),
    )
    description = "extractive question answering (SQuAD v1.1 / v2.0 JSON)"
    default_sequence_length = 384
    default_epochs = 2

    # --- command line ---------------------------------------------------------------
    def make_layout(self, **values):
        return QALayout(**values)

    # --- fine-tuning ------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        from keras_bert_zoo.tasks.span_qa.data import read_squad

        layout = layout or QALayout()
        return read_squad(path, version_2_with_negative=layout.version_2_with_negative, max_examples=max_examples)

    def make_preprocessor(self, vocab_dir, sequence_length, layout):
        from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor

        layout = layout or QALayout()
        return SpanQAPreprocessor.from_preset(
            vocab_dir,
            sequence_length=sequence_length,
            doc_stride=layout.doc_stride,
            stride_mode=layout.stride_mode,
            max_query_length=layout.max_query_length,
        )

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        layout = layout or QALayout()
        saved = layout.to_dict() | {"sequence_length": sequence_length}
        return self.model_class().from_preset(
            model,
            preprocessor=preprocessor,
            version_2_with_negative=layout.version_2_with_negative,
            null_threshold=layout.null_threshold,
            data_layout=saved,
        )

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, batching="auto"):
        from keras_bert_zoo.tasks.span_qa.preprocessor import make_qa_dataset, make_qa_windows

        if training:
            windows = make_qa_windows(
                preprocessor, examples.questions, examples.contexts, examples.answer_starts, examples.answer_ends
            )
        else:
            windows = make_qa_windows(preprocessor, examples.questions, examples.contexts)
        # Default: random batches packed into full rows, one softmax per window over its own positions
        # (`preprocessing.packing`, docs/decisions.md); "bucketed": each batch padded to the bucket of its
        # longest window, the softmax over the padded row as in the original.
        packed = batching in ("auto", "packed") and training
        return make_qa_dataset(
            windows, batch_size, training=training, seed=seed, bucket=batching != "fixed", pack=packed
        )

    def primary_metric(self, layout):
        return "f1"

    def score(self, model, examples, dataset):
        return self.answer_and_score(model, examples)[0]

    def answer_and_score(self, model, examples, batch_size=64):
        """`(metrics, rows)`: official EM/F1 (v2.0: HasAns/NoAns and the best threshold too)
        of the model's answers, and its answer rows in the order of `examples`."""
        from keras_bert_zoo.tasks.span_qa.metrics import find_best_threshold, squad_scores

        rows = model.predict_answers(examples.questions, examples.contexts, batch_size=batch_size)
        golds = dict(zip(examples.ids, examples.answers, strict=True))
        v2 = examples.version_2_with_negative
        metrics = squad_scores(
            {q: r["answer"] for q, r in zip(examples.ids, rows, strict=True)}, golds, version_2_with_negative=v2
        )
        if v2:
            metrics.update(
                find_best_threshold(
                    {q: r["span_answer"] for q, r in zip(examples.ids, rows, strict=True)},
                    {q: r["null_score_diff"] for q, r in zip(examples.ids, rows, strict=True)},
                    golds,
                )
            )
        return metrics, rows

    # --- evaluate / predict ---------------------------------------------------------------
    def _read_for_model(self, model, path, require_answers=True):
        from keras_bert_zoo.tasks.span_qa.data import read_squad

        # evaluate/predict have no --version-2-with-negative: the model's own setting is used.
        hint = (
            "this model was fine-tuned for SQuAD v1.1 (every question answerable): score it on a v1.1 "
            "file, or fine-tune one for v2.0 with `bert-zoo finetune qa --version-2-with-negative`"
        )
        return read_squad(
            path, version_2_with_negative=model.version_2_with_negative, require_answers=require_answers, v2_hint=hint
        )

    def evaluate(self, model_dir, data_paths, batch_size=64):
        return self.evaluate_outputs(model_dir, data_paths, batch_size)[0]

    def evaluate_outputs(self, model_dir, data_paths, batch_size=64):
        """Metrics plus `predictions.json` (`{id: answer}`, the official form) and, for
        v2.0 models, `null_odds.json` (`{id: null score - best span score}`)."""
        model = self.load_model(model_dir)
        examples = [self._read_for_model(model, p) for p in data_paths]  # all files checked before any scoring
        metrics, files = {}, {"predictions.json": {}}
        if model.version_2_with_negative:
            files["null_odds.json"] = {}
        for path, data in zip(data_paths, examples, strict=True):
            scores, rows = self.answer_and_score(model, data, batch_size)
            if len(data_paths) == 1:
                metrics.update(scores)
            else:  # one set of scores per file
                metrics.update({f"{path}:{k}": v for k, v in scores.items()})
            files["predictions.json"].update({q: r["answer"] for q, r in zip(data.ids, rows, strict=True)})
            if model.version_2_with_negative:
                files["null_odds.json"].update({q: r["null_score_diff"] for q, r in zip(data.ids, rows, strict=True)})
        metrics["questions"] = sum(len(d) for d in examples)
        return metrics, files

    def add_predict_arguments(self, parser):
        parser.add_argument("--question", default=None, help="qa: the question (with --context)")
        parser.add_argument("--context", default=None, help="qa: the passage to answer from (with --question)")

    def predict_inputs(self, args, model):
        """(question, passage) pairs from `--question/--context` or a SQuAD `--data` file.

        A missing or contradicting flag is a `UsageError` (exit code 2), as argparse's own."""
        if getattr(args, "data", None):
            if args.question is not None or args.context is not None:
                raise UsageError("give either --data FILE or --question with --context, not both.")
            data = self._read_for_model(model, args.data, require_answers=False)
            return list(zip(data.questions, data.contexts, data.ids, strict=True))
        if args.question is None or args.context is None:
            missing = "--context (the passage to answer from)" if args.context is None else "--question"
            raise UsageError(f"a qa model needs --question and --context (or --data FILE); {missing} is missing.")
        if not args.question.strip():
            raise UsageError("--question is empty; give the question to answer.")
        if not args.context.strip():
            raise UsageError("--context is empty; give the passage to find the answer in.")
        if getattr(args, "texts", None):
            raise UsageError(f"a qa model takes --question and --context, not positional text ({args.texts[0]!r}).")
        return [(args.question, args.context, None)]

    def predict(self, model, texts):
        rows = model.predict_answers([t[0] for t in texts], [t[1] for t in texts])
        out = []
        for (question, _, qid), row in zip(texts, rows, strict=True):
            out.append({**({"id": qid} if qid is not None else {}), "question": question, **row})
        return out

    def format_prediction(self, row):
        answer = row["answer"] if row["start"] >= 0 or row["answer"] else "(no answer)"
        head = f"{row['id']}\t" if "id" in row else ""
        return f"{head}{answer}\t[{row['start']}:{row['end']}]\tscore={row['score']:.4g}\tp={row['probability']:.3f}"


TASK = QATask()
