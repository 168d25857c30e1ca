"""`ChoiceServing`: the `choice` task's SavedModel serving: a context and its choices in, the best choice and probabilities out.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.export.serving import TaskServing

__all__ = ["ChoiceServing"]


class ChoiceServing(TaskServing):
    """`serving_default(context, choices)`: `context` `tf.string [batch]`, `choices`
    `tf.string [batch, num_choices]` -> `logits`, `probabilities` `float32
    [batch, num_choices]` (softmax over the choices), `best_index` `int32 [batch]` and
    `best_choice` `string [batch]`. `tokenize(context, choices)` returns the packed pairs
    `[batch, num_choices, seq]` (and the `choices` given); `predict_token_ids` takes the
    ids (no `best_choice` there)."""

    default_signature = "choose"
    ids_shape = (None, None, None)

    def text_inputs(self):
        import tensorflow as tf

        return [
            tf.TensorSpec([None], tf.string, name="context"),
            tf.TensorSpec([None, None], tf.string, name="choices"),
        ]

    def tokenize_inputs(self):
        return self.text_inputs()

    def preprocess(self, context, choices):
        import tensorflow as tf

        features = {k: tf.cast(v, tf.int32) for k, v in self.preprocessor((context, choices)).items()}
        features["choices"] = choices  # for `best_choice` (the model takes only the ids)
        return features

    def outputs(self, logits, features):
        import tensorflow as tf

        logits = tf.cast(logits, tf.float32)
        best = tf.argmax(logits, axis=-1, output_type=tf.int32)
        out = {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1), "best_index": best}
        if "choices" in features:
            out["best_choice"] = tf.gather(features["choices"], best, batch_dims=1)
        return out

    def info(self):
        return {"inputs": ["context", "choices"], "num_choices": (self.model.data_layout or {}).get("num_choices")}
