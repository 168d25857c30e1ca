"""The user's script, timed: `model.fit(texts, labels)` vs KerasHub's `fit` vs HF's training loop.

What a user of each library writes to fine-tune all-MiniLM-L6-v2 on raw text, the whole
`fit` (or loop) timed, one epoch, batch 32, length 128, the same first N training examples:

- `ours`: (TensorFlow; `ours_jax` / `ours_torch`: the same script under `KERAS_BACKEND=jax` / `torch`)
  `BertClassifier.from_preset(minilm, num_classes=2, preprocessor=BertPreprocessor
  .from_preset(minilm, sequence_length=128))`, `compile()` defaults, `fit(texts, labels,
  batch_size=32, epochs=1)` (tagger: `BertTagger` + `TaggingPreprocessor`, `fit(words,
  tags)`); then `evaluate` and `predict` on the raw dev texts (batch 64), timed each;
  `ours_bucketed` is the same with `fit(..., batching="bucketed")` (random batches, each
  padded to its longest: the padded path's batches and loss), for the accuracy check;
  `ours_packed` / `ours_by_length` name the batching of `fit` (`batching="packed"`: each
  random batch laid end to end in rows of 128; `"by_length"`: grouped by length), to
  choose the default by measurement;
  `ours_xla` is `compile(jit_compile=True)` (the XLA decision, measured);
  `ours_packed_everywhere` packs `evaluate` and `predict` too (`batching="packed"`);
  `ours_by_length_sorted` groups `fit`'s batches by length and sorts `evaluate` / `predict`
  (the classifier's default; the choice model's before it packed by default);
  choice: `BertMultipleChoice` + `MultipleChoicePreprocessor`, `fit((contexts, choices),
  labels)` on "which sentence comes next?" questions from WikiText-2 (`next_sentence_choice.py`,
  easy variant), batch 32 questions (128 pairs);
- `keras_hub`: `keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=
  BertTextClassifierPreprocessor(BertTokenizer(vocab.txt), sequence_length=128))`, its
  `compile()` defaults, `fit(texts, labels, batch_size=32)`; the backbone has MiniLM's shape
  (6 layers, hidden 384, 12 heads, FFN 1536) with random weights (KerasHub reads no local HF
  directory offline): the same compute, so its speed, not its accuracy, is reported;
- `hf` / `hf1`: `AutoTokenizer(truncation, max_length=128)` + `DataCollatorWithPadding` +
  `DataLoader(shuffle=True)` + torch `AdamW` with linear warm-up/decay and clipping at 1.0
  (what `Trainer` does), at 2 threads (`hf`) and 1 thread (`hf1`, often faster on this shared
  2-core machine); then the dev set through the tokenizer + model under `torch.no_grad`
  (batch 64, dynamic padding), its time the reference for `predict` and `evaluate`;
  choice: `BertForMultipleChoice` with `run_swag.py`'s pairs, each batch padded to its
  longest pair (`DataCollatorForMultipleChoice`);

Each system runs in its own process (nothing else of the benchmark loaded), rounds
interleaved (ours, keras_hub, hf, hf1, ours, ...) so machine load hits all alike; ratios are
medians of per-round ratios, of wall time and of the process's CPU time (the work done, which
other processes on a loaded machine disturb less). Sentences/s count examples, never padded tokens.
`ours_bf16` / `hf_bf16` are each side at its best on a bf16 host: `keras.mixed_precision.
set_global_policy("mixed_bfloat16")` before the model is built, and `torch.autocast("cpu",
dtype=torch.bfloat16)` around HF's forward passes (`--reference ours_bf16` reports ratios to it).

    python benchmarks/fit_speed.py --task classify --rounds 2
    python benchmarks/fit_speed.py --task tag --rounds 2 --examples 800
    python benchmarks/fit_speed.py --task classify --systems ours,ours_bucketed --seeds 0,1,2   # accuracy
    python benchmarks/fit_speed.py --task choice --systems ours,ours_by_length_sorted,hf --examples 400

Writes `benchmarks/results/fit_speed_TASK.json` and prints a markdown table.
"""

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch's spinning OpenMP workers, see finetune_speed.py

