"""Whole-word masking on Chinese text: jieba's words, masked whole, at BERT's rates, on MSRA sentences.

The reference for the words is the segmenter itself called on each whole sentence (as HF's
`run_chinese_ref.py` segments whole lines), not the masker's run-by-run segmentation.
"""

import re
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.preprocessing.chinese_words import is_cjk_ideograph, load_jieba, resolve_segmenter
from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
from tests import chinese_fixtures
from tests.helpers import shared_data

SEQ = 128
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def msra_sentences(name="dev.txt", limit=1200):
    """Sentences of the real MSRA NER file (a character and its tag a line, a blank line between)."""
    return chinese_fixtures.msra_sentences(shared_data("msra_ner", name), limit)


@pytest.fixture(scope="module")
def chinese_rows():
    """One sentence a row, a character a token (as BERT splits ideographs); sentences of ideographs and
    punctuation only, so jieba's blocks over the sentence are the masker's ideograph runs."""
    pytest.importorskip("jieba")
    sentences = [
        s for s in msra_sentences() if len(s) <= SEQ - 2 and not any(c.isalnum() and not is_cjk_ideograph(c) for c in s)
    ]
    vocabulary = SPECIALS + sorted({c for s in sentences for c in s})
    ids = {t: i for i, t in enumerate(vocabulary)}
    rows = np.zeros([len(sentences), SEQ], np.int32)
    for i, s in enumerate(sentences):
        rows[i, : len(s) + 2] = [ids["[CLS]"]] + [ids[c] for c in s] + [ids["[SEP]"]]
    return sentences, vocabulary, rows


def masker_for(vocabulary, segmenter="jieba", **kwargs):
    ids = {t: i for i, t in enumerate(vocabulary)}
    return MaskedLMMasker(
        vocabulary_size=len(vocabulary),
        mask_token_id=ids["[MASK]"],
        unselectable_token_ids=[ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]],
        max_predictions=20,
        whole_word_masking=True,
        vocabulary=vocabulary,
        whole_word_segmenter=segmenter,
        **kwargs,
    )


def chosen_matrix(out, shape):
    chosen = np.zeros(shape, bool)
    positions, weights = out["mask_positions"].numpy(), out["mask_weights"].numpy() > 0
    for i in range(shape[0]):
        chosen[i, positions[i][weights[i]]] = True
    return chosen


def reference_words(sentence):
    """(start, end) in the row (after [CLS]) of each word of two or more ideographs, from jieba itself."""
    import jieba

    spans, start = [], 1
    for word in jieba.lcut(sentence):
        if len(word) >= 2 and all(is_cjk_ideograph(c) for c in word):
            spans.append((start, start + len(word)))
        start += len(word)
    return spans


def test_every_word_masked_whole_or_not_at_all(chinese_rows):
    sentences, vocabulary, rows = chinese_rows
    out = masker_for(vocabulary)(rows, seed=[3, 5])
    chosen = chosen_matrix(out, rows.shape)
    words = whole = 0
    for i, sentence in enumerate(sentences):
        for start, end in reference_words(sentence):
            picked = chosen[i, start:end]
            assert picked.all() or not picked.any(), (sentence, sentence[start - 1 : end - 1], picked)
            words += 1
            whole += picked.all()
    assert words > 5000 and whole > 500  # many words, and many chosen whole: not character masking
    # Character masking (the WordPiece rule on Chinese) splits words: the test can fail.
    chars = chosen_matrix(masker_for(vocabulary, "wordpiece")(rows, seed=[3, 5]), rows.shape)
    split = sum(
        0 < chars[i, s:e].sum() < e - s for i, sentence in enumerate(sentences) for s, e in reference_words(sentence)
    )
    assert split > 100


def test_rates_15_percent_split_80_10_10(chinese_rows):
    _, vocabulary, rows = chinese_rows
    mask_id = vocabulary.index("[MASK]")
    out = masker_for(vocabulary)(rows, seed=[7, 11])
    chosen = chosen_matrix(out, rows.shape)
    candidates = (rows > 4) | (rows == 1)
    selection = chosen.sum() / candidates.sum()
    new, old = out["token_ids"].numpy()[chosen], rows[chosen]
    assert chosen.sum() > 5000
    assert abs(selection - 0.15) <= 0.01, selection
    assert abs(np.mean(new == mask_id) - 0.80) <= 0.02
    assert abs(np.mean((new != mask_id) & (new != old)) - 0.10) <= 0.015
    assert abs(np.mean(new == old) - 0.10) <= 0.015
    # Budget per row as the original: round(0.15 * candidates) (at most 20), filled by whole words.
    budget = np.minimum(20, np.maximum(1, np.round(0.15 * candidates.sum(1))))
    assert np.mean(chosen.sum(1) == budget) > 0.9 and (chosen.sum(1) <= budget).all()


