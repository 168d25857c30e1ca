"""Token classification (named entities): `tag`.

Model `BertTagger`; data CoNLL column files (IOB1 read as IOB2), IOB2/BIOES/BMES column
files (the Chinese sets' one character a line) and JSON Lines (`tasks.tagger.data`); words -> first-piece labels and
overlapping windows (`tasks.tagger.preprocessor`); entity-level
precision/recall/F1 by the conlleval rules (`tasks.tagger.metrics`); serving `text` ->
entity spans (`tasks.tagger.entity_graph`) and word tags.
"""

import dataclasses

from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.options import TaskOption
from keras_bert_zoo.tasks.tagger.serving import TaggerServing

__all__ = ["TaggingLayout", "TagTask", "TASK"]


@dataclasses.dataclass
class TaggingLayout:
    """How a tagged file is read: its scheme (None: detect) and the model's labels."""

    scheme: str = None
    label_all_tokens: bool = False
    strict_tags: bool = False

    def to_dict(self):
        return dataclasses.asdict(self)


class TagTask(TaskSpec):
    name = "tag"
    model_path = "keras_bert_zoo.tasks.tagger.model.BertTagger"
    serving = TaggerServing  # its SavedModel's inputs and outputs (serving.py)
    shown_metrics = ("precision", "recall", "f1")
    description = "token classification / named entities (CoNLL-2003 columns, IOB2/BIOES/BMES, JSONL)"
    # "auto": training batches packed; "bucketed": random batches each cut to their longest, as
    # HF's Trainer; "by_length": batches grouped by length; "fixed": padded to the length.
    batchings = ("auto", "packed", "by_length", "bucketed", "fixed")
    options = (
        TaskOption(
            "scheme",
            str,
            None,
            "tag scheme of the files (default: detect; CoNLL-2003's are IOB1, read as IOB2; the Chinese "
            "sets' B-/M-/E-/S- are BMES, kept as such)",
            choices=("IOB1", "IOB2", "BIOES", "BMES"),
        ),
        TaskOption(
            "label_all_tokens",
            bool,
            False,
            "label every word piece (later pieces get the I- tag), as run_ner.py's option",
        ),
        TaskOption(
            "strict_tags",
            bool,
            False,
            "refuse a file whose tags break its scheme (an I-/M-/E- continuing no entity); by default they are "
            "kept, as conlleval reads them, and one line says how many",
        ),
    )

    @property
    def pack_width(self):
        """Packed rows' width: 64 and 128 ran at 103 and 95 sentences/s on CoNLL-2003; one number
        for the job and `BertTagger.fit` on raw words (`TaggingPreprocessor.raw_dataset`)."""
        from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

        return TaggingPreprocessor.PACK_WIDTH

    # --- command line ---------------------------------------------------------------
    def make_layout(self, **values):
        return TaggingLayout(**values)

    # --- fine-tuning ------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        from keras_bert_zoo.tasks.tagger.data import read_tagged

        layout = layout or TaggingLayout()
        return read_tagged(
            path,
            scheme=layout.scheme,
            max_examples=max_examples,
            label_names=reference.label_names if reference is not None else None,
            strict=layout.strict_tags,
        )

    def make_preprocessor(self, vocab_dir, sequence_length, layout):
        from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

        layout = layout or TaggingLayout()
        return TaggingPreprocessor.from_preset(
            vocab_dir, sequence_length=sequence_length, label_all_tokens=layout.label_all_tokens
        )

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        if layout is not None and layout.label_all_tokens and preprocessor.label_names is None:
            preprocessor.label_names = list(train_examples.label_names)
        saved_layout = (layout or TaggingLayout()).to_dict() | {"sequence_length": sequence_length}
        return self.model_class().from_preset(
            model,
            num_labels=len(train_examples.label_names),
            label_names=list(train_examples.label_names),
            scheme=train_examples.scheme,
            data_layout=saved_layout,
            preprocessor=preprocessor,
        )

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, batching="auto"):
        from keras_bert_zoo.tasks.tagger.dataset import make_tagging_dataset

        # Default: random batches (as HF's Trainer draws them) packed into rows of `pack_width`:
        # the same windows and loss as the batch padded to its longest ("bucketed"), without
        # computing its padding: 1.8-2.4x the sentences/s on CoNLL-2003 (docs/benchmarks.md).
        # "by_length" groups batches by length instead (F1 0.828 vs 0.830 over four seeds).
        packed = batching in ("auto", "packed") and training
        return make_tagging_dataset(
            examples,
            preprocessor,
            batch_size,
            training=training,
            seed=seed,
            with_labels=training,
            bucket=batching != "fixed" and not packed,
            group_by_length=batching == "by_length" and training,
            pack_width=min(self.pack_width, preprocessor.sequence_length) if packed else None,
        )

    def primary_metric(self, layout):
        return "f1"

    def score(self, model, examples, dataset):
        from keras_bert_zoo.tasks.tagger.metrics import entity_scores

        predicted = model.predict_tags(examples.words)
        return entity_scores(examples.tags, predicted, scheme=model.scheme)

    # --- evaluate / predict ---------------------------------------------------------------
    def evaluate(self, model_dir, data_paths, batch_size=64):
        from keras_bert_zoo.tasks.tagger.data import read_tagged
        from keras_bert_zoo.tasks.tagger.metrics import entity_scores

        model = self.load_model(model_dir)
        layout = model.data_layout or {}
        words, tags = [], []
        for path in data_paths:
            examples = read_tagged(
                path,
                scheme=layout.get("scheme"),
                label_names=model.label_names,
                strict=layout.get("strict_tags", False),
            )
            words += examples.words
            tags += examples.tags
        metrics = entity_scores(tags, model.predict_tags(words, batch_size=batch_size), scheme=model.scheme)
        metrics["sentences"] = len(words)
        return metrics

    def predict(self, model, texts):
        return [
            {"text": text, "entities": entities}
            for text, entities in zip(texts, model.predict_entities(list(texts)), strict=True)
        ]

    def format_prediction(self, row):
        shown = "  ".join(f"{e['type']}:{e['text']}[{e['start']}:{e['end']}]" for e in row["entities"])
        return f"{shown or '(no entities)'}\t{row['text']}"


TASK = TagTask()
