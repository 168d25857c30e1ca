"""Vocabulary learning on the words our tokenizer sees: HF `tokenizers`' WordPiece trainer (default) and
tensorflow-text's learner (`learner="tensorflow_text"`)."""

import pytest
import tensorflow as tf

from keras_bert_zoo import cli
from keras_bert_zoo.preprocessing import BertTokenizer
from keras_bert_zoo.preprocessing.normalization import normalize
from keras_bert_zoo.preprocessing.vocabulary import learn_vocabulary
from tests.helpers import shared_data
from tests.preprocessing.shared_text import _tsv_columns

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def test_matches_tensorflow_text_bert_vocab_on_lowercase_ascii():
    """SST-2 is lowercased ASCII: there tf-text's BasicTokenizer and ours see the same words."""
    from tensorflow_text.tools.wordpiece_vocab.bert_vocab_from_dataset import bert_vocab_from_dataset

    lines = [s for s in _tsv_columns(shared_data("sst2", "dev.tsv"), {"sentence"}) if s.isascii()][:500]
    ds = tf.data.Dataset.from_tensor_slices(lines).batch(256)
    params = {"lower_thresh": 2, "max_token_length": 50}
    ref = bert_vocab_from_dataset(ds, 600, SPECIALS, bert_tokenizer_params={"lower_case": True}, learn_params=params)
    ours = learn_vocabulary(ds, 600, min_count=2, learner="tensorflow_text")
    assert ours == ref
    assert len(ours) > 300


def test_layout_normalisation_and_hf_parity(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    with open(shared_data("pretrain_text", "wikitext-2.valid.tokens.txt"), encoding="utf-8") as f:
        lines = f.read().splitlines()[:800]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n" + "Café CAFÉ café Zürich\u200b naïve 東京 Σ\n" * 5, encoding="utf-8")
    vocab = learn_vocabulary([str(corpus)], 1000, num_unused_tokens=4, min_count=2)
    assert vocab[:9] == SPECIALS + [f"[unused{i}]" for i in range(4)]
    assert len(vocab) == 1000 and len(set(vocab)) == len(vocab)  # the size asked for
    # Every piece is already in the tokenizer's normal form (lowercase, no accents).
    pieces = [t[2:] if t.startswith("##") else t for t in vocab[9:]]
    assert normalize(tf.constant(pieces)).numpy().tolist() == [p.encode() for p in pieces]
    assert "é" not in vocab and "东" not in vocab and "東" in vocab
    pieces_of_cafe = [vocab[i] for i in BertTokenizer(vocab)(tf.constant(["CAFÉ"])).to_list()[0]]
    assert "".join(p.removeprefix("##") for p in pieces_of_cafe) == "cafe"
    # The learned vocabulary tokenizes like HF does with it, and covers the corpus.
    ours = BertTokenizer(vocab)(tf.constant(lines)).to_list()
    path = tmp_path / "vocab.txt"
    path.write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    ref = tokenizers.BertWordPieceTokenizer(str(path))
    assert ours == [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)]
    flat = [i for row in ours for i in row]
    assert flat.count(vocab.index("[UNK]")) / len(flat) < 0.02


def test_cli_vocab(tmp_path, capsys):
    out = tmp_path / "out" / "vocab.txt"
    code = cli.main(
        [
            "vocab",
            "--corpus",
            shared_data("pretrain_text", "sample_text.txt"),
            "--size",
            "1000",
            "--out",
            str(out),
            "--unused",
            "2",
            "--min-count",
            "1",
        ]
    )
    assert code == 0
    vocab = out.read_text(encoding="utf-8").splitlines()
    assert vocab[:7] == SPECIALS + ["[unused0]", "[unused1]"] and len(vocab) == 1000
    assert "wrote" in capsys.readouterr().out
    assert BertTokenizer(str(out)).vocabulary == vocab


