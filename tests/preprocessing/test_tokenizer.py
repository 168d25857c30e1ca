"""BertTokenizer against HF `tokenizers` (the reference the checkpoints were trained with)."""

import os
import unicodedata

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_bert_zoo.preprocessing import BertTokenizer
from tests.helpers import minilm_path, shared_data
from tests.preprocessing.shared_text import shared_lines

tokenizers = pytest.importorskip("tokenizers")

# Each line is a regression test for a place where tensorflow-text's bert normaliser
# (or a naive port) differs from HF.
HARD_CASES = [
    "Hello, World! The quick brown fox.",
    "Zürich café naïve résumé Ångström Ǆemal",  # accents, NFD, digraphs
    "中文字符 and 日本語 ひらがな カタカナ 한국어",  # CJK split, kana/hangul not split
    "emoji 😀🎉👍🏽 and ZWJ 👨‍👩‍👧",  # supplementary planes, ZWJ (Cf, removed)
    "µ micro sign, 5µm, Μ μ",  # tf-text case-folds U+00B5 to Greek mu; HF keeps it
    "zero\u200bwidth\u200c\u200d\ufeffjoiners and soft\u00adhyphen",  # Cf removed
    "ctrl\x00nul\x01\x07\x1b[31m\x7f\x85\x9f end",  # Cc removed
    "vt\x0bff\x0cfs\x1cus\x1f tab\tnl\ncr\r end",  # \x0b \x0c \x1c-\x1f are removed, not spaces
    "mojibake: Ã©tÃ© â€™ â€œquotedâ€\x9d Ã¼ber",
    "a" * 101 + " " + "b" * 100 + " " + "é" * 101,  # > 100 characters -> [UNK]
    "",
    "   \t\n ",
    "I [MASK] you [SEP] [mask] a[CLS]b [PAD][UNK]",  # raw special tokens kept whole (exact case)
    "İstanbul ΣΑΣ ΟΔΥΣΣΕΥΣ straße ǅ ﬁ",  # full lowercase, no final-sigma rule, ligatures kept
    "\u2003em\u3000ideographic\u00a0nbsp\u2028line\u2029para\u202fnarrow",  # Unicode spaces
    "$5 + x^2 = <y> | ~z ` @a #b",  # ASCII symbols are BERT punctuation
    "«quotes» „low” ‹single› — – … ¿que? ¡si!",  # Unicode punctuation
    "\ufdd0\ufdef nonchar \U0010ffff \ue000 private",  # noncharacters (kept), private use (removed)
    "e\u0301 o\u0308 a\u030a combining marks alone: \u0301\u0308",
    "\ufffd replacement char",
    "Ⅻ ① ½ ２０２６ ｆｕｌｌｗｉｄｔｈ",  # compatibility characters (no NFKC in BERT)
]


@pytest.fixture(scope="module")
def vocab_dir():
    return minilm_path()


@pytest.fixture(scope="module")
def tokenizer(vocab_dir):
    return BertTokenizer.from_preset(vocab_dir)


