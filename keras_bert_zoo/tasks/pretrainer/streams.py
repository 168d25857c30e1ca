"""`pretrain`'s batches: from TFRecords (`record_batches`), or from a text corpus the training
stream and the held-out batches (`text_batches`).

From text, training batches are masked anew every pass (dynamic masking); the held-out ones
(every N-th document with `holdout_every`, or an `eval_corpus`) are cached so each
evaluation scores the same batches. Part of the task's data half.
"""

import os

from keras_bert_zoo.errors import InvalidInputError
from keras_bert_zoo.tasks.pretrainer.inputs import check_paths, training_documents

__all__ = ["record_batches", "text_batches"]


def text_batches(corpus, vocabulary, batch_size, data_layout, *, seed, eval_corpus, eval_batches):
    """`(train, heldout)` streams from text: fresh masks every pass; heldout (or None) cached, of known length."""
    from keras_bert_zoo.preprocessing.bucketing import with_known_cardinality
    from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset, split_documents

    common = {
        k: data_layout[k]
        for k in (
            "sequence_length",
            "max_predictions",
            "nsp",
            "whole_word_masking",
            "whole_word_segmenter",
            "max_ngram",
            "corpus_format",
            "lowercase",
        )
    }
    train = pretraining_dataset(
        corpus,
        vocabulary,
        batch_size=batch_size,
        repeat=True,
        drop_remainder=True,
        seed=seed,
        document_filter=training_documents(data_layout["holdout_every"]),
        **common,
    )
    holdout_every, heldout = data_layout["holdout_every"], None
    if eval_corpus:
        heldout = (
            pretraining_dataset(
                check_paths(eval_corpus, "--eval-corpus"), vocabulary, batch_size=batch_size, seed=seed + 1, **common
            )
            .take(eval_batches)
            .cache()
        )
    elif holdout_every:
        heldout = (
            pretraining_dataset(
                corpus,
                vocabulary,
                batch_size=batch_size,
                seed=seed + 1,
                document_filter=lambda i: split_documents(i, holdout_every),
                **common,
            )
            .take(eval_batches)
            .cache()
        )
    if heldout is not None:
        # A known length: Keras warns "ran out of data" when evaluating a stream of unknown length.
        heldout, batches = with_known_cardinality(heldout)
        if not batches:  # evaluating nothing: an empty "held-out" line and Keras' "ran out of data"
            raise InvalidInputError(
                _no_heldout_message(corpus, data_layout["corpus_format"], holdout_every, eval_corpus)
            )
    return train, heldout


def _no_heldout_message(corpus, corpus_format, holdout_every, eval_corpus):
    """Why the held-out set is empty, and the flags that fix it."""
    from keras_bert_zoo.tasks.pretrainer.corpus import read_documents

    if eval_corpus:
        return (
            f"--eval-corpus {' '.join(map(str, eval_corpus))} makes no pretraining examples in the "
            f"{corpus_format!r} format; give held-out text with sentences, or check --corpus-format."
        )
    documents = sum(1 for _ in read_documents(corpus, corpus_format))
    if documents < holdout_every:
        return (
            f"--holdout-every {holdout_every} holds out every {holdout_every}th document, but the corpus has "
            f"{documents}, so none is held out and there is nothing to evaluate on; use --holdout-every "
            f"{max(2, documents)} or less, --eval-corpus FILE, or --holdout-every 0 (no held-out evaluation)."
        )
    return (
        f"the documents --holdout-every {holdout_every} holds out make no pretraining examples (too short); "
        "use --eval-corpus FILE or --holdout-every 0 (no held-out evaluation)."
    )


def record_batches(corpus, batch_size, data_layout, seed, input_shards, workers):
    """Training batches from TFRecords; under multi-worker with `input_shards`, this worker's files only.

    `workers` is `(number of workers, this worker's index)` (`training.strategies.worker_info`).
    """
    from keras_bert_zoo.tasks.pretrainer.records import read_pretraining_records, worker_files

    train = read_pretraining_records(
        corpus,
        batch_size,
        data_layout["sequence_length"],
        data_layout["max_predictions"],
        use_nsp=data_layout["nsp"] != "none",
        shuffle=True,
        repeat=True,
        drop_remainder=True,
        seed=seed,
        input_shards=input_shards,
        num_workers=workers[0],
        worker_index=workers[1],
    )
    if input_shards > 1:
        mine = worker_files(corpus, batch_size, input_shards, *workers)
        print(
            f"worker {workers[1]} of {workers[0]} reads {len(mine)} of {input_shards} input shard files: "
            + ", ".join(os.path.basename(f) for f in mine),
            flush=True,
        )
    return train
