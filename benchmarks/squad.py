"""SQuAD v1.1 span QA: all-MiniLM-L6-v2 fine-tuned on squad/train.json, scored on squad/dev.json, ours and HF's.

Both sides get the same questions, the same windows and the same recipe, and are run in the
same invocation (one after the other, each in its own process so TensorFlow and PyTorch
never share a thread pool):

- ours: `keras_bert_zoo.finetune("qa", ...)` (what `bert-zoo finetune qa` calls), windows in
  HF's overlap meaning (`stride_mode="overlap"`);
- HF: transformers `BertForQuestionAnswering` in PyTorch (`torch.set_num_threads(2)`), the
  features, training loop and post-processing of HF's `examples/pytorch/question-answering`
  `run_qa.py` / `utils_qa.py` written out here (no `Trainer`, no `datasets`).

The recipe (REFERENCE_RESULTS.md): the real all-MiniLM-L6-v2 checkpoint; question at most 64
word pieces (Google's `max_query_length`; longer questions are cut, counted in the results);
windows of `--sequence-length` (256) tokens, consecutive windows overlapping by `--overlap`
(128) tokens (HF's `stride=128`; run_qa.py's `doc_stride`); `--epochs` (1), batch 32, lr 5e-5,
AdamW (betas 0.9/0.999, epsilon 1e-6 on both sides, weight decay 0.01 not on biases or
LayerNorm weights), 10% linear warm-up (`round(0.1 * total)` steps) then linear decay to 0,
global gradient clipping at norm 1.0, seed 0. A window that does not contain the first gold
answer is labelled start = end = 0 ([CLS]); train labels come from the FIRST gold answer
(run_qa.py's rule; the shared train split comes from the official dev set, so it has up to 3).
Post-processing: per window the top-20 starts x top-20 ends, spans outside the passage,
reversed or longer than 30 tokens dropped, score = start + end logit, best over all windows
of the question, text cut from the passage by character offsets.

HF side, exactly (run_qa.py's `prepare_train_features` / `prepare_validation_features`):
`tokenizer(question.lstrip(), context, truncation="only_second", max_length=256, stride=128,
return_overflowing_tokens=True, return_offsets_mapping=True)` with the fast (Rust) tokenizer,
labels by run_qa.py's offset rules; padding: DYNAMIC (each batch padded to its longest
window; run_qa.py's default `pad_to_max_length=True` pads every window to 256, which gives the
same logits and is slower, so dynamic is HF's faster and fairer setting). run_qa.py's
`postprocess_qa_predictions` has no max-context filter (Google's run_squad.py has one; ours
follows Google's); the difference is named, not hidden.

Scores: dev exact match and F1 of the model at the END of training, by the official SQuAD
v1.1 evaluation script's rules, written out below (`_official_v11`: normalize_answer,
f1_score, exact_match_score, metric_max_over_ground_truths), as fractions in [0, 1]. Both
sides' `predictions.json` (official `{id: answer}` form) are also scored by
`keras_bert_zoo.metrics.squad` when it exists, and the two scorers must agree.
Speed: training windows per second over the training steps only (tokenisation and dev
scoring excluded). Because the two end-to-end runs see different machine load, `--only speed`
also times train steps of both on the same batches of real windows (batch 32 x 256) in
interleaved rounds and reports the median of the per-round ratios (`speed.json`).

Every run writes `ROOT/RUN/ours.json`, `ROOT/RUN/hf.json` (and `predictions_*.json`),
`ROOT/RUN/results.json` (both sides, ratios, recipe, command, start time, load, git commit)
and prints a markdown table; RUN is `s{sequence_length}-e{epochs}` (plus `-n{N}` with
--max-train-questions).

    python benchmarks/squad.py                         # both sides, 256 / 1 epoch (REFERENCE_RESULTS' HF figure)
    python benchmarks/squad.py --sequence-length 384 --epochs 2   # the full recipe (hours on 2 cores)
    python benchmarks/squad.py --only hf               # one side only (the other's JSON is kept if present)
    python benchmarks/squad.py --only speed            # interleaved train-step timing, ours vs HF, same batches
    python benchmarks/squad.py --table                 # the table of a finished run
    python benchmarks/squad.py --max-train-questions 64 --max-dev-questions 32 --root /tmp/squad_smoke
"""

import argparse
import collections
import datetime
import json
import os
import re
import string
import subprocess
import sys
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import git_commit, hf_optimizer, hf_train, minilm_path, now, read_json, set_tf_threads, uptime, versions, write_json  # noqa: E402
from common import write_result  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(os.path.dirname(REPO), "shared", "data", "squad")
TRAIN = os.path.join(DATA, "train.json")
DEV = os.path.join(DATA, "dev.json")

RECIPE = dict(learning_rate=5e-5, batch_size=32, warmup_ratio=0.1, weight_decay=0.01, adam_epsilon=1e-6,
              clip_norm=1.0, seed=0, threads=2, max_query_length=64, n_best_size=20, max_answer_length=30)
# REFERENCE_RESULTS.md: HF transformers, same checkpoint and recipe (256 / overlap 128), another session.
HF_REFERENCE = {(256, 1): dict(exact_match=0.280, f1=0.444, windows=9027, train_seconds=1974, windows_per_second=4.6)}


def run_dir(root, sequence_length, epochs, max_train, seed=0):
    return os.path.join(root, f"s{sequence_length}-e{epochs}" + (f"-n{max_train}" if max_train else "")
                        + (f"-seed{seed}" if seed else ""))


