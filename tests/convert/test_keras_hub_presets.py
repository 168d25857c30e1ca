"""KerasHub / keras-nlp BERT presets, both ways, against KerasHub itself.

KerasHub saves tiny `BertBackbone`, `BertTextClassifier` and `BertMaskedLM` presets with
its own `save_to_preset` (random weights, every tensor perturbed so each one matters;
a vocabulary with accented words, since KerasHub's uncased tokenizer lowercases without
stripping accents). Ours must load them with the same tokens and outputs within 1e-5,
under both registered-name prefixes; what we write as KerasHub must load into KerasHub
with no warning and the same outputs; ours -> KerasHub -> ours is exact.
"""

import json
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

from keras_bert_zoo import BertBackbone, BertClassifier, BertPretrainer, BertTokenizer
from keras_bert_zoo.cli import main
from keras_bert_zoo.errors import CheckpointError
from keras_bert_zoo.preprocessing.preprocessor import BertPreprocessor
from tests.helpers import REPO_ROOT

keras_hub = pytest.importorskip("keras_hub")

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "quick",
    "brown",
    "fox",
    "café",
    "cafe",
    "über",
    "uber",
    "naïve",
    "naive",
    "is",
    "a",
    "'",
    "s",
    ".",
    "##s",
    "##es",
    "jump",
    "over",
    "lazy",
    "dog",
    "!",
]
TEXTS = ["The quick brown Fox jumps over the lazy dog.", "Café über naïve fox's!", "a CAFE is a café"]
SIZES = dict(
    vocabulary_size=len(VOCAB), num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=24
)


def _perturb(model, seed=0):
    rng = np.random.default_rng(seed)
    for v in model.weights:
        if "float" in str(v.dtype):
            v.assign(v.numpy() + rng.normal(0, 0.2, v.shape).astype("float32"))


@pytest.fixture(scope="module")
def presets(tmp_path_factory):
    """KerasHub's own presets: {"backbone", "classifier", "masked_lm", "gpt2"} -> directory."""
    root = tmp_path_factory.mktemp("keras_hub")
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=VOCAB, lowercase=True)
    backbone = keras_hub.models.BertBackbone(**SIZES)
    _perturb(backbone)
    backbone.save_to_preset(str(root / "backbone"))
    classifier = keras_hub.models.BertTextClassifier(
        backbone,
        num_classes=3,
        preprocessor=keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=20),
    )
    _perturb(classifier, seed=1)  # the head too (the backbone moves with it)
    classifier.save_to_preset(str(root / "classifier"))
    masked_lm = keras_hub.models.BertMaskedLM(
        classifier.backbone, preprocessor=keras_hub.models.BertMaskedLMPreprocessor(tokenizer, sequence_length=20)
    )
    _perturb(masked_lm.masked_lm_head, seed=2)
    masked_lm.save_to_preset(str(root / "masked_lm"))
    keras_hub.models.GPT2Backbone(
        vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=4, intermediate_dim=8, max_sequence_length=8
    ).save_to_preset(str(root / "gpt2"))
    return {name: str(root / name) for name in ("backbone", "classifier", "masked_lm", "gpt2")}


def as_keras_nlp(src, dst):
    """The same preset as keras-nlp wrote it: `keras_nlp>` registered names, `keras_nlp.src` modules."""
    shutil.copytree(src, dst)
    for name in os.listdir(dst):
        if name.endswith(".json"):
            path = os.path.join(dst, name)
            text = open(path, encoding="utf-8").read()
            open(path, "w", encoding="utf-8").write(
                text.replace('"keras_hub>', '"keras_nlp>').replace('"keras_hub.src', '"keras_nlp.src')
            )
    assert "keras_nlp>BertBackbone" in open(os.path.join(dst, "config.json")).read()
    return str(dst)


@pytest.fixture(params=["keras_hub", "keras_nlp"])
def prefixed(request, presets, tmp_path):
    """`presets`, under the registered-name prefix of the parameter."""
    if request.param == "keras_hub":
        return presets
    return {k: as_keras_nlp(v, tmp_path / k) for k, v in presets.items() if k != "gpt2"}


def _real(ids, mask):
    """Rows of ids cut to their real (unpadded) positions, as lists."""
    return [list(r[np.asarray(m, bool)]) for r, m in zip(np.asarray(ids), np.asarray(mask), strict=True)]


