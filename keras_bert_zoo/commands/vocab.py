"""`bert-zoo vocab --corpus F... --size N --out vocab.txt`: learn a WordPiece vocabulary."""

from keras_bert_zoo.commands.common import MAX_VOCABULARY, add_overwrite_argument, count_int, int_in

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    parser.add_argument("--corpus", nargs="+", required=True, help="text files, one sentence or paragraph a line")
    parser.add_argument(
        "--size",
        type=int_in(10, MAX_VOCABULARY),
        required=True,
        help="vocabulary size (special and unused tokens included)",
    )
    parser.add_argument("--out", required=True, help="output vocab.txt")
    add_overwrite_argument(parser)
    parser.add_argument("--cased", action="store_true", help="keep case (and accents, unless --strip-accents)")
    parser.add_argument(
        "--strip-accents",
        choices=["auto", "yes", "no"],
        default="auto",
        help="auto = strip when lowercasing (HF default)",
    )
    parser.add_argument("--no-chinese-split", action="store_true", help="do not split CJK ideographs into words")
    parser.add_argument("--unused", type=int_in(0, MAX_VOCABULARY), default=0, help="number of [unusedN] reserve slots")
    parser.add_argument(
        "--min-count",
        type=count_int,
        default=None,
        help="lowest count of a piece kept (default: any count; tensorflow-text's learner: the lowest "
        "threshold it searches, default 10)",
    )
    parser.add_argument(
        "--learner",
        choices=("auto", "tokenizers", "tensorflow_text"),
        default="auto",
        help="auto: HF tokenizers' WordPiece trainer (fast, fills --size), else tensorflow-text's",
    )


def run(args):
    import time

    from keras_bert_zoo.files import check_output
    from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary, save_vocabulary

    check_output(args.out, args.overwrite, kind="file")  # before learning, not after
    start = time.time()
    vocab = learn_vocabulary(
        args.corpus,
        args.size,
        lowercase=not args.cased,
        strip_accents={"auto": None, "yes": True, "no": False}[args.strip_accents],
        tokenize_chinese_chars=not args.no_chinese_split,
        num_unused_tokens=args.unused,
        min_count=args.min_count,
        learner=args.learner,
    )
    save_vocabulary(vocab, args.out)
    print(
        f"wrote {args.out}: {len(vocab)} tokens ({args.unused} unused) from {len(args.corpus)} file(s) "
        f"in {time.time() - start:.1f} s"
    )
    return 0