def test_bad_arguments(tmp_path, capsys):
    with pytest.raises(ValueError, match="larger than the 5 reserved"):
        learn_vocabulary(["x.txt"], 5)
    with pytest.raises(FileNotFoundError, match="missing.txt does not exist"):
        learn_vocabulary([str(tmp_path / "missing.txt")], 100)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no words"):
        learn_vocabulary([str(empty)], 100)
    code = cli.main(["vocab", "--corpus", str(tmp_path / "missing.txt"), "--size", "100", "--out", str(tmp_path / "v")])
    assert code == 1 and "missing.txt does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("size", [2000, 5000])
def test_fills_the_size_and_hf_reads_it_like_us(tmp_path, size):
    """The size asked for, where tensorflow-text's learner returned far fewer (3,574 for 8,000 on
    WikiText-2); HF's own BERT tokenizer (`tokenizers.BertWordPieceTokenizer`), reading the same
    vocab.txt, splits every line as ours."""
    tokenizers = pytest.importorskip("tokenizers")
    path = shared_data("pretrain_text", "wikitext-2.valid.tokens.txt")
    vocab = learn_vocabulary([path], size)
    assert len(vocab) == size and len(set(vocab)) == size
    out = tmp_path / "vocab.txt"
    out.write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()][:300]
    ref = tokenizers.BertWordPieceTokenizer(str(out), lowercase=True)
    expected = [e.ids for e in ref.encode_batch(lines, add_special_tokens=False)]
    assert BertTokenizer(str(out))(tf.constant(lines)).to_list() == expected


def test_a_smaller_vocabulary_than_asked_says_so_and_why(tmp_path, capsys):
    """A small text cannot fill 8,000 tokens: one line names both sizes and the reason (every word
    is already one token), and the words then tokenize whole, which is that reason."""
    pytest.importorskip("tokenizers")
    corpus = tmp_path / "small.txt"
    corpus.write_text("the cat sat on the mat .\nthe dog ran in the park .\n" * 5, encoding="utf-8")
    vocab = learn_vocabulary([str(corpus)], 8000)
    err = capsys.readouterr().err
    assert err.strip() == (
        f"note: learned a vocabulary of {len(vocab):,} tokens, not the 8,000 asked for: every "
        "word of the text is already one token, so nothing is left to merge; a larger text "
        "gives more."
    )
    words = "the cat sat on the mat . the dog ran in the park ."
    assert [vocab[i] for i in BertTokenizer(vocab)(tf.constant([words])).to_list()[0]] == words.split()
    learn_vocabulary([str(corpus)], len(vocab))  # filled: nothing to say
    assert capsys.readouterr().err == ""


def test_learner_is_checked():
    with pytest.raises(ValueError, match="learner='bpe'"):
        learn_vocabulary(["x.txt"], 100, learner="bpe")


def test_the_same_text_gives_the_same_vocabulary(tmp_path):
    """HF's trainer numbered its `##` pieces in hash-map order, which changes from run to run (and
    from call to call), so merges that tie on count went either way: the same corpus gave another
    vocabulary each time (huggingface/tokenizers#1794). Real English and Chinese text, learned five
    times in one process, must give one vocabulary, in BERT's layout."""
    pytest.importorskip("tokenizers")
    from tests.chinese_fixtures import msra_sentences

    with open(shared_data("pretrain_text", "wikitext-2.valid.tokens.txt"), encoding="utf-8") as f:
        english = [line for line in f.read().splitlines() if line.strip()][:300]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(
        "\n".join(english + msra_sentences(shared_data("msra_ner", "dev.txt"), limit=300)) + "\n", encoding="utf-8"
    )
    vocabularies = {tuple(learn_vocabulary([str(corpus)], 3000)) for _ in range(5)}
    assert len(vocabularies) == 1
    (vocab,) = vocabularies
    assert len(vocab) == 3000 and len(set(vocab)) == 3000
    # Reserved tokens, the characters, their `##` forms (sorted), then the merges.
    pieces = vocab[len(SPECIALS) :]
    characters = [t for t in pieces if len(t) == 1]
    continuing = [t for t in pieces if t.startswith("##") and len(t) == 3]
    assert vocab[: len(SPECIALS)] == tuple(SPECIALS)
    assert pieces[: len(characters)] == tuple(characters) and "中" in characters
    assert pieces[len(characters) : len(characters) + len(continuing)] == tuple(sorted(continuing))
