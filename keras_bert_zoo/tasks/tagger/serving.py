"""`TaggerServing`: the `tag` task's SavedModel serving: raw text in, word tags and entity spans out.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.errors import ArgumentTypeError, UsageError
from keras_bert_zoo.export.serving import TaskServing

__all__ = ["TaggerServing"]


class TaggerServing(TaskServing):
    """Raw text in, per text: one tag per word and the entity spans, all in the graph.

    Words are split as BERT's basic tokenizer splits text (`tasks.tagger.words`): at
    whitespace, and each CJK ideograph and each punctuation character is a word, so a
    Chinese sentence is tagged character by character; the same words as
    `BertTagger.predict_tags` on the string, found on Unicode code points, so offsets are
    in characters, not UTF-8 bytes. Long texts are read in
    overlapping windows (`TaggingPreprocessor.windows`) and every word gets the tag
    of the window where it has the most context (`merge_windows_tf`), as
    `BertTagger.predict_tags`. Entities are decoded by the conlleval rules for any
    of the model's labels (IOB2: an entity starts at `B-X`, or at `I-X` after `O` or
    another type, and continues on `I-X`; BIOES adds `S-X` and closes after `E-X`);
    labels without a `B-`/`I-`/`E-`/`S-` prefix and a type count as `O`.

    SavedModel signatures cannot return ragged tensors, so each ragged output is a
    padded dense tensor plus a length vector (`tf.RaggedTensor.from_tensor(x,
    lengths=n)` gives the ragged one back; padding is `""`, `-1` or `0.0`):

    - `serving_default` / `tag`, `text` `tf.string [batch]` ->
      `words`, `tags` `string [batch, max_words]`, `tag_ids` `int32`, `word_start`,
      `word_end` `int64 [batch, max_words]` (characters, end exclusive), with
      `num_words` `int64 [batch]`; `entity_text`, `entity_type` `string
      [batch, max_entities]`, `start`, `end` `int64` (characters, end exclusive:
      `text[start:end] == entity_text`), `score` `float32` (mean over the entity's
      words of each word's highest softmax probability), with `num_entities`
      `int64 [batch]`.
    - `predict_token_ids`: no words there, so token-level `logits`, `probabilities`
      `float32 [batch, seq, num_labels]`, `tag_ids` `int32 [batch, seq]`, `tags`
      `string [batch, seq]` (every position, specials and later pieces included).
    - `tokenize`: the windows the model sees (`token_ids`, `segment_ids`,
      `padding_mask`, `word_ids`, `first_piece_mask` `int32 [num_windows, seq]`,
      `sentence_ids` `int32 [num_windows]`) and the words (`words`, `word_start`,
      `word_end`, `num_words`, `text`).
    """

    default_signature = "tag"
    ENTITY_OUTPUTS = ("entity_text", "entity_type", "start", "end", "score")
    WORD_OUTPUTS = ("words", "tags", "tag_ids", "word_start", "word_end")

    # The windows' per-position features are cut with the model inputs.
    position_keys = ("token_ids", "segment_ids", "padding_mask", "word_ids", "first_piece_mask")
    position_outputs = ("output",)  # the logits `[windows, seq, num_labels]`

    def __init__(self, model, preprocessor, text_pair=False):
        import tensorflow as tf

        from keras_bert_zoo.tasks.tagger.entity_graph import label_tables
        from keras_bert_zoo.tasks.tagger.words import word_class_table

        if text_pair:
            raise UsageError("a BertTagger tags one text per example; it takes no text_pair.")
        if not hasattr(preprocessor, "windows"):
            raise ArgumentTypeError(
                f"a BertTagger needs a TaggingPreprocessor (words -> windows), got {type(preprocessor).__name__}."
            )
        super().__init__(model, preprocessor, text_pair)
        names = list(model.label_names or [str(i) for i in range(model.num_labels)])
        tables = label_tables(names)
        self.names = names
        self.label_names = tf.constant(names)
        # Per label: its entity type ("" for O), prefix code and type index (the conlleval decoder's tables).
        self.entity_types = tf.constant(tables["entity_types"])
        self.prefix_codes = tf.constant(tables["prefix_codes"], tf.int32)
        self.type_codes = tf.constant(tables["type_codes"], tf.int32)
        starts, classes = word_class_table()
        self.word_classes = (tf.constant(starts, tf.int32), tf.constant(classes, tf.int32))

    # --- text -> words -> windows ------------------------------------------------------
    def split_words(self, text):
        """`text` `[batch]` -> ragged `[batch, (words)]` words, character starts and ends (int64)."""
        from keras_bert_zoo.tasks.tagger.words import split_words_tf

        return split_words_tf(text, self.word_classes)

    def preprocess(self, text, text_pair=None):
        words, starts, ends = self.split_words(text)
        features = dict(self.preprocessor.windows(words))
        features.update(
            {
                "text": text,
                "words": words.to_tensor(""),
                "word_start": starts.to_tensor(-1),
                "word_end": ends.to_tensor(-1),
                "num_words": words.row_lengths(),
            }
        )
        return features

    # --- logits -> tags -> entities ----------------------------------------------------
    def entities(self, tag_ids, scores, starts, ends):
        """Entity spans of ragged `[batch, (words)]` tag ids by the conlleval rules.

        Args: `tag_ids` int, `scores` float32 (one per word), `starts`/`ends` int64
        (the words' character offsets), all with the same row lengths.

        Returns:
            dict of ragged `[batch, (entities)]`: `entity_type`, `first_word`,
            `last_word` (exclusive), `start`, `end`, `score` (mean of the words' scores).
        """
        import tensorflow as tf

        from keras_bert_zoo.tasks.tagger.entity_graph import entity_spans_tf

        tables = {"entity_types": self.entity_types, "prefix_codes": self.prefix_codes, "type_codes": self.type_codes}
        spans, bounds = entity_spans_tf(tag_ids, tables)
        inside, begins, ends_here = bounds["inside"], bounds["begins"], bounds["ends"]
        count = tf.reduce_sum(tf.cast(begins, tf.int64))
        entity_of_word = tf.boolean_mask(tf.cumsum(tf.cast(begins, tf.int64)) - 1, inside)
        score = tf.math.unsorted_segment_mean(
            tf.boolean_mask(tf.cast(scores.values, tf.float32), inside), entity_of_word, count
        )
        per_entity = spans["first_word"].with_values
        return {
            **spans,
            "start": per_entity(tf.cast(tf.boolean_mask(starts.values, begins), tf.int64)),
            "end": per_entity(tf.cast(tf.boolean_mask(ends.values, ends_here), tf.int64)),
            "score": per_entity(score),
        }

    def outputs(self, logits, features):
        import tensorflow as tf

        from keras_bert_zoo.tasks.tagger.windows import merge_windows_tf

        logits = tf.cast(logits, tf.float32)
        if "sentence_ids" not in features:  # predict_token_ids: token-level, no words to map to
            ids = tf.argmax(logits, axis=-1, output_type=tf.int32)
            return {
                "logits": logits,
                "probabilities": tf.nn.softmax(logits, axis=-1),
                "tag_ids": ids,
                "tags": tf.gather(self.label_names, ids),
            }
        num_words = features["num_words"]
        per_word = merge_windows_tf(
            logits, features["word_ids"], features["sentence_ids"], num_words, features["first_piece_mask"]
        )
        word_logits = per_word.values
        ids = per_word.with_values(tf.argmax(word_logits, axis=-1, output_type=tf.int32))
        best = per_word.with_values(tf.reduce_max(tf.nn.softmax(word_logits, axis=-1), axis=-1))

        def ragged(dense):
            return tf.RaggedTensor.from_tensor(dense, lengths=num_words)

        starts, ends = ragged(features["word_start"]), ragged(features["word_end"])
        found = self.entities(ids, best, starts, ends)
        rows = found["start"].value_rowids()
        start, end = found["start"].values, found["end"].values
        text = tf.strings.substr(tf.gather(features["text"], rows), start, end - start, unit="UTF8_CHAR")
        found["entity_text"] = found["start"].with_values(text)
        out = {
            "words": features["words"],
            "tags": ids.with_values(tf.gather(self.label_names, ids.values)).to_tensor(""),
            "tag_ids": ids.to_tensor(-1),
            "word_start": features["word_start"],
            "word_end": features["word_end"],
            "num_words": num_words,
            "num_entities": found["start"].row_lengths(),
        }
        pads = {"entity_text": "", "entity_type": "", "start": -1, "end": -1, "score": 0.0}
        out.update({k: found[k].to_tensor(pads[k]) for k in self.ENTITY_OUTPUTS})
        return out

    def info(self):
        return {
            "label_names": list(self.names),
            "scheme": self.model.scheme,
            "offsets": "characters",
            "words": "BERT's basic split: whitespace separates; each CJK ideograph and punctuation mark is a word",
            "ragged_outputs": {"num_words": list(self.WORD_OUTPUTS), "num_entities": list(self.ENTITY_OUTPUTS)},
        }