def read_squad(path, max_questions=None):
    """SQuAD v1.1 JSON -> flat examples, as HF `datasets`' squad loader builds them (context not stripped)."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)["data"]
    examples = []
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                examples.append(dict(id=qa["id"], question=qa["question"], context=paragraph["context"],
                                     answers=dict(text=[a["text"] for a in qa["answers"]],
                                                  answer_start=[a["answer_start"] for a in qa["answers"]])))
    return examples[:max_questions] if max_questions else examples


# --- official SQuAD v1.1 scoring, written out (evaluate-v1.1.py) ---------------------------------------
def _normalize_answer(s):
    """Lower text and remove punctuation, articles and extra whitespace."""

    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def _f1_score(prediction, ground_truth):
    prediction_tokens = _normalize_answer(prediction).split()
    ground_truth_tokens = _normalize_answer(ground_truth).split()
    common = collections.Counter(prediction_tokens) & collections.Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def _exact_match_score(prediction, ground_truth):
    return _normalize_answer(prediction) == _normalize_answer(ground_truth)


def _metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, ground_truth) for ground_truth in ground_truths)


def _official_v11(dataset, predictions):
    """evaluate-v1.1.py's `evaluate` (its `dataset` is the file's "data"), as fractions (the script prints
    100x); a question without a prediction scores 0."""
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue
                ground_truths = [x["text"] for x in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += _metric_max_over_ground_truths(_exact_match_score, prediction, ground_truths)
                f1 += _metric_max_over_ground_truths(_f1_score, prediction, ground_truths)
    return dict(exact_match=exact_match / total, f1=f1 / total, questions=total)


def score(dataset_path, predictions, ids=None):
    """Official v1.1 scores of `predictions` ({id: text}); with `ids` (smoke runs on the first N dev
    questions), the file is cut to those questions first."""
    with open(dataset_path, encoding="utf-8") as f:
        dataset = json.load(f)["data"]
    if ids is not None:
        keep = set(ids)
        dataset = [{"paragraphs": [{"qas": [qa for qa in p["qas"] if qa["id"] in keep]} for p in a["paragraphs"]]}
                   for a in dataset]
    return _official_v11(dataset, predictions)


# --- HF transformers (PyTorch): run_qa.py's features, loop and post-processing ---------------------------
def truncate_questions(tokenizer, examples, max_query_length):
    """Cuts each question after its `max_query_length`-th word piece (Google's max_query_length;
    run_qa.py itself never truncates the question). Returns the number of questions cut."""
    enc = tokenizer([e["question"].lstrip() for e in examples], add_special_tokens=False,
                    return_offsets_mapping=True)
    cut = 0
    for e, offsets in zip(examples, enc["offset_mapping"]):
        if len(offsets) > max_query_length:
            q = e["question"].lstrip()
            e["question"] = q[:offsets[max_query_length - 1][1]]
            cut += 1
    return cut


def _tokenize(tokenizer, examples, sequence_length, overlap):
    return tokenizer([e["question"].lstrip() for e in examples], [e["context"] for e in examples],
                     truncation="only_second", max_length=sequence_length, stride=overlap,
                     return_overflowing_tokens=True, return_offsets_mapping=True, padding=False)


def hf_train_features(tokenizer, examples, sequence_length, overlap):
    """run_qa.py's `prepare_train_features` (pad_on_right; first gold answer)."""
    enc = _tokenize(tokenizer, examples, sequence_length, overlap)
    features = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        input_ids = enc["input_ids"][i]
        cls_index = input_ids.index(tokenizer.cls_token_id)
        sequence_ids = enc.sequence_ids(i)
        answers = examples[enc["overflow_to_sample_mapping"][i]]["answers"]
        start_position = end_position = cls_index
        if answers["answer_start"]:
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start_index = 0
            while sequence_ids[token_start_index] != 1:
                token_start_index += 1
            token_end_index = len(input_ids) - 1
            while sequence_ids[token_end_index] != 1:
                token_end_index -= 1
            if offsets[token_start_index][0] <= start_char and offsets[token_end_index][1] >= end_char:
                while token_start_index < len(offsets) and offsets[token_start_index][0] <= start_char:
                    token_start_index += 1
                start_position = token_start_index - 1
                while offsets[token_end_index][1] >= end_char:
                    token_end_index -= 1
                end_position = token_end_index + 1
        features.append(dict(input_ids=input_ids, token_type_ids=enc["token_type_ids"][i],
                             attention_mask=enc["attention_mask"][i], start_positions=start_position,
                             end_positions=end_position))
    return features


def hf_eval_features(tokenizer, examples, sequence_length, overlap):
    """run_qa.py's `prepare_validation_features`: offsets kept for passage tokens only."""
    enc = _tokenize(tokenizer, examples, sequence_length, overlap)
    features = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        sequence_ids = enc.sequence_ids(i)
        features.append(dict(input_ids=enc["input_ids"][i], token_type_ids=enc["token_type_ids"][i],
                             attention_mask=enc["attention_mask"][i],
                             example_id=examples[enc["overflow_to_sample_mapping"][i]]["id"],
                             offset_mapping=[o if sequence_ids[k] == 1 else None for k, o in enumerate(offsets)]))
    return features