DATA = os.path.join(os.path.dirname(common.REPO), "shared", "data")
# The choice questions ("which sentence comes next?", WikiText-2 articles, `next_sentence_choice.py`'s
# easy variant, seed 0) are written here on first use: 2,000 training and 600 dev questions.
CHOICE_DIR = os.path.join("/tmp", "bert_zoo_fit_speed_choice")
FILES = {"classify": (os.path.join(DATA, "sst2", "train.tsv"), os.path.join(DATA, "sst2", "dev.tsv")),
         "tag": (os.path.join(DATA, "conll2003", "eng.train"), os.path.join(DATA, "conll2003", "eng.testa")),
         "choice": (os.path.join(CHOICE_DIR, "train.jsonl"), os.path.join(CHOICE_DIR, "dev.jsonl"))}
BATCH, LENGTH, EVAL_BATCH = 32, 128, 64


def write_choice_questions():
    import next_sentence_choice

    if not all(os.path.exists(p) for p in FILES["choice"]):
        next_sentence_choice.write_questions(CHOICE_DIR, "easy", train_questions=2000, dev_questions=600, seed=0)


def read(task, path, n=None):
    """Raw examples: (texts, labels, label_names) for classify, (words, tags, names) for tag,
    ((contexts, choices), labels, None) for choice."""
    if task == "choice":
        with open(path, encoding="utf-8") as f:
            rows = [json.loads(line) for line in f if line.strip()][:n]
        return ([r["context"] for r in rows], [r["choices"] for r in rows]), [r["label"] for r in rows], None
    if task == "classify":
        from keras_bert_zoo.preprocessing.task_data import DataLayout, read_examples

        data = read_examples(path, DataLayout.for_task("sst2"), max_examples=n)
        return list(data.texts[0]), [int(v) for v in data.labels], list(data.label_names)
    from keras_bert_zoo.preprocessing.tagging_data import read_tagged

    data = read_tagged(path, max_examples=n)
    return data.words, data.tags, list(data.label_names)


def accuracy(task, true, pred):
    if task in ("classify", "choice"):
        return sum(int(a == b) for a, b in zip(true, pred)) / len(true)
    from seqeval.metrics import f1_score

    return float(f1_score(true, pred))


# --- workers: one system, one process -----------------------------------------------------------------
def run_ours(task, n, seed, batching="auto", jit_compile=None, eval_batching="auto", policy=None):
    import keras
    import numpy as np

    if policy:  # what a user writes for bf16: the global policy, before the model is built
        keras.mixed_precision.set_global_policy(policy)

    from keras_bert_zoo import (BertClassifier, BertMultipleChoice, BertPreprocessor, BertTagger,
                                MultipleChoicePreprocessor, TaggingPreprocessor)

    minilm = common.minilm_path()
    x, y, names = read(task, FILES[task][0], n)
    dev_x, dev_y, _ = read(task, FILES[task][1])
    keras.utils.set_random_seed(seed)
    if task == "classify":
        model = BertClassifier.from_preset(minilm, num_classes=2,
                                           preprocessor=BertPreprocessor.from_preset(minilm, sequence_length=LENGTH))
    elif task == "choice":
        model = BertMultipleChoice.from_preset(
            minilm, preprocessor=MultipleChoicePreprocessor.from_preset(minilm, sequence_length=LENGTH))
    else:
        model = BertTagger.from_preset(minilm, num_labels=len(names), label_names=names,
                                       preprocessor=TaggingPreprocessor.from_preset(minilm, sequence_length=LENGTH))
    model.compile(**({} if jit_compile is None else {"jit_compile": jit_compile}))
    t, c = time.perf_counter(), time.process_time()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, batching=batching)
    fit_s, fit_cpu_s = time.perf_counter() - t, time.process_time() - c
    evaluate, predict = model.evaluate, model.predict
    if eval_batching == "sorted":  # what "auto" did before the choice model packed by default
        evaluate, predict = sorted_evaluate_and_predict(model)
        eval_batching = "auto"
    t, c = time.perf_counter(), time.process_time()
    evaluate(dev_x, dev_y, batch_size=EVAL_BATCH, verbose=0, batching=eval_batching)
    evaluate_s, evaluate_cpu_s = time.perf_counter() - t, time.process_time() - c
    t, c = time.perf_counter(), time.process_time()
    if task in ("classify", "choice"):
        pred = np.argmax(predict(dev_x, batch_size=EVAL_BATCH, verbose=0, batching=eval_batching), -1).tolist()
    else:
        pred = model.predict_tags(dev_x, batch_size=EVAL_BATCH)
    predict_s, predict_cpu_s = time.perf_counter() - t, time.process_time() - c
    return dict(fit_s=fit_s, evaluate_s=evaluate_s, predict_s=predict_s, fit_cpu_s=fit_cpu_s,
                evaluate_cpu_s=evaluate_cpu_s, predict_cpu_s=predict_cpu_s, train_examples=len(y),
                dev_examples=len(dev_y), dev_score=accuracy(task, dev_y, pred))


