"""TPU readiness on any machine: the input has static shapes, and every step compiles with XLA.

A TPU runs a step only as one XLA program with fixed shapes. `check_tpu_compat(model,
dataset)` checks what a TPU would refuse, on the CPU, before anyone pays for a TPU:

- the batches: every feature and label has a fully known shape (batch dimension
  included: `drop_remainder=True`; no length bucketing, a fixed `sequence_length`
  and `max_predictions`), integer ids are int32, no string tensors;
- the steps: `train_step`, `test_step` and `predict_step` each lower to one XLA
  (HLO) program with `jit_compile=True`; the train step is also compiled by the
  CPU's XLA backend and run once on a real batch.

The input pipeline itself must be made of `tf.data` ops (TFRecords, not a Python
`from_generator`, which cannot run on a TPU host); `pretrain --strategy tpu` refuses
text corpora for that reason.

Examples:
>>> import keras, numpy as np, tensorflow as tf
>>> from keras_bert_zoo.training.tpu_compat import check_tpu_compat
>>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
>>> model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
>>> ds = tf.data.Dataset.from_tensor_slices((np.ones((8, 4), "float32"), np.zeros(8, "int32")))
>>> sorted(check_tpu_compat(model, ds.batch(4, drop_remainder=True)))
['predict', 'test', 'train']
"""

__all__ = ["STEPS", "TPUCompatError", "static_batches", "check_input_spec", "check_tpu_compat", "describe"]

STEPS = ("train", "test", "predict")


def _named(structure):
    """`(path, leaf)` pairs, paths written as `x.token_ids`, `y.mask_ids`, ..."""
    import keras

    top = {0: "x", 1: "y", 2: "sample_weight"} if isinstance(structure, tuple) else {}
    return [
        (".".join([top.get(path[0], str(path[0])), *map(str, path[1:])]) if path else "input", leaf)
        for path, leaf in keras.tree.flatten_with_path(structure)
    ]


class TPUCompatError(ValueError):
    """A batch or a step that would not run on a TPU; the message names the tensor or step."""


def static_batches(dataset, batch_size):
    """Re-batches `dataset` to exactly `batch_size` rows per batch (the last partial one dropped)."""
    return dataset.unbatch().batch(batch_size, drop_remainder=True)


def check_input_spec(element_spec):
    """Raises `TPUCompatError` for a dynamic shape, a string or an int64 tensor; returns a description."""
    import tensorflow as tf

    shown = []
    for path, spec in _named(element_spec):
        name = path or "input"
        if not isinstance(spec, tf.TensorSpec):
            raise TPUCompatError(f"{name} is a {type(spec).__name__}; a TPU step takes dense tensors only.")
        if spec.dtype == tf.string:
            raise TPUCompatError(f"{name} is a string tensor: tokenize in tf.data before the step.")
        if spec.dtype == tf.int64:
            raise TPUCompatError(f"{name} is int64: ids must be int32 on a TPU (cast in tf.data).")
        if not spec.shape.is_fully_defined():
            raise TPUCompatError(
                f"{name} has shape {spec.shape}: a TPU step needs static shapes (batch with "
                "drop_remainder=True, pad to a fixed sequence_length, no length bucketing)."
            )
        shown.append(f"{name} {spec.shape.as_list()} {spec.dtype.name}")
    return ", ".join(shown)


def check_tpu_compat(model, dataset):
    """Checks `dataset`'s batches and compiles each step of `model` with XLA; returns `{step: hlo_ops}`.

    Args:
        model: a compiled Keras model (its weights change: the train step runs once).
        dataset: `tf.data.Dataset` of `(x, y)` batches as the model trains on them.

    Returns:
        dict `train` / `test` / `predict` -> the number of HLO instructions of the
        compiled program (a sanity figure).

    Raises:
        TPUCompatError: naming the tensor or the step that a TPU would refuse.
    """
    import tensorflow as tf

    from keras_bert_zoo.keras_compat import symbolic_build

    check_input_spec(dataset.element_spec)
    batch = next(iter(dataset))
    symbolic_build(model, batch)  # variables exist before tracing, as fit ensures
    if model.optimizer is not None and not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    report = {}
    for name in STEPS:
        step = tf.function(getattr(model, f"{name}_step"), jit_compile=True)
        try:
            # Lowering to HLO is where a TPU fails (an op without an XLA kernel, a shape
            # known only at run time); the train step, which holds the others' forward
            # pass, is also compiled to machine code and run once.
            hlo = step.experimental_get_compiler_ir(batch)(stage="hlo")
            if name == "train":
                outputs = step(batch)
                for path, value in _named(outputs):
                    if not value.shape.is_fully_defined():
                        raise TPUCompatError(f"the train step's output {path} has a dynamic shape {value.shape}.")
        except TPUCompatError:
            raise
        except Exception as e:  # XLA's own message says which op; keep it, with the step named
            raise TPUCompatError(f"the {name} step does not compile with XLA: {str(e).splitlines()[0]}") from e
        report[name] = sum(1 for line in hlo.splitlines() if " = " in line)
    return report


def describe(report, dataset):
    """One line per step for the `--check-tpu-compat` dry run."""
    lines = [f"tpu-compat: input {check_input_spec(dataset.element_spec)}"]
    lines += [
        f"tpu-compat: {name} step lowered to XLA ({ops} HLO instructions)"
        + (", compiled and run on this CPU" if name == "train" else "")
        for name, ops in report.items()
    ]
    return "\n".join(lines)