def postprocess_qa_predictions(examples, features, all_start_logits, all_end_logits, n_best_size=20,
                               max_answer_length=30):
    """utils_qa.py's `postprocess_qa_predictions`, SQuAD v1.1 branch: {id: answer text}."""
    import numpy as np

    features_per_example = collections.defaultdict(list)
    for i, feature in enumerate(features):
        features_per_example[feature["example_id"]].append(i)
    all_predictions = collections.OrderedDict()
    for example in examples:
        prelim_predictions = []
        for feature_index in features_per_example[example["id"]]:
            start_logits = all_start_logits[feature_index]
            end_logits = all_end_logits[feature_index]
            offset_mapping = features[feature_index]["offset_mapping"]
            start_indexes = np.argsort(start_logits)[-1: -n_best_size - 1: -1].tolist()
            end_indexes = np.argsort(end_logits)[-1: -n_best_size - 1: -1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (start_index >= len(offset_mapping) or end_index >= len(offset_mapping)
                            or offset_mapping[start_index] is None or len(offset_mapping[start_index]) < 2
                            or offset_mapping[end_index] is None or len(offset_mapping[end_index]) < 2):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim_predictions.append({
                        "offsets": (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                        "score": float(start_logits[start_index] + end_logits[end_index])})
        predictions = sorted(prelim_predictions, key=lambda x: x["score"], reverse=True)[:n_best_size]
        context = example["context"]
        texts = [context[p["offsets"][0]:p["offsets"][1]] for p in predictions]
        if not texts or (len(texts) == 1 and texts[0] == ""):
            texts.insert(0, "empty")
        all_predictions[example["id"]] = texts[0]
    return all_predictions


def _collate(pad_id, keys):
    import torch

    def collate(batch):  # dynamic padding: to the longest window of the batch
        length = max(len(f["input_ids"]) for f in batch)
        out = {}
        for key, pad in (("input_ids", pad_id), ("token_type_ids", 0), ("attention_mask", 0)):
            out[key] = torch.tensor([f[key] + [pad] * (length - len(f[key])) for f in batch], dtype=torch.long)
        for key in keys:
            out[key] = torch.tensor([f[key] for f in batch], dtype=torch.long)
        return out

    return collate


def hf_dev_predictions(model, tokenizer, dev, dev_features):
    """HF's side of dev: `BertForQuestionAnswering` logits per window (dynamic padding), then
    run_qa.py's post-processing -> `{id: answer}`."""
    import torch

    model.eval()
    starts, ends = [None] * len(dev_features), [None] * len(dev_features)
    order = sorted(range(len(dev_features)), key=lambda i: len(dev_features[i]["input_ids"]))
    eval_collate = _collate(tokenizer.pad_token_id, ())
    with torch.no_grad():
        for b in range(0, len(order), 64):
            ids = order[b:b + 64]
            output = model(**eval_collate([dev_features[i] for i in ids]))
            for row, i in enumerate(ids):
                n = len(dev_features[i]["input_ids"])
                starts[i] = output.start_logits[row, :n].numpy()
                ends[i] = output.end_logits[row, :n].numpy()
    return postprocess_qa_predictions(dev, dev_features, starts, ends, RECIPE["n_best_size"],
                                      RECIPE["max_answer_length"])


def cross_score(out, sequence_length, overlap, max_dev=None):
    """Our trained model (`OUT/ours_model`, HF-loadable) scored by HF's dev pipeline: its windows,
    logits and run_qa.py post-processing. Equal to our own score, the post-processing is not
    where ours and HF differ; different, it is."""
    import torch
    from transformers import AutoTokenizer, BertForQuestionAnswering

    torch.set_num_threads(RECIPE["threads"])
    model_dir = os.path.join(out, "ours_model")
    if not os.path.isfile(os.path.join(model_dir, "model.safetensors")):
        raise SystemExit(f"--cross-score: no trained model in {model_dir}; run `--only ours` with the same "
                         f"--root, --sequence-length, --epochs and --seed first.")
    dev = read_squad(DEV, max_dev)
    tokenizer = AutoTokenizer.from_pretrained(minilm_path())
    truncate_questions(tokenizer, dev, RECIPE["max_query_length"])
    model = BertForQuestionAnswering.from_pretrained(model_dir)
    predictions = hf_dev_predictions(model, tokenizer, dev, hf_eval_features(tokenizer, dev, sequence_length, overlap))
    scores = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    ours = read_json(os.path.join(out, "ours.json")) or {}
    record = {"model": model_dir, "exact_match": scores["exact_match"], "f1": scores["f1"],
              "ours_pipeline": {k: ours.get(k) for k in ("exact_match", "f1")},
              "same_answers": sum(predictions[k] == v for k, v in (read_json(ours["predictions"]) or {}).items()
                                  if k in predictions) if ours.get("predictions") else None,
              "questions": len(predictions), "date": now(), "git_commit": git_commit()}
    write_json(os.path.join(out, "cross_score.json"), record)
    print(f"our weights, HF's dev pipeline: EM {scores['exact_match']:.4f} / F1 {scores['f1']:.4f}; "
          f"our pipeline: {record['ours_pipeline']}; same answer on {record['same_answers']} of {len(predictions)}")
    return record


def run_hf(sequence_length, overlap, epochs, max_train, max_dev, out):
    import random

    import numpy as np
    import torch
    import transformers
    from torch.utils.data import DataLoader
    from transformers import AutoTokenizer, BertForQuestionAnswering

    torch.set_num_threads(RECIPE["threads"])
    seed = RECIPE["seed"]
    random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
    transformers.set_seed(seed)
    minilm = minilm_path()
    train, dev = read_squad(TRAIN, max_train), read_squad(DEV, max_dev)
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    assert tokenizer.is_fast and tokenizer.padding_side == "right"
    model = BertForQuestionAnswering.from_pretrained(minilm)

    t = time.perf_counter()
    cut_train = truncate_questions(tokenizer, train, RECIPE["max_query_length"])
    train_features = hf_train_features(tokenizer, train, sequence_length, overlap)
    tokenize_seconds = time.perf_counter() - t
    cut_dev = truncate_questions(tokenizer, dev, RECIPE["max_query_length"])
    dev_features = hf_eval_features(tokenizer, dev, sequence_length, overlap)
    labelled = sum(f["start_positions"] != 0 for f in train_features)
    collate = _collate(tokenizer.pad_token_id, ("start_positions", "end_positions"))
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(train_features, batch_size=RECIPE["batch_size"], shuffle=True, generator=generator,
                        collate_fn=collate)
    trained = hf_train(model, loader, epochs,
                       f"{minilm} on {len(train)} questions ({len(train_features)} windows of <= {sequence_length}, "
                       f"overlap {overlap}; {labelled} contain the answer), dev {len(dev)} questions "
                       f"({len(dev_features)} windows)", RECIPE, log_every=20)
    train_seconds = trained["train_seconds"]

    # --- dev: logits per window, run_qa.py's post-processing, official scoring -----------------------
    t = time.perf_counter()
    predictions = hf_dev_predictions(model, tokenizer, dev, dev_features)
    predict_seconds = time.perf_counter() - t
    write_json(os.path.join(out, "predictions_hf.json"), predictions)
    scores = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    record = {
        "system": "hf", "exact_match": scores["exact_match"], "f1": scores["f1"], "dev_questions": scores["questions"],
        "train_seconds": train_seconds, "windows_per_second": len(train_features) * epochs / train_seconds,
        "train_windows": len(train_features), "train_windows_with_answer": labelled, "train_questions": len(train),
        "dev_windows": len(dev_features), "questions_cut_at_64": dict(train=cut_train, dev=cut_dev),
        "steps": trained["steps"], "warmup_steps": trained["warmup_steps"], "padding": "dynamic (longest window of each batch)",
        "tokenize_train_seconds": tokenize_seconds, "dev_predict_seconds": predict_seconds,
        "final_train_loss": trained["final_train_loss"], "loadavg_before": trained["loadavg_before"],
        "loadavg_after": trained["loadavg_after"], "uptime_before": trained["uptime_before"],
        "uptime_after": trained["uptime_after"], "date": now(),
        "git_commit": git_commit(), "versions": versions("torch", "transformers", "tokenizers"),
        "torch_threads": torch.get_num_threads(), "tensorflow_in_process": "tensorflow" in sys.modules,
        "predictions": os.path.join(out, "predictions_hf.json"),
    }
    write_json(os.path.join(out, "hf.json"), record)
    print(f"HF: dev EM {record['exact_match']:.4f} / F1 {record['f1']:.4f}, {record['windows_per_second']:.2f} "
          f"train windows/s over {train_seconds:.0f} s", flush=True)
    return record


# --- ours ------------------------------------------------------------------------------------------
def run_ours(sequence_length, overlap, epochs, max_train, max_dev, out):
    set_tf_threads(RECIPE["threads"])
    from keras_bert_zoo import finetune

    minilm = minilm_path()
    dev = read_squad(DEV, max_dev)
    load_before, uptime_before = os.getloadavg(), uptime()
    start = time.perf_counter()
    model, metrics = finetune(
        "qa", minilm, TRAIN, DEV, os.path.join(out, "ours_model"), doc_stride=overlap, stride_mode="overlap",
        max_query_length=RECIPE["max_query_length"],
        epochs=epochs, batch_size=RECIPE["batch_size"], learning_rate=RECIPE["learning_rate"],
        warmup_ratio=RECIPE["warmup_ratio"], sequence_length=sequence_length, max_train_examples=max_train,
        max_dev_examples=max_dev, select="final", eval_every=0, seed=RECIPE["seed"], verbose=2)
    wall = time.perf_counter() - start
    load_after_train, uptime_after_train = os.getloadavg(), uptime()
    # The same model's answers, written in the official form and scored by the official rules written out here.
    t = time.perf_counter()
    answers = model.predict_answers([e["question"] for e in dev], [e["context"] for e in dev],
                                    n_best=RECIPE["n_best_size"], max_answer_length=RECIPE["max_answer_length"])
    predict_seconds = time.perf_counter() - t
    predictions = {e["id"]: a["answer"] for e, a in zip(dev, answers)}
    write_json(os.path.join(out, "predictions_ours.json"), predictions)
    official = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    windows = _train_windows(model, metrics, max_train)
    record = {
        "system": "ours", "metrics": metrics, "exact_match": official["exact_match"], "f1": official["f1"],
        "finetune_exact_match": metrics.get("exact_match"), "finetune_f1": metrics.get("f1"),
        "dev_questions": official["questions"], "train_seconds": metrics["train_seconds"],
        "windows_per_second": windows * epochs / metrics["train_seconds"], "train_windows": windows,
        "train_questions": metrics["train_examples"], "steps": metrics["steps"],
        "padding": "length buckets (each batch cut to the bucket holding its longest window)",
        "dev_predict_seconds": predict_seconds, "final_train_loss": metrics["final_train_loss"], "wall_seconds": wall,
        "loadavg_before": list(load_before), "loadavg_after": list(load_after_train),
        "uptime_before": uptime_before, "uptime_after": uptime_after_train, "date": now(),
        "git_commit": git_commit(), "versions": versions("tensorflow", "keras", "tensorflow-text"),
        "metrics_json": os.path.join(out, "ours_model", "metrics.json"),
        "predictions": os.path.join(out, "predictions_ours.json"),
    }
    write_json(os.path.join(out, "ours.json"), record)
    print(f"ours: dev EM {record['exact_match']:.4f} / F1 {record['f1']:.4f} (finetune's own: "
          f"{record['finetune_exact_match']} / {record['finetune_f1']}), {record['windows_per_second']:.2f} "
          f"train windows/s over {record['train_seconds']:.0f} s", flush=True)
    return record


def ours_from_model(model_dir, sequence_length, epochs, max_train, max_dev, out, command=None):
    """`ours.json` from a finished `bert-zoo finetune qa` directory of THIS recipe (e.g. one
    run with the same flags by someone else on the shared machine, so that two identical
    jobs do not compete): its `metrics.json` gives the training figures; the model's dev
    answers are recomputed here, written as `predictions_ours.json` and scored by the
    official rules written out above. The record says where it came from."""
    from keras_bert_zoo.tasks import get_task

    with open(os.path.join(model_dir, "metrics.json")) as f:
        metrics = json.load(f)
    with open(os.path.join(model_dir, "config.json")) as f:
        layout = ((json.load(f).get("keras_bert_zoo") or {}).get("task_config") or {}).get("data_layout") or {}
    model = get_task("qa").load_model(model_dir)
    settings = {k: getattr(model.preprocessor, k, None)
                for k in ("sequence_length", "doc_stride", "stride_mode", "max_query_length")}
    expected = dict(sequence_length=sequence_length, doc_stride=128, stride_mode="overlap",
                    max_query_length=RECIPE["max_query_length"])
    if settings != expected or int(metrics["epochs"]) != epochs or int(metrics.get("selection_best", 0)):
        raise ValueError(f"{model_dir} was not trained with this recipe: windows {settings}, epochs "
                         f"{metrics['epochs']}, selection_best {metrics.get('selection_best')}; expected {expected}, "
                         f"epochs {epochs}, final model.")
    dev = read_squad(DEV, max_dev)
    t = time.perf_counter()
    answers = model.predict_answers([e["question"] for e in dev], [e["context"] for e in dev],
                                    n_best=RECIPE["n_best_size"], max_answer_length=RECIPE["max_answer_length"])
    predict_seconds = time.perf_counter() - t
    predictions = {e["id"]: a["answer"] for e, a in zip(dev, answers)}
    write_json(os.path.join(out, "predictions_ours.json"), predictions)
    official = score(DEV, predictions, ids=[e["id"] for e in dev] if max_dev else None)
    windows = _train_windows(model, metrics, max_train)
    record = {
        "system": "ours", "source": {"model_dir": model_dir, "command": command, "data_layout": layout,
                                     "metrics_json_mtime": _mtime(os.path.join(model_dir, "metrics.json"))},
        "metrics": metrics, "exact_match": official["exact_match"], "f1": official["f1"],
        "finetune_exact_match": metrics.get("exact_match"), "finetune_f1": metrics.get("f1"),
        "dev_questions": official["questions"], "train_seconds": metrics["train_seconds"],
        "windows_per_second": windows * epochs / metrics["train_seconds"], "train_windows": windows,
        "train_questions": metrics["train_examples"], "steps": metrics["steps"],
        "padding": "length buckets (each batch cut to the bucket holding its longest window)",
        "dev_predict_seconds": predict_seconds, "final_train_loss": metrics["final_train_loss"],
        "loadavg_before": None, "loadavg_after": None, "date": now(), "git_commit": git_commit(),
        "versions": versions("tensorflow", "keras", "tensorflow-text"),
        "predictions": os.path.join(out, "predictions_ours.json"),
    }
    write_json(os.path.join(out, "ours.json"), record)
    print(f"ours ({model_dir}): dev EM {record['exact_match']:.4f} / F1 {record['f1']:.4f} (finetune's own: "
          f"{record['finetune_exact_match']} / {record['finetune_f1']}), {record['windows_per_second']:.2f} "
          f"train windows/s over {record['train_seconds']:.0f} s", flush=True)
    return record


def _mtime(path):
    return datetime.datetime.fromtimestamp(os.path.getmtime(path)).astimezone().isoformat(timespec="seconds")


def _train_windows(model, metrics, max_train):
    """Training windows of ours (to turn steps into windows/s): finetune's count, or recounted."""
    if metrics.get("train_windows"):
        return int(metrics["train_windows"])
    from keras_bert_zoo.preprocessing.squad import make_qa_windows

    train = read_squad(TRAIN, max_train)
    return len(make_qa_windows(model.preprocessor, [e["question"] for e in train], [e["context"] for e in train]))


# --- speed: train steps of both on the same batches, interleaved rounds ----------------------------------
def speed(out, sequence_length=256, overlap=128, batch_size=32, rounds=5, steps=2, threads=2, batches=6,
          hf_one_thread=True, xla=False):
    """Train-step throughput of ours (`BertSpanQA`, as `finetune` compiles it) vs HF
    `BertForQuestionAnswering` (torch AdamW, same schedule and clipping), both from the real
    all-MiniLM-L6-v2, on the SAME `batches` batches of real SQuAD training windows (HF's
    run_qa.py windows and labels, each padded to `sequence_length`: batch 32 x 256), in
    `rounds` interleaved rounds of `steps` steps each, so both see the same machine load.
    2 intra-op threads on both sides (TensorFlow: 2 intra-op / 1 inter-op; PyTorch:
    `torch.set_num_threads(2)`). Reports median/best round and the median per-round ratio.
    With `hf_one_thread`, a diagnostic row runs HF's step on 1 thread: on an oversubscribed
    machine PyTorch's 2-thread OpenMP regions can wait on a descheduled thread, and this row
    shows how much of a gap that is. `xla` adds a row for ours compiled with XLA (finetune's
    default is no XLA, the row that compares with the end-to-end run)."""
    import statistics

    import numpy as np
    import tensorflow as tf

    set_tf_threads(threads)
    import keras
    import torch
    import transformers
    from transformers import AutoTokenizer, BertForQuestionAnswering

    from keras_bert_zoo.models.span_qa import BertSpanQA
    from keras_bert_zoo.training import create_optimizer

    torch.set_num_threads(threads)
    minilm = minilm_path()
    tokenizer = AutoTokenizer.from_pretrained(minilm)
    train = read_squad(TRAIN)
    truncate_questions(tokenizer, train, RECIPE["max_query_length"])
    features = hf_train_features(tokenizer, train, sequence_length, overlap)
    rng = np.random.default_rng(0)
    chosen = rng.choice(len(features), batches * batch_size, replace=False)

    def pad(f, key, value):
        return f[key] + [value] * (sequence_length - len(f[key]))

    data = []
    for b in range(batches):
        fs = [features[i] for i in chosen[b * batch_size:(b + 1) * batch_size]]
        ids = np.array([pad(f, "input_ids", tokenizer.pad_token_id) for f in fs], "int32")
        seg = np.array([pad(f, "token_type_ids", 0) for f in fs], "int32")
        mask = np.array([pad(f, "attention_mask", 0) for f in fs], "int32")
        starts = np.array([f["start_positions"] for f in fs], "int32")
        ends = np.array([f["end_positions"] for f in fs], "int32")
        data.append(dict(
            ours=({"token_ids": ids, "segment_ids": seg, "padding_mask": mask},
                  {"start_positions": starts, "end_positions": ends}),
            hf=dict(input_ids=torch.tensor(ids, dtype=torch.long), token_type_ids=torch.tensor(seg, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long),
                    start_positions=torch.tensor(starts, dtype=torch.long),
                    end_positions=torch.tensor(ends, dtype=torch.long))))
    total_steps = 1000
    load_before = os.getloadavg()
    systems, cursor = {}, {}

    def next_batch(name):
        cursor[name] = cursor.get(name, -1) + 1
        return data[cursor[name] % batches]

    for jit in ((False, True) if xla else (False,)):
        keras.utils.set_random_seed(0)
        ours = BertSpanQA.from_preset(minilm, preprocessor=None)
        ours.compile(optimizer=create_optimizer(RECIPE["learning_rate"], total_steps=total_steps,
                                                warmup_ratio=RECIPE["warmup_ratio"]), jit_compile=jit)
        name = f"ours, Keras 3 / TF, {'XLA' if jit else 'no XLA (as finetune runs it)'}"
        systems[name] = lambda model=ours, name=name: model.train_on_batch(*next_batch(name)["ours"])
    torch.manual_seed(0)
    hf = BertForQuestionAnswering.from_pretrained(minilm).train()
    optimizer, scheduler, _ = hf_optimizer(hf, total_steps, RECIPE)
    hf_name = "HF BertForQuestionAnswering, PyTorch eager"

    def hf_step():
        optimizer.zero_grad(set_to_none=True)
        hf(**next_batch(hf_name)["hf"]).loss.backward()
        torch.nn.utils.clip_grad_norm_(hf.parameters(), RECIPE["clip_norm"])
        optimizer.step()
        scheduler.step()

    systems[hf_name] = hf_step
    if hf_one_thread:  # diagnostic: PyTorch's 2-thread OpenMP regions wait on a descheduled thread under load
        torch.manual_seed(0)
        hf1 = BertForQuestionAnswering.from_pretrained(minilm).train()
        optimizer1, scheduler1, _ = hf_optimizer(hf1, total_steps, RECIPE)
        hf1_name = "diagnostic: HF BertForQuestionAnswering, PyTorch on 1 thread"

        def hf1_step():
            torch.set_num_threads(1)
            try:
                optimizer1.zero_grad(set_to_none=True)
                hf1(**next_batch(hf1_name)["hf"]).loss.backward()
                torch.nn.utils.clip_grad_norm_(hf1.parameters(), RECIPE["clip_norm"])
                optimizer1.step()
                scheduler1.step()
            finally:
                torch.set_num_threads(threads)

        systems[hf1_name] = hf1_step
    for name, step in systems.items():  # compile / warm up
        t = time.perf_counter()
        for _ in range(2):
            step()
        print(f"warm-up, {name}: {time.perf_counter() - t:.1f} s", flush=True)
    times = {k: [] for k in systems}
    for r in range(rounds):
        for name, step in systems.items():
            t = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append(time.perf_counter() - t)
        print(f"round {r + 1}/{rounds}: " + ", ".join(f"{n.split(',')[0]} {times[n][-1]:.1f} s" for n in systems),
              flush=True)
    windows = steps * batch_size
    result = {"systems": {}, "batch_size": batch_size, "sequence_length": sequence_length, "rounds": rounds,
              "steps_per_round": steps, "distinct_batches": batches, "torch_threads": torch.get_num_threads(),
              "tf_threads": {"intra_op": tf.config.threading.get_intra_op_parallelism_threads(),
                             "inter_op": tf.config.threading.get_inter_op_parallelism_threads()},
              "cpus": os.cpu_count(), "loadavg_before": list(load_before), "loadavg_after": list(os.getloadavg()),
              "date": now(), "git_commit": git_commit(),
              "versions": {"keras": keras.__version__, "tensorflow": tf.__version__, "torch": torch.__version__,
                           "transformers": transformers.__version__}}
    for name, ts in times.items():
        ratio = [hf_t / t for t, hf_t in zip(ts, times[hf_name])]  # > 1: faster than HF
        result["systems"][name] = {"median_windows_per_second": windows / statistics.median(ts),
                                   "best_windows_per_second": windows / min(ts),
                                   "median_ratio_vs_hf": statistics.median(ratio), "per_round_ratio": ratio,
                                   "round_seconds": ts}
    write_json(os.path.join(out, "speed.json"), result)
    _print_speed(result)
    print(f"\nwrote {os.path.join(out, 'speed.json')}")
    return result


def _print_speed(result):
    print(f"\nTrain steps on the same real SQuAD windows, batch {result['batch_size']} x {result['sequence_length']}, "
          f"{result['rounds']} interleaved rounds of {result['steps_per_round']} steps; torch threads "
          f"{result['torch_threads']}, TF intra-op {result['tf_threads']['intra_op']} / inter-op "
          f"{result['tf_threads']['inter_op']}; load average {result['loadavg_before'][0]:.1f} -> "
          f"{result['loadavg_after'][0]:.1f} ({result['date'][:16]})\n")
    print("| system | windows/s (median round) | windows/s (best round) | ratio to HF (median of per-round ratios) |")
    print("|---|---|---|---|")
    for name, r in result["systems"].items():
        print(f"| {name} | {r['median_windows_per_second']:.2f} | {r['best_windows_per_second']:.2f} | "
              f"{r['median_ratio_vs_hf']:.2f}x |")
    one = [r for n, r in result["systems"].items() if n.startswith("diagnostic")]
    if one:  # ours against HF's faster thread setting in the same rounds
        import statistics

        for name, r in result["systems"].items():
            if name.startswith("ours"):
                ratios = [h / t for t, h in zip(r["round_seconds"], one[0]["round_seconds"])]
                print(f"{name} / HF on 1 thread (per-round ratios {', '.join(f'{x:.2f}' for x in ratios)}): "
                      f"median {statistics.median(ratios):.2f}x")


# --- both, cross-check, and the table ------------------------------------------------------------------
def cross_check(out, max_dev=None):
    """Both sides' predictions.json scored by the official rules written out here and by
    `keras_bert_zoo.metrics.squad` (when it exists): the two scorers must agree."""
    dev_ids = [e["id"] for e in read_squad(DEV, max_dev)] if max_dev else None
    checks = {}
    for side in ("ours", "hf"):
        predictions = read_json(os.path.join(out, f"predictions_{side}.json"))
        if predictions is None:
            continue
        official = score(DEV, predictions, ids=dev_ids)
        check = {"official_rules_here": official}
        try:
            library = _library_scores(predictions, dev_ids)
            check["keras_bert_zoo.metrics.squad"] = library
            check["agree"] = all(abs(library[k] - official[k]) < 1e-9 for k in ("exact_match", "f1"))
        except ImportError as error:
            check["keras_bert_zoo.metrics.squad"] = f"not available: {error}"
        checks[side] = check
    return checks


def _library_scores(predictions, ids):
    from keras_bert_zoo.metrics.squad import squad_scores

    keep = set(ids) if ids is not None else None
    golds = {e["id"]: e["answers"]["text"] for e in read_squad(DEV) if keep is None or e["id"] in keep}
    scores = squad_scores(predictions, golds)
    return {"exact_match": float(scores["exact_match"]), "f1": float(scores["f1"])}


def _load_note(r):
    if not r.get("loadavg_before"):
        return "not recorded"
    return f"{r['loadavg_before'][0]:.1f}→{r['loadavg_after'][0]:.1f}"


def print_table(out, sequence_length, epochs, max_dev=None):
    ours, hf = read_json(os.path.join(out, "ours.json")), read_json(os.path.join(out, "hf.json"))
    rows = []
    for name, r in (("ours (keras_bert_zoo, TF)", ours), ("HF transformers (PyTorch, 2 threads)", hf)):
        if r is None:
            rows.append(f"| {name} | (not run) | | | | | | | |")
            continue
        rows.append(f"| {name} | {r['exact_match']:.4f} | {r['f1']:.4f} | {r['train_windows']:,} | {r['steps']} | "
                    f"{r['train_seconds']:.0f} | {r['windows_per_second']:.2f} | {_load_note(r)} | {r['date'][:16]} |")
    print(f"\nSQuAD v1.1, all-MiniLM-L6-v2, windows of {sequence_length} (overlap 128), {epochs} epoch(s), dev "
          f"(squad/dev.json) at the end of training, official v1.1 scoring ({out}):\n")
    print("| system | dev EM | dev F1 | train windows | steps | train s | train windows/s "
          "| load 1-min (before→after) | date |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    summary = {}
    checks = cross_check(out, max_dev)
    for side, check in checks.items():
        print(f"scorers, {side}: official rules here EM {check['official_rules_here']['exact_match']:.4f} / "
              f"F1 {check['official_rules_here']['f1']:.4f}; keras_bert_zoo.metrics.squad "
              f"{check['keras_bert_zoo.metrics.squad']}; agree: {check.get('agree')}")
    summary["scorer_checks"] = checks
    speed_result = read_json(os.path.join(out, "speed.json"))
    if speed_result:
        _print_speed(speed_result)
        summary["interleaved_speed"] = {k: v["median_ratio_vs_hf"] for k, v in speed_result["systems"].items()}
    if ours and hf:
        summary.update(exact_match_difference=ours["exact_match"] - hf["exact_match"],
                       f1_difference=ours["f1"] - hf["f1"],
                       speed_ratio=ours["windows_per_second"] / hf["windows_per_second"])
        print(f"\nours − HF dev EM: {summary['exact_match_difference']:+.4f}, F1: {summary['f1_difference']:+.4f}; "
              f"ours/HF end-to-end training windows/s: {summary['speed_ratio']:.2f}x (separate processes, one "
              f"after the other: see the load columns).")
    ref = HF_REFERENCE.get((sequence_length, epochs))
    if ref:
        print(f"REFERENCE_RESULTS.md (HF, another session): dev EM {ref['exact_match']} / F1 {ref['f1']}, "
              f"{ref['windows']:,} windows, {ref['windows_per_second']} windows/s.")
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description="SQuAD v1.1 fine-tuning, ours and HF transformers side by side")
    parser.add_argument("--sequence-length", type=int, default=256)
    parser.add_argument("--overlap", type=int, default=128,
                        help="tokens shared by consecutive windows (HF's stride; ours: stride_mode='overlap')")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--max-train-questions", type=int, help="keep the first N training questions (smoke tests)")
    parser.add_argument("--max-dev-questions", type=int, help="keep the first N dev questions (smoke tests)")
    parser.add_argument("--only", choices=("ours", "hf", "speed"),
                        help="one side only, or the interleaved train-step timing of both (speed.json)")
    parser.add_argument("--rounds", type=int, default=5, help="--only speed: interleaved rounds")
    parser.add_argument("--steps", type=int, default=2, help="--only speed: train steps per system per round")
    parser.add_argument("--xla", action="store_true", help="--only speed: also time ours with XLA")
    parser.add_argument("--speed-batch-size", type=int, default=RECIPE["batch_size"],
                        help="--only speed: windows per step (32; 16 halves the memory, about 8 GB at 32 x 256 "
                             "with both systems in one process)")
    parser.add_argument("--root", default="/tmp/bert_zoo_squad")
    parser.add_argument("--seed", type=int, default=0,
                        help="both sides' seed (head initialisation, data order, dropout); results go to "
                             "ROOT/s<len>-e<epochs>-seed<N> when N is not 0")
    parser.add_argument("--threads", type=int, default=2,
                        help="intra-op threads of each side's quality run (1 lets two runs share the 2 cores)")
    parser.add_argument("--table", action="store_true", help="print the table of a finished run and exit")
    parser.add_argument("--ours-from", metavar="DIR",
                        help="with --only ours: take ours from a finished `bert-zoo finetune qa` DIR of this recipe "
                             "(scored here) instead of training again")
    parser.add_argument("--ours-command", help="with --ours-from: the command that wrote DIR (recorded)")
    parser.add_argument("--cross-score", action="store_true",
                        help="score a finished run's ours_model with HF's dev pipeline (cross_score.json)")
    args = parser.parse_args(argv)
    RECIPE.update(seed=args.seed, threads=args.threads)
    out = run_dir(args.root, args.sequence_length, args.epochs, args.max_train_questions, args.seed)
    side_args = (args.sequence_length, args.overlap, args.epochs, args.max_train_questions, args.max_dev_questions, out)
    if args.table:
        print_table(out, args.sequence_length, args.epochs, args.max_dev_questions)
        return
    if args.cross_score:
        cross_score(out, args.sequence_length, args.overlap, args.max_dev_questions)
        return
    if args.only == "ours" and args.ours_from:
        ours_from_model(args.ours_from, args.sequence_length, args.epochs, args.max_train_questions,
                        args.max_dev_questions, out, args.ours_command)
        return
    if args.only == "ours":
        run_ours(*side_args)
        return
    if args.only == "hf":
        run_hf(*side_args)
        return
    if args.only == "speed":
        speed(out, args.sequence_length, args.overlap, args.speed_batch_size, args.rounds, args.steps, xla=args.xla)
        return
    # Both, one after the other, each in a fresh process (TF and PyTorch thread pools never mixed).
    command = " ".join([os.path.basename(sys.executable)] + sys.argv)
    started, uptime_start, commit_start = now(), uptime(), git_commit()
    print(f"{started}: {uptime_start}", flush=True)
    passed = [a for a in (sys.argv[1:] if argv is None else argv) if a != "--table"]
    for side in ("ours", "hf"):
        subprocess.run([sys.executable, os.path.abspath(__file__), *passed, "--only", side], check=True)
    summary = print_table(out, args.sequence_length, args.epochs, args.max_dev_questions)
    write_json(os.path.join(out, "results.json"), {
        "ours": read_json(os.path.join(out, "ours.json")), "hf": read_json(os.path.join(out, "hf.json")), **summary,
        "recipe": {**RECIPE, "epochs": args.epochs, "sequence_length": args.sequence_length, "overlap": args.overlap,
                   "max_train_questions": args.max_train_questions, "max_dev_questions": args.max_dev_questions,
                   "train": TRAIN, "dev": DEV, "model": minilm_path()},
        "command": command, "started": started, "finished": now(), "uptime_start": uptime_start,
        "uptime_end": uptime(), "cpus": os.cpu_count(),
        "git_commit_start": commit_start, "git_commit_end": git_commit(),
    })
    print(f"\nresults: {os.path.join(out, 'results.json')}")
    print(f"summary: {record_result(out)}")


def record_result(out):
    """`benchmarks/results/squad.json` (for `benchmarks/report.py`) from a finished run's results.json."""
    results = read_json(os.path.join(out, "results.json"))
    if not results or not results.get("ours"):
        return None
    ours, hf = results["ours"], results.get("hf") or {}
    recipe = results.get("recipe", {})
    what = (f"SQuAD v1.1 dev (MiniLM, {recipe.get('epochs', '?')} epoch(s), windows of "
            f"{recipe.get('sequence_length', '?')})")
    rows = [{"what": f"{what}: {name}", "unit": "fraction", "ours": ours.get(key), "peer": hf.get(key),
             "peer_name": "HF transformers", "higher_is_better": True}
            for name, key in (("exact match", "exact_match"), ("F1", "f1"))]
    return write_result("squad", rows, command=results.get("command", "python benchmarks/squad.py"),
                        source=os.path.join(out, "results.json"), started=results.get("started"),
                        commit=results.get("git_commit_start"))


if __name__ == "__main__":
    main()
