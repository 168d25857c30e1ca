"""HF's `run_qa.py` / `utils_qa.py` written out, for the HF sides of squad and finetune_speed: SQuAD read as HF
`datasets` builds it, questions cut at Google's `max_query_length`, the train and eval windows, the logits of each
dev window and the post-processing to `{id: answer}`. Not a benchmark (`run.py squad` is); no TensorFlow.
"""

import collections
import json

import hf_loop


def read_squad(path, max_questions=None):
    """SQuAD v1.1 JSON -> flat examples, as HF `datasets`' squad loader builds them (context not stripped)."""
    with open(path, encoding="utf-8") as f:
        examples = [
            dict(
                id=qa["id"],
                question=qa["question"],
                context=paragraph["context"],
                answers=dict(
                    text=[a["text"] for a in qa["answers"]], answer_start=[a["answer_start"] for a in qa["answers"]]
                ),
            )
            for article in json.load(f)["data"]
            for paragraph in article["paragraphs"]
            for qa in paragraph["qas"]
        ]
    return examples[:max_questions] if max_questions else examples


# --- HF transformers (PyTorch): run_qa.py's features, loop and post-processing ---------------------------
def truncate_questions(tokenizer, examples, max_query_length):
    """Cuts each question after its `max_query_length`-th word piece (Google's max_query_length;
    run_qa.py itself never truncates the question). Returns the number of questions cut."""
    enc = tokenizer([e["question"].lstrip() for e in examples], add_special_tokens=False, return_offsets_mapping=True)
    cut = 0
    for e, offsets in zip(examples, enc["offset_mapping"], strict=True):
        if len(offsets) > max_query_length:
            q = e["question"].lstrip()
            e["question"] = q[: offsets[max_query_length - 1][1]]
            cut += 1
    return cut


def _tokenize(tokenizer, examples, sequence_length, overlap):
    return tokenizer(
        [e["question"].lstrip() for e in examples],
        [e["context"] for e in examples],
        truncation="only_second",
        max_length=sequence_length,
        stride=overlap,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        padding=False,
    )


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
        features.append(
            dict(
                input_ids=input_ids,
                token_type_ids=enc["token_type_ids"][i],
                attention_mask=enc["attention_mask"][i],
                start_positions=start_position,
                end_positions=end_position,
            )
        )
    return features


def hf_eval_features(tokenizer, examples, sequence_length, overlap):
    """run_qa.py's `prepare_validation_features`: offsets kept for passage tokens only."""
    enc = _tokenize(tokenizer, examples, sequence_length, overlap)
    features = []
    for i, offsets in enumerate(enc["offset_mapping"]):
        sequence_ids = enc.sequence_ids(i)
        features.append(
            dict(
                input_ids=enc["input_ids"][i],
                token_type_ids=enc["token_type_ids"][i],
                attention_mask=enc["attention_mask"][i],
                example_id=examples[enc["overflow_to_sample_mapping"][i]]["id"],
                offset_mapping=[o if sequence_ids[k] == 1 else None for k, o in enumerate(offsets)],
            )
        )
    return features


def postprocess_qa_predictions(
    examples, features, all_start_logits, all_end_logits, n_best_size=20, max_answer_length=30
):
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
            start_indexes = np.argsort(start_logits)[-1 : -n_best_size - 1 : -1].tolist()
            end_indexes = np.argsort(end_logits)[-1 : -n_best_size - 1 : -1].tolist()
            for start_index in start_indexes:
                for end_index in end_indexes:
                    if (
                        start_index >= len(offset_mapping)
                        or end_index >= len(offset_mapping)
                        or offset_mapping[start_index] is None
                        or len(offset_mapping[start_index]) < 2
                        or offset_mapping[end_index] is None
                        or len(offset_mapping[end_index]) < 2
                    ):
                        continue
                    if end_index < start_index or end_index - start_index + 1 > max_answer_length:
                        continue
                    prelim_predictions.append(
                        {
                            "offsets": (offset_mapping[start_index][0], offset_mapping[end_index][1]),
                            "score": float(start_logits[start_index] + end_logits[end_index]),
                        }
                    )
        predictions = sorted(prelim_predictions, key=lambda x: x["score"], reverse=True)[:n_best_size]
        context = example["context"]
        texts = [context[p["offsets"][0] : p["offsets"][1]] for p in predictions]
        if not texts or (len(texts) == 1 and texts[0] == ""):
            texts.insert(0, "empty")
        all_predictions[example["id"]] = texts[0]
    return all_predictions


def hf_dev_predictions(model, tokenizer, dev, dev_features, n_best_size=20, max_answer_length=30):
    """HF's side of dev: `BertForQuestionAnswering` logits per window (dynamic padding), then
    run_qa.py's post-processing -> `{id: answer}`."""
    import torch

    model.eval()
    starts, ends = [None] * len(dev_features), [None] * len(dev_features)
    order = sorted(range(len(dev_features)), key=lambda i: len(dev_features[i]["input_ids"]))
    eval_collate = hf_loop.pad_collate(tokenizer.pad_token_id, ())
    with torch.no_grad():
        for b in range(0, len(order), 64):
            ids = order[b : b + 64]
            output = model(**eval_collate([dev_features[i] for i in ids]))
            for row, i in enumerate(ids):
                n = len(dev_features[i]["input_ids"])
                starts[i] = output.start_logits[row, :n].numpy()
                ends[i] = output.end_logits[row, :n].numpy()
    return postprocess_qa_predictions(dev, dev_features, starts, ends, n_best_size, max_answer_length)