def sorted_evaluate_and_predict(model):
    """`evaluate` / `predict` over examples sorted by length, each batch cut to its longest
    (`batch_raw_sorted`), as `Task` runs them for a model that does not pack by default."""
    import keras

    from keras_bert_zoo.preprocessing.batching import batch_raw_sorted, unsort
    from keras_bert_zoo.preprocessing.bucketing import fine_boundaries

    def batches(x, y=None, batch_size=EVAL_BATCH):
        return batch_raw_sorted(model.preprocessor, x, y, batch_size=batch_size, boundaries=fine_boundaries(LENGTH, 1))

    def evaluate(x, y, batch_size, verbose, batching):
        return keras.Model.evaluate(model, batches(x, y, batch_size)[0], verbose=verbose)

    def predict(x, batch_size, verbose, batching):
        ds, order = batches(x, batch_size=batch_size)
        model.trace_predict(ds.element_spec)
        return unsort(keras.Model.predict(model, ds, verbose=verbose), order)

    return evaluate, predict


def run_keras_hub(task, n, seed):
    import keras
    import keras_hub

    x, y, _ = read(task, FILES[task][0], n)
    keras.utils.set_random_seed(seed)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=6, num_heads=12, hidden_dim=384,
                                             intermediate_dim=1536, max_sequence_length=512)
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=os.path.join(common.minilm_path(), "vocab.txt"),
                                               lowercase=True)
    pre = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=LENGTH)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=pre)
    model.compile()
    t = time.perf_counter()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
    return dict(fit_s=time.perf_counter() - t, train_examples=len(y))


def run_hf(task, n, seed, threads, autocast=False):
    import torch
    import transformers
    from torch.utils.data import DataLoader

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    # HF at its best on a bf16 host: one `torch.autocast` around the forward passes (train and dev).
    precision = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if autocast else contextlib.nullcontext
    minilm = common.minilm_path()
    x, y, names = read(task, FILES[task][0], n)
    dev_x, dev_y, _ = read(task, FILES[task][1])
    tokenizer = transformers.AutoTokenizer.from_pretrained(minilm)
    recipe = dict(learning_rate=5e-5, weight_decay=0.01, adam_epsilon=1e-6, warmup_ratio=0.1)
    if task == "classify":
        model = transformers.BertForSequenceClassification.from_pretrained(minilm, num_labels=2)
        collate = transformers.DataCollatorWithPadding(tokenizer)
    elif task == "choice":  # run_swag.py: DataCollatorForMultipleChoice pads to the batch's longest pair
        import next_sentence_choice

        model = transformers.BertForMultipleChoice.from_pretrained(minilm)
        collate = next_sentence_choice._collate(tokenizer.pad_token_id)
    else:
        model = transformers.BertForTokenClassification.from_pretrained(minilm, num_labels=len(names))
        collate = transformers.DataCollatorForTokenClassification(tokenizer)
    index = {n_: i for i, n_ in enumerate(names or [])}

    def features(texts, labels):
        import conll

        if task == "choice":
            return next_sentence_choice._encode(tokenizer, [dict(context=c, choices=k, label=y_) for c, k, y_
                                                            in zip(texts[0], texts[1], labels)], LENGTH)
        if task == "classify":
            enc = tokenizer(texts, truncation=True, max_length=LENGTH)
            return [dict(input_ids=enc["input_ids"][i], token_type_ids=enc["token_type_ids"][i],
                         attention_mask=enc["attention_mask"][i], labels=labels[i]) for i in range(len(texts))]
        rows, _ = conll._encode(tokenizer, texts, labels, index, LENGTH)
        return rows

    t, c = time.perf_counter(), time.process_time()  # the whole user script: tokenize, batch, train
    train = features(x, y)
    train = [{k: v for k, v in f.items() if k != "word_ids"} for f in train]
    loader = DataLoader(train, batch_size=BATCH, shuffle=True, collate_fn=collate)
    optimizer, scheduler, _ = common.hf_optimizer(model, len(loader), recipe)
    model.train()
    for batch in loader:
        common.hf_step(model, batch, optimizer, scheduler, 1.0, precision=precision)
    fit_s, fit_cpu_s = time.perf_counter() - t, time.process_time() - c

    t, c = time.perf_counter(), time.process_time()  # dev: tokenizer + model, no_grad, dynamic padding (predict's and evaluate's work)
    model.eval()
    dev = features(dev_x, dev_y)
    word_ids = [f.pop("word_ids", None) for f in dev]
    pred = []
    with torch.no_grad():
        for start in range(0, len(dev), EVAL_BATCH):
            batch = collate(dev[start:start + EVAL_BATCH])
            with precision():
                out = model(**batch)
            out.loss.item()
            pred.extend(out.logits.argmax(-1).tolist())
    eval_s, eval_cpu_s = time.perf_counter() - t, time.process_time() - c
    if task == "tag":  # first piece of each word; words cut by truncation get "O"
        tags = []
        for ids, row, words in zip(word_ids, pred, dev_x):
            seen, out = {}, ["O"] * len(words)
            for pos, w in enumerate(ids):
                if w is not None and w not in seen:
                    seen[w] = True
                    out[w] = names[row[pos]]
            tags.append(out)
        pred = tags
    return dict(fit_s=fit_s, evaluate_s=eval_s, predict_s=eval_s, fit_cpu_s=fit_cpu_s, evaluate_cpu_s=eval_cpu_s,
                predict_cpu_s=eval_cpu_s, train_examples=len(y), dev_examples=len(dev_y),
                dev_score=accuracy(task, dev_y, pred), threads=threads)


