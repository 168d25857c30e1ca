"""A raw string becomes words as BERT splits it: Python (`word_spans`, `as_words`) and TF (`split_words_tf`)
agree word for word and offset for offset, and both give the words of HF's own `BasicTokenizer` (the reference
nobody here wrote) on Chinese, mixed and English text."""

import random

import pytest
import tensorflow as tf

from keras_bert_zoo.tasks.tagger.words import as_words, split_words_tf, word_class_table, word_spans
from tests.chinese_fixtures import CHINESE_SENTENCES

TEXTS = CHINESE_SENTENCES + [
    "EU rejects German call to boycott British lamb.",
    "I met Angela Merkel in Berlin, then flew to the U.S. (New York) on 3/4/2024!",
    "Zürich naïve café São Paulo 東京都 日本語 ｶﾀｶﾅ ひらがな 한국어 🙂 👍🏽 done",
    "“引号”和（括号）、顿号《书名》——破折号……省略号～",
    "ＡＢＣ１２３全角字母　全角空格",
    "",
    "   \t\r\n ",
    "x" * 7,
    "$5+3=8 <tag> a^b `c` a|b ~d",
]
# The characters fuzzed strings are drawn from: every class of character, several of each.
ALPHABET = list("北京习近平。，、！？“”（）abcXYZ019.-,'$%é😀ｶ한 ") + ["\u3000", "\t", "\xa0", "\n"]


def _tf_split(texts):
    table = tuple(tf.constant(x, tf.int32) for x in word_class_table())
    words, starts, ends = split_words_tf(tf.constant(texts), table)
    return (
        [[w.decode("utf-8") for w in row] for row in words.numpy()],
        [list(zip(s, e, strict=True)) for s, e in zip(starts.to_list(), ends.to_list(), strict=True)],
    )


def _fuzzed(count, seed=0):
    rng = random.Random(seed)
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30))) for _ in range(count)]


def test_chinese_sentence_is_one_word_per_character():
    text = "我们在北京天安门广场见到了中国国家主席习近平。"
    assert as_words(text) == list(text)
    assert [text[a:b] for a, b in word_spans(text)] == list(text)
    mixed = "上海浦东新区2024年GDP增长5.2%，华为和Apple都在这里"
    assert as_words(mixed)[6:13] == ["2024", "年", "GDP", "增", "长", "5", "."]
    assert "Apple" in as_words(mixed)


def test_python_and_tf_agree_word_for_word_and_slice_the_text():
    texts = TEXTS + _fuzzed(400)
    tf_words, tf_spans = _tf_split(texts)
    for text, words, spans in zip(texts, tf_words, tf_spans, strict=True):
        assert spans == word_spans(text), text
        assert words == as_words(text) == [text[a:b] for a, b in spans], text


def _hf_basic_tokenizer():
    pytest.importorskip("transformers")
    try:  # transformers 5 keeps the pure-Python BERT tokenizer here
        from transformers.models.bert.tokenization_bert_legacy import BasicTokenizer
    except ImportError:
        from transformers.models.bert.tokenization_bert import BasicTokenizer
    return BasicTokenizer(do_lower_case=False, tokenize_chinese_chars=True, strip_accents=False)


def test_words_are_hf_basic_tokenizer_words():
    """HF's BasicTokenizer (no lower-casing, no accent stripping) splits the same text into the same words."""
    basic = _hf_basic_tokenizer()
    # (HF drops control characters and normalises to NFC first; the fuzz alphabet has neither to change.)
    for text in TEXTS + _fuzzed(400, seed=1):
        assert as_words(text) == basic.tokenize(text), text


def test_offsets_are_hf_fast_tokenizer_word_offsets(tmp_path):
    """HF's Rust tokenizer (BertNormalizer + BertPreTokenizer) maps each piece to its word and its characters:
    each word's first and last characters are the offsets here."""
    transformers = pytest.importorskip("transformers")
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "北", "京", "ab", "##c"]) + "\n")
    tokenizer = transformers.BertTokenizerFast(str(vocab), do_lower_case=False, tokenize_chinese_chars=True)
    for text in TEXTS + _fuzzed(300, seed=2):
        encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        spans = {}
        for word, (a, b) in zip(encoding.word_ids(), encoding["offset_mapping"], strict=True):
            first, last = spans.get(word, (a, b))
            spans[word] = (min(first, a), max(last, b))
        assert word_spans(text) == [spans[k] for k in sorted(spans)], text


def test_english_with_punctuation_splits_it_off():
    """The BERT rule for English: punctuation is its own word (CoNLL-2003's tokens too), so an entity's span does
    not take the full stop after it; a list of words is kept as given."""
    assert as_words("EU rejects German call.") == ["EU", "rejects", "German", "call", "."]
    assert as_words(["U.S.", "Jean-Pierre"]) == ["U.S.", "Jean-Pierre"]
