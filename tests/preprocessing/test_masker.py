"""MaskedLMMasker: the original 15% / 80-10-10 recipe, measured on real text."""

import os
import time

import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing.masker import MaskedLMMasker
from tests.helpers import minilm_path, shared_data

SEQ = 128


@pytest.fixture(scope="module")
def real_batch():
    """~300k real WordPiece tokens: WikiText-2 valid packed into 128-token pairs."""
    from keras_bert_zoo.tasks.pretrainer.data import packed_instances

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
        vocabulary_size=len(vocabulary),
        mask_token_id=ids["[MASK]"],
        unselectable_token_ids=[ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]],
        max_predictions=20,
        vocabulary=vocabulary,
        **kwargs,
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
    for p, w in zip(positions, weights, strict=True):
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
    for use_word_ids, max_ngram in ((True, 1), (False, 1), (True, 3)):  # tokenizer word ids, the '##' rule
        masker = masker_for(vocabulary, whole_word_masking=True, max_ngram=max_ngram)
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
        # A word that would overflow the budget is skipped and smaller ones fill it.
        per_row = np.isin(token_ids, [0, 101, 102], invert=True).sum(1)
        budget = np.minimum(20, np.maximum(1, np.round(per_row * 0.15)))
        assert (weights.sum(1) < budget).sum() <= 1, (use_word_ids, max_ngram)
        assert abs(weights.sum() / per_row.sum() - 0.15) <= 0.005


def budgets(token_ids, special, rate=0.15, max_predictions=20):
    per_row = np.isin(token_ids, special, invert=True).sum(1)
    return np.minimum(max_predictions, np.maximum(1, np.round(per_row * rate)))


@pytest.mark.parametrize(
    "mode",
    ["token", "whole_word", "ngram", "whole_word_ngram"],
)
def test_wikitext_selection_rate_is_15_percent(real_batch, mode):
    """Every mode selects 15% on ~2,500 real WikiText-2 rows of 128 tokens: a unit that
    would overflow the budget is skipped and later ones fill it (the original's
    `continue`), so rows reach their budget; the chosen tokens still split 80/10/10."""
    token_ids, vocabulary = real_batch
    ids = {t: i for i, t in enumerate(vocabulary)}
    special = [ids["[CLS]"], ids["[SEP]"], ids["[PAD]"]]
    masker = masker_for(vocabulary, whole_word_masking="whole_word" in mode, max_ngram=3 if "ngram" in mode else 1)
    out = masker(token_ids, seed=[7, 11])
    r = rates(token_ids, out, special, ids["[MASK]"])
    assert len(token_ids) >= 2000
    assert abs(r["selection"] - 0.15) <= 0.005, r
    weights = out["mask_weights"].numpy()
    budget = budgets(token_ids, special)
    assert weights.sum() >= 0.999 * budget.sum(), (weights.sum(), budget.sum())
    assert (weights.sum(1) < budget).sum() <= 5  # of ~2,500 rows
    assert abs(r["mask"] - 0.80) <= 0.01 and abs(r["random"] - 0.10) <= 0.01 and abs(r["kept"] - 0.10) <= 0.01, r
    chosen_ids = token_ids[np.arange(len(token_ids))[:, None], out["mask_positions"].numpy()][weights > 0]
    assert not np.isin(chosen_ids, special).any()


def test_whole_word_skips_a_word_that_overflows():
    """Budget 3 over a 3-piece word and 3 one-piece words: the budget is always filled.

    Stopping at the first word that does not fit (instead of skipping it) selects a
    single token whenever a one-piece word comes before the 3-piece word."""
    # [CLS] w1 ##a ##b w2 w3 w4 [SEP]: 6 candidates, selection_rate 0.5 -> budget 3.
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "w1", "##a", "##b", "w2", "w3", "w4"]
    row = [2, 5, 6, 7, 8, 9, 10, 3]
    masker = MaskedLMMasker(
        vocabulary_size=len(vocabulary),
        mask_token_id=4,
        unselectable_token_ids=[0, 2, 3],
        max_predictions=6,
        selection_rate=0.5,
        whole_word_masking=True,
        vocabulary=vocabulary,
    )
    out = masker(np.array([row] * 400, "int32"), seed=[3, 4])
    weights = out["mask_weights"].numpy()
    np.testing.assert_array_equal(weights.sum(1), 3)
    positions = [tuple(p[w > 0]) for p, w in zip(out["mask_positions"].numpy(), weights, strict=True)]
    assert positions.count((1, 2, 3)) > 50  # the long word, alone
    assert all(p == (1, 2, 3) or not set(p) & {1, 2, 3} for p in positions)  # never split


def span_lengths(masker, token_ids, special, seed):
    """Candidate tokens per span, per row (the last span of a row, cut short, left out)."""
    candidate = np.isin(token_ids, special, invert=True)
    units = masker.masking_units(token_ids, seed=seed).numpy()
    assert ((units >= 0) == candidate).all()  # `special` are the masker's unselectable ids
    spans = []
    for u, c in zip(units, candidate, strict=True):
        values, counts = np.unique(u[c], return_counts=True)
        spans.append(dict(zip(values[:-1].tolist(), counts[:-1].tolist(), strict=True)))
    return units, spans


