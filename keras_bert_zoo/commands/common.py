"""Flags several verbs share (the training verbs' own: `commands.training_flags`)."""

# Numeric flag types (ranges carried by the type): `keras_bert_zoo.flags`, shared with the tasks' flags.
from keras_bert_zoo.flags import (
    MAX_VOCABULARY,
    batch_int,
    count_int,
    float_in,
    int_in,
    learning_rate_float,
    length_int,
    ratio_float,
    seed_int,
    steps_int,
)

__all__ = [
    "add_overwrite_argument",
    "flag_values",
    "MAX_VOCABULARY",
    "batch_int",
    "count_int",
    "float_in",
    "int_in",
    "learning_rate_float",
    "length_int",
    "ratio_float",
    "seed_int",
    "steps_int",
]


def add_overwrite_argument(parser, what="--out"):
    """`--overwrite`: replace an existing output, once the new one is complete."""
    parser.add_argument(
        "--overwrite", action="store_true", help=f"replace an existing {what} (only once the new output is complete)"
    )


def flag_values(args, *names):
    """`{name: args.name}` for flags a job takes under their own names."""
    return {name: getattr(args, name) for name in names}