@pytest.fixture(scope="module")
def hf(vocab_dir):
    tok = tokenizers.Tokenizer.from_file(os.path.join(vocab_dir, "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return tok


def hf_ids(hf, texts):
    return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


@pytest.mark.slow  # the hard cases and every code point stay in the default run
def test_hf_parity_on_all_shared_lines(tokenizer, hf):
    """Ids, and character offsets, equal HF's on every real line in ../shared/data."""
    lines = [line for source in shared_lines(shared_data()).values() for line in source]
    assert len(lines) > 100_000
    ours = tokenizer(tf.constant(lines)).to_list()
    encodings = hf.encode_batch(lines, add_special_tokens=False)
    ref = [e.ids for e in encodings]
    bad = [(line, a, b) for line, a, b in zip(lines, ours, ref, strict=True) if a != b]
    assert not bad, f"{len(bad)} of {len(lines)} lines differ from HF, e.g. {bad[:3]}"
    # `call` sends lines that are ASCII after normalisation through tf-text's end-to-end
    # WordPiece; `word_ids` takes the general path (normalise, split, WordPiece) for every
    # line, so its words and their pieces must agree with HF's on the others too.
    other = [i for i, line in enumerate(lines) if not line.isascii()]
    assert len(other) > 1000
    words = tokenizer.word_ids(tf.constant([lines[i] for i in other])).to_list()
    assert words == [encodings[i].word_ids for i in other]
    ids, starts, ends = tokenizer.tokenize_with_offsets(tf.constant(lines))
    assert ids.to_list() == ref
    offsets = [list(zip(s, e, strict=True)) for s, e in zip(starts.to_list(), ends.to_list(), strict=True)]
    assert offsets == [[tuple(o) for o in e.offsets] for e in encodings]


@pytest.mark.parametrize("text", HARD_CASES)
def test_hf_parity_on_hard_cases(tokenizer, hf, text):
    assert tokenizer(tf.constant([text])).to_list()[0] == hf_ids(hf, [text])[0]
    ids, starts, ends = tokenizer.tokenize_with_offsets(text)
    enc = hf.encode(text, add_special_tokens=False)
    assert ids.numpy().tolist() == enc.ids
    assert list(zip(starts.numpy().tolist(), ends.numpy().tolist(), strict=True)) == [tuple(o) for o in enc.offsets]
    assert tokenizer.word_ids(text).numpy().tolist() == enc.word_ids


@pytest.mark.parametrize(
    "lowercase,strip_accents,chinese",
    [(False, None, True), (True, False, True), (False, True, True), (True, None, False)],
)
def test_hf_parity_options(vocab_dir, lowercase, strip_accents, chinese):
    """Cased, lowercase-keep-accents, strip-without-lowercase and no-CJK-split, vs HF's same options."""
    vocab = os.path.join(vocab_dir, "vocab.txt")
    ref = tokenizers.BertWordPieceTokenizer(
        vocab, lowercase=lowercase, strip_accents=strip_accents, handle_chinese_chars=chinese
    )
    ours = BertTokenizer(vocab, lowercase=lowercase, strip_accents=strip_accents, tokenize_chinese_chars=chinese)
    got = ours(tf.constant(HARD_CASES)).to_list()
    want = [e.ids for e in ref.encode_batch(HARD_CASES, add_special_tokens=False)]
    assert got == want


def test_hf_parity_on_every_code_point(tokenizer, hf):
    """Each code point of planes 0-2 inside, before and after words.

    Known, accepted difference: HF's character tables are from an older Unicode than
    RE2's, so characters assigned since Unicode 3.2 (ancient scripts, new marks) can
    be classified differently; plus 4 characters whose category Unicode changed. Any
    other difference fails.
    """
    cps = [c for c in range(0x30000) if not 0xD800 <= c < 0xE000]
    texts = ["a" + chr(c) + "b c" + chr(c) + chr(c) + "É" for c in cps]
    ours = tokenizer(tf.constant(texts)).to_list()
    ref = hf_ids(hf, texts)
    bad = [c for c, a, b in zip(cps, ours, ref, strict=True) if a != b]
    recategorised = {0x166D, 0x1734, 0x1885, 0x1886}
    unexplained = [hex(c) for c in bad if unicodedata.ucd_3_2_0.category(chr(c)) != "Cn" and c not in recategorised]
    assert not unexplained
    assert len(bad) < 600, f"{len(bad)} code points differ from HF (was 568)"


def test_word_ids_match_hf(tokenizer, hf):
    lines = shared_lines(shared_data(), ["conll2003", "mrpc"])
    lines = lines["conll2003"][:2000] + lines["mrpc"][:2000]
    ours = tokenizer.word_ids(tf.constant(lines)).to_list()
    assert ours == [e.word_ids for e in hf.encode_batch(lines, add_special_tokens=False)]


def test_detokenize_matches_hf_decoder(tokenizer, hf):
    lines = shared_lines(shared_data(), ["rte"])["rte"][:500] + HARD_CASES
    ids = tokenizer(tf.constant(lines))
    hf.decoder = tokenizers.decoders.WordPiece(cleanup=False)
    # Our detokenize drops [PAD] (padding is not text); everything else is as HF decodes it.
    no_pad = [[i for i in row if i != tokenizer.pad_token_id] for row in ids.to_list()]
    want = hf.decode_batch(no_pad, skip_special_tokens=False)
    got = [t.decode("utf-8") for t in tokenizer.detokenize(ids).numpy()]
    assert got == want
    # Dense padded ids detokenize the same ([PAD] dropped); 1-D ids give a scalar.
    dense = ids.to_tensor(tokenizer.pad_token_id)
    assert [t.decode() for t in tokenizer.detokenize(dense).numpy()] == want
    assert tokenizer.detokenize(ids[0]).numpy().decode() == want[0]


def test_vocabulary_api(tokenizer, vocab_dir):
    with open(os.path.join(vocab_dir, "vocab.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert tokenizer.vocabulary == lines
    assert tokenizer.vocabulary_size() == len(lines) == 30522
    ids = (
        tokenizer.pad_token_id,
        tokenizer.unk_token_id,
        tokenizer.cls_token_id,
        tokenizer.sep_token_id,
        tokenizer.mask_token_id,
    )
    assert [lines[i] for i in ids] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokenizer.token_to_id("hello") == lines.index("hello")
    assert tokenizer.id_to_token(lines.index("##ing")) == "##ing"
    with pytest.raises(KeyError, match="not in the vocabulary"):
        tokenizer.token_to_id("not-a-token")
    with pytest.raises(IndexError, match="out of range"):
        tokenizer.id_to_token(30522)


def test_sequence_length_and_shapes(vocab_dir, hf):
    tok = BertTokenizer.from_preset(vocab_dir, sequence_length=6)
    out = tok(["one two three four five six seven eight", "short"])
    ref = hf_ids(hf, ["one two three four five six seven eight", "short"])
    assert out.shape == (2, 6) and out.dtype == tf.int32
    assert out.numpy().tolist() == [ref[0][:6], ref[1] + [0] * (6 - len(ref[1]))]
    assert tok("scalar input").shape == (6,)
    ds = tf.data.Dataset.from_tensor_slices(["a b", "c"]).batch(2).map(tok)
    assert ds.element_spec.shape.as_list() == [None, 6]  # static length for XLA/TPU
    ragged = BertTokenizer.from_preset(vocab_dir)(tf.constant([["a b"], ["c"]]))  # [batch, 1] column
    assert ragged.to_list() == hf_ids(hf, ["a b", "c"])


def test_tf_data_and_tf_function_agree_with_eager(tokenizer):
    lines = HARD_CASES * 3
    eager = tokenizer(tf.constant(lines)).to_list()
    ds = tf.data.Dataset.from_tensor_slices(lines).batch(7).map(tokenizer)
    from_ds = [row for batch in ds for row in batch.to_list()]
    assert from_ds == eager
    graph = tf.function(tokenizer, jit_compile=False)(tf.constant(lines)).to_list()
    assert graph == eager
    offs = tf.function(tokenizer.tokenize_with_offsets)(tf.constant(lines))
    eager_offs = tokenizer.tokenize_with_offsets(tf.constant(lines))
    for a, b in zip(offs, eager_offs, strict=True):
        assert a.to_list() == b.to_list()


def test_config_round_trip_and_keras_save(tokenizer, tmp_path):
    small = BertTokenizer(tokenizer.vocabulary, lowercase=False, strip_accents=True, keep_special_tokens=False)
    config = small.get_config()
    clone = BertTokenizer.from_config(config)
    assert clone.get_config() == config
    assert "vocabulary" not in config and clone.vocabulary is None  # an asset: it comes with the .keras file
    assert clone.vocabulary_size() == tokenizer.vocabulary_size()  # what an embedding table needs first

    @keras.saving.register_keras_serializable(package="test_tokenizer")
    class Holder(keras.Model):
        def __init__(self, tokenizer, **kwargs):
            super().__init__(**kwargs)
            self.tokenizer = tokenizer
            self.embedding = keras.layers.Embedding(tokenizer.vocabulary_size(), 2)

        def call(self, ids):
            return self.embedding(ids)

        def get_config(self):
            return {"tokenizer": keras.saving.serialize_keras_object(self.tokenizer)}

        @classmethod
        def from_config(cls, config):
            return cls(keras.saving.deserialize_keras_object(config["tokenizer"]))

    model = Holder(small)
    model(np.zeros((1, 2), "int32"))
    path = str(tmp_path / "holder.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert restored.tokenizer.vocabulary == small.vocabulary
    assert restored.tokenizer.get_config() == config
    assert restored.tokenizer(HARD_CASES).to_list() == small(HARD_CASES).to_list()


def test_saved_model_with_raw_strings(tokenizer, tmp_path):
    module = tf.Module()
    module.tokenizer = tokenizer
    module.tokenize = tf.function(
        lambda text: tokenizer(text).to_tensor(tokenizer.pad_token_id),
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    path = str(tmp_path / "saved")
    tf.saved_model.save(module, path)
    restored = tf.saved_model.load(path)
    texts = tf.constant(HARD_CASES)
    np.testing.assert_array_equal(restored.tokenize(texts).numpy(), module.tokenize(texts).numpy())


def test_preset_round_trip_loads_in_transformers(tokenizer, tmp_path):
    """Our `save_to_preset` files load in HF transformers and tokenize the same."""
    transformers = pytest.importorskip("transformers")
    tokenizer.save_to_preset(str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["tokenizer_config.json", "vocab.txt"]
    again = BertTokenizer.from_preset(str(tmp_path))
    # Layer names are auto-numbered per Keras session (fixtures outlive the per-test reset).
    assert {**again.get_config(), "name": None} == {**tokenizer.get_config(), "name": None}
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    want = [hf_tok(t, add_special_tokens=False)["input_ids"] for t in HARD_CASES]
    assert tokenizer(HARD_CASES).to_list() == want


def test_the_vocabulary_is_an_asset_of_a_keras_file_not_part_of_its_config(tmp_path):
    """A `.keras` file's config.json carries the tokenizer's options and 5 special ids, not the
    vocabulary; the vocabulary is `vocab.txt` among the file's assets, and the reloaded
    preprocessor tokenizes identically."""
    import json

    from keras_bert_zoo import BertPreprocessor
    from keras_bert_zoo.errors import UsageError

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "on", "mat", "."]
    preprocessor = BertPreprocessor(BertTokenizer(tokens), sequence_length=8)
    preprocessor.tokenizer.save_assets(str(tmp_path))
    assert (tmp_path / "vocab.txt").read_text().split("\n")[:-1] == tokens
    config = preprocessor.get_config()
    assert '"vocabulary":' not in json.dumps(config) and '"mat"' not in json.dumps(config)

    # A config alone rebuilds the layers; using the tokenizer before its assets load is a clear error.
    clone = BertPreprocessor.from_config(config)
    with pytest.raises(UsageError, match="has no vocabulary yet"):
        clone(["the cat"])
    clone.tokenizer.load_assets(str(tmp_path))
    np.testing.assert_array_equal(
        clone(["the cats sat on the mat ."])["token_ids"], preprocessor(["the cats sat on the mat ."])["token_ids"]
    )


def test_a_model_saved_as_keras_keeps_its_vocabulary_among_the_assets(tmp_path):
    import zipfile

    from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor

    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "##s", "on", "mat", "."]
    backbone = BertBackbone(
        vocabulary_size=len(tokens),
        num_layers=1,
        num_heads=2,
        hidden_dim=8,
        intermediate_dim=16,
        max_sequence_length=16,
    )
    model = BertClassifier(
        backbone, num_classes=2, preprocessor=BertPreprocessor(BertTokenizer(tokens), sequence_length=8)
    )
    path = str(tmp_path / "model.keras")
    model.save(path)
    with zipfile.ZipFile(path) as archive:
        config = archive.read("config.json").decode("utf-8")
        assets = [n for n in archive.namelist() if n.startswith("assets/") and n.endswith("vocab.txt")]
        assert len(assets) == 1, archive.namelist()
        assert archive.read(assets[0]).decode("utf-8").split("\n")[:-1] == tokens
    assert '"mat"' not in config and "special_token_ids" in config
    restored = keras.saving.load_model(path)
    texts = ["the cats sat on the mat .", "the mat"]
    np.testing.assert_allclose(
        restored.predict(texts, verbose=0), model.predict(texts, verbose=0), rtol=1e-6, atol=1e-6
    )
