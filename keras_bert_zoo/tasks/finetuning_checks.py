"""The fine-tuning job's checks before its first step: the vocabulary, the model and the recipe.

`finetune` (`tasks.finetuning`) runs them before it reads a batch, so that a bad flag or a
vocabulary that does not fit the checkpoint stops the run at once with a message naming
the flag, not after minutes of data preparation.

Examples:
>>> from keras_bert_zoo.tasks.finetuning_checks import check_lora_rank
>>> check_lora_rank(8)
>>> check_lora_rank(0)
Traceback (most recent call last):
...
keras_bert_zoo.errors.UsageError: --lora-rank 0 must be a positive integer (4 to 16 is usual).
"""

import dataclasses
import os

import numpy as np

from keras_bert_zoo.errors import MissingPathError, UsageError

__all__ = ["vocab_dir_for", "check_vocabulary", "check_lora_rank", "Recipe", "recipe_of", "SELECTIONS"]

SELECTIONS = ("final", "best")


def vocab_dir_for(model, vocab=None):
    """The directory holding the `vocab.txt` to use, checked to exist."""
    from keras_bert_zoo.models.presets import BACKBONE_PRESETS

    if model not in BACKBONE_PRESETS and not os.path.isdir(str(model)):
        raise MissingPathError(
            f"--model {model!r} is neither a preset name nor a directory; give a checkpoint "
            f"directory or one of {', '.join(sorted(BACKBONE_PRESETS))}."
        )
    if vocab:
        path = vocab if os.path.isdir(vocab) else os.path.dirname(os.path.abspath(vocab))
    else:
        path = model if os.path.isdir(str(model)) else None
    if path is None or not os.path.isfile(os.path.join(path, "vocab.txt")):
        from keras_bert_zoo.convert.keras_hub_format import is_keras_hub_preset

        if path is not None and is_keras_hub_preset(path):
            raise UsageError(
                f"--model {model!r} is a KerasHub preset (its vocabulary is in assets/tokenizer/); "
                f"convert it once (bert-zoo convert --from {model} --out DIR) and pass --model DIR."
            )
        raise UsageError(
            f"no vocab.txt for --model {model!r}: a preset name has only an architecture; pass "
            "--vocab path/to/vocab.txt (e.g. the checkpoint's) or a --model directory that has one."
        )
    return path


def check_vocabulary(model, vocab_dir, sequence_length=None):
    """Raises before training when the vocabulary or the length does not fit the model."""
    from keras_bert_zoo.convert.checkpoint import read_architecture
    from keras_bert_zoo.preprocessing.vocab_file import read_vocabulary, vocabulary_past_table

    arch = read_architecture(model)
    vocab_path = os.path.join(vocab_dir, "vocab.txt")
    size = len(read_vocabulary(vocab_path))
    if size > arch["vocabulary_size"]:  # a shorter vocabulary is fine: HF checkpoints pad their tables
        raise vocabulary_past_table(vocab_path, size, arch["vocabulary_size"], f" (--model {model!r})")
    if sequence_length is not None and sequence_length > arch["max_sequence_length"]:
        raise UsageError(
            f"--sequence-length {sequence_length} is longer than the model's {arch['max_sequence_length']} "
            "learned positions; use at most that."
        )


def check_lora_rank(lora_rank):
    """None (no LoRA) or a positive int; a bool is refused (`True` is not a rank)."""
    if lora_rank is not None and (isinstance(lora_rank, bool) or not isinstance(lora_rank, int) or lora_rank < 1):
        raise UsageError(f"--lora-rank {lora_rank!r} must be a positive integer (4 to 16 is usual).")


@dataclasses.dataclass
class Recipe:
    """A fine-tuning run's recipe, the task's defaults filled in and every value checked (`recipe_of`).

    `optimizer` is `finetune`'s `recipe` argument (`"linear"` or `"bert_original"`); `batching`
    is the asked one until the job settles it for its replicas and device.
    """

    epochs: int
    learning_rate: float
    warmup_ratio: float
    optimizer: str
    sequence_length: int
    layout: object
    batching: str
    select: str
    seed: int


def recipe_of(
    spec,
    *,
    select,
    batching,
    epochs,
    batch_size,
    learning_rate,
    warmup_ratio,
    optimizer,
    sequence_length,
    layout,
    seed,
    task_options,
):
    """The run's `Recipe` with the task's defaults filled in, every value checked."""
    if select not in SELECTIONS:
        raise UsageError(f"select={select!r}; use one of {SELECTIONS}.")
    learning_rate = spec.default_learning_rate if learning_rate is None else learning_rate
    epochs = spec.default_epochs if epochs is None else epochs
    layout = spec.layout_from_options(layout, **task_options)
    sequence_length = sequence_length or spec.default_sequence_length
    _check_recipe(
        epochs=epochs,
        batch_size=batch_size,
        learning_rate=learning_rate,
        sequence_length=sequence_length,
        warmup_ratio=warmup_ratio,
    )
    if not isinstance(batching, str) or batching not in spec.batchings:
        raise UsageError(
            f"batching={batching!r} is not a batching of task {spec.name!r}; use one of "
            f"{', '.join(map(repr, spec.batchings))}" + _batching_hint(batching)
        )
    return Recipe(epochs, learning_rate, warmup_ratio, optimizer, sequence_length, layout, batching, select, seed)


def _batching_hint(batching):
    """Which tasks take a batching the chosen task does not, for its error message."""
    from keras_bert_zoo.tasks.registry import get_task, task_names

    takers = [name for name in task_names(finetunable=True) if batching in get_task(name).batchings]
    if not takers:
        return "."
    return f" ({batching!r} is a batching of {' and '.join(f'`finetune {name}`' for name in takers)})."


def _check_recipe(**values):
    """Positive, finite numbers, with a message naming the flag."""
    for name, value in values.items():
        bad = value is None or not np.isfinite(value) or value < 0 or (value == 0 and name != "warmup_ratio")
        if bad or (name == "warmup_ratio" and value > 1):
            allowed = "within [0, 1]" if name == "warmup_ratio" else "positive"
            raise UsageError(f"--{name.replace('_', '-')} {value} must be {allowed}.")
    if values["sequence_length"] < 8:
        raise UsageError(f"--sequence-length {values['sequence_length']} is too short; use at least 8 (128 is usual).")
