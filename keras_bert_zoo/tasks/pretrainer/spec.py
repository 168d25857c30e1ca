"""The pretrained masked-LM as a task: held-out MLM / NSP scores and fill-mask serving.

`bert-zoo evaluate` / `predict` / `export` on a directory written by `pretrain` go
through `TASK` (found by the registry under `"pretrain"` and `"BertPretrainer"`);
the pretraining job itself is `keras_bert_zoo.tasks.pretrainer.job.pretrain`.
"""

import os

from keras_bert_zoo.errors import CheckpointError, InvalidInputError, UsageError
from keras_bert_zoo.export.serving import TaskServing
from keras_bert_zoo.files import check_input_file
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.options import TaskOption

__all__ = ["evaluate_pretrainer", "PretrainTask", "PretrainerServing", "TASK"]


def _is_records(paths):
    return all(str(p).endswith((".tfrecord", ".tfrecords")) or "tfrecord" in os.path.basename(str(p)) for p in paths)


def evaluate_pretrainer(model_dir, data_paths, batch_size=32, max_batches=None):
    """Held-out MLM / NSP scores of a pretrained model directory on a corpus.

    The corpus is prepared as at training time (the `data_layout` saved in the
    directory: sequence length, NSP mode, corpus format) with fixed-seed masks, so
    two evaluations of one model give the same numbers.

    Returns:
        dict with `mlm_accuracy`, `nsp_accuracy`, `mlm_loss`, `nsp_loss`, `loss`, `sequences`.
    """
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.tasks.pretrainer.data import default_max_predictions, pretraining_dataset
    from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records

    data_paths = [data_paths] if isinstance(data_paths, (str, os.PathLike)) else list(data_paths)
    for p in data_paths:
        check_input_file(p, "--data file")
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab):
        raise CheckpointError(f"{model_dir} has no vocab.txt, so the corpus cannot be tokenized; "
                         "evaluate a directory written by `bert-zoo pretrain`.")
    model = BertPretrainer.from_preset(model_dir, preprocessor=None)
    model.compile(jit_compile=False)
    cfg = {"sequence_length": 128, "nsp": "nsp", "corpus_format": "bert", "lowercase": True,
           "whole_word_masking": False, "max_ngram": 1, **model.data_layout}
    cfg.setdefault("max_predictions", default_max_predictions(cfg["sequence_length"]))
    if _is_records(data_paths):
        ds = read_pretraining_records(data_paths, batch_size, use_nsp=cfg["nsp"] != "none")
    else:
        ds = pretraining_dataset(
            data_paths, vocab, sequence_length=cfg["sequence_length"], max_predictions=cfg["max_predictions"],
            batch_size=batch_size, nsp=cfg["nsp"], whole_word_masking=cfg["whole_word_masking"],
            max_ngram=cfg["max_ngram"], corpus_format=cfg["corpus_format"], lowercase=cfg["lowercase"], seed=2024,
        )
    if max_batches:
        ds = ds.take(max_batches)
    ds = ds.cache()
    sequences = sum(int(x["token_ids"].shape[0]) for x, _ in ds)
    ds, _ = with_known_cardinality(ds)  # Keras warns "ran out of data" on streams of unknown length
    if sequences == 0:
        raise InvalidInputError(f"{data_paths} produced no pretraining examples; check --data and the corpus format "
                         f"({cfg['corpus_format']!r}).")
    metrics = {k: float(v) for k, v in model.evaluate(ds, return_dict=True, verbose=0).items()}
    metrics["sequences"] = sequences
    return metrics


class PretrainTask(TaskSpec):
    name = "pretrain"
    model_path = "keras_bert_zoo.tasks.pretrainer.model.BertPretrainer"
    description = "masked-LM + next-sentence pretraining"
    finetunable = False
    checkpoint_heads = {
        "hf": ("cls.predictions.transform.dense.weight", "cls.seq_relationship.weight"),
        "google": ("cls/predictions/transform/dense/kernel", "cls/seq_relationship/output_weights"),
    }
    head_priority = 0  # its cls.* tensors are specific; tried before a classifier's
    default_learning_rate = 1e-4

    def evaluate(self, model_dir, data_paths, batch_size=32):
        return evaluate_pretrainer(model_dir, data_paths, batch_size=batch_size)

    def predict(self, model, texts):
        if not any("[MASK]" in t for t in texts):
            raise InvalidInputError("a pretrained model fills in masks: write [MASK] where a word is missing, e.g. "
                             "'The capital of France is [MASK] .'")
        return [{"text": text, "masks": [[{"token": t, "score": round(p, 4)} for t, p in slot] for slot in answer]}
                for text, answer in zip(texts, model.fill_mask(list(texts)))]

    def format_prediction(self, row):
        shown = "  |  ".join(", ".join(f"{c['token']} {c['score']:.3f}" for c in slot) for slot in row["masks"])
        return f"{shown or '(no [MASK])'}\t{row['text']}"

    def serving(self):
        return PretrainerServing


class PretrainerServing(TaskServing):
    """Fill-mask: the top-k tokens at each `[MASK]` of the text (at most `max_masks`).

    Outputs `[batch, max_masks, top_k]` `tokens`, `token_ids`, `scores` (softmax
    probabilities), and `[batch, max_masks]` `mask_positions` and `is_mask` (False on
    padding slots, where the other outputs are meaningless).
    """

    default_signature = "fill_mask"
    options = (TaskOption("top_k", int, 5, "fill-mask, tokens returned per [MASK] (5)", low=1, high=1000),
               TaskOption("max_masks", int, 8, "fill-mask, [MASK]s read per text (8)", low=1, high=512))

    def __init__(self, model, preprocessor, text_pair=False, top_k=5, max_masks=8):
        super().__init__(model, preprocessor, text_pair)
        self.top_k = int(top_k)
        self.max_masks = int(max_masks)
        # Checked here, not left to tf.math.top_k: its error surfaces while the export is being
        # traced, as TensorFlow's traced source code, naming neither the flag nor the vocabulary.
        vocabulary = int(model.backbone.vocabulary_size)
        if not 1 <= self.top_k <= vocabulary:
            raise UsageError(f"--top-k {self.top_k} (top_k= in Python) asks for more tokens than the model's "
                             f"vocabulary of {vocabulary}; use 1 to {vocabulary}.")
        self.mask_id = preprocessor.tokenizer.mask_token_id
        self.vocab_table = None

    def bind(self, module):
        self.vocab_table = module.vocab_table

    def model_inputs(self, features):
        import tensorflow as tf

        is_mask = tf.equal(features["token_ids"], self.mask_id)
        positions = tf.ragged.boolean_mask(
            tf.broadcast_to(tf.range(tf.shape(is_mask)[1]), tf.shape(is_mask)), is_mask
        )
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


TASK = PretrainTask()
