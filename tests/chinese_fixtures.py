"""Small Chinese checkpoints written by HF's own classes, for tests of Chinese text on every path.

Real Chinese checkpoints (`bert-base-chinese`, HFL's wwm models) cannot be downloaded here, so the tests build
what those repos hold, at a tiny size, with `transformers` itself: a character vocabulary (every CJK ideograph a
token, as Google's 21,128-entry Chinese vocabulary), `config.json` with label names, `model.safetensors`, and the
`tokenizer_config.json` keys HF reads (`do_lower_case`, `tokenize_chinese_chars`). HF's `BertTokenizer` and
`BertModel` on the same files are the references.

Examples:
>>> import tempfile
>>> from tests.chinese_fixtures import write_chinese_checkpoint
>>> path = write_chinese_checkpoint(tempfile.mkdtemp())  # doctest: +SKIP
"""

import json
import os

# Sentences as Chinese users write them: no spaces between words, full-width punctuation, digits and Latin words
# inside, one mixed with an English name.
CHINESE_SENTENCES = [
    "我们在北京天安门广场见到了中国国家主席习近平。",
    "国产的本能做到这样，心满意足了",
    "上海浦东新区2024年GDP增长5.2%，华为和Apple都在这里设了研发中心。",
    "李明在清华大学读书，他说：“BERT模型很好用！”",
    "这本书的内容一般，快递很快，包装也不错。",
    "房间太小了，隔音很差，不推荐。",
]

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Google's Chinese vocabulary keeps Latin words and digits as WordPiece pieces next to the characters.
LATIN_PIECES = ["gdp", "apple", "bert", "##rt", "be", "##e", "a", "##pp", "##le", "20", "##24", "5", "2", "%"]


def msra_sentences(path, limit=None):
    """Sentences of an MSRA NER file (one `char tag` a line, blank line between sentences) as strings."""
    sentences, chars = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                if chars:
                    sentences.append("".join(chars))
                    chars = []
                    if limit and len(sentences) >= limit:
                        break
                continue
            chars.append(line.split()[0])
    if chars and not (limit and len(sentences) >= limit):
        sentences.append("".join(chars))
    return sentences


def character_vocabulary(texts, extra=()):
    """Special tokens, then Latin pieces, then every distinct non-space character of `texts` in first-seen order."""
    vocab = list(SPECIAL_TOKENS) + list(LATIN_PIECES) + list(extra)
    seen = set(vocab)
    for text in texts:
        for char in text:
            if not char.isspace() and char not in seen and not char.isascii():
                seen.add(char)
                vocab.append(char)
    for char in "abcdefghijklmnopqrstuvwxyz0123456789.,:!?%()":  # single ASCII characters, as Google's vocab has
        if char not in seen:
            seen.add(char)
            vocab.append(char)
    return vocab


def write_chinese_checkpoint(
    path,
    texts=CHINESE_SENTENCES,
    head=None,
    label_names=None,
    num_layers=2,
    hidden=32,
    heads=4,
    seed=0,
    do_lower_case=False,
):
    """Writes an HF-layout Chinese BERT to `path` with HF's classes; returns `path`.

    Args:
        texts: text whose characters make the vocabulary (tests tokenize text drawn from the same source).
        head: None (`BertModel`), "classify" (`BertForSequenceClassification`), "tag"
            (`BertForTokenClassification`), "qa" (`BertForQuestionAnswering`) or "mlm" (`BertForMaskedLM`).
        label_names: written as `id2label` / `label2id` for "classify" and "tag", as real fine-tuned checkpoints do.
        do_lower_case: `tokenizer_config.json`'s key; `bert-base-chinese` has False.
    """
    import torch
    import transformers

    os.makedirs(path, exist_ok=True)
    vocab = character_vocabulary(texts)
    with open(os.path.join(path, "vocab.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(vocab) + "\n")
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"do_lower_case": do_lower_case, "tokenize_chinese_chars": True, "model_max_length": 512}, f)
    extra = {}
    if label_names:
        extra = {"id2label": dict(enumerate(label_names)), "label2id": {n: i for i, n in enumerate(label_names)}}
    config = transformers.BertConfig(
        vocab_size=len(vocab),
        hidden_size=hidden,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        intermediate_size=4 * hidden,
        max_position_embeddings=128,
        hidden_act="gelu",
        **extra,
    )
    classes = {
        None: transformers.BertModel,
        "classify": transformers.BertForSequenceClassification,
        "tag": transformers.BertForTokenClassification,
        "qa": transformers.BertForQuestionAnswering,
        "mlm": transformers.BertForMaskedLM,
    }
    torch.manual_seed(seed)
    model = classes[head](config).eval()
    model.save_pretrained(path, safe_serialization=True)
    return path


def hf_tokenizer(path):
    """HF's slow `BertTokenizer` on the checkpoint's files: the reference for token ids and offsets."""
    import transformers

    return transformers.BertTokenizer.from_pretrained(path)
