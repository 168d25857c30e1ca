"""Numeric flag types that carry their own ranges, for every verb and every task's flags.

A bad value is a usage error that argparse reports as one line with exit code 2:
`argument --batch-size: 0 is out of range; use 1 to 65,536`. The upper bounds catch typos
(an extra digit) long before they exhaust memory or time; floats refuse NaN and infinity.
This module imports nothing heavy (`bert-zoo VERB --help` builds its parser without
TensorFlow) and sits outside `commands/` so task modules (`tasks/*.py`, which declare their
own flags) can use the same types; `commands.common` re-exports them.

Examples:
>>> from keras_bert_zoo.flags import int_in
>>> int_in(1, 10)("3")
3
"""

import argparse
import math

__all__ = [
    "MAX_STEPS",
    "MAX_BATCH",
    "MAX_LENGTH",
    "MAX_VOCABULARY",
    "int_in",
    "float_in",
    "positive_int",
    "steps_int",
    "count_int",
    "batch_int",
    "length_int",
    "seed_int",
    "learning_rate_float",
    "ratio_float",
    "STRATEGIES",
    "PRECISIONS",
]

MAX_STEPS = 10**9
MAX_BATCH = 65_536
MAX_LENGTH = 8_192
MAX_VOCABULARY = 1_000_000
_MAX_SEED = 2**31 - 1

# `--strategy` and `--mixed-precision` (`training.strategies` gives them a meaning): here so
# the CLI's parser is built without importing TensorFlow.
STRATEGIES = ("default", "mirrored", "multi_worker", "tpu")
PRECISIONS = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def int_in(low, high):
    """An argparse `type`: an int within [low, high]."""

    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; use {low:,} to {high:,}")
        return value

    parse.__name__ = "integer"
    parse.bounds = (low, high)
    return parse


def float_in(low, high, low_open=True):
    """An argparse `type`: a finite float within (low, high] (or [low, high])."""

    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > high or value < low or (low_open and value == low):
            bracket = "(" if low_open else "["
            raise argparse.ArgumentTypeError(f"{text} is out of range; use a number in {bracket}{low:g}, {high:g}]")
        return value

    parse.__name__ = "number"
    parse.bounds = (low, high)
    return parse


positive_int = int_in(1, MAX_STEPS)
steps_int = int_in(1, MAX_STEPS)
count_int = int_in(0, MAX_STEPS)
batch_int = int_in(1, MAX_BATCH)
length_int = int_in(8, MAX_LENGTH)
seed_int = int_in(0, _MAX_SEED)
learning_rate_float = float_in(0.0, 1.0)
ratio_float = float_in(0.0, 1.0, low_open=False)
