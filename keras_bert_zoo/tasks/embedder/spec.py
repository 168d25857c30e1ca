"""Sentence embeddings: `embed` (`bert-zoo embed`, `evaluate-embeddings`, export).

Model `BertSentenceEmbedder`; evaluation is unsupervised STS (cosine of the two
sentences' embeddings against the gold score, Spearman and Pearson); serving
`text` -> `embeddings`. Nothing is fine-tuned here (fine-tune STS-B as regression with
`bert-zoo finetune classify --task stsb`).
"""

from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.embedder.serving import EmbedderServing

__all__ = ["EmbedTask", "similarity_scores", "TASK"]


class EmbedTask(TaskSpec):
    name = "embed"
    model_path = "keras_bert_zoo.tasks.embedder.model.BertSentenceEmbedder"
    serving = EmbedderServing  # its SavedModel's inputs and outputs (serving.py)
    description = "sentence embeddings (mean / cls / pooled / max pooling)"
    finetunable = False

    def evaluate(self, model_dir, data_paths, batch_size=64):
        """Unsupervised STS of a saved embedder: Spearman / Pearson of cosine vs gold."""
        model = self.load_model(model_dir)
        parts = [similarity_scores(model, path, batch_size=batch_size) for path in data_paths]
        if len(parts) == 1:
            return parts[0]
        return {f"{key}_{i}": value for i, part in enumerate(parts) for key, value in part.items()}

    def predict(self, model, texts):
        vectors = model.encode(list(texts))
        return [
            {"text": t, "embedding": [round(float(v), 6) for v in row]} for t, row in zip(texts, vectors, strict=True)
        ]

    def format_prediction(self, row):
        values = row["embedding"]
        head = " ".join(f"{v:.4f}" for v in values[:4])
        return f"[{head} ... ] ({len(values)} values)\t{row['text']}"


def similarity_scores(embedder, path, batch_size=64, max_examples=None):
    """Unsupervised STS: encodes both sentences of every pair in an STS-B file and
    correlates their cosine similarity with the gold scores.

    Returns a flat dict: `spearman`, `pearson` (fractions in [-1, 1]) and `examples`.

    Examples:
    ```python
    from keras_bert_zoo import BertSentenceEmbedder
    from keras_bert_zoo.tasks.embedder.spec import similarity_scores
    embedder = BertSentenceEmbedder.from_preset("path/to/all-MiniLM-L6-v2", pooling="cls")
    similarity_scores(embedder, "../shared/data/stsb/sts-dev.csv")   # {"spearman": ..., ...}
    ```
    """
    from keras_bert_zoo.tasks.embedder.data import read_sts
    from keras_bert_zoo.tasks.embedder.metrics import similarity_correlations

    pairs = read_sts(path, max_examples=max_examples)
    # Each distinct sentence once (STS-B dev: 3000 sentences, 2,9xx distinct).
    unique = sorted(set(pairs.sentences1) | set(pairs.sentences2))
    index = {s: i for i, s in enumerate(unique)}
    vectors = embedder.encode(unique, batch_size=batch_size)
    metrics = similarity_correlations(
        vectors[[index[s] for s in pairs.sentences1]], vectors[[index[s] for s in pairs.sentences2]], pairs.scores
    )
    metrics["examples"] = len(pairs)
    return metrics


TASK = EmbedTask()
