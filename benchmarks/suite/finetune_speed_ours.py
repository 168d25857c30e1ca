"""finetune_speed's side of ours: the model, training dataset and optimizer exactly as `finetune` builds them, and
one epoch through the library's training loop timed as `finetune` times it. Not a benchmark (`run.py
finetune_speed` is).
"""

import common
from common import minilm_path


def build_ours(task, cfg, examples, batching, total_rounds, recipe, batch_size, jit_compile=False, coarse=False):
    """The model, training dataset and steps per epoch exactly as `finetune` builds them
    (same calls, same order), plus the examples and padding of one epoch. `coarse` (tag,
    diagnostic): random batches cut to the coarse buckets 16/32/64/96/128, as before
    training batches were cut to within 8 pieces of their longest."""
    import keras
    import tensorflow as tf

    with_known_cardinality = common.lib("with_known_cardinality")
    DataLayout = common.lib("DataLayout")
    get_task = common.lib("get_task")
    check_vocabulary, vocab_dir_for = common.lib("check_vocabulary", "vocab_dir_for")
    create_optimizer = common.lib("create_optimizer")

    spec, minilm = get_task(task), minilm_path()
    layout = spec.layout_from_options(DataLayout.for_task("sst2") if task == "classify" else None, **cfg["options"])
    train_examples = spec.read_data(cfg["train"], layout, max_examples=examples)
    vocab_dir = vocab_dir_for(minilm)
    check_vocabulary(minilm, vocab_dir, cfg["sequence_length"])
    keras.utils.set_random_seed(recipe["seed"])
    preprocessor = spec.make_preprocessor(vocab_dir, cfg["sequence_length"], layout)
    model = spec.build_model(minilm, train_examples, layout, preprocessor, cfg["sequence_length"])
    if coarse:
        default_boundaries = common.lib("default_boundaries")
        make_tagging_dataset = common.lib("make_tagging_dataset")

        ds = make_tagging_dataset(
            train_examples,
            preprocessor,
            batch_size,
            training=True,
            seed=recipe["seed"],
            with_labels=True,
            bucket=True,
            boundaries=default_boundaries(cfg["sequence_length"]),
        )
    else:
        ds = spec.dataset(
            train_examples, preprocessor, batch_size, training=True, seed=recipe["seed"], batching=batching
        )
    ds, steps_per_epoch = with_known_cardinality(ds)
    model.compile(
        optimizer=create_optimizer(
            recipe["learning_rate"], total_steps=steps_per_epoch * total_rounds, warmup_ratio=recipe["warmup_ratio"]
        ),
        jit_compile=jit_compile,
    )

    def count(state, batch):
        # Examples = sequences: a row's first token, or where a packed row's sequence number changes.
        mask = batch[0]["padding_mask"]
        starts = (mask > 0) & tf.not_equal(mask, tf.pad(mask, [[0, 0], [1, 0]])[:, :-1])
        return (
            state[0] + tf.reduce_sum(tf.cast(starts, tf.int64)),
            state[1] + tf.reduce_sum(tf.cast(mask > 0, tf.int64)),
            state[2] + tf.size(mask, out_type=tf.int64),
        )

    zero = tf.constant(0, tf.int64)
    rows, real, padded = (int(x) for x in ds.reduce((zero, zero, zero), count))
    return dict(
        model=model,
        dataset=ds,
        steps_per_epoch=steps_per_epoch,
        examples=rows,
        read=len(train_examples),
        real_tokens=real,
        padded_tokens=padded,
    )


def ours_round(system):
    """One epoch through the library's loop with finetune's StepLog; returns (train seconds, examples)."""
    StepLog = common.lib("StepLog")
    train = common.lib("train")

    log = StepLog()
    train(
        system["model"],
        system["dataset"],
        epochs=1,
        steps_per_epoch=system["steps_per_epoch"],
        callbacks=[log],
        verbose=0,
    )
    return log.train_seconds, system["examples"]
