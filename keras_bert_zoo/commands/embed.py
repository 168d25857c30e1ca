"""`bert-zoo embed --model DIR --data FILE --out embeddings.npy`: sentence embeddings.

`FILE` holds one text per line (row i of the output is line i; a blank line is an empty
text). `DIR` is any checkpoint directory with a `vocab.txt`: a sentence-transformers /
HF model, or one written by `bert-zoo finetune` / `pretrain` / `save_to_preset`.
The `.npy` file is written atomically (a reader never sees half of it); an existing one is
replaced only with `--overwrite`, as every other output.

Examples:
    bert-zoo embed --model path/to/all-MiniLM-L6-v2 --data sentences.txt --out /tmp/embeddings.npy
"""

import sys
import time

from keras_bert_zoo.commands.common import add_overwrite_argument, batch_int, length_int
from keras_bert_zoo.errors import CheckpointError, UsageError

__all__ = ["POOLINGS", "LONG_FILE", "add_arguments", "add_embedding_arguments", "load_embedder", "run"]

POOLINGS = ("mean", "cls", "pooled", "max")
LONG_FILE = 5000  # texts; longer files get progress lines on stderr


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint directory (HF, sentence-transformers, ours)")
    parser.add_argument("--data", required=True, help="text file, one text per line (UTF-8)")
    parser.add_argument("--out", required=True, help="output .npy file, float32 [lines, hidden]")
    add_overwrite_argument(parser)
    add_embedding_arguments(parser)
    parser.add_argument("--normalize", action="store_true", help="L2-normalize each embedding")


def add_embedding_arguments(parser):
    parser.add_argument(
        "--pooling",
        choices=POOLINGS,
        default=None,
        help="default: the model's own (sentence-transformers config or saved embedder), else mean",
    )
    parser.add_argument("--batch-size", type=batch_int, default=64)
    parser.add_argument(
        "--sequence-length",
        type=length_int,
        default=None,
        help="default: the model's (sentence-transformers max_seq_length, saved preprocessor), else 128",
    )


def load_embedder(args):
    from keras_bert_zoo.tasks.embedder.model import BertSentenceEmbedder

    options = {k: v for k, v in (("pooling", args.pooling), ("sequence_length", args.sequence_length)) if v}
    from keras_bert_zoo.tasks.base import check_vocabulary_fits

    embedder = BertSentenceEmbedder.from_preset(args.model, **options)
    if embedder.preprocessor is None:
        raise CheckpointError(
            f"--model {args.model!r} has no vocab.txt, so text cannot be tokenized; copy the "
            "vocabulary the model was trained with into it."
        )
    check_vocabulary_fits(embedder, args.model)
    # As finetune: a length past the learned positions would fail inside TensorFlow on the
    # first long line (`indices[...] is not in [0, 512)`), after the model has loaded.
    positions = int(embedder.backbone.max_sequence_length)
    if int(embedder.preprocessor.sequence_length) > positions:
        raise UsageError(
            f"--sequence-length {embedder.preprocessor.sequence_length} is longer than the model's "
            f"{positions} learned positions; use at most that."
        )
    return embedder


def _read_lines(path):
    """The texts of `path`, one a line; errors name the file and line (`files.read_text_file`)."""
    from keras_bert_zoo.files import read_text_file

    return read_text_file(path, "--data file").splitlines()


def run(args):
    from keras_bert_zoo.files import check_output, write_npy

    check_output(args.out, args.overwrite, kind="file")  # before the work, not after
    texts = _read_lines(args.data)
    if not texts:
        from keras_bert_zoo.errors import InvalidInputError

        raise InvalidInputError(f"--data {args.data!r} is empty; give one text per line.")
    embedder = load_embedder(args)
    start = time.perf_counter()

    def progress(done, total):
        if total >= LONG_FILE:
            rate = done / max(time.perf_counter() - start, 1e-9)
            print(f"embedded {done}/{total} texts ({rate:.0f}/s)", file=sys.stderr, flush=True)

    vectors = embedder.encode(texts, batch_size=args.batch_size, normalize=args.normalize or None, progress=progress)
    write_npy(args.out, vectors, overwrite=args.overwrite)
    print(
        f"wrote {args.out}: {vectors.shape[0]} x {vectors.shape[1]} float32 ({embedder.pooling} pooling"
        f"{', normalized' if args.normalize or embedder.normalize else ''}; "
        f"{time.perf_counter() - start:.1f} s)"
    )
    return 0
