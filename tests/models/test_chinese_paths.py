"""Raw Chinese strings (no spaces) on every non-tagger Python path, against HF's classes on the same files.

The checkpoints are tiny HF-layout Chinese BERTs that `transformers` itself writes (`tests/chinese_fixtures`):
a character vocabulary, label names, `tokenizer_config.json`. HF's `BertTokenizer` and task models on the same
directory are the references for ids, logits, fill-mask tokens and answer spans.
"""

import numpy as np
import pytest

from keras_bert_zoo import BertClassifier, BertPretrainer, BertSentenceEmbedder, BertSpanQA
from tests.chinese_fixtures import CHINESE_SENTENCES, hf_tokenizer, write_chinese_checkpoint

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

REVIEWS = [
    "这本书的内容一般，快递很快，包装也不错。",
    "房间太小了，隔音很差，不推荐。",
    "国产的本能做到这样，心满意足了",
]
LABELS = ["负面", "正面"]


def _hf_inputs(path, texts, *pairs):
    return hf_tokenizer(path)(texts, *pairs, return_tensors="pt", padding=True)


@pytest.fixture(scope="module")
def classify_dir(tmp_path_factory):
    return write_chinese_checkpoint(str(tmp_path_factory.mktemp("zh_cls")), head="classify", label_names=LABELS)


def test_classifier_predict_fit_and_labels_on_raw_chinese(classify_dir):
    model = BertClassifier.from_preset(classify_dir)
    logits = np.asarray(model.predict(REVIEWS, verbose=0))
    hf = transformers.BertForSequenceClassification.from_pretrained(classify_dir).eval()
    with torch.no_grad():
        expected = hf(**_hf_inputs(classify_dir, REVIEWS)).logits.numpy()
    np.testing.assert_allclose(logits, expected, atol=1e-5, rtol=0)

    labels, probabilities = model.predict_labels(REVIEWS)
    assert list(labels) == [LABELS[i] for i in np.argmax(expected, axis=-1)]
    np.testing.assert_allclose(np.asarray(probabilities).sum(-1), 1.0, atol=1e-6)

    model.compile(optimizer="adam")
    history = model.fit(REVIEWS * 4, np.array([1, 0, 1] * 4), epochs=3, batch_size=4, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]


def test_sentence_embedder_encodes_raw_chinese_as_hf_mean_pooling(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "emb"))
    embedder = BertSentenceEmbedder.from_preset(path, pooling="mean", normalize=False)
    ours = np.asarray(embedder.encode(CHINESE_SENTENCES))
    hf = transformers.BertModel.from_pretrained(path).eval()
    batch = _hf_inputs(path, CHINESE_SENTENCES)
    with torch.no_grad():
        hidden = hf(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    expected = ((hidden * mask).sum(1) / mask.sum(1)).numpy()
    np.testing.assert_allclose(ours, expected, atol=1e-5, rtol=0)


def test_fill_mask_on_chinese_without_spaces_matches_hf(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "mlm"), head="mlm")
    texts = ["我们在北[MASK]天安门广场见到了中国国家主席习近平。", "上海浦东新区2024年[MASK][MASK]增长5.2%"]
    answers = BertPretrainer.from_preset(path).fill_mask(texts, top_k=3)
    tokenizer = hf_tokenizer(path)
    hf = transformers.BertForMaskedLM.from_pretrained(path).eval()
    assert [len(a) for a in answers] == [1, 2]
    for text, answer in zip(texts, answers, strict=True):
        batch = tokenizer([text], return_tensors="pt")
        with torch.no_grad():
            probs = torch.softmax(hf(**batch).logits[0], -1).numpy()
        where = np.flatnonzero(batch["input_ids"][0].numpy() == tokenizer.mask_token_id)
        for slot, position in zip(answer, where, strict=True):
            best = np.argsort(-probs[position])[:3]
            assert [t for t, _ in slot] == tokenizer.convert_ids_to_tokens(best.tolist())
            np.testing.assert_allclose([p for _, p in slot], probs[position, best], atol=1e-5)


