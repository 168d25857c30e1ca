"""HF `run_ner.py`'s word handling written out, for the HF sides of conll, fit_speed and finetune_speed: word pieces
labelled at the first piece of each word (-100 elsewhere), and word-level tags read back from the first pieces.
Not a benchmark (`run.py conll` is); the PyTorch processes import it without TensorFlow.
"""


# --- HF transformers (PyTorch) ---------------------------------------------------------------------
def encode_words(tokenizer, words, tags, label_index, max_length):
    """HF run_ner.py's tokenize_and_align_labels: first piece labelled, -100 elsewhere."""
    enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
    full = tokenizer(words, is_split_into_words=True, truncation=False)
    features = []
    truncated_sentences = unseen_words = truncated_words = 0
    for i, sentence in enumerate(words):
        word_ids = enc.word_ids(i)
        labels, previous = [], None
        for w in word_ids:
            if w is None or w == previous:
                labels.append(-100)
            else:
                labels.append(label_index[tags[i][w]] if tags is not None else 0)
            previous = w
        seen = {w for w in word_ids if w is not None}
        seen_full = {w for w in full.word_ids(i) if w is not None}
        unseen_words += len(sentence) - len(seen)
        truncated_words += len(seen_full - seen)
        truncated_sentences += int(len(full["input_ids"][i]) > max_length)
        features.append(
            dict(
                input_ids=enc["input_ids"][i],
                token_type_ids=enc["token_type_ids"][i],
                attention_mask=enc["attention_mask"][i],
                labels=labels,
                word_ids=word_ids,
            )
        )
    counts = dict(
        truncated_sentences=truncated_sentences,
        words_unseen=unseen_words,
        words_cut_by_truncation=truncated_words,
        words_without_pieces=unseen_words - truncated_words,
    )
    return features, counts


def predict_words(model, collate, features, words, names, batch_size=64):
    """Word-level tags of `words` from `BertForTokenClassification` logits at the first piece of each word
    (`features` from `encode_words`, run shortest first); words truncation hides stay "O"."""
    import torch

    predicted = [["O"] * len(s) for s in words]
    order = sorted(range(len(features)), key=lambda i: len(features[i]["input_ids"]))
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            ids = order[start : start + batch_size]
            batch = collate([{k: v for k, v in features[i].items() if k != "word_ids"} for i in ids])
            batch.pop("labels")
            argmax = model(**batch).logits.argmax(-1).numpy()
            for row, i in enumerate(ids):
                previous = None
                for position, w in enumerate(features[i]["word_ids"]):
                    if w is not None and w != previous:
                        predicted[i][w] = names[argmax[row, position]]
                    previous = w
    return predicted
