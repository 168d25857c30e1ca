"""MaskedLMMasker: the original 15% / 80-10-10 recipe, measured on real text."""

import os

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
from tests.helpers import minilm_path, shared_data

SEQ = 128


@pytest.fixture(scope="module")
def real_batch():
    """~300k real WordPiece tokens: WikiText-2 valid packed into 128-token pairs."""
    from keras_bert_zoo.preprocessing.pretraining_data import packed_instances

    corpus = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    vocab = os.path.join(minilm_path(), "vocab.txt")
    rows = list(packed_instances([corpus], vocab, SEQ, corpus_format="wikitext", seed=3))
    token_ids = np.array([r[0] for r in rows], "int32")
    with open(vocab, encoding="utf-8") as f:
        vocabulary = [line.rstrip("\n") for line in f]
    return token_ids, vocabulary


def masker_for(vocabulary, **kwargs):
    ids = {t: i for i, t in enumerate(vocabulary)}
    return MaskedLMMasker(
        vocabulary_size=len(vocabulary), mask_token_id=ids["[MASK]"],
        unselectable_token_ids=[ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]],
        max_predictions=20, vocabulary=vocabulary, **kwargs,
    )


def rates(token_ids, out, special, mask_id):
    positions = out["mask_positions"].numpy()
    weights = out["mask_weights"].numpy() > 0
    masked = out["token_ids"].numpy()
    rows = np.repeat(np.arange(len(token_ids))[:, None], positions.shape[1], axis=1)
    original_at = token_ids[rows, positions][weights]
    new_at = masked[rows, positions][weights]
    candidates = int(np.isin(token_ids, special, invert=True).sum())
    chosen = int(weights.sum())
    return {
        "selection": chosen / candidates,
        "mask": float(np.mean(new_at == mask_id)),
        "random": float(np.mean((new_at != mask_id) & (new_at != original_at))),
        "kept": float(np.mean(new_at == original_at)),
        "candidates": candidates,
    }


def test_rates_on_real_tokens(real_batch):
    token_ids, vocabulary = real_batch
    ids = {t: i for i, t in enumerate(vocabulary)}
    special = [ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]]
    masker = masker_for(vocabulary)
    out = masker(token_ids, seed=[7, 11])
    r = rates(token_ids, out, special, ids["[MASK]"])
    assert r["candidates"] >= 100_000
    assert abs(r["selection"] - 0.15) <= 0.01, r
    assert abs(r["mask"] - 0.80) <= 0.01, r
    assert abs(r["random"] - 0.10) <= 0.01, r
    assert abs(r["kept"] - 0.10) <= 0.01, r

    positions = out["mask_positions"].numpy()
    weights = out["mask_weights"].numpy()
    masked = out["token_ids"].numpy()
    rows = np.arange(len(token_ids))[:, None]
    # Special tokens are never chosen, and never inserted as random replacements.
    chosen_ids = token_ids[rows, positions][weights > 0]
    assert not np.isin(chosen_ids, special).any()
    assert not np.isin(masked[token_ids != masked], special).any()
    # mask_ids are the original ids; everything not chosen is untouched.
    np.testing.assert_array_equal(out["mask_ids"].numpy()[weights > 0], chosen_ids)
    chosen_mask = np.zeros_like(token_ids, bool)
    for i in range(len(token_ids)):
        chosen_mask[i, positions[i][weights[i] > 0]] = True
    np.testing.assert_array_equal(masked[~chosen_mask], token_ids[~chosen_mask])
    # Positions ascending, padding slots at the end with weight 0 and id 0.
    for p, w in zip(positions, weights):
        n = int(w.sum())
        assert np.all(np.diff(p[:n]) > 0) and np.all(w[n:] == 0) and np.all(p[n:] == 0)
    # The original count per sequence: min(20, max(1, round(0.15 * candidates))).
    per_row = np.isin(token_ids, special, invert=True).sum(1)
    np.testing.assert_array_equal(weights.sum(1), np.minimum(20, np.maximum(1, np.round(per_row * 0.15))))


