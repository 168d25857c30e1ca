"""TPU readiness on the CPU: one XLA-compiled train/eval/predict step per task model, static inputs only.

The models are the `REPLICA_CASES` of `test_strategies.py`, which must hold every registered
`Task` subclass (`test_every_task_model_has_a_replica_case`), so a new task model is checked here
as soon as it has its replica case.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.training.tpu_compat import (
    TPUCompatError,
    check_tpu_compat,
    static_batches,
)
from tests.training.test_strategies import LEARNING_RATE, PER_REPLICA_BATCH, REPLICA_CASES, SHIFT_INVARIANT_BIASES


@pytest.mark.parametrize("case", sorted(REPLICA_CASES))
def test_every_step_lowers_to_xla_and_the_compiled_train_step_matches_the_plain_one(case):
    build, x, y = REPLICA_CASES[case](np.random.default_rng(0), 2 * PER_REPLICA_BATCH)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(PER_REPLICA_BATCH, drop_remainder=True)
    xla, plain = build(), build()
    plain.set_weights(xla.get_weights())
    report = check_tpu_compat(xla, dataset)
    assert set(report) == {"train", "test", "predict"} and min(report.values()) > 10
    # The XLA program computes what the ordinary step computes (one train step from equal weights).
    batch = next(iter(dataset))
    plain._symbolic_build(data_batch=batch)
    plain_logs = tf.function(plain.train_step)(batch)
    for variable, a, b in zip(xla.weights, xla.get_weights(), plain.get_weights(), strict=True):
        if variable.path == SHIFT_INVARIANT_BIASES.get(case):
            # Its exact gradient is 0 (a softmax does not see a shift of all its logits), so
            # each side's is float noise, and Adam's first step, lr * g / (|g| + eps), is
            # up to lr in either direction.
            assert np.abs(a - b).max() <= 2 * LEARNING_RATE
            continue
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=2e-5, err_msg=variable.path)
    assert np.isfinite(float(plain_logs["loss"]))


def _classifier():
    from tests.training.test_strategies import classifier_case

    return classifier_case(np.random.default_rng(0), 8)


def test_a_dynamic_batch_dimension_is_refused():
    build, x, y = _classifier()
    ragged_batch = tf.data.Dataset.from_tensor_slices((x, y)).batch(3)  # 8 rows: the last batch has 2
    with pytest.raises(TPUCompatError, match=r"x\.\w+ has shape \(None, 8\).*drop_remainder=True"):
        check_tpu_compat(build(), ragged_batch)
    fixed = static_batches(ragged_batch, 4)
    assert fixed.element_spec[0]["token_ids"].shape == (4, 8)
    assert sum(1 for _ in fixed) == 2


@pytest.mark.parametrize("dtype, match", [(tf.int64, "int64: ids must be int32"), (tf.string, "string tensor")])
def test_int64_and_string_inputs_are_refused(dtype, match):
    build, x, y = _classifier()
    x = dict(x, token_ids=tf.as_string(x["token_ids"]) if dtype == tf.string else tf.cast(x["token_ids"], dtype))
    with pytest.raises(TPUCompatError, match=match):
        check_tpu_compat(build(), tf.data.Dataset.from_tensor_slices((x, y)).batch(4, drop_remainder=True))


@pytest.mark.slow  # over a minute together with the others: kept out of the 20-minute default run
def test_finetune_and_pretrain_dry_runs_check_the_real_pipelines(tmp_path, capsys):
    """`--check-tpu-compat` on the real jobs: static batches of the task's own pipeline, XLA steps, nothing written."""
    from keras_bert_zoo import BertBackbone
    from keras_bert_zoo.cli import main
    from tests.helpers import minilm_path, shared_data

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film"]
    BertBackbone(
        vocabulary_size=len(words), num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=16
    ).save_to_preset(str(tmp_path / "model"))
    (tmp_path / "model" / "vocab.txt").write_text("\n".join(words) + "\n")
    (tmp_path / "data.tsv").write_text("sentence\tlabel\n" + "good film\t1\nbad\t0\n" * 5)
    data = str(tmp_path / "data.tsv")
    assert (
        main(
            [
                "finetune",
                "classify",
                "--model",
                str(tmp_path / "model"),
                "--train",
                data,
                "--dev",
                data,
                "--glue",
                "sst2",
                "--batch-size",
                "4",
                "--sequence-length",
                "16",
                "--check-tpu-compat",
                "--out",
                str(tmp_path / "ft"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    # Bucketing is off and the 10 examples make 2 full batches of 4: static [4, 16] int32.
    assert "x.token_ids [4, 16] int32" in out and "train step lowered to XLA" in out, out
    assert "predict step lowered" in out and "test step lowered" in out
    assert (
        main(
            [
                "pretrain",
                "--corpus",
                shared_data("pretrain_text", "sample_text.txt"),
                "--preset",
                "bert_tiny_uncased",
                "--vocab",
                minilm_path(),
                "--batch-size",
                "2",
                "--sequence-length",
                "32",
                "--check-tpu-compat",
                "--out",
                str(tmp_path / "pt"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "x.mask_positions [2, 5] int32" in out and "on a TPU pass TFRecords" in out, out
    assert not (tmp_path / "ft").exists() and not (tmp_path / "pt").exists()


def test_pretrain_on_tpu_refuses_a_text_corpus(tmp_path):
    from keras_bert_zoo import pretrain
    from tests.helpers import shared_data

    with pytest.raises(ValueError, match="--strategy tpu reads TFRecords"):
        pretrain(
            shared_data("pretrain_text", "sample_text.txt"),
            str(tmp_path / "out"),
            preset="bert_tiny_uncased",
            vocab_size=200,
            strategy="tpu",
            tpu="local",
        )
