"""Sentence and sentence-pair classification (and regression, multi-label): `classify`.

Model `BertClassifier`; data GLUE TSV / CSV / JSON Lines (`tasks.classifier.data`);
metrics accuracy, F1, Matthews, Pearson/Spearman (`metrics.classification`); serving
`text` (+ `text_pair`) -> `label_ids`, `probabilities`, `labels`.
"""

from keras_bert_zoo.errors import CheckpointError, InvalidInputError, UsageError
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.classifier.serving import ClassifierServing
from keras_bert_zoo.tasks.options import TaskOption

__all__ = ["ClassifyTask", "TASK"]

_PAIR_SEPARATORS = ("\t", " ||| ")


class ClassifyTask(TaskSpec):
    name = "classify"
    model_path = "keras_bert_zoo.tasks.classifier.model.BertClassifier"
    serving = ClassifierServing  # its SavedModel's inputs and outputs (serving.py)
    description = "sentence or sentence-pair classification / regression (GLUE, CSV, JSONL)"
    # "auto": training batches grouped by length, evaluation batches sorted and bucketed.
    batchings = ("auto", "by_length", "bucketed", "fixed", "packed")
    # run_classifier.py writes its head at the top level (`output_weights`).
    checkpoint_heads = {"hf": ("classifier.weight", "classifier.bias"), "google": ("output_weights", "output_bias")}
    head_priority = 1  # before choice, which has the same HF tensor names
    options = (
        TaskOption(
            "glue",
            str,
            None,
            "GLUE layout: sst2, mrpc, rte, cola, qqp, stsb (the original STS Benchmark "
            "sts-*.csv files; regression, MSE), stsb_glue (GLUE's STS-B tsv), mnli, qnli, wnli",
            aliases=("--task",),
        ),
        TaskOption("text_column", list, None, "text column name or index; give it twice for sentence pairs"),
        TaskOption("label_column", str, None, "label column name or index"),
        TaskOption(
            "problem_type",
            str,
            None,
            "default: from --glue, else single_label",
            choices=("single_label", "multi_label", "regression"),
        ),
        TaskOption("header", bool, True, "CSV/TSV files have no header row", flag="--no-header"),
    )

    # --- command line ---------------------------------------------------------------
    def make_layout(self, glue, text_column, label_column, problem_type, header):
        from keras_bert_zoo.tasks.classifier.data import DataLayout

        if glue:
            layout = DataLayout.for_task(glue)
            if problem_type:
                layout.problem_type = problem_type
            return layout
        if not text_column or label_column is None:
            raise UsageError(
                "give --glue (a GLUE layout) or both --text-column and --label-column "
                "(finetune's `glue=`, or `text_column=[...]` and `label_column=`)."
            )

        def column(c):  # an index when the files have no header
            return int(c) if isinstance(c, str) and c.isdigit() and not header else c

        return DataLayout(
            tuple(column(c) for c in text_column),
            column(label_column),
            problem_type=problem_type or "single_label",
            header=header,
        )

    # --- fine-tuning ------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        from keras_bert_zoo.tasks.classifier.data import read_examples

        examples = read_examples(
            path, layout, label_names=reference.label_names if reference else None, max_examples=max_examples
        )
        if reference is None and layout.problem_type == "single_label" and len(examples.label_names) < 2:
            raise InvalidInputError(
                f"{path} has a single label ({examples.label_names}); classification needs at least two."
            )
        return examples

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        problem_type = layout.problem_type
        names = train_examples.label_names
        num_classes = 1 if problem_type == "regression" else len(names)
        # The model speaks the display names (SST-2: negative/positive) when the file's labels are codes.
        codes = list(layout.label_names or ()) == list(names or ())
        shown = layout.display_names if layout.display_names and codes else names
        saved_layout = layout.to_dict() | {"label_names": names, "sequence_length": sequence_length}
        return self.model_class().from_preset(
            model,
            num_classes=num_classes,
            problem_type=problem_type,
            label_names=list(shown) if problem_type != "regression" else None,
            data_layout=saved_layout,
            preprocessor=preprocessor,
        )

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, batching="auto"):
        from keras_bert_zoo.tasks.classifier.data import make_dataset

        return make_dataset(
            examples, preprocessor, batch_size, shuffle=training, seed=seed, batching=batching, with_labels=training
        )

    def primary_metric(self, layout):
        from keras_bert_zoo.metrics.classification import TASK_METRICS

        if layout.task in TASK_METRICS:
            return TASK_METRICS[layout.task][0]
        return {"regression": "pearson", "multi_label": "f1"}.get(layout.problem_type, "accuracy")

    def score(self, model, examples, dataset):
        import numpy as np

        from keras_bert_zoo.metrics.classification import classification_metrics

        probs = model.logits_to_probabilities(model.predict(dataset, verbose=0))
        labels = examples.labels
        if model.problem_type == "single_label":
            pred = np.argmax(probs, axis=-1)
        elif model.problem_type == "multi_label":
            pred = (probs > 0.5).astype(labels.dtype)
        else:
            pred = probs[:, 0]
        return classification_metrics(labels, pred, model.problem_type, model.num_classes)

    # --- evaluate / predict ---------------------------------------------------------------
    def evaluate(self, model_dir, data_paths, batch_size=64):
        import numpy as np

        from keras_bert_zoo.tasks.classifier.data import DataLayout, Examples, read_examples

        model = self.load_model(model_dir)
        if not model.data_layout:
            raise CheckpointError(
                f"{model_dir} does not record the data layout it was trained on; "
                "evaluate a directory written by `bert-zoo finetune classify`."
            )
        layout = DataLayout.from_dict(model.data_layout)
        # The layout holds the file's label values (e.g. "0"/"1"); the model may show other names.
        parts = [read_examples(p, layout, label_names=layout.label_names or model.label_names) for p in data_paths]
        examples = Examples(
            texts=tuple(sum((list(e.texts[i]) for e in parts), []) for i in range(len(layout.text_columns))),
            labels=np.concatenate([e.labels for e in parts]),
            label_names=model.label_names,
        )
        dataset = self.dataset(examples, model.preprocessor, batch_size, training=False)
        metrics = self.score(model, examples, dataset)
        metrics["examples"] = len(examples)
        return metrics

    def predict(self, model, texts):
        pairs = len((model.data_layout or {}).get("text_columns", [None])) == 2
        inputs = [_split_pair(t) for t in texts] if pairs else list(texts)
        labels, probs = model.predict_labels(inputs, verbose=0)
        names = model.label_names or [str(i) for i in range(model.num_classes)]
        return [
            {
                "text": text,
                "label": label,
                "probabilities": {n: round(float(p), 4) for n, p in zip(names, row, strict=True)},
            }
            for text, label, row in zip(texts, labels, probs, strict=True)
        ]

    def format_prediction(self, row):
        shown = "  ".join(f"{n}={p:.3f}" for n, p in row["probabilities"].items())
        return f"{row['label']}\t{shown}\t{row['text']}"


def _split_pair(text):
    for sep in _PAIR_SEPARATORS:
        if sep in text:
            a, b = text.split(sep, 1)
            return a.strip(), b.strip()
    raise InvalidInputError(
        f"this model classifies sentence pairs; write {text!r} as 'first sentence ||| second sentence'."
    )


TASK = ClassifyTask()
