"""`EmbedderServing`: the `embed` task's SavedModel serving: raw text in, sentence embeddings out.

The task's spec names it as data (`TaskSpec.serving`); `export_saved_model` finds it
through the registry by the model's class.
"""

from keras_bert_zoo.export.serving import TaskServing

__all__ = ["EmbedderServing"]


class EmbedderServing(TaskServing):
    """`embeddings` float32 `[batch, hidden]` (unit length when the model normalizes)."""

    def outputs(self, embeddings, features):
        import tensorflow as tf

        return {"embeddings": tf.cast(embeddings, tf.float32)}

    def info(self):
        return {
            "pooling": self.model.pooling,
            "normalize": self.model.normalize,
            "embedding_dim": int(self.model.output_shape[-1]),
        }
