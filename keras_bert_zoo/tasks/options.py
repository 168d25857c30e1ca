"""Task options declared as data: one table gives the CLI flags, the checks and `finetune`'s keywords.

A task lists its options once (`TaskSpec.options`, a tuple of `TaskOption`); from that
list `bert-zoo finetune TASK` gets its flags (`add_option_flags`), both the flags and
`finetune(TASK, ..., name=value)` get the same range and choice checks
(`option_values`), and the task builds its data layout from the checked values
(`TaskSpec.make_layout`). A bad value is a `UsageError` (exit code 2) naming the option,
the value and what is allowed.

The batchings (`finetune(..., batching=NAME)`, `--batching NAME`) are one vocabulary for
every task, `BATCHINGS`; a task offers the names its `dataset` gives a meaning to
(`TaskSpec.batchings`).

Examples:
>>> from keras_bert_zoo.tasks.options import TaskOption, option_values
>>> stride = TaskOption("doc_stride", int, 128, "pieces between window starts", low=1, high=8192)
>>> option_values((stride,), "qa", {"doc_stride": 64})
{'doc_stride': 64}
>>> option_values((stride,), "qa", {"doc_strid": 64})
Traceback (most recent call last):
...
keras_bert_zoo.errors.UsageError: doc_strid is not an option of the qa task; its options are doc_stride.
"""

import argparse
import dataclasses
import math

from keras_bert_zoo.errors import UsageError

__all__ = ["BATCHINGS", "TaskOption", "option_values", "add_option_flags", "values_from_args"]

BATCHINGS = {
    "auto": "the task's default (its fastest at equal accuracy; see each task's --help)",
    "packed": "training batches drawn at random and packed into full rows, each example attending only to "
    "itself (same loss as padded batches, without computing the padding)",
    "by_length": "training batches of examples of similar length, each padded to its bucket width",
    "bucketed": "batches drawn at random (HF's Trainer), each cut to the bucket width of its longest example",
    "fixed": "every batch padded to --sequence-length (static shapes: TPU, XLA)",
}


@dataclasses.dataclass(frozen=True)
class TaskOption:
    """One option of a task: its keyword, type, default, help and allowed values.

    Attributes:
        name: the `finetune` keyword (`"doc_stride"`); the flag is `--doc-stride`.
        type: `int`, `float`, `str` or `bool` (a bool is a flag that turns it on), or
            `list` (a repeatable string flag, e.g. `--text-column a --text-column b`).
        default: the value when not given.
        help: one line for `--help`.
        choices: the allowed values of a `str` option.
        low, high: the inclusive range of an `int`/`float` option.
        flag: the flag when it differs from the name's (`"--no-header"` for `header`
            negates: the flag stores False).
        aliases: more flags for the same option (`"--task"` for classify's `--glue`).
    """

    name: str
    type: type
    default: object
    help: str
    choices: tuple = None
    low: float = None
    high: float = None
    flag: str = None
    aliases: tuple = ()

    @property
    def flag_name(self):
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def negated(self):
        return self.type is bool and self.flag_name.startswith("--no-")

    def check(self, value, task):
        """`value` converted and checked; raises `UsageError` naming the option and the fix."""
        where = f"{self.name} (`{self.flag_name}`) of the {task} task"
        if value is None:
            return value
        if self.type is bool:
            if not isinstance(value, bool):
                raise UsageError(f"{where} is True or False, not {value!r}.")
            return value
        if self.type is list:
            if isinstance(value, str) or not all(isinstance(v, (str, int)) for v in value):
                raise UsageError(f"{where} is a list of column names or indices, not {value!r}.")
            return list(value)
        if self.type in (int, float):
            number = value
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or (self.type is int and not float(value).is_integer())
                or not math.isfinite(value)
            ):
                raise UsageError(f"{where} is {'an integer' if self.type is int else 'a number'}, not {value!r}.")
            number = self.type(value)
            if (self.low is not None and number < self.low) or (self.high is not None and number > self.high):
                raise UsageError(f"{where} is {value!r}, out of range; use {self.low:g} to {self.high:g}.")
            return number
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{where} is {value!r}; use one of {', '.join(map(repr, self.choices))}.")
        return value


def option_values(options, task, given):
    """The values of `options` (defaults filled in) from `given` (`{name: value}`), checked.

    Raises `UsageError` for a name that is not an option of `task` or a value out of its range.
    """
    known = {option.name: option for option in options}
    unknown = sorted(set(given) - set(known))
    if unknown:
        listed = ", ".join(sorted(known)) or "none"
        raise UsageError(
            f"{', '.join(unknown)} {'is not an option' if len(unknown) == 1 else 'are not options'} "
            f"of the {task} task; its options are {listed}."
        )
    return {name: option.check(given.get(name, option.default), task) for name, option in known.items()}


def add_option_flags(parser, options):
    """Adds one flag per option to `parser` (an argparse parser or group)."""
    for option in options:
        kwargs = {"dest": option.name, "help": option.help}
        if option.type is bool:
            kwargs.update(action="store_false" if option.negated else "store_true", default=option.default)
        elif option.type is list:
            kwargs.update(action="append", default=None)
        else:
            kwargs.update(type=_parser_of(option), default=option.default, choices=option.choices)
        parser.add_argument(option.flag_name, *option.aliases, **kwargs)


def values_from_args(options, args):
    """`{name: value}` of `options` as parsed by `add_option_flags`."""
    return {option.name: getattr(args, option.name) for option in options}


def _parser_of(option):
    """An argparse `type` that converts and range-checks, so a bad flag exits 2 in argparse."""
    if option.type not in (int, float):
        return option.type

    def parse(text):
        try:
            value = option.type(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if option.type is int else 'a number'}"
            ) from None
        try:
            return option.check(value, "this")
        except UsageError:
            raise argparse.ArgumentTypeError(f"{text} is out of range; use {option.low:g} to {option.high:g}") from None

    parse.__name__ = option.type.__name__
    return parse
