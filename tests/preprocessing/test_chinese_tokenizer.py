"""Chinese text through `BertTokenizer` and `BertBackbone`, against HF's `BertTokenizer` and `BertModel`.

The checkpoint is a tiny HF-written Chinese BERT (`tests/chinese_fixtures`) whose character vocabulary is
learned from the first 2,000 MSRA dev sentences, so the last 1,000 hold characters it lacks ([UNK]), as real
text does against Google's 21,128 entries. MSRA (People's Daily) also brings full-width digits and Latin
letters, Chinese punctuation and mixed scripts. Ids must equal HF's on all 3,000 dev sentences and on the
mixed sentences, with `do_lower_case` true and false; character offsets must slice the original strings as
HF's offsets do; hidden states must equal HF `BertModel`'s within 1e-5.
"""

import unicodedata

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertTokenizer
from tests.chinese_fixtures import CHINESE_SENTENCES, hf_tokenizer, msra_sentences, write_chinese_checkpoint
from tests.helpers import shared_data

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

# Mixed text beyond MSRA: accents, full-width forms, Japanese kana and Korean (not CJK ideographs: split only
# at punctuation), emoji outside the BMP, and a [MASK] written in the text.
MIXED = CHINESE_SENTENCES + [
    "Café和ＢＥＲＴ模型１２３，naïve用户说：好！",
    "東京タワーと서울타워，𠀀字在扩展B区。😀表情",
    "北京[MASK]门广场2008年奥运会",
]


@pytest.fixture(scope="module")
def msra_dev():
    return msra_sentences(shared_data("msra_ner", "dev.txt"))


@pytest.fixture(scope="module", params=[False, True], ids=["cased", "lowercase"])
def checkpoint(request, tmp_path_factory, msra_dev):
    path = str(tmp_path_factory.mktemp("zh_tok"))
    return write_chinese_checkpoint(path, texts=msra_dev[:2000] + CHINESE_SENTENCES, do_lower_case=request.param)


def test_ids_equal_hf_on_every_msra_dev_sentence_and_mixed_text(checkpoint, msra_dev):
    assert len(msra_dev) == 3000
    ours = BertTokenizer.from_preset(checkpoint)
    hf = hf_tokenizer(checkpoint)
    texts = msra_dev + MIXED
    expected = hf(texts, add_special_tokens=False)["input_ids"]
    got = ours.tokenize(texts).to_list()
    mismatched = [(t, g, e) for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not mismatched, mismatched[:3]
    unk = hf.convert_tokens_to_ids("[UNK]")
    assert sum(ids.count(unk) for ids in expected[2000:3000]) > 0  # the held-out sentences reach [UNK]


def _normalised(text, lowercase):
    if lowercase:
        text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    return text


def test_offsets_slice_the_original_strings_as_hf(checkpoint, msra_dev):
    ours = BertTokenizer.from_preset(checkpoint)
    hf = hf_tokenizer(checkpoint)
    texts = msra_dev[2000:2500] + MIXED
    ids, starts, ends = (t.to_list() for t in ours.tokenize_with_offsets(texts))
    expected = hf(texts, add_special_tokens=False, return_offsets_mapping=True)
    vocab = ours.get_vocabulary()
    for text, row, s, e, hf_offsets in zip(texts, ids, starts, ends, expected["offset_mapping"], strict=True):
        assert list(zip(s, e, strict=True)) == [tuple(o) for o in hf_offsets], text
        for token_id, start, end in zip(row, s, e, strict=True):
            token = vocab[token_id]
            if token != "[UNK]" and token != "[MASK]":
                assert _normalised(text[start:end], ours.lowercase) == token.removeprefix("##"), (text, token)


def test_hidden_states_equal_hf_bert_model_on_chinese(checkpoint):
    hf = hf_tokenizer(checkpoint)
    batch = hf(MIXED, CHINESE_SENTENCES[::-1] + MIXED[:3], return_tensors="np", padding=True)
    x = {
        "token_ids": batch["input_ids"].astype("int32"),
        "segment_ids": batch["token_type_ids"].astype("int32"),
        "padding_mask": batch["attention_mask"].astype("int32"),
    }
    ours = BertBackbone.from_preset(checkpoint)(x)
    model = transformers.BertModel.from_pretrained(checkpoint).eval()
    with torch.no_grad():
        out = model(**{k: torch.tensor(v).long() for k, v in batch.items()})
    real = x["padding_mask"].astype(bool)
    seq = out.last_hidden_state.numpy()
    np.testing.assert_allclose(np.asarray(ours["sequence_output"])[real], seq[real], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.asarray(ours["pooled_output"]), out.pooler_output.numpy(), atol=1e-5, rtol=0)
