"""The pretrained masked-LM as a task: held-out MLM / NSP scores and fill-mask serving.

`bert-zoo evaluate` / `predict` / `export` on a directory written by `pretrain` go
through `TASK` (found by the registry under `"pretrain"` and `"BertPretrainer"`);
the pretraining job itself is `keras_bert_zoo.tasks.pretrainer.job.pretrain`.
"""

import os

from keras_bert_zoo.errors import CheckpointError, InvalidInputError
from keras_bert_zoo.files import check_input_file
from keras_bert_zoo.tasks.base import TaskSpec
from keras_bert_zoo.tasks.pretrainer.serving import PretrainerServing

__all__ = ["evaluate_pretrainer", "PretrainTask", "TASK"]


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
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.tasks.pretrainer.data import default_max_predictions, pretraining_dataset
    from keras_bert_zoo.tasks.pretrainer.model import BertPretrainer
    from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records

    data_paths = [data_paths] if isinstance(data_paths, (str, os.PathLike)) else list(data_paths)
    for p in data_paths:
        check_input_file(p, "--data file")
    vocab = os.path.join(model_dir, "vocab.txt")
    if not os.path.isfile(vocab):
        raise CheckpointError(
            f"{model_dir} has no vocab.txt, so the corpus cannot be tokenized; "
            "evaluate a directory written by `bert-zoo pretrain`."
        )
    model = BertPretrainer.from_preset(model_dir, preprocessor=None)
    model.compile(jit_compile=False)
    cfg = {
        "sequence_length": 128,
        "nsp": "nsp",
        "corpus_format": "bert",
        "lowercase": True,
        "whole_word_masking": False,
        "whole_word_segmenter": "wordpiece",  # directories written before the option: the ## rule
        "max_ngram": 1,
        **model.data_layout,
    }
    cfg.setdefault("max_predictions", default_max_predictions(cfg["sequence_length"]))
    if _is_records(data_paths):
        ds = read_pretraining_records(data_paths, batch_size, use_nsp=cfg["nsp"] != "none")
    else:
        ds = pretraining_dataset(
            data_paths,
            vocab,
            sequence_length=cfg["sequence_length"],
            max_predictions=cfg["max_predictions"],
            batch_size=batch_size,
            nsp=cfg["nsp"],
            whole_word_masking=cfg["whole_word_masking"],
            whole_word_segmenter=cfg["whole_word_segmenter"],
            max_ngram=cfg["max_ngram"],
            corpus_format=cfg["corpus_format"],
            lowercase=cfg["lowercase"],
            seed=2024,
        )
    if max_batches:
        ds = ds.take(max_batches)
    ds = ds.cache()
    sequences = sum(int(x["token_ids"].shape[0]) for x, _ in ds)
    ds, _ = with_known_cardinality(ds)  # Keras warns "ran out of data" on streams of unknown length
    if sequences == 0:
        raise InvalidInputError(
            f"{data_paths} produced no pretraining examples; check --data and the corpus format "
            f"({cfg['corpus_format']!r})."
        )
    metrics = {k: float(v) for k, v in model.evaluate(ds, return_dict=True, verbose=0).items()}
    metrics["sequences"] = sequences
    return metrics


class PretrainTask(TaskSpec):
    name = "pretrain"
    model_path = "keras_bert_zoo.tasks.pretrainer.model.BertPretrainer"
    serving = PretrainerServing  # its SavedModel's inputs and outputs (serving.py)
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
            raise InvalidInputError(
                "a pretrained model fills in masks: write [MASK] where a word is missing, e.g. "
                "'The capital of France is [MASK] .'"
            )
        return [
            {"text": text, "masks": [[{"token": t, "score": round(p, 4)} for t, p in slot] for slot in answer]}
            for text, answer in zip(texts, model.fill_mask(list(texts)), strict=True)
        ]

    def format_prediction(self, row):
        shown = "  |  ".join(", ".join(f"{c['token']} {c['score']:.3f}" for c in slot) for slot in row["masks"])
        return f"{shown or '(no [MASK])'}\t{row['text']}"


TASK = PretrainTask()
