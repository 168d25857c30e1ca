"""`bert-zoo evaluate-embeddings --model DIR --data sts-dev.csv --pooling mean|cls|pooled|max`.

Unsupervised semantic similarity: both sentences of each STS-B pair are embedded, and
the cosine of the two embeddings is correlated with the gold score (Spearman, the
standard STS figure, and Pearson). Nothing is trained. `--out` writes `metrics.json`.

Examples:
    bert-zoo evaluate-embeddings --model path/to/all-MiniLM-L6-v2 \\
        --data ../shared/data/stsb/sts-dev.csv --pooling cls
"""

import json

from keras_bert_zoo.commands.common import add_overwrite_argument
from keras_bert_zoo.commands.embed import add_embedding_arguments, load_embedder
from keras_bert_zoo.flags import steps_int

__all__ = ["add_arguments", "run"]


def add_arguments(parser):
    parser.add_argument("--model", required=True, help="checkpoint directory (HF, sentence-transformers, ours)")
    parser.add_argument("--data", required=True, help="STS-B file: original sts-*.csv or GLUE STS-B tsv")
    parser.add_argument("--out", default=None, help="metrics.json path (default: print only)")
    add_overwrite_argument(parser)
    parser.add_argument("--max-examples", type=steps_int, default=None, help="score the first N pairs (default: all)")
    add_embedding_arguments(parser)


def run(args):
    from keras_bert_zoo.files import check_output, write_metrics
    from keras_bert_zoo.tasks.embedder.data import read_sts
    from keras_bert_zoo.tasks.embedder.spec import similarity_scores

    if args.out:
        check_output(args.out, args.overwrite, kind="file")  # before the work, not after
    read_sts(args.data, max_examples=1)  # a bad file fails before the model loads
    embedder = load_embedder(args)
    metrics = similarity_scores(embedder, args.data, batch_size=args.batch_size, max_examples=args.max_examples)
    if args.out:
        write_metrics(metrics, args.out)
    print(json.dumps({**metrics, "pooling": embedder.pooling}, indent=2, sort_keys=True))
    return 0