def _hub_inputs(preprocessor, texts=TEXTS):
    x = preprocessor(np.array(texts))
    return {k: np.asarray(v).astype("int32") for k, v in x.items()}


# --- KerasHub -> ours --------------------------------------------------------------------------
def test_backbone_outputs_match_keras_hub(prefixed, presets):
    ours = BertBackbone.from_preset(prefixed["backbone"])
    theirs = keras_hub.models.BertBackbone.from_preset(presets["backbone"])
    assert ours.activation == "gelu_approximate"  # KerasHub's GELU is the tanh form
    x = _hub_inputs(keras_hub.models.BertTextClassifierPreprocessor.from_preset(presets["classifier"]))
    a, b = theirs(x), ours(x)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(b[key]), np.asarray(a[key]), atol=1e-5, rtol=0)


def test_classifier_tokens_and_logits_match_keras_hub_on_raw_strings(prefixed, presets):
    ours = BertClassifier.from_preset(prefixed["classifier"])
    theirs = keras_hub.models.BertTextClassifier.from_preset(presets["classifier"])
    assert ours.num_classes == 3
    x_theirs = _hub_inputs(theirs.preprocessor)
    x_ours = {k: np.asarray(v) for k, v in ours.preprocessor(np.array(TEXTS)).items()}
    assert _real(x_ours["token_ids"], x_ours["padding_mask"]) == _real(x_theirs["token_ids"], x_theirs["padding_mask"])
    assert VOCAB.index("café") in x_ours["token_ids"]  # lowercased, accent kept (KerasHub's uncased)
    assert not ours.preprocessor.tokenizer.strip_accents
    np.testing.assert_allclose(ours.predict(TEXTS, verbose=0), theirs.predict(TEXTS, verbose=0), atol=1e-5, rtol=0)


def test_masked_lm_head_matches_keras_hub(prefixed, presets, capsys):
    ours = BertPretrainer.from_preset(prefixed["masked_lm"])
    assert "NSP head initialised randomly" in capsys.readouterr().out
    theirs = keras_hub.models.BertMaskedLM.from_preset(presets["masked_lm"])
    x = _hub_inputs(keras_hub.models.BertTextClassifierPreprocessor.from_preset(presets["classifier"]))
    x["mask_positions"] = np.array([[1, 3, 5], [2, 4, 6], [1, 2, 7]], "int32")
    np.testing.assert_allclose(np.asarray(ours(x)["mlm_logits"]), np.asarray(theirs(x)), atol=1e-5, rtol=0)


def test_loading_needs_no_keras_hub(presets):
    """The weights are read with h5py: in a process where keras_hub cannot be imported."""
    code = (
        "import sys; sys.modules['keras_hub'] = None; sys.modules['keras_nlp'] = None\n"
        "from keras_bert_zoo import BertClassifier\n"
        f"m = BertClassifier.from_preset({presets['classifier']!r})\n"
        "print('loaded', m.num_classes, 'keras_hub' in [k for k, v in sys.modules.items() if v])\n"
    )
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert "loaded 3 False" in result.stdout, result.stderr[-2000:]


# --- ours -> KerasHub -> ours --------------------------------------------------------------------
def _ours(seed=3):
    backbone = BertBackbone(**SIZES, activation="gelu_approximate")
    _perturb(backbone, seed)
    tokenizer = BertTokenizer(VOCAB, lowercase=True, strip_accents=False, keep_special_tokens=False)
    return backbone, BertPreprocessor(tokenizer, sequence_length=20, truncate="round_robin")