def test_same_seed_same_masks(chinese_rows):
    _, vocabulary, rows = chinese_rows
    masker = masker_for(vocabulary)
    first, again = masker(rows[:64], seed=[1, 2]), masker_for(vocabulary)(rows[:64], seed=[1, 2])
    for key in first:
        np.testing.assert_array_equal(first[key].numpy(), again[key].numpy())
    other = masker(rows[:64], seed=[1, 3])
    assert not np.array_equal(first["mask_positions"].numpy(), other["mask_positions"].numpy())


def test_english_unchanged_by_the_segmenter():
    """On WordPiece text the jieba segmenter gives the `##` rule's masks exactly; auto picks wordpiece."""
    pytest.importorskip("jieba")
    vocabulary = SPECIALS + ["the", "play", "##ing", "##ed", "cat", "un", "##believ", "##able", "."]
    rng = np.random.default_rng(0)
    rows = np.concatenate(
        [np.full([32, 1], 2), rng.integers(5, len(vocabulary), [32, 40]), np.full([32, 1], 3)], axis=1
    ).astype(np.int32)
    wordpiece, jieba = masker_for(vocabulary, "wordpiece"), masker_for(vocabulary, "jieba")
    np.testing.assert_array_equal(wordpiece.masking_units(rows), jieba.masking_units(rows))
    for key, value in wordpiece(rows, seed=[4, 4]).items():
        np.testing.assert_array_equal(value.numpy(), jieba(rows, seed=[4, 4])[key].numpy())
    assert resolve_segmenter("auto", ["the cat sat on the mat ."] * 3) == "wordpiece"
    assert resolve_segmenter("auto", ["中国国家主席习近平在北京会见了外宾。"]) == "jieba"
    # An English text quoting a Chinese name stays on the WordPiece rule (5% threshold).
    assert (
        resolve_segmenter("auto", ["The Beijing office (北京) opened in the spring of that year ." * 3]) == "wordpiece"
    )


@pytest.fixture
def no_segmenter(monkeypatch):
    """Neither rjieba nor jieba importable, as on an install without the `chinese` extra."""
    monkeypatch.setitem(sys.modules, "jieba", None)
    monkeypatch.setitem(sys.modules, "rjieba", None)


def test_missing_segmenter_names_the_extra(no_segmenter, tmp_path):
    from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset

    with pytest.raises(UsageError, match=r'pip install "keras-bert-zoo\[chinese\]"'):
        load_jieba()
    with pytest.raises(UsageError, match=r"keras-bert-zoo\[chinese\]"):
        masker_for(SPECIALS + ["中", "国"])
    corpus = tmp_path / "zh.txt"
    corpus.write_text("中国国家主席在北京。\n他们见到了外宾。\n\n我们在上海。\n天气很好。\n", encoding="utf-8")
    vocabulary = SPECIALS + sorted(set("中国国家主席在北京他们见到了外宾我们上海天气很好。"))
    with pytest.raises(UsageError, match=r"keras-bert-zoo\[chinese\]"):
        pretraining_dataset(str(corpus), vocabulary, sequence_length=16, max_predictions=3, whole_word_masking=True)
    # Character masking needs no segmenter, nor does English whole-word masking.
    pretraining_dataset(str(corpus), vocabulary, sequence_length=16, max_predictions=3)
    english = tmp_path / "en.txt"
    english.write_text("the cat sat .\nthe cat ran .\n\nthe cat sat .\n", encoding="utf-8")
    vocab_en = SPECIALS + ["the", "cat", "sat", "ran", "."]
    pretraining_dataset(str(english), vocab_en, sequence_length=16, max_predictions=3, whole_word_masking=True)


def test_pipeline_masks_words_whole(tmp_path):
    """`pretraining_dataset` on a Chinese corpus with whole-word masking (auto): jieba's words in every batch."""
    jieba = pytest.importorskip("jieba")
    from keras_bert_zoo.tasks.pretrainer.data import pretraining_dataset

    sentences = msra_sentences(limit=200)
    corpus = tmp_path / "zh.txt"
    corpus.write_text("".join(s + "\n" + ("\n" if i % 5 == 4 else "") for i, s in enumerate(sentences)), "utf-8")
    vocabulary = SPECIALS + sorted({c.lower() for s in sentences for c in s})
    ds = pretraining_dataset(str(corpus), vocabulary, sequence_length=64, max_predictions=10, whole_word_masking=True)
    whole = 0
    for x, y in ds.take(3):
        chosen = chosen_matrix({"mask_positions": x["mask_positions"], "mask_weights": y["mask_weights"]}, (32, 64))
        original = x["token_ids"].numpy().copy()
        for i, (positions, ids, weights) in enumerate(
            zip(x["mask_positions"], y["mask_ids"], y["mask_weights"], strict=True)
        ):
            original[i, positions.numpy()[weights > 0]] = ids.numpy()[weights > 0]
        for i, row in enumerate(original):
            ideograph = [len(vocabulary[t]) == 1 and is_cjk_ideograph(vocabulary[t]) for t in row]
            start = 0
            while start < len(row):  # each run of ideographs, cut by jieba itself
                end = start
                while end < len(row) and ideograph[end]:
                    end += 1
                position = start
                for word in jieba.lcut("".join(vocabulary[t] for t in row[start:end])) if end > start else []:
                    picked = chosen[i, position : position + len(word)]
                    assert picked.all() or not picked.any(), word
                    whole += len(word) > 1 and picked.all()
                    position += len(word)
                start = end + 1
    assert whole > 20