def test_whole_word_masking_never_splits_a_word():
    """Word boundaries from HF `tokenizers` (the reference) are never split."""
    tokenizers = pytest.importorskip("tokenizers")
    corpus = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    tok = tokenizers.Tokenizer.from_file(os.path.join(minilm_path(), "tokenizer.json"))
    tok.enable_truncation(SEQ)
    tok.enable_padding(length=SEQ)
    with open(corpus, encoding="utf-8") as f:
        lines = [line.strip() for line in f if len(line.strip()) > 200][:400]
    encodings = tok.encode_batch(lines)
    token_ids = np.array([e.ids for e in encodings], "int32")
    word_ids = np.array([[-1 if w is None else w for w in e.word_ids] for e in encodings], "int32")
    vocabulary = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1])]
    assert (token_ids > 0).sum() > 40_000
    for use_word_ids in (True, False):  # tokenizer word ids, and the original '##' rule
        masker = masker_for(vocabulary, whole_word_masking=True)
        out = masker(token_ids, word_ids=word_ids if use_word_ids else None, seed=[1, 2])
        positions, weights = out["mask_positions"].numpy(), out["mask_weights"].numpy()
        split_words = 0
        multi_piece_chosen = 0
        for i in range(len(token_ids)):
            chosen = set(positions[i][weights[i] > 0].tolist())
            for w in set(word_ids[i][word_ids[i] >= 0].tolist()):
                pieces = set(np.nonzero(word_ids[i] == w)[0].tolist())
                inter = pieces & chosen
                if inter and inter != pieces:
                    split_words += 1
                if len(pieces) > 1 and inter == pieces:
                    multi_piece_chosen += 1
        assert split_words == 0
        assert multi_piece_chosen > 50  # multi-piece words really are chosen whole
        candidates = np.isin(token_ids, [0, 101, 102], invert=True).sum()
        rate = weights.sum() / candidates
        assert 0.13 <= rate <= 0.155, rate  # a whole word that would overflow the budget is left out


def test_ngram_masking_chooses_spans(real_batch):
    token_ids, vocabulary = real_batch
    token_ids = token_ids[:500]
    masker = masker_for(vocabulary, max_ngram=3)
    out = masker(token_ids, seed=[5, 6])
    positions, weights = out["mask_positions"].numpy(), out["mask_weights"].numpy()
    runs = []
    for p, w in zip(positions, weights):
        p = p[w > 0]
        run = 1
        for a, b in zip(p[:-1], p[1:]):
            if b == a + 1:
                run += 1
            else:
                runs.append(run)
                run = 1
        runs.append(run)
    single = MaskedLMMasker(**{**masker.get_config(), "max_ngram": 1})(token_ids, seed=[5, 6])
    assert np.mean(runs) > 1.5  # spans of 1..3 tokens (mean 2 before merges)
    sel = weights.sum() / np.isin(token_ids, [0, 101, 102], invert=True).sum()
    assert 0.12 <= sel <= 0.155
    assert single["mask_weights"].numpy().sum() >= weights.sum()


def test_seeded_calls_reproduce_and_differ():
    masker = MaskedLMMasker(vocabulary_size=1000, mask_token_id=4, unselectable_token_ids=[0, 2, 3])
    ids = np.random.default_rng(0).integers(5, 1000, size=(8, 64)).astype("int32")
    ids[:, 0], ids[:, -1] = 2, 3
    a = masker(ids, seed=[1, 2])
    b = masker(ids, seed=[1, 2])
    c = masker(ids, seed=[1, 3])
    np.testing.assert_array_equal(a["token_ids"], b["token_ids"])
    assert not np.array_equal(a["mask_positions"], c["mask_positions"])
    # Unbatched input works as one row.
    single = masker(ids[0], seed=[1, 2])
    assert single["mask_positions"].shape == (20,)


def test_runs_in_tf_data_and_config_round_trip():
    masker = MaskedLMMasker(vocabulary_size=50, mask_token_id=4, unselectable_token_ids=[0, 2, 3],
                            max_predictions=5, seed=3)
    clone = MaskedLMMasker.from_config(masker.get_config())
    assert clone.get_config() == masker.get_config()
    ids = np.random.default_rng(0).integers(5, 50, size=(6, 16)).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices(ids).batch(3).map(masker)
    shapes = [tuple(b["mask_positions"].shape) for b in ds]
    assert shapes == [(3, 5), (3, 5)]


def test_bad_arguments_have_clear_errors():
    with pytest.raises(ValueError, match="sum to at most 1"):
        MaskedLMMasker(vocabulary_size=10, mask_token_id=4, mask_token_rate=0.9, random_token_rate=0.2)
    masker = MaskedLMMasker(vocabulary_size=10, mask_token_id=4, whole_word_masking=True)
    with pytest.raises(ValueError, match="word_ids"):
        masker(np.ones((2, 8), "int32"))
