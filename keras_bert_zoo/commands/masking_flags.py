"""`bert-zoo pretrain`'s objective flags: NSP/SOP and what a mask covers (tokens, words, Chinese words, n-grams)."""

from keras_bert_zoo.commands.common import int_in

__all__ = ["add_masking_arguments"]


def add_masking_arguments(parser):
    """The pretraining objective: NSP/SOP, and the masking units (tokens, words, Chinese words, n-grams)."""
    parser.add_argument("--nsp", choices=("nsp", "sop", "none"), default="nsp")
    parser.add_argument("--whole-word-masking", action="store_true")
    parser.add_argument(
        "--whole-word-segmenter",
        choices=("auto", "wordpiece", "jieba"),
        default="auto",
        help="words of --whole-word-masking: wordpiece joins ## pieces (every Chinese character a word); "
        'jieba cuts Chinese into words (pip install "keras-bert-zoo[chinese]"); auto: jieba when CJK '
        "ideographs are at least 5%% of the corpus' characters",
    )
    parser.add_argument("--max-ngram", type=int_in(1, 10), default=1, help=">1: mask spans of 1..N words/tokens")
