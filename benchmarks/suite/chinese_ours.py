"""Our side of the Chinese benchmark (`suite/chinese.py`): the Keras path as a user writes it. `from_preset` on the
checkpoint's directory, the package's readers, `compile(optimizer=create_optimizer(lr))`, `fit` on the raw data
(characters and tags; review strings and labels), then `predict_tags` / `evaluate`. Nothing else is tuned: the
benchmark only pins TensorFlow to the same 2 threads HF's PyTorch gets.

Speed: training examples over the wall time of the whole `fit` call (tokenization, tracing and compilation
included), against HF's tokenization plus its training loop.
"""

import os
import time

import common
from common import git_commit, now, set_tf_threads, uptime, versions, write_json


def _bioes(sequences):
    """BMES tags read as BIOES (`M-` = `I-`), as seqeval's default mode reads them."""
    return [["I-" + t[2:] if t.startswith("M-") else t for t in s] for s in sequences]


def _finish(record, out, load_before):
    record.update(
        loadavg_before=list(load_before),
        loadavg_after=list(os.getloadavg()),
        uptime_after=uptime(),
        date=now(),
        git_commit=git_commit(),
        versions=versions("tensorflow", "keras"),
    )
    write_json(os.path.join(out, "ours.json"), record)
    return record


def run_ner(model_dir, train_path, dev_path, recipe, out):
    set_tf_threads(recipe["threads"])
    import keras
    from seqeval.metrics import f1_score

    from keras_bert_zoo import BertTagger, TaggingPreprocessor

    # What a user imports from keras_bert_zoo.tasks.tagger.data / .metrics and keras_bert_zoo.training.
    entity_scores, read_tagged, create_optimizer = common.lib("entity_scores", "read_tagged", "create_optimizer")
    keras.utils.set_random_seed(recipe["seed"])
    load_before = os.getloadavg()
    train = read_tagged(train_path, max_examples=recipe["max_train"])
    dev = read_tagged(dev_path, label_names=train.label_names)
    preprocessor = TaggingPreprocessor.from_preset(model_dir, sequence_length=recipe["sequence_length"])
    model = BertTagger.from_preset(
        model_dir, label_names=train.label_names, scheme=train.scheme, preprocessor=preprocessor
    )
    model.compile(optimizer=create_optimizer(recipe["learning_rate"]))
    start = time.perf_counter()
    history = model.fit(train.words, train.tags, batch_size=recipe["batch_size"], epochs=1, verbose=2)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    predicted = model.predict_tags(dev.words)
    predict_seconds = time.perf_counter() - start
    ours = entity_scores(dev.tags, predicted, scheme=dev.scheme)
    record = dict(
        system="ours",
        task="ner",
        f1=ours["f1"],
        precision=ours["precision"],
        recall=ours["recall"],
        f1_seqeval=float(f1_score(_bioes(dev.tags), _bioes(predicted))),
        scheme=dev.scheme,
        label_names=list(train.label_names),
        examples_per_second=len(train.words) / fit_seconds,
        train_seconds=fit_seconds,
        final_train_loss=float(history.history["loss"][-1]),
        dev_predict_seconds=predict_seconds,
        train_examples=len(train.words),
        train_characters=sum(map(len, train.words)),
        dev_examples=len(dev.words),
        dev_characters=sum(map(len, dev.words)),
    )
    print(f"ours NER: dev entity F1 {record['f1']:.4f}, {record['examples_per_second']:.1f} sentences/s", flush=True)
    return _finish(record, out, load_before)


def run_sentiment(model_dir, train_path, dev_path, recipe, out):
    set_tf_threads(recipe["threads"])
    import keras

    from keras_bert_zoo import BertClassifier, BertPreprocessor

    read_examples, layout_class, create_optimizer = common.lib("read_examples", "DataLayout", "create_optimizer")
    keras.utils.set_random_seed(recipe["seed"])
    load_before = os.getloadavg()
    layout = layout_class.for_task("sst2")
    train = read_examples(train_path, layout, max_examples=recipe["max_train"])
    dev = read_examples(dev_path, layout, label_names=train.label_names)
    preprocessor = BertPreprocessor.from_preset(model_dir, sequence_length=recipe["sequence_length"])
    model = BertClassifier.from_preset(model_dir, num_classes=2, preprocessor=preprocessor)
    model.compile(optimizer=create_optimizer(recipe["learning_rate"]))
    start = time.perf_counter()
    history = model.fit(train.texts[0], train.labels, batch_size=recipe["batch_size"], epochs=1, verbose=2)
    fit_seconds = time.perf_counter() - start
    start = time.perf_counter()
    accuracy = model.evaluate(dev.texts[0], dev.labels, batch_size=64, return_dict=True, verbose=0)["accuracy"]
    record = dict(
        system="ours",
        task="sentiment",
        accuracy=float(accuracy),
        examples_per_second=len(train.labels) / fit_seconds,
        train_seconds=fit_seconds,
        final_train_loss=float(history.history["loss"][-1]),
        dev_predict_seconds=time.perf_counter() - start,
        train_examples=len(train.labels),
        dev_examples=len(dev.labels),
    )
    print(f"ours sentiment: dev accuracy {accuracy:.4f}, {record['examples_per_second']:.1f} reviews/s", flush=True)
    return _finish(record, out, load_before)
