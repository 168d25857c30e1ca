"""`bert-zoo embed --model DIR --data FILE --out embeddings.npy`: sentence embeddings.

`FILE` holds one text per line (row i of the output is line i; a blank line is an empty
text). `DIR` is any checkpoint directory with a `vocab.txt`: a sentence-transformers /
HF model, or one written by `bert-zoo finetune` / `pretrain` / `save_to_preset`.
The `.npy` file is written atomically (a reader never sees half of it).

Examples:
    bert-zoo embed --model path/to/all-MiniLM-L6-v2 --data sentences.txt --out /tmp/embeddings.npy
"""

import sys
import time

POOLINGS = ("mean", "cls", "pooled", "max")
LONG_FILE = 5000  # texts; longer files get progress lines on stderr


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint directory (HF, sentence-transformers, ours)")
    parser.add_argument("--data", required=True, help="text file, one text per line (UTF-8)")
    parser.add_argument("--out", required=True, help="output .npy file, float32 [lines, hidden]")
    add_embedding_arguments(parser)
    parser.add_argument("--normalize", action="store_true", help="L2-normalize each embedding")


def add_embedding_arguments(parser):
    parser.add_argument("--pooling", choices=POOLINGS, default=None,
                        help="default: the model's own (sentence-transformers config or saved embedder), else mean")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--sequence-length", type=int, default=None,
                        help="default: the model's (sentence-transformers max_seq_length, saved preprocessor), "
                             "else 128")


def load_embedder(args):
    from keras_bert_zoo.models.embedder import BertSentenceEmbedder

    options = {k: v for k, v in (("pooling", args.pooling), ("sequence_length", args.sequence_length)) if v}
    embedder = BertSentenceEmbedder.from_preset(args.model, **options)
    if embedder.preprocessor is None:
        raise ValueError(f"--model {args.model!r} has no vocab.txt, so text cannot be tokenized.")
    return embedder


def read_lines(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        raise FileNotFoundError(f"--data {path!r} does not exist.") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"--data {path!r} is not UTF-8 text ({e.reason} at byte {e.start}).") from None


def run(args):
    from keras_bert_zoo.files import write_npy

    texts = read_lines(args.data)
    if not texts:
        raise ValueError(f"--data {args.data!r} is empty; give one text per line.")
    embedder = load_embedder(args)
    start = time.perf_counter()

    def progress(done, total):
        if total >= LONG_FILE:
            rate = done / max(time.perf_counter() - start, 1e-9)
            print(f"embedded {done}/{total} texts ({rate:.0f}/s)", file=sys.stderr, flush=True)

    vectors = embedder.encode(texts, batch_size=args.batch_size, normalize=args.normalize or None,
                              progress=progress)
    write_npy(args.out, vectors)
    print(f"wrote {args.out}: {vectors.shape[0]} x {vectors.shape[1]} float32 ({embedder.pooling} pooling"
          f"{', normalized' if args.normalize or embedder.normalize else ''}; "
          f"{time.perf_counter() - start:.1f} s)")
    return 0
