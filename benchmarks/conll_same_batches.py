"""CoNLL-2003 fine-tuning, ours and HF's, on the SAME batches: do the two trajectories agree?

`benchmarks/conll.py` compares end-of-training F1 of two independent runs, which differ in
their data order, dropout draws and head initialisation as well as in their code. This
script removes those three, so that any remaining gap is in the code:

- the batches are ours, built by `finetune("tag", batching="bucketed")`'s own data path
  (`TagTask.dataset`: CoNLL read as IOB2, windows, first-piece labels, random order, each
  batch cut to its fine bucket; padded, not packed, so that HF reads them as they are)
  and fed to both sides;
- both models start from the same head: ours (`--head-from ours`, a truncated normal with
  stddev 0.02, as the original BERT code draws it) or HF's (`--head-from hf`, a plain normal
  0.02), copied into the other side;
- the optimizers are the real recipe's over a whole epoch's schedule (lr 5e-5, 10% warm-up
  of 439 steps, linear decay, AdamW with decay off biases and LayerNorm, epsilon 1e-6,
  clip 1.0): ours `create_optimizer` + `train_on_batch`, HF `benchmarks/common.py`'s
  `hf_optimizer` / `hf_step` (what `Trainer` does).

With `--dropout off` both models train deterministically, so the per-step losses must
agree to float noise; with `--dropout on` the draws differ, so only the mean losses over
stretches of steps can be compared. `--evaluate` then scores both trained models on
eng.testa through the same code (HF's weights saved with `save_pretrained` and read by
`BertTagger.from_preset`, then `predict_tags` and `entity_scores`), so the two F1s differ
only by what training did. One thread each.

    python benchmarks/conll_same_batches.py --dropout off --steps 60
    python benchmarks/conll_same_batches.py --dropout on --steps 100 --json /tmp/same_batches_on.json
    python benchmarks/conll_same_batches.py --dropout on --steps 439 --evaluate   # a whole epoch, both scored
    python benchmarks/conll_same_batches.py --dropout on --steps 439 --evaluate --head-from hf
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, git_commit, hf_optimizer, hf_step, minilm_path, now, set_tf_threads, write_json  # noqa: E402

TRAIN = os.path.join(os.path.dirname(REPO), "shared", "data", "conll2003", "eng.train")
DEV = os.path.join(os.path.dirname(REPO), "shared", "data", "conll2003", "eng.testa")
RECIPE = dict(learning_rate=5e-5, batch_size=32, sequence_length=128, warmup_ratio=0.1, weight_decay=0.01,
              adam_epsilon=1e-6, clip_norm=1.0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dropout", choices=("on", "off"), default="off")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--head-from", choices=("ours", "hf"), default="ours",
                        help="whose freshly initialised head both sides start from")
    parser.add_argument("--evaluate", action="store_true", help="score both trained models on eng.testa")
    parser.add_argument("--json", help="write every step's two losses here")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error(f"--steps {args.steps}: use at least 1.")

    set_tf_threads(1)
    import keras
    import numpy as np
    import torch
    import transformers

    from keras_bert_zoo.tasks.registry import get_task
    from keras_bert_zoo.training import create_optimizer

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    keras.utils.set_random_seed(args.seed)
    spec = get_task("tag")
    layout = spec.layout_from_options(None)
    train = spec.read_data(TRAIN, layout)
    preprocessor = spec.make_preprocessor(minilm_path(), RECIPE["sequence_length"], layout)
    ours = spec.build_model(minilm_path(), train, layout, preprocessor, RECIPE["sequence_length"])
    hf = transformers.BertForTokenClassification.from_pretrained(minilm_path(), num_labels=len(train.label_names))
    if args.head_from == "ours":
        kernel, bias = ours.classifier.get_weights()
        with torch.no_grad():
            hf.classifier.weight.copy_(torch.tensor(kernel.T))
            hf.classifier.bias.copy_(torch.tensor(bias))
    else:
        ours.classifier.set_weights([hf.classifier.weight.detach().numpy().T, hf.classifier.bias.detach().numpy()])
    if args.dropout == "off":
        for layer in ours._flatten_layers():
            if isinstance(layer, keras.layers.Dropout):
                layer.rate = 0.0
        hf.eval()  # no dropout
    else:
        hf.train()

    batches = spec.dataset(train, preprocessor, RECIPE["batch_size"], training=True, seed=args.seed,
                           batching="bucketed")
    total = int(batches.cardinality())  # one epoch's schedule on both sides, as finetune(epochs=1) has
    if not 1 <= args.steps <= total:
        parser.error(f"--steps {args.steps}: one epoch has {total} batches; use 1 to {total}.")
    ours.compile(optimizer=create_optimizer(RECIPE["learning_rate"], total_steps=total,
                                            warmup_ratio=RECIPE["warmup_ratio"]))
    optimizer, schedule, _ = hf_optimizer(hf, total, RECIPE)
    losses = {"ours": [], "hf": []}
    for step, (x, y) in enumerate(batches.take(args.steps)):
        losses["ours"].append(float(ours.train_on_batch(x, y, return_dict=True)["loss"]))
        losses["hf"].append(hf_step(hf, {"input_ids": torch.tensor(x["token_ids"].numpy(), dtype=torch.long),
                                         "token_type_ids": torch.tensor(x["segment_ids"].numpy(), dtype=torch.long),
                                         "attention_mask": torch.tensor(x["padding_mask"].numpy(), dtype=torch.long),
                                         "labels": torch.tensor(y.numpy(), dtype=torch.long)},
                                    optimizer, schedule, RECIPE["clip_norm"]))
        if (step + 1) % 10 == 0:
            a, b = np.mean(losses["ours"][-10:]), np.mean(losses["hf"][-10:])
            print(f"steps {step - 8}-{step + 1}: mean loss ours {a:.4f}, HF {b:.4f}", flush=True)
    diff = np.abs(np.subtract(losses["ours"], losses["hf"]))
    summary = {"mean_loss_ours": float(np.mean(losses["ours"])), "mean_loss_hf": float(np.mean(losses["hf"])),
               "max_step_difference": float(diff.max())}
    if args.evaluate:
        summary.update(evaluate(ours, hf, train.label_names))
    print(f"dropout {args.dropout}, {args.steps} of {total} steps: {summary}")
    if args.json:
        write_json(args.json, {**summary, "dropout": args.dropout, "steps": args.steps, "seed": args.seed,
                               "epoch_steps": total, "head_from": args.head_from,
                               "losses": losses, "recipe": RECIPE, "date": now(), "git_commit": git_commit()})


def evaluate(ours, hf, label_names):
    """Dev entity F1 of both trained models, through the same prediction and scoring code."""
    import shutil
    import tempfile

    from keras_bert_zoo import BertTagger
    from keras_bert_zoo.metrics.entities import entity_scores
    from keras_bert_zoo.preprocessing.tagging_data import read_tagged

    dev = read_tagged(DEV, label_names=label_names)
    scores = {"ours": entity_scores(dev.tags, ours.predict_tags(dev.words))}
    with tempfile.TemporaryDirectory() as hf_dir:
        hf.config.id2label, hf.config.label2id = dict(enumerate(label_names)), {n: i for i, n in enumerate(label_names)}
        hf.save_pretrained(hf_dir, safe_serialization=True)
        shutil.copy(os.path.join(minilm_path(), "vocab.txt"), hf_dir)
        hf_as_ours = BertTagger.from_preset(hf_dir, preprocessor=ours.preprocessor, scheme=ours.scheme)
        scores["hf"] = entity_scores(dev.tags, hf_as_ours.predict_tags(dev.words))
    return {f"dev_{k}_{side}": float(v[k]) for side, v in scores.items() for k in ("f1", "precision", "recall")}


if __name__ == "__main__":
    main()