def _load_without_warnings(cls, path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = cls.from_preset(path)
    shown = [str(w.message) for w in caught if not issubclass(w.category, DeprecationWarning)]
    assert not shown, shown
    return model


def test_our_classifier_loads_into_keras_hub_with_the_same_outputs(tmp_path):
    backbone, preprocessor = _ours()
    ours = BertClassifier(backbone, num_classes=4, preprocessor=preprocessor)
    _perturb(ours, seed=4)
    ours.save_to_preset(str(tmp_path / "kh"), format="keras_hub")
    theirs = _load_without_warnings(keras_hub.models.BertTextClassifier, str(tmp_path / "kh"))
    x_theirs = _hub_inputs(theirs.preprocessor)
    x_ours = {k: np.asarray(v) for k, v in ours.preprocessor(np.array(TEXTS)).items()}
    assert _real(x_ours["token_ids"], x_ours["padding_mask"]) == _real(x_theirs["token_ids"], x_theirs["padding_mask"])
    np.testing.assert_allclose(theirs.predict(TEXTS, verbose=0), ours.predict(TEXTS, verbose=0), atol=1e-5, rtol=0)
    kh_backbone = _load_without_warnings(keras_hub.models.BertBackbone, str(tmp_path / "kh"))
    np.testing.assert_allclose(
        np.asarray(kh_backbone(x_theirs)["sequence_output"]),
        np.asarray(ours.backbone(x_theirs)["sequence_output"]),
        atol=1e-5,
        rtol=0,
    )
    back = BertClassifier.from_preset(str(tmp_path / "kh"))  # ours -> KerasHub -> ours: exact
    assert len(back.weights) == len(ours.weights)
    for a, b in zip(ours.weights, back.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_our_pretrainer_loads_into_keras_hub_as_masked_lm(tmp_path):
    backbone, preprocessor = _ours(seed=5)
    ours = BertPretrainer(backbone, preprocessor=preprocessor, mlm_activation="gelu", mlm_layer_norm_epsilon=1e-5)
    _perturb(ours, seed=6)
    ours.save_to_preset(str(tmp_path / "kh"), format="keras_hub")
    theirs = _load_without_warnings(keras_hub.models.BertMaskedLM, str(tmp_path / "kh"))
    x = _hub_inputs(keras_hub.models.BertTextClassifierPreprocessor(theirs.preprocessor.tokenizer, sequence_length=20))
    x["mask_positions"] = np.array([[1, 3], [2, 4], [5, 1]], "int32")
    np.testing.assert_allclose(np.asarray(theirs(x)), np.asarray(ours(x)["mlm_logits"]), atol=1e-5, rtol=0)
    back = BertPretrainer.from_preset(str(tmp_path / "kh"))
    kept = [w for w in ours.weights if "seq_relationship" not in w.path]  # KerasHub has no NSP head
    assert len(kept) == len(ours.weights) - 2
    by_path = {w.path: w for w in back.weights}
    for w in kept:
        np.testing.assert_array_equal(by_path[w.path].numpy(), w.numpy())


def test_our_backbone_alone_is_a_keras_hub_backbone(tmp_path):
    backbone, _ = _ours(seed=7)
    backbone.save_to_preset(str(tmp_path / "kh"), format="keras_hub")
    assert sorted(os.listdir(tmp_path / "kh")) == ["config.json", "metadata.json", "model.weights.h5"]
    theirs = _load_without_warnings(keras_hub.models.BertBackbone, str(tmp_path / "kh"))
    x = {
        "token_ids": np.array([[2, 5, 9, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    np.testing.assert_allclose(
        np.asarray(theirs(x)["pooled_output"]), np.asarray(backbone(x)["pooled_output"]), atol=1e-5, rtol=0
    )


def test_a_lora_backbone_goes_to_keras_hub_merged(tmp_path):
    """KerasHub's preset saving merges LoRA adapters into the kernels; ours does the same for
    format="keras_hub", so KerasHub computes what our LoRA model computes."""
    backbone, _ = _ours(seed=8)
    backbone.enable_lora(2)
    _perturb(backbone, seed=9)  # non-zero adapters too
    backbone.save_to_preset(str(tmp_path / "kh"), format="keras_hub")
    theirs = _load_without_warnings(keras_hub.models.BertBackbone, str(tmp_path / "kh"))
    x = {
        "token_ids": np.array([[2, 5, 9, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]], "int32"),
    }
    np.testing.assert_allclose(
        np.asarray(theirs(x)["sequence_output"]), np.asarray(backbone(x)["sequence_output"]), atol=1e-5, rtol=0
    )


# --- the command -------------------------------------------------------------------------------
def test_cli_converts_keras_hub_to_ours_and_back(presets, tmp_path, capsys):
    ours_dir, kh_dir = str(tmp_path / "ours"), str(tmp_path / "kh")
    assert main(["convert", "--from", presets["classifier"], "--out", ours_dir]) == 0
    assert main(["convert", "--from", ours_dir, "--out", kh_dir, "--to", "keras-hub"]) == 0
    assert "as a KerasHub preset" in capsys.readouterr().out
    with open(os.path.join(ours_dir, "tokenizer_config.json")) as f:
        assert json.load(f)["strip_accents"] is False  # the KerasHub tokenizer's own option, kept
    original = keras_hub.models.BertTextClassifier.from_preset(presets["classifier"])
    again = _load_without_warnings(keras_hub.models.BertTextClassifier, kh_dir)
    np.testing.assert_allclose(again.predict(TEXTS, verbose=0), original.predict(TEXTS, verbose=0), atol=1e-5, rtol=0)


# --- bad inputs: one line naming the file, nothing written --------------------------------------------
def _damaged(presets, tmp_path, kind):
    if kind == "gpt2":
        return presets["gpt2"], os.path.join(presets["gpt2"], "config.json")
    path = str(tmp_path / kind)
    shutil.copytree(presets["classifier"], path)
    if kind == "truncated_weights":
        victim = os.path.join(path, "model.weights.h5")
        data = open(victim, "rb").read()
        open(victim, "wb").write(data[: len(data) // 2])
    elif kind == "truncated_task_weights":
        victim = os.path.join(path, "task.weights.h5")
        data = open(victim, "rb").read()
        open(victim, "wb").write(data[: len(data) // 3])
    else:
        victim = os.path.join(path, "assets", "tokenizer", "vocabulary.txt")
        os.remove(victim)
    return path, victim


@pytest.mark.parametrize("kind", ["gpt2", "truncated_weights", "truncated_task_weights", "missing_vocabulary"])
def test_bad_keras_hub_preset_is_one_line_naming_the_file(presets, tmp_path, capsys, kind):
    path, victim = _damaged(presets, tmp_path, kind)
    with pytest.raises(CheckpointError) as e:
        BertClassifier.from_preset(path)
    assert victim in str(e.value) and "\n" not in str(e.value)
    out = tmp_path / "out"
    assert main(["convert", "--from", path, "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and victim in err[0] and "Traceback" not in err[0], err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith("out")]


def test_keras_hub_output_never_replaces_a_directory_of_other_files(tmp_path):
    backbone, _ = _ours()
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    with pytest.raises(ValueError, match="holds other files"):
        backbone.save_to_preset(str(target), format="keras_hub")
    assert os.listdir(target) == ["notes.txt"]


def test_weights_files_without_layer_names_load_by_keras_keys(presets, tmp_path):
    """Files whose `vars` groups carry no `name` attribute are read by Keras' class-numbered keys."""
    import h5py

    path = str(tmp_path / "unnamed")
    shutil.copytree(presets["classifier"], path)
    for name in ("model.weights.h5", "task.weights.h5"):
        with h5py.File(os.path.join(path, name), "a") as h5:
            h5.visititems(lambda key, obj: obj.attrs.pop("name", None) if isinstance(obj, h5py.Group) else None)
    named, unnamed = BertClassifier.from_preset(presets["classifier"]), BertClassifier.from_preset(path)
    for a, b in zip(named.weights, unnamed.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_task_without_keras_hub_counterpart_is_refused_before_writing(tmp_path):
    from keras_bert_zoo import BertTagger

    backbone, _ = _ours()
    with pytest.raises(CheckpointError, match="BertTagger has no KerasHub counterpart"):
        BertTagger(backbone, num_labels=3).save_to_preset(str(tmp_path / "kh"), format="keras_hub")
    assert not (tmp_path / "kh").exists()


def test_loading_without_huggingface_hub_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(CheckpointError, match=r'pip install "keras-bert-zoo\[hub\]"'):
        BertBackbone.from_preset("hf://google-bert/bert-base-uncased")


def test_finetune_on_a_keras_hub_preset_says_to_convert_it(presets, tmp_path, capsys):
    (tmp_path / "train.tsv").write_text("sentence\tlabel\nthe fox\t1\na dog\t0\n")
    assert (
        main(
            [
                "finetune",
                "classify",
                "--model",
                presets["classifier"],
                "--train",
                str(tmp_path / "train.tsv"),
                "--dev",
                str(tmp_path / "train.tsv"),
                "--glue",
                "sst2",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "is a KerasHub preset" in err and "bert-zoo convert --from" in err
    assert not (tmp_path / "out").exists()