def test_span_qa_answers_slice_the_chinese_context_as_hf_best_span(tmp_path):
    path = write_chinese_checkpoint(str(tmp_path / "qa"), head="qa")
    model = BertSpanQA.from_preset(path)
    questions = ["李明在哪里读书？", "华为和谁在上海设了研发中心？"]
    contexts = [CHINESE_SENTENCES[3], CHINESE_SENTENCES[2]]
    answers = model.predict_answers(questions, contexts, max_answer_length=8)

    tokenizer = hf_tokenizer(path)
    hf = transformers.BertForQuestionAnswering.from_pretrained(path).eval()
    for question, context, answer in zip(questions, contexts, answers, strict=True):
        assert answer["answer"] == context[answer["start"] : answer["end"]] and answer["answer"]
        for candidate in answer["n_best"]:
            assert candidate["text"] == context[candidate["start"] : candidate["end"]]
        # HF's best span over the context's tokens (end >= start, at most 8 tokens), mapped to characters.
        batch = tokenizer(question, context, return_offsets_mapping=True, return_tensors="pt")
        offsets = batch.pop("offset_mapping")[0].numpy()
        with torch.no_grad():
            out = hf(**batch)
        start, end = out.start_logits[0].numpy(), out.end_logits[0].numpy()
        in_context = np.flatnonzero(np.asarray(batch.sequence_ids(0)) == 1)
        score, best = max((start[i] + end[j], (i, j)) for i in in_context for j in in_context if i <= j < i + 8)
        i, j = best
        assert (answer["start"], answer["end"]) == (int(offsets[i][0]), int(offsets[j][1]))
        assert answer["score"] == pytest.approx(float(score), abs=1e-4)


def test_hfl_address_loads_from_the_cache_with_hf_default_casing(tmp_path, hf_cache):
    """hf://hfl/NAME: an HFL-style repo (tokenizer_config.json holding {"init_inputs": []}) loads from the cache;
    HF's default do_lower_case=True applies, as HF reads it."""
    import json

    from keras_bert_zoo import BertBackbone, BertTokenizer
    from tests.convert.test_hub_cache import cache_repo

    source = write_chinese_checkpoint(str(tmp_path / "hfl"), do_lower_case=False)
    (tmp_path / "hfl" / "tokenizer_config.json").write_text(json.dumps({"init_inputs": []}))
    files = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
    cache_repo(hf_cache, "hfl/chinese-roberta-wwm-ext", source, files=files)
    backbone = BertBackbone.from_preset("hf://hfl/chinese-roberta-wwm-ext")
    assert backbone.vocabulary_size == BertBackbone.from_preset(source).vocabulary_size
    model = BertClassifier.from_preset("hf://hfl/chinese-roberta-wwm-ext", num_classes=2)
    assert model.preprocessor.tokenizer.lowercase is hf_tokenizer(source).do_lower_case is True
    assert BertTokenizer.from_preset(source).lowercase is True


def test_pickle_only_chinese_directory_is_refused_with_the_ways_to_a_safe_file(tmp_path):
    from keras_bert_zoo.errors import UnsafeFileError

    path = write_chinese_checkpoint(str(tmp_path / "hfl_pickle"))
    model = transformers.BertModel.from_pretrained(path)
    # What old HFL repos hold: pytorch_model.bin, torch.save's pickle (transformers 5 no longer writes it).
    torch.save(model.state_dict(), str(tmp_path / "hfl_pickle" / "pytorch_model.bin"))
    (tmp_path / "hfl_pickle" / "model.safetensors").unlink()
    assert (tmp_path / "hfl_pickle" / "pytorch_model.bin").exists()
    with pytest.raises(UnsafeFileError) as error:
        BertClassifier.from_preset(path, num_classes=2)
    message = str(error.value)
    assert "\n" not in message and "pytorch_model.bin" in message and "never loaded" in message
    assert "hf://ORG/NAME@refs/pr/N" in message and "safe_serialization=True" in message
