"""`PretrainerServing`: the `pretrain` task's SavedModel serving: fill-mask.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.export.serving import TaskServing
from keras_bert_zoo.tasks.options import TaskOption

__all__ = ["PretrainerServing"]


class PretrainerServing(TaskServing):
    """Fill-mask: the top-k tokens at each `[MASK]` of the text (at most `max_masks`).

    Outputs `[batch, max_masks, top_k]` `tokens`, `token_ids`, `scores` (softmax
    probabilities), and `[batch, max_masks]` `mask_positions` and `is_mask` (False on
    padding slots, where the other outputs are meaningless).
    """

    default_signature = "fill_mask"
    options = (
        TaskOption("top_k", int, 5, "fill-mask, tokens returned per [MASK] (5)", low=1, high=1000),
        TaskOption("max_masks", int, 8, "fill-mask, [MASK]s read per text (8)", low=1, high=512),
    )

    def __init__(self, model, preprocessor, text_pair=False, top_k=5, max_masks=8):
        super().__init__(model, preprocessor, text_pair)
        self.top_k = int(top_k)
        self.max_masks = int(max_masks)
        # Checked here, not left to tf.math.top_k: its error surfaces while the export is being
        # traced, as TensorFlow's traced source code, naming neither the flag nor the vocabulary.
        vocabulary = int(model.backbone.vocabulary_size)
        if not 1 <= self.top_k <= vocabulary:
            raise UsageError(
                f"--top-k {self.top_k} (top_k= in Python) asks for more tokens than the model's "
                f"vocabulary of {vocabulary}; use 1 to {vocabulary}."
            )
        self.mask_id = preprocessor.tokenizer.mask_token_id
        self.vocab_table = None

    def bind(self, module):
        self.vocab_table = module.vocab_table

    def model_inputs(self, features):
        import tensorflow as tf

        is_mask = tf.equal(features["token_ids"], self.mask_id)
        positions = tf.ragged.boolean_mask(tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask)
        positions = positions[:, : self.max_masks]
        features = dict(features)
        features["mask_positions"] = positions.to_tensor(0, shape=[None, self.max_masks])
        features["is_mask"] = tf.sequence_mask(positions.row_lengths(), self.max_masks)
        return features

    def outputs(self, model_outputs, features):
        import tensorflow as tf

        probs = tf.nn.softmax(tf.cast(model_outputs["mlm_logits"], tf.float32), axis=-1)
        scores, ids = tf.math.top_k(probs, k=self.top_k)
        return {
            "token_ids": ids,
            "tokens": self.vocab_table.lookup(tf.cast(ids, tf.int64)),
            "scores": scores,
            "mask_positions": features["mask_positions"],
            "is_mask": features["is_mask"],
        }

    def info(self):
        return {"top_k": self.top_k, "max_masks": self.max_masks}
