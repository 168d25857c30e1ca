"""How models load and save checkpoints, without knowing any file format.

The models own their name table (`weight_names`: which variable is which checkpoint
tensor) and decide what goes where; reading and writing files (HF safetensors, original
Google TF1 checkpoints, our presets) is `keras_bert_zoo.convert`'s job. The dependency
points one way, convert -> models: `keras_bert_zoo.convert` registers its reader and its
writer here when it is imported, and the package `keras_bert_zoo` imports it, so
`BertBackbone.from_preset(directory)` works after importing any part of the package.

A checkpoint, as the registered reader returns it, has:

- `path`, `format` (`"hf"` or `"google"`), `config` (the raw config dict),
  `backbone_kwargs` (`BertBackbone` arguments), `extra` (our `keras_bert_zoo` config
  section, `{}` for foreign checkpoints);
- `file(name)`: path of a file beside the weights, or None;
- `get(spec)`: the tensor of a `WeightSpec` in Keras layout, or None (and remembers it
  as read); `name_of(spec)`: its name in the checkpoint's layout, for messages;
- `tensor_names()`, `tensor_shape(name)`: what is stored;
- `unused_tensors(backbone_only=False)`: names of the tensors nothing has read
  (optimizer state and buffers excepted); `backbone_only` keeps those that look like
  backbone weights.

Notes for the user (random initialisation, a missing pooler, tensors left unread) are
one line each on stderr, so the `bert-zoo` command shows them as they happen.
"""

import os
import sys

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.keras_compat import all_layers
from keras_bert_zoo.models.presets import BACKBONE_PRESETS, PRETRAINED_REPOS
from keras_bert_zoo.models.weight_names import backbone_weight_specs

__all__ = [
    "CONFIG_SECTION",
    "register_resolver",
    "register_keras_hub_writer",
    "register_checkpoint_reader",
    "register_preset_writer",
    "registered_hooks",
    "resolve",
    "save_as",
    "open_checkpoint",
    "write_preset",
    "note",
    "is_preset_name",
    "note_random_init",
    "report_unused",
    "assign_weights",
    "missing_tensors",
    "load_backbone_weights",
    "read_config",
]

CONFIG_SECTION = "keras_bert_zoo"  # our section of config.json (task, labels, ...)
_POOLER_TENSORS = ("pooler.dense.weight", "pooler.dense.bias")


# --- the hooks keras_bert_zoo.convert fills ---------------------------------------------
_HOOKS = {"reader": None, "writer": None, "resolver": None, "keras_hub_writer": None}


def register_resolver(resolver):
    """Sets `resolver(name_or_path, load_weights) -> name_or_path`: turns a preset name or
    `hf://ORG/NAME[@REV]` into a local directory (`keras_bert_zoo.convert.hub`)."""
    _HOOKS["resolver"] = resolver
    return resolver


def register_keras_hub_writer(writer):
    """Sets `writer(path, model)`: writes a model as a KerasHub preset directory."""
    _HOOKS["keras_hub_writer"] = writer
    return writer


def register_checkpoint_reader(reader):
    """Sets `reader(path) -> checkpoint` (raising `CheckpointError` for what it cannot read)."""
    _HOOKS["reader"] = reader
    return reader


def register_preset_writer(writer):
    """Sets `writer(path, backbone, head_specs=(), architecture="BertModel", extra=None, tied=(),
    include_pooler=True)`."""
    _HOOKS["writer"] = writer
    return writer


def registered_hooks():
    """`{kind: function}` of what is registered ("reader", "writer", "resolver",
    "keras_hub_writer"; None: nothing yet), a copy: change them through the `register_*`
    functions. `import keras_bert_zoo` (through `keras_bert_zoo.convert`) fills all four."""
    return dict(_HOOKS)


def _hook(kind):
    hook = _HOOKS[kind]
    if hook is None:
        raise RuntimeError(
            f"no checkpoint {kind} is registered; `import keras_bert_zoo` (which imports "
            "keras_bert_zoo.convert) before loading or saving presets."
        )
    return hook


def resolve(name_or_path, load_weights=True):
    """The local directory `from_preset` reads for `name_or_path`, or a preset name itself
    when `load_weights=False` (architecture only). A local directory comes back unchanged.

    A preset name stands for its official pretrained checkpoint, `hf://ORG/NAME[@REV]` for
    any Hub repo; both go through `huggingface_hub`'s cache (see `keras_bert_zoo.convert.hub`).
    """
    return _hook("resolver")(name_or_path, load_weights)


def save_as(path, model, format):
    """Writes `model` as a KerasHub preset when `format="keras_hub"` and returns True;
    returns False for `"keras_bert_zoo"` (ours, HF layout: the caller writes it)."""
    if format == "keras_hub":
        if any(layer.quantization_mode for layer in all_layers(model)):
            raise UsageError(
                f"{model.name} is quantized; a KerasHub preset holds float weights. Save it with "
                "format='keras_bert_zoo' (it records the quantization) or model.save('m.keras'), "
                "or write the float model and quantize after loading it."
            )
        _hook("keras_hub_writer")(path, model)
        return True
    if format != "keras_bert_zoo":
        raise UsageError(
            f"format={format!r} is not a preset format; use 'keras_bert_zoo' (HF layout, the default) or 'keras_hub'."
        )
    return False


