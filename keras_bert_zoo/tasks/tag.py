"""Token classification (named entities): `tag`.

Model `BertTagger`; data CoNLL column files (IOB1 read as IOB2), IOB2/BIOES column
files and JSON Lines (`preprocessing.tagging_data`); words -> first-piece labels and
overlapping windows (`preprocessing.tagging`); entity-level precision/recall/F1 by the
conlleval rules (`metrics.entities`); serving `text` -> entity spans and word tags.
"""

import dataclasses

from keras_bert_zoo.export.saved_model import TaskServing, register_serving
from keras_bert_zoo.tasks.base import TaskSpec


@dataclasses.dataclass
class TaggingLayout:
    """How a tagged file is read: its scheme (None: detect) and the model's labels."""

    scheme: str = None
    label_all_tokens: bool = False

    def to_dict(self):
        return dataclasses.asdict(self)


class TagTask(TaskSpec):
    name = "tag"
    model_class_name = "BertTagger"
    description = "token classification / named entities (CoNLL-2003 columns, IOB2/BIOES, JSONL)"

    def model_class(self):
        from keras_bert_zoo.models.tagger import BertTagger

        return BertTagger

    # --- command line ---------------------------------------------------------------
    def add_arguments(self, parser):
        parser.add_argument("--scheme", choices=("IOB1", "IOB2", "BIOES"), default=None,
                            help="tag scheme of the files (default: detect; CoNLL-2003's are IOB1, read as IOB2)")
        parser.add_argument("--label-all-tokens", action="store_true",
                            help="label every word piece (later pieces get the I- tag), as run_ner.py's option")

    def layout_from_args(self, args):
        return TaggingLayout(scheme=args.scheme, label_all_tokens=args.label_all_tokens)

    # --- fine-tuning ------------------------------------------------------------------
    def read_data(self, path, layout, reference=None, max_examples=None):
        from keras_bert_zoo.preprocessing.tagging_data import read_tagged

        layout = layout or TaggingLayout()
        return read_tagged(path, scheme=layout.scheme, max_examples=max_examples,
                           label_names=reference.label_names if reference is not None else None)

    def make_preprocessor(self, vocab_dir, sequence_length, layout):
        from keras_bert_zoo.preprocessing.tagging import TaggingPreprocessor

        layout = layout or TaggingLayout()
        return TaggingPreprocessor.from_preset(vocab_dir, sequence_length=sequence_length,
                                               label_all_tokens=layout.label_all_tokens)

    def build_model(self, model, train_examples, layout, preprocessor, sequence_length):
        if layout is not None and layout.label_all_tokens and preprocessor.label_names is None:
            preprocessor.label_names = list(train_examples.label_names)
        saved_layout = (layout or TaggingLayout()).to_dict() | {"sequence_length": sequence_length}
        return self.model_class().from_preset(
            model, num_labels=len(train_examples.label_names), label_names=list(train_examples.label_names),
            scheme=train_examples.scheme, data_layout=saved_layout, preprocessor=preprocessor)

    def dataset(self, examples, preprocessor, batch_size, training, seed=0, bucketing=True):
        from keras_bert_zoo.preprocessing.tagging import make_tagging_dataset

        return make_tagging_dataset(examples, preprocessor, batch_size, training=training, seed=seed,
                                    with_labels=training, bucket=bucketing)

    def primary_metric(self, layout):
        return "f1"

    def shown_metrics(self, layout):
        return ["precision", "recall", "f1"]

    def score(self, model, examples, dataset):
        from keras_bert_zoo.metrics.entities import entity_scores

        predicted = model.predict_tags(examples.words)
        return entity_scores(examples.tags, predicted, scheme=model.scheme)

    # --- evaluate / predict ---------------------------------------------------------------
    def load_model(self, model_dir):
        model = self.model_class().from_preset(model_dir)
        if model.preprocessor is None:
            raise ValueError(f"{model_dir} has no vocab.txt, so text cannot be tokenized; use a directory "
                             "written by `bert-zoo finetune tag`.")
        return model

    def evaluate(self, model_dir, data_paths, batch_size=64):
        from keras_bert_zoo.metrics.entities import entity_scores
        from keras_bert_zoo.preprocessing.tagging_data import read_tagged

        model = self.load_model(model_dir)
        scheme = (model.data_layout or {}).get("scheme")
        words, tags = [], []
        for path in data_paths:
            examples = read_tagged(path, scheme=scheme, label_names=model.label_names)
            words += examples.words
            tags += examples.tags
        metrics = entity_scores(tags, model.predict_tags(words, batch_size=batch_size), scheme=model.scheme)
        metrics["sentences"] = len(words)
        return metrics

    def predict(self, model, texts):
        return [{"text": text, "entities": entities}
                for text, entities in zip(texts, model.predict_entities(list(texts)))]

    def format_prediction(self, row):
        shown = "  ".join(f"{e['type']}:{e['text']}[{e['start']}:{e['end']}]" for e in row["entities"])
        return f"{shown or '(no entities)'}\t{row['text']}"

    def serving(self):
        return TaggerServing


@register_serving("BertTagger")
class TaggerServing(TaskServing):
    """Raw text in (words split on whitespace), per input: `tags` (one per word), and the
    entity spans `entity_text`, `entity_type`, `start`, `end` (character offsets, end
    exclusive) and `score`, as ragged `[batch, (entities)]`, computed in the graph.
    Long texts are read in overlapping windows; every word gets one tag."""

    default_signature = "tag"

    def __init__(self, model, preprocessor, text_pair=False):
        import tensorflow as tf

        super().__init__(model, preprocessor, text_pair)
        names = model.label_names or [str(i) for i in range(model.num_labels)]
        self.label_names = tf.constant(names)
        # begins[i]: label i starts an entity; inside[i]: label i continues one (type in types[i]).
        kinds = [n[2:] if len(n) > 2 and n[1] == "-" else "" for n in names]
        self.types = tf.constant(kinds)
        self.starts_entity = tf.constant([n[:2] in ("B-", "S-") for n in names])
        self.ends_entity = tf.constant([n[:2] in ("E-", "S-") for n in names] if model.scheme == "BIOES"
                                       else [False] * len(names))
        self.is_outside = tf.constant([n == "O" or not kinds[i] for i, n in enumerate(names)])

    def info(self):
        return {"label_names": [n.decode() for n in self.label_names.numpy().tolist()], "scheme": self.model.scheme}


TASK = TagTask()