SYSTEMS = {
    "ours": lambda task, n, seed: run_ours(task, n, seed),
    "ours_bucketed": lambda task, n, seed: run_ours(task, n, seed, batching="bucketed"),
    "ours_packed": lambda task, n, seed: run_ours(task, n, seed, batching="packed"),
    "ours_by_length": lambda task, n, seed: run_ours(task, n, seed, batching="by_length"),
    "ours_xla": lambda task, n, seed: run_ours(task, n, seed, jit_compile=True),
    "ours_packed_everywhere": lambda task, n, seed: run_ours(task, n, seed, batching="packed", eval_batching="packed"),
    "ours_by_length_sorted": lambda task, n, seed: run_ours(task, n, seed, batching="by_length", eval_batching="sorted"),
    "ours_bf16": lambda task, n, seed: run_ours(task, n, seed, policy="mixed_bfloat16"),
    "keras_hub": run_keras_hub,
    "hf": lambda task, n, seed: run_hf(task, n, seed, threads=2),
    "hf1": lambda task, n, seed: run_hf(task, n, seed, threads=1),
    "hf_bf16": lambda task, n, seed: run_hf(task, n, seed, threads=2, autocast=True),
    "hf1_bf16": lambda task, n, seed: run_hf(task, n, seed, threads=1, autocast=True),
    "ours_jax": lambda task, n, seed: run_ours(task, n, seed),
    "ours_torch": lambda task, n, seed: run_ours(task, n, seed),
}
# `ours` on Keras' other backends: the worker sets KERAS_BACKEND before anything imports keras
# (every other system runs on TensorFlow, whatever the caller's environment says).
KERAS_BACKENDS = {"ours_jax": "jax", "ours_torch": "torch"}


def worker(args):
    load = os.getloadavg()
    result = SYSTEMS[args.worker](args.task, args.examples, args.seed)
    result.update(system=args.worker, seed=args.seed, loadavg_before=list(load), loadavg_after=list(os.getloadavg()))
    if "keras" in sys.modules:
        result["keras_backend"] = sys.modules["keras"].backend.backend()
    print("RESULT " + json.dumps(result), flush=True)


