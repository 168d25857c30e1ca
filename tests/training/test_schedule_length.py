"""The learning-rate schedule ends exactly at the last step of a length-grouped run.

Batches grouped by length are more than `ceil(examples / batch)` (one partial batch per
length bucket: SST-2 629 against 625), so a schedule sized by that formula reached 0
before the end and the last steps trained at rate 0. `create_optimizer(lr)` (sized by
`fit`, which counts its batches) and `create_optimizer(lr, dataset=...)` know the true
count; the jobs count theirs. Each run here checks: steps run == `total_steps`, the rate
of the last step is still above 0 and the rate after it is the final value, 0.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo import BertClassifier, finetune
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.tasks.classifier.data import DataLayout
from keras_bert_zoo.training import create_optimizer
from tests.helpers import save_tiny_model

WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "the", "film", "was", "plot", "a", "very"]
BATCH = 4


def _texts(n, seed=0):
    """Sentences of 1 to 30 words: several 8-wide length buckets, each with a partial batch."""
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS[5:], size=int(rng.integers(1, 31)))) for _ in range(n)]
    return texts, rng.integers(0, 2, size=n)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return save_tiny_model(str(tmp_path_factory.mktemp("tiny")), WORDS)


def _classifier(model_dir):
    keras.utils.set_random_seed(0)
    return BertClassifier.from_preset(model_dir, num_classes=2)


def _assert_schedule_ends_at_last_step(optimizer):
    schedule = optimizer.learning_rate_schedule
    steps = int(optimizer.iterations.numpy())
    assert steps == schedule.total_steps, (steps, schedule.total_steps)
    assert float(schedule(steps - 1)) > 0.0  # the last step still learns ...
    assert float(schedule(steps)) == 0.0  # ... and the decay ends right after it
    assert float(optimizer.learning_rate) == 0.0


@pytest.mark.parametrize("recipe", ["linear", "bert_original"])
def test_length_grouped_fit_sizes_the_schedule(model_dir, recipe):
    texts, labels = _texts(50)
    model = _classifier(model_dir)
    model.compile(optimizer=create_optimizer(1e-3, recipe=recipe))
    model.fit(texts, labels, batch_size=BATCH, epochs=2, verbose=0)
    # The grouping gives more steps than the formula the examples used to size the schedule with.
    assert int(model.optimizer.iterations.numpy()) > 2 * -(-len(texts) // BATCH)
    _assert_schedule_ends_at_last_step(model.optimizer)
    assert model.optimizer.learning_rate_schedule.warmup_steps == round(0.1 * model.optimizer.iterations.numpy())


def test_create_optimizer_counts_the_batches_of_a_dataset(model_dir):
    texts, labels = _texts(50, seed=1)
    model = _classifier(model_dir)
    train = model.raw_dataset(texts, labels, batch_size=BATCH, training=True)
    model.compile(optimizer=create_optimizer(1e-3, dataset=train, epochs=3))
    model.fit(train, epochs=3, verbose=0)
    _assert_schedule_ends_at_last_step(model.optimizer)


def test_a_sized_schedule_is_kept_and_int_inputs_size_by_rows(model_dir):
    model = _classifier(model_dir)
    model.compile(optimizer=create_optimizer(1e-3, total_steps=7))
    texts, labels = _texts(12)
    model.fit(texts, labels, batch_size=BATCH, verbose=0)
    assert model.optimizer.learning_rate_schedule.total_steps == 7  # what the user asked for
    ids = model.preprocessor(texts)
    fresh = _classifier(model_dir)
    fresh.compile(optimizer=create_optimizer(1e-3))
    fresh.fit({k: v.numpy()[:, :32] for k, v in ids.items()}, labels, batch_size=5, epochs=2, verbose=0)
    _assert_schedule_ends_at_last_step(fresh.optimizer)  # 2 * ceil(12 / 5) = 6 steps


def test_unsized_schedule_errors_are_one_clear_line(model_dir):
    optimizer = create_optimizer(1e-3)
    with pytest.raises(UsageError, match="no total_steps yet"):
        float(optimizer.learning_rate)
    with pytest.raises(UsageError, match="not both"):
        create_optimizer(1e-3, total_steps=5, dataset=tf.data.Dataset.range(3))
    with pytest.raises(UsageError, match="repeats forever"):
        create_optimizer(1e-3, dataset=tf.data.Dataset.range(3).repeat())
    model = _classifier(model_dir)
    model.compile(optimizer=create_optimizer(1e-3))
    texts, labels = _texts(8)
    endless = model.raw_dataset(texts, labels, batch_size=BATCH).repeat()
    with pytest.raises(UsageError, match="cannot count the batches"):
        model.fit(endless, epochs=1, verbose=0)


def test_unsized_schedule_round_trips_through_keras(model_dir, tmp_path):
    model = _classifier(model_dir)
    model.compile(optimizer=create_optimizer(1e-3, warmup_ratio=0.2))
    texts, labels = _texts(20)
    model.fit(texts, labels, batch_size=BATCH, verbose=0)
    config = keras.optimizers.serialize(model.optimizer)
    schedule = keras.optimizers.deserialize(config).learning_rate_schedule
    original = model.optimizer.learning_rate_schedule
    assert (schedule.total_steps, schedule.warmup_steps) == (original.total_steps, original.warmup_steps)
    assert schedule.warmup_steps == round(0.2 * original.total_steps)


def test_finetune_job_ends_its_schedule_at_the_last_step(model_dir, tmp_path):
    texts, labels = _texts(42, seed=2)  # 12 grouped batches against ceil(42 / 4) = 11
    for name in ("train", "dev"):
        rows = ["sentence\tlabel"] + [f"{t}\t{y}" for t, y in zip(texts, labels, strict=True)]
        (tmp_path / f"{name}.tsv").write_text("\n".join(rows) + "\n")
    model, _ = finetune(
        "classify",
        model_dir,
        str(tmp_path / "train.tsv"),
        str(tmp_path / "dev.tsv"),
        str(tmp_path / "out"),
        layout=DataLayout.for_task("sst2"),
        epochs=2,
        batch_size=BATCH,
        sequence_length=32,
        verbose=0,
    )
    assert int(model.optimizer.iterations.numpy()) > 2 * -(-len(texts) // BATCH)
    _assert_schedule_ends_at_last_step(model.optimizer)
