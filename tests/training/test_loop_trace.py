"""The jobs' train step runs one graph for batches of every shape (`training.loop.train_function`).

A graph traced for one batch shape rounds otherwise than the shape-generic one. When the step traced the first
shapes it met on their own (Keras' `reduce_retracing`), a run resumed mid-epoch met other shapes first than the
uninterrupted run and ended 6e-8 away from it (all-MiniLM-L6-v2, `finetune classify --deterministic`; the slow
`test_resume.py` runs show it end to end). Here: one trace for batches of three widths and two sizes.
"""

import keras
import numpy as np
import tensorflow as tf

from keras_bert_zoo.training.loop import train_function


def test_train_steps_of_every_shape_run_one_trace():
    keras.utils.set_random_seed(0)
    model = keras.Sequential(
        [keras.Input((None,), dtype="int32"), keras.layers.Embedding(20, 4), keras.layers.GlobalAveragePooling1D()]
        + [keras.layers.Dense(2)]
    )
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rows = [np.arange(1, n + 1) % 20 for n in (3, 5, 9, 4, 7, 2, 8)]
    ds = tf.data.Dataset.from_generator(
        lambda: ((r, i % 2) for i, r in enumerate(rows)),
        output_signature=(tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.int64)),
    ).padded_batch(3)  # widths 9, 8, 8 over sizes 3, 3, 1
    step = train_function(model, ds.element_spec)  # traced here, before the first batch
    traced = step.experimental_get_tracing_count()
    losses = [float(step(batch)["loss"]) for batch in ds]
    assert len(losses) == 3 and all(np.isfinite(losses))
    assert step.experimental_get_tracing_count() == traced  # no batch shape traced a graph of its own
