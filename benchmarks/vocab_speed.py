"""Vocabulary learning: seconds and pieces returned, ours vs HF `tokenizers`, in one run.

Three learners on the same corpus and size, in interleaved rounds:

- **ours** `learn_vocabulary(files, size)`: our normalisation and word splitting (TF ops,
  what `BertTokenizer` sees), then `tokenizers`' `WordPieceTrainer` (the default learner);
- **ours, tensorflow-text learner** `learn_vocabulary(..., learner="tensorflow_text")`: the
  learner behind `bert_vocab_from_dataset` (pure Python, binary search over count
  thresholds), the package's learner before; `--rounds-tf-text 0` skips it;
- **HF** `tokenizers.BertWordPieceTokenizer().train(files, vocab_size=size)`: HF's own BERT
  normaliser and pre-tokenizer in Rust, the peer.

Prints seconds, pieces returned and the ratios, with the machine line and load.

Usage:
    python benchmarks/vocab_speed.py          # WikiText-2 (1.1 MB, ../shared/data), 8,000 pieces
    python benchmarks/vocab_speed.py --corpus my.txt --size 30000
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import REPO, RESULTS, machine_line, write_json  # noqa: E402

WIKITEXT = os.path.join(REPO, "..", "shared", "data", "pretrain_text", "wikitext-2.valid.tokens.txt")


def ours(corpus, size, learner):
    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary

    return learn_vocabulary([corpus], size, learner=learner)


def hf(corpus, size):
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(lowercase=True)
    tokenizer.train([corpus], vocab_size=size, show_progress=False)
    return tokenizer.get_vocab()


def timed(fn, *args):
    start = time.perf_counter()
    pieces = fn(*args)
    return time.perf_counter() - start, len(pieces)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=WIKITEXT)
    parser.add_argument("--size", type=int, default=8000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rounds-tf-text", type=int, default=1, help="rounds of the slow learner (0: skip)")
    parser.add_argument("--out", default=os.path.join(RESULTS, "vocab_speed.json"))
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    before = machine_line()
    print(before, flush=True)
    print(f"corpus {args.corpus} ({os.path.getsize(args.corpus) / 1e6:.2f} MB), size {args.size}", flush=True)
    ours(args.corpus, 100, "tokenizers")  # imports and TF start-up out of the first round
    runs = {"ours": [], "ours_tensorflow_text": [], "hf": []}
    for r in range(max(args.rounds, args.rounds_tf_text)):
        if r < args.rounds:
            runs["ours"].append(timed(ours, args.corpus, args.size, "tokenizers"))
            runs["hf"].append(timed(hf, args.corpus, args.size))
        if r < args.rounds_tf_text:
            runs["ours_tensorflow_text"].append(timed(ours, args.corpus, args.size, "tensorflow_text"))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1][0]:.1f} s / {v[-1][1]} pieces"
                                             for k, v in runs.items() if len(v) > r), flush=True)
    summary = {k: {"seconds": statistics.median(s for s, _ in v), "pieces": v[-1][1]} for k, v in runs.items() if v}
    for k, v in summary.items():
        print(f"{k:22s}: {v['seconds']:6.1f} s, {v['pieces']} pieces of {args.size} asked"
              + (f"; {v['seconds'] / summary['hf']['seconds']:.2f}x HF's time" if k != "hf" else ""), flush=True)
    if "ours_tensorflow_text" in summary:
        print(f"ours (tokenizers) is {summary['ours_tensorflow_text']['seconds'] / summary['ours']['seconds']:.1f}x "
              "faster than the tensorflow-text learner", flush=True)
    after = machine_line()
    print(after, flush=True)
    record = {"corpus": os.path.basename(args.corpus), "size": args.size, "summary": summary, "runs": runs,
              "machine_before": before, "machine_after": after,
              "command": "python benchmarks/vocab_speed.py " + " ".join(argv or sys.argv[1:])}
    write_json(args.out, record)
    return record


if __name__ == "__main__":
    tempfile.tempdir = tempfile.gettempdir()
    main()