def test_layer_config_round_trip():
    masker = MaskedLMMasker(10, 4, whole_word_segmenter="jieba")
    assert MaskedLMMasker.from_config(masker.get_config()).whole_word_segmenter == "jieba"
    with pytest.raises(UsageError, match="whole_word_segmenter"):
        MaskedLMMasker(10, 4, whole_word_segmenter="auto")
    with pytest.raises(UsageError, match="whole_word_segmenter"):
        resolve_segmenter("ltp")


def test_rjieba_and_jieba_give_the_same_words():
    """The two backends of the `chinese` extra agree on real sentences (the masks do not depend on which)."""
    rjieba, jieba = pytest.importorskip("rjieba"), pytest.importorskip("jieba")
    for sentence in msra_sentences(limit=500):
        assert rjieba.cut(sentence, hmm=True) == jieba.lcut(sentence, HMM=True)


def test_tf_data_map_runs_the_segmenter(chinese_rows):
    """Inside `tf.data.Dataset.map` (graph mode, parallel calls) the masks equal the eager call's."""
    _, vocabulary, rows = chinese_rows
    masker = masker_for(vocabulary)
    ds = tf.data.Dataset.from_tensor_slices(rows[:64]).batch(32)
    ds = ds.enumerate().map(lambda i, b: masker(b, seed=tf.stack([tf.constant(9, tf.int64), i])), num_parallel_calls=2)
    for index, out in enumerate(ds):
        eager = masker(rows[index * 32 : (index + 1) * 32], seed=[9, index])
        np.testing.assert_array_equal(out["mask_positions"].numpy(), eager["mask_positions"].numpy())


def test_masked_lm_dataset_on_a_chinese_checkpoint_masks_words(tmp_path):
    """`masked_lm_dataset` (what `continue_pretraining` trains on) with whole-word masking, HF-written Chinese vocab."""
    jieba = pytest.importorskip("jieba")
    from keras_bert_zoo import BertPretrainer, masked_lm_dataset
    from tests.chinese_fixtures import CHINESE_SENTENCES, write_chinese_checkpoint

    pretrainer = BertPretrainer.from_preset(write_chinese_checkpoint(str(tmp_path / "zh"), head="mlm"))
    vocabulary = pretrainer.preprocessor.tokenizer.get_vocabulary()
    texts = CHINESE_SENTENCES * 8
    ds = masked_lm_dataset(pretrainer.preprocessor, texts, batch_size=8, whole_word_masking=True, seed=1)
    whole = 0
    for x, y in ds.take(4):
        original = x["token_ids"].numpy().copy()
        weights = y["mask_weights"].numpy() > 0
        for i in range(len(original)):
            original[i, x["mask_positions"].numpy()[i][weights[i]]] = y["mask_ids"].numpy()[i][weights[i]]
        chosen = chosen_matrix(
            {"mask_positions": x["mask_positions"], "mask_weights": y["mask_weights"]}, original.shape
        )
        for i, row in enumerate(original):
            tokens = [vocabulary[t] for t in row]
            text = "".join(t if len(t) == 1 and is_cjk_ideograph(t) else "\0" for t in tokens)
            for run_start, run in ((m.start(), m.group()) for m in re.finditer("[^\0]+", text)):
                position = run_start
                for word in jieba.lcut(run):
                    picked = chosen[i, position : position + len(word)]
                    assert picked.all() or not picked.any(), word
                    whole += len(word) > 1 and picked.all()
                    position += len(word)
    assert whole > 0


@pytest.mark.slow
def test_continue_pretraining_with_chinese_whole_words(tmp_path):
    """`continue_pretraining(..., whole_word_masking=True)` trains an HF-written Chinese checkpoint."""
    pytest.importorskip("jieba")
    from keras_bert_zoo import BertPretrainer, continue_pretraining
    from tests.chinese_fixtures import CHINESE_SENTENCES, write_chinese_checkpoint

    pretrainer = BertPretrainer.from_preset(write_chinese_checkpoint(str(tmp_path / "zh"), head="mlm"))
    figures = continue_pretraining(
        pretrainer, CHINESE_SENTENCES * 8, steps=1, head_steps=0, batch_size=8, verbose=0, whole_word_masking=True
    )
    assert figures["steps"] == 1 and figures["mlm_accuracy"] is not None