def run_one(system, task, n, seed):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", system, "--task", task, "--examples", str(n),
           "--seed", str(seed)]
    return common.run_worker(cmd, system)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(FILES), default="classify")
    parser.add_argument("--systems", default="ours,keras_hub,hf,hf1")
    parser.add_argument("--reference", default="ours", help="the system whose speed-ups over the others are reported")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--examples", type=int, default=1600)
    parser.add_argument("--seeds", default="0", help="comma-separated; each round uses the next seed")
    parser.add_argument("--out", default=None)
    parser.add_argument("--worker", default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.worker:  # first, before anything (the choice questions' writer too) imports keras
        os.environ["KERAS_BACKEND"] = KERAS_BACKENDS.get(args.worker, "tensorflow")
    if args.task == "choice":
        write_choice_questions()
    if args.worker:
        return worker(args)
    systems, seeds = args.systems.split(","), [int(s) for s in args.seeds.split(",")]
    bf16_hardware = common.bf16_hardware()
    if any("bf16" in s for s in systems) and not bf16_hardware:
        print("note: this CPU has no native bf16 (neither amx_bf16 nor avx512_bf16): bf16 systems run emulated "
              "bfloat16 here, slower than float32; compare them on a bf16 host", flush=True)
    started, info_before, runs = common.now(), common.machine_line(), []
    for r in range(args.rounds):
        seed = seeds[r % len(seeds)]
        for system in systems:
            result = run_one(system, args.task, args.examples, seed)
            result["round"] = r
            runs.append(result)
            print(f"round {r} seed {seed} {system}: fit {result['fit_s']:.1f} s "
                  f"({result['train_examples'] / result['fit_s']:.1f} ex/s)"
                  + (f", evaluate {result['evaluate_s']:.1f} s, predict {result['predict_s']:.1f} s, "
                     f"dev {result['dev_score']:.4f}" if "dev_score" in result else ""), flush=True)
    record = dict(task=args.task, examples=args.examples, batch_size=BATCH, sequence_length=LENGTH,
                  command="python benchmarks/fit_speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                  started=started, finished=common.now(), machine_before=info_before, machine_after=common.machine_line(),
                  commit=common.git_commit(), versions=common.versions("tensorflow", "keras", "keras-hub", "torch",
                                                                       "transformers"),
                  bf16_hardware=bf16_hardware, runs=runs, reference=args.reference,
                  summary=summarize(runs, systems, args.reference))
    out = args.out or os.path.join(common.REPO, "benchmarks", "results", f"fit_speed_{args.task}.json")
    common.write_json(out, record)
    print_table(record)


def summarize(runs, systems, reference="ours"):
    """Per system: median examples/s of fit, median seconds of evaluate/predict, dev scores, and the
    median per-round ratios of `reference`'s speed to every other system's."""
    out = {}
    for s in systems:
        rows = [r for r in runs if r["system"] == s]
        out[s] = dict(fit_examples_per_s=statistics.median(r["train_examples"] / r["fit_s"] for r in rows))
        for key in ("evaluate_s", "predict_s"):
            if all(key in r for r in rows):
                out[s][key] = statistics.median(r[key] for r in rows)
        if all("dev_score" in r for r in rows):
            out[s]["dev_scores"] = [round(r["dev_score"], 4) for r in rows]
    if reference in systems:
        for s in systems:
            if s == reference:
                continue
            for key, better in (("fit_s", "fit"), ("evaluate_s", "evaluate"), ("predict_s", "predict"),
                                ("fit_cpu_s", "fit_cpu"), ("evaluate_cpu_s", "evaluate_cpu"),
                                ("predict_cpu_s", "predict_cpu")):
                ratios = [o[key] and p[key] / o[key] for o, p in _pairs(runs, reference, s) if key in o and key in p]
                if ratios:
                    out[s][f"ours_{better}_speedup"] = round(statistics.median(ratios), 2)
    return out


def _pairs(runs, a, b):
    rounds = sorted({r["round"] for r in runs})
    for k in rounds:
        ra = [r for r in runs if r["round"] == k and r["system"] == a]
        rb = [r for r in runs if r["round"] == k and r["system"] == b]
        if ra and rb:
            yield ra[0], rb[0]


def print_table(record):
    print(f"\n{record['task']}: {record['examples']} examples, batch {record['batch_size']}, length "
          f"{record['sequence_length']}, 1 epoch; {record['machine_before']}; native bf16: "
          f"{', '.join(record.get('bf16_hardware') or []) or 'none'}")
    reference = record.get("reference", "ours")
    print(f"| system | fit examples/s | evaluate s | predict s | dev score | {reference}'s fit / evaluate / predict "
          "speed-up | the same in CPU seconds |")
    print("|---|---|---|---|---|---|---|")
    for s, v in record["summary"].items():
        ups = "/".join(str(v.get(f"ours_{k}_speedup", "-")) for k in ("fit", "evaluate", "predict"))
        cpu = "/".join(str(v.get(f"ours_{k}_cpu_speedup", "-")) for k in ("fit", "evaluate", "predict"))
        print(f"| {s} | {v['fit_examples_per_s']:.1f} | {v.get('evaluate_s', float('nan')):.1f} | "
              f"{v.get('predict_s', float('nan')):.1f} | {v.get('dev_scores', '-')} | {ups if s != reference else '-'} | {cpu if s != reference else '-'} |")


if __name__ == "__main__":
    main()
