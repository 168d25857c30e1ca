"""`ClassifierServing`: the `classify` task's SavedModel serving: raw text (or text pairs) in, labels and probabilities out.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.export.serving import TaskServing

__all__ = ["ClassifierServing"]


class ClassifierServing(TaskServing):
    """`label_ids`, `probabilities`, `labels` (names) for single-label,
    multi-label (multi-hot ids, `|`-joined names) and regression (`scores`)."""

    def __init__(self, model, preprocessor, text_pair=False):
        import tensorflow as tf

        super().__init__(model, preprocessor, text_pair)
        names = model.label_names or [str(i) for i in range(model.num_classes)]
        self.label_names = tf.constant(names, dtype=tf.string)

    def outputs(self, logits, features):
        import tensorflow as tf

        logits = tf.cast(logits, tf.float32)
        kind = self.model.problem_type
        if kind == "regression":
            return {"scores": logits[:, 0]}
        if kind == "multi_label":
            probs = tf.sigmoid(logits)
            hot = probs > 0.5
            names = tf.where(hot, self.label_names[None, :], "")
            joined = tf.strings.reduce_join(names, axis=-1, separator="|")
            # reduce_join keeps the separators of empty names: squeeze them out.
            joined = tf.strings.regex_replace(joined, r"\|+", "|")
            joined = tf.strings.regex_replace(joined, r"^\||\|$", "")
            return {"label_ids": tf.cast(hot, tf.int32), "probabilities": probs, "labels": joined}
        probs = tf.nn.softmax(logits, axis=-1)
        ids = tf.argmax(probs, axis=-1, output_type=tf.int32)
        return {"label_ids": ids, "probabilities": probs, "labels": tf.gather(self.label_names, ids)}

    def info(self):
        return {
            "problem_type": self.model.problem_type,
            "num_classes": self.model.num_classes,
            "label_names": [n.decode() for n in self.label_names.numpy().tolist()],
        }