def test_ngram_span_lengths_are_uniform(real_batch):
    """max_ngram=3 cuts each row into spans of 1, 2 or 3 tokens, each length 1/3 likely;
    the chosen spans keep close to that (only the last fills of a budget prefer short ones)."""
    token_ids, vocabulary = real_batch
    special = [0, 101, 102]
    assert [vocabulary[i] for i in special] == ["[PAD]", "[CLS]", "[SEP]"]
    masker = masker_for(vocabulary, max_ngram=3)
    units, spans = span_lengths(masker, token_ids, special, [5, 6])
    lengths = np.array([n for row in spans for n in row.values()])
    assert len(lengths) > 100_000
    share = [float(np.mean(lengths == k)) for k in (1, 2, 3)]
    assert np.allclose(share, 1 / 3, atol=0.01), share
    assert lengths.max() == 3

    out = masker(token_ids, seed=[5, 6])
    positions, weights = out["mask_positions"].numpy(), out["mask_weights"].numpy()
    chosen = []
    for i, row in enumerate(spans):
        taken = set(units[i][positions[i][weights[i] > 0]].tolist())
        chosen += [n for unit, n in row.items() if unit in taken]
        # A span is chosen whole or not at all.
        for unit in taken:
            at = np.nonzero(units[i] == unit)[0]
            assert set(at.tolist()) <= set(positions[i][weights[i] > 0].tolist())
    chosen = np.array(chosen)
    chosen_share = [float(np.mean(chosen == k)) for k in (1, 2, 3)]
    assert np.allclose(chosen_share, 1 / 3, atol=0.07), chosen_share
    assert 1.85 <= chosen.mean() <= 2.0, chosen.mean()


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
    masker = MaskedLMMasker(
        vocabulary_size=50, mask_token_id=4, unselectable_token_ids=[0, 2, 3], max_predictions=5, seed=3
    )
    clone = MaskedLMMasker.from_config(masker.get_config())
    assert clone.get_config() == masker.get_config()
    ids = np.random.default_rng(0).integers(5, 50, size=(6, 16)).astype("int32")
    ds = tf.data.Dataset.from_tensor_slices(ids).batch(3).map(masker)
    shapes = [tuple(b["mask_positions"].shape) for b in ds]
    assert shapes == [(3, 5), (3, 5)]


def graph_shapes(graph):
    """Static output shapes of every op, nested function graphs (while bodies) included."""
    for op in graph.get_operations():
        for t in op.outputs:
            yield op.type, t.shape
    for function in getattr(graph, "_functions", {}).values():
        if getattr(function, "graph", None) is not None:
            yield from graph_shapes(function.graph)


@pytest.mark.parametrize(
    "kwargs", [{}, {"whole_word_masking": True}, {"max_ngram": 3}, {"whole_word_masking": True, "max_ngram": 3}]
)
def test_no_batch_by_seq_by_seq_tensor(kwargs):
    """Memory is O(batch * seq): no op makes a tensor with two sequence-sized dims
    (a [batch, seq, seq] one-hot is 268 MB at batch 256, length 512)."""
    batch, seq = 3, 64
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(95)]
    masker = MaskedLMMasker(
        vocabulary_size=100,
        mask_token_id=4,
        unselectable_token_ids=[0, 2, 3],
        max_predictions=5,
        vocabulary=vocabulary,
        **kwargs,
    )
    fn = tf.function(lambda ids, seed: masker(ids, seed=seed))
    concrete = fn.get_concrete_function(tf.TensorSpec([batch, seq], tf.int32), tf.TensorSpec([2], tf.int64))
    shapes = list(graph_shapes(concrete.graph))
    assert len(shapes) > 50
    big = [(op, shape) for op, shape in shapes if shape.rank is not None and shape.as_list().count(seq) >= 2]
    assert not big, big
    assert all(
        concrete.structured_outputs[k].shape == (batch, 5) for k in ("mask_positions", "mask_ids", "mask_weights")
    )


def test_batch_256_by_512_is_fast():
    ids = np.random.default_rng(0).integers(5, 1000, size=(256, 512)).astype("int32")
    ids[:, 0], ids[:, 300], ids[:, -1] = 2, 3, 3
    for kwargs in ({}, {"max_ngram": 3}):
        masker = MaskedLMMasker(
            vocabulary_size=1000, mask_token_id=4, unselectable_token_ids=[0, 2, 3], max_predictions=80, **kwargs
        )
        fn = tf.function(lambda x, seed: masker(x, seed=seed))  # noqa: B023  (traced and timed in this iteration only)
        fn(ids, tf.constant([1, 2]))  # trace
        # CPU seconds of this process (all TF threads), not wall time: on a loaded machine a niced
        # run can wait seconds for a core between two clock reads, while a per-row Python loop
        # would still burn far more than 2 s of CPU itself.
        start = time.process_time()
        out = fn(ids, tf.constant([1, 3]))
        assert time.process_time() - start < 2.0  # ~0.03 CPU-s (0.09-0.14 s wall under load 11)
        assert out["mask_positions"].shape == (256, 80)
        np.testing.assert_array_equal(out["mask_weights"].numpy().sum(1), 76)  # round(0.15 * 509)


def test_bad_arguments_have_clear_errors():
    with pytest.raises(ValueError, match="sum to at most 1"):
        MaskedLMMasker(vocabulary_size=10, mask_token_id=4, mask_token_rate=0.9, random_token_rate=0.2)
    masker = MaskedLMMasker(vocabulary_size=10, mask_token_id=4, whole_word_masking=True)
    with pytest.raises(ValueError, match="word_ids"):
        masker(np.ones((2, 8), "int32"))
