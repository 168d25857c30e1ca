"""The README's quick start runs as written, and the README keeps its two commands.

The quick start loads `bert_tiny_uncased` by preset name, which goes through huggingface_hub's
cache. This machine has no Hub access, so the test puts a checkpoint in an offline cache under
the preset's real repo id (`google/bert_uncased_L-2_H-128_A-2`), laid out as huggingface_hub
writes it: the tiny `TFBertForPreTraining` that HF's own code saved in
`tests/fixtures/hf_tf_bert/pretraining` (config.json, tf_model.h5, vocab.txt: the files a Turc et
al. repo ships, the h5 being its only safe weight file); its Chinese line finds a tiny Chinese BERT that HF's classes wrote
(`tests/chinese_fixtures`) under `google-bert/bert-base-chinese`. The block is taken from README.md by its
marker and executed unchanged in a temporary directory, then the README's serving block loads
what it exported.
"""

import os
import re

import numpy as np

from keras_bert_zoo.models import presets
from tests.chinese_fixtures import write_chinese_checkpoint
from tests.convert.test_hub_cache import cache_repo
from tests.helpers import REPO_ROOT

README = os.path.join(REPO_ROOT, "README.md")
MARKER = "<!-- quickstart"
TEST_COMMAND = 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest'
CHINESE_FILES = ("config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json")
FIXTURE = os.path.join(REPO_ROOT, "tests", "fixtures", "hf_tf_bert", "pretraining")


def readme_text():
    with open(README, encoding="utf-8") as f:
        return f.read()


def code_after(marker):
    """The first ```python block after `marker`, exactly as the README shows it."""
    text = readme_text()
    start = text.find(marker)
    assert start >= 0, f"README.md has no {marker!r}"
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match, f"no ```python block after {marker!r}"
    return match.group(1)


def test_quickstart_runs_as_written_from_an_offline_hub_cache(hf_cache, tmp_path, monkeypatch):
    cache_repo(
        hf_cache,
        presets.PRETRAINED_REPOS["bert_tiny_uncased"],
        FIXTURE,
        files=("config.json", "tf_model.h5", "vocab.txt"),
    )
    # The Chinese line loads bert_base_chinese: a tiny Chinese BERT written by HF's classes stands in for it.
    # Not written as ./bert_base_chinese: a directory of a preset's name wins over the preset (docs/loading.md),
    # and this test is about the name reaching the Hub cache.
    chinese = write_chinese_checkpoint(str(tmp_path / "zh_source"))
    cache_repo(hf_cache, presets.PRETRAINED_REPOS["bert_base_chinese"], chinese, files=CHINESE_FILES)
    monkeypatch.chdir(tmp_path)  # the block writes its SavedModel to a relative path
    namespace = {"__name__": "readme_quickstart"}
    exec(compile(code_after(MARKER), "README.md:quickstart", "exec"), namespace)

    model = namespace["model"]
    # The preset name resolved to the cached checkpoint, not to the table's architecture
    # (bert_tiny is 128 wide; the cached one 32).
    assert model.backbone.hidden_dim == 32 and model.backbone.vocabulary_size == 100
    assert model.optimizer.iterations.numpy() == 2  # fit ran: 2 epochs of one batch
    assert np.asarray(namespace["logits"]).shape == (1, 2)
    labels, probabilities = namespace["labels"], np.asarray(namespace["probabilities"])
    assert list(labels) == [["negative", "positive"][int(np.argmax(probabilities[0]))]]
    np.testing.assert_allclose(probabilities.sum(axis=-1), 1.0, atol=1e-6)
    zh_labels, zh_probabilities = namespace["zh"]
    assert len(zh_labels) == 1 and np.asarray(zh_probabilities).shape == (1, 2)

    # The README's serving block loads what the quick start exported, as written.
    served = {"__name__": "readme_serving"}
    exec(compile(code_after("## Serving"), "README.md:serving", "exec"), served)
    out = served["out"]
    np.testing.assert_allclose(out["probabilities"].numpy(), probabilities, atol=1e-5, rtol=0)
    assert [x.decode() for x in out["labels"].numpy()] == list(labels)


def test_readme_is_a_short_page_with_the_two_commands():
    text = readme_text()
    assert len(text.splitlines()) <= 250
    assert "bert-zoo demo" in text
    assert TEST_COMMAND in text
    with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as f:
        assert TEST_COMMAND in f.read().splitlines()  # CI runs the README's test command verbatim


def test_readme_links_and_docs_exist():
    """Every link and every `docs/...` page the README names is in the repository; a results row
    still waiting for its record says TBD."""
    prose = re.sub(r"```.*?```", "", readme_text(), flags=re.S)
    checked = 0
    for line in prose.splitlines():
        for link in re.findall(r"\[[^\]]*\]\(([^)\s#]+)\)", line) + re.findall(r"`(docs/[\w.-]+\.md)`", line):
            checked += 1
            if link.startswith("http") or os.path.exists(os.path.join(REPO_ROOT, link)):
                continue
            assert "TBD" in line, f"README links to {link}, which does not exist"
    assert checked >= 10  # the results table's records and the docs pages were found