def open_checkpoint(path):
    """The checkpoint in directory `path`, opened by the registered reader."""
    return _hook("reader")(path)


def write_preset(path, backbone, **kwargs):
    """Writes `backbone` (and the task's head tensors in `kwargs`) as a preset directory."""
    return _hook("writer")(path, backbone, **kwargs)


# --- notes ---------------------------------------------------------------------------------
def note(message):
    """One line for the user, on stderr (looked up at call time, so redirections see it)."""
    print(message, file=sys.stderr)


def is_preset_name(name_or_path):
    """Does `name_or_path` stand for a preset of the table (not a local directory)?

    An existing directory wins over a preset of the same name: `./bert_base_chinese` holding a
    checkpoint loads that checkpoint, as `from_pretrained` and KerasHub read a local path first.
    Every place that tells a preset name from a path asks here, so they cannot disagree.
    """
    return isinstance(name_or_path, str) and name_or_path in BACKBONE_PRESETS and not os.path.isdir(name_or_path)


def note_random_init(name):
    if PRETRAINED_REPOS.get(name):
        weights = "load_weights=True loads its pretrained checkpoint"
    else:  # the small cased sizes: Turc et al. released them uncased only
        weights = (
            f"Google released no pretrained checkpoint of this size and casing; "
            f"{name.replace('_cased', '_uncased')} has one"
        )
    note(f"{name}: architecture only, random initialisation (load_weights=False; {weights})")


def report_unused(checkpoint, owner, accounted=(), backbone_only=False):
    """One line naming the checkpoint tensors `owner` did not read, if there are any."""
    unused = [n for n in checkpoint.unused_tensors(backbone_only=backbone_only) if n not in set(accounted)]
    if unused:
        shown = ", ".join(unused[:6]) + (", ..." if len(unused) > 6 else "")
        note(f"{checkpoint.path}: {len(unused)} checkpoint tensor(s) not used by {owner}: {shown}")
    return unused


# --- weights --------------------------------------------------------------------------------
def assign_weights(checkpoint, specs, required=True):
    """Copies checkpoint tensors into the variables of `specs`, all or nothing.

    Every tensor is read and shape-checked before any variable is written, so a
    checkpoint that does not fit leaves the model untouched.

    Returns:
        True when every spec was found and assigned; False when `required=False`
        and some are missing (then nothing is assigned).

    Raises:
        CheckpointError: a tensor has the wrong shape (naming it and both shapes), or
            tensors are missing and `required=True` (naming the first ones).
    """
    values, missing, wrong = [], [], []
    for spec in specs:  # read them all, so every tensor asked for counts as used
        value = checkpoint.get(spec)
        if value is None:
            missing.append(checkpoint.name_of(spec))
            continue
        expected = tuple(spec.variable.shape)
        if tuple(value.shape) != expected:
            wrong.append((checkpoint.name_of(spec), tuple(value.shape), expected))
        values.append((spec.variable, value))
    if wrong:
        name, got, expected = wrong[0]
        raise CheckpointError(
            f"{checkpoint.path}: tensor {name!r} has shape {got}, the model expects {expected}"
            f"{f' ({len(wrong) - 1} more mismatched)' if len(wrong) > 1 else ''}. "
            "Check that the config matches the weights."
        )
    if missing:
        if not required:
            return False
        raise CheckpointError(
            f"{checkpoint.path}: {len(missing)} tensor(s) missing from the checkpoint, first {missing[:3]}."
        )
    for variable, value in values:
        variable.assign(value)
    return True


def missing_tensors(checkpoint, specs):
    """Names (in the checkpoint's layout) of the `specs` the checkpoint does not have."""
    return [checkpoint.name_of(s) for s in specs if checkpoint.get(s) is None]


def load_backbone_weights(backbone, checkpoint, pooler_needed=True):
    """Fills every backbone variable from `checkpoint`; the pooler only if it is there.

    Some checkpoints have no pooler (sentence encoders, HF `BertForMaskedLM`,
    `BertForTokenClassification` and `BertForQuestionAnswering`): the backbone still
    loads, its pooler keeps its random initialisation, and, when the model uses the
    pooler (`pooler_needed`), one warning line says so and what to do about it.
    """
    specs = backbone_weight_specs(backbone)
    assign_weights(checkpoint, [s for s in specs if s.name not in _POOLER_TENSORS])
    pooler = [s for s in specs if s.name in _POOLER_TENSORS]
    if not assign_weights(checkpoint, pooler, required=False) and pooler_needed:
        note(
            f"warning: {checkpoint.path} has no pooler weights (pooler.dense.*): the pooler is "
            "randomly initialised; pooled_output and BertClassifier heads will need fine-tuning; "
            "use pooling='mean' features or a checkpoint with a pooler"
        )
    return backbone


def read_config(path):
    """`path/config.json` as a dict, or None when `path` is not a directory with one."""
    import json
    import os

    config_path = os.path.join(os.fspath(path), "config.json")
    if not os.path.isfile(config_path):
        return None
    try:
        with open(config_path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        raise CheckpointError(f"{config_path} is not valid JSON: {e}") from None
