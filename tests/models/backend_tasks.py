"""The script `test_backends.py` runs under each Keras backend (`tests.helpers.run_on_backend`).

For every task model saved by TensorFlow under `ARGS["presets"]`: `from_preset`, `predict`
on raw inputs (before training), `evaluate` / `fit` / `evaluate` on raw inputs (the loss
before and after), `predict` again, and `save_to_preset` under `ARGS["out"]`. Then the
TensorFlow-only entry points, each expected to refuse with a one-line `UsageError`.
Shared with the test: the raw inputs (`INPUTS`), so both sides read the same examples.
"""

__all__ = ["INPUTS", "SCRIPT"]

TEXTS = [
    "a charming film .",
    "dull",
    "the plot is thin but the acting is fine and the score is lovely",
    "it never finds its footing",
    "a triumph",
    "one of the worst films of the year , badly written",
]
INPUTS = {
    "texts": TEXTS,
    "labels": [1, 0, 1, 0, 1, 0],
    "words": [t.split() for t in TEXTS],
    "tags": [[(i + j) % 3 for j in range(len(t.split()))] for i, t in enumerate(TEXTS)],
    "contexts": ["a quiet film", "the sun rose", "he sat down"],
    "choices": [["and it was good", "bad"], ["then it set", "and rained hard all day"], ["and read", "the moon"]],
    "choice_labels": [0, 1, 1],
    "questions": ["who sat down ?", "what rose ?"],
    "passages": ["he sat down on the chair and read a book by the window", "the sun rose over the quiet hills"],
    "answer_spans": [[0, 2], [4, 13]],  # character offsets of "he", "sun rose"
    "masked": ["a [MASK] film .", "the plot is [MASK] but the acting is fine"],
}

SCRIPT = r'''
import tensorflow as tf
from keras_bert_zoo.models.precision import with_precision
from keras_bert_zoo import (BertClassifier, BertMultipleChoice, BertPretrainer, BertSentenceEmbedder, BertSpanQA,
                            BertTagger, masked_lm_dataset)
from keras_bert_zoo.tasks.span_qa.preprocessor import make_qa_dataset, make_qa_windows

presets, out, x = ARGS["presets"], ARGS["out"], ARGS["inputs"]
results = {}


def train(name, model, fit_x, fit_y, eval_x, eval_y, epochs=3, **fit_kwargs):
    """Loss on raw inputs before and after a short `fit` (SGD, no dropout: deterministic)."""
    model.compile(optimizer=keras.optimizers.SGD(0.5), **({"loss": "mse"} if name == "embedder" else {}))
    before = model.evaluate(eval_x, eval_y, verbose=0, return_dict=True)["loss"]
    model.fit(fit_x, fit_y, epochs=epochs, verbose=0, **fit_kwargs)
    results[name + "_loss"] = [before, model.evaluate(eval_x, eval_y, verbose=0, return_dict=True)["loss"]]


def finish(name, model, predict):
    results[name + "_before"] = before[name]
    results[name + "_after"] = predict(model)
    model.save_to_preset(os.path.join(out, name))


predicts = {
    "classifier": lambda m: m.predict(x["texts"], batch_size=4, verbose=0),
    "tagger": lambda m: m.predict(x["words"], batch_size=4, verbose=0),
    "choice": lambda m: m.predict((x["contexts"], x["choices"]), batch_size=2, verbose=0),
    "embedder": lambda m: m.predict(x["texts"], batch_size=4, verbose=0),
    "span_qa": lambda m: np.array([[a["start"], a["end"], a["score"]] for a in
                                   m.predict_answers(x["questions"], x["passages"], n_best=3)]),
    "pretrainer": lambda m: np.array([[p for _, p in slot] for text in m.fill_mask(x["masked"], top_k=3)
                                      for slot in text]),
}
classes = {"classifier": BertClassifier, "tagger": BertTagger, "choice": BertMultipleChoice,
           "embedder": BertSentenceEmbedder, "span_qa": BertSpanQA, "pretrainer": BertPretrainer}
models = {name: cls.from_preset(os.path.join(presets, name)) for name, cls in classes.items()}
before = {name: predicts[name](model) for name, model in models.items()}
for name in ARGS["variants"]:  # the embedder's other pooling modes
    results[name] = predicts["embedder"](BertSentenceEmbedder.from_preset(os.path.join(presets, name)))
for name in ("classifier", "embedder"):  # bfloat16 twins, before training
    twin = with_precision(models[name], "bf16")
    results[name + "_bf16"] = predicts[name](twin)
    results[name + "_bf16_dtype"] = np.array(twin.backbone.get_layer("encoder_layer_0").compute_dtype)

m = models["classifier"]  # LoRA: adapters and head train, the rest stays
frozen = [keras.ops.convert_to_numpy(w) for w in m.backbone.non_trainable_weights]
results["classifier_trainable"] = sum(int(np.prod(w.shape)) for w in m.trainable_weights)
train("classifier", m, x["texts"], x["labels"], x["texts"], x["labels"], batch_size=3, shuffle=False)
results["classifier_frozen_moved"] = max(float(np.abs(keras.ops.convert_to_numpy(w) - v).max())
                                         for w, v in zip(m.backbone.non_trainable_weights, frozen, strict=True))
results["classifier_labels"] = np.array(m.predict_labels(x["texts"])[0])
finish("classifier", m, predicts["classifier"])
m = models["tagger"]
train("tagger", m, x["words"], x["tags"], x["words"], x["tags"], batch_size=3, shuffle=False)
results["tagger_tags"] = np.array(sum(m.predict_tags(x["words"]), []))
finish("tagger", m, predicts["tagger"])
m = models["choice"]
pairs = (x["contexts"], x["choices"])
train("choice", m, pairs, x["choice_labels"], pairs, x["choice_labels"], batch_size=3, shuffle=False)
finish("choice", m, predicts["choice"])
m = models["embedder"]
targets = np.eye(8, dtype="float32")[np.arange(len(x["texts"])) % 8]
train("embedder", m, x["texts"], targets, x["texts"], targets, batch_size=3, shuffle=False)
finish("embedder", m, predicts["embedder"])
m = models["span_qa"]  # raw questions and passages: predict_answers; fit takes the windows' ints
spans = np.array(x["answer_spans"])
windows = make_qa_windows(m.preprocessor, x["questions"], x["passages"], spans[:, 0], spans[:, 1])
train("span_qa", m, make_qa_dataset(windows, batch_size=2, training=True, seed=0), None,
      make_qa_dataset(windows, batch_size=2, training=True, seed=0), None)
finish("span_qa", m, predicts["span_qa"])
m = models["pretrainer"]  # raw texts -> masked batches (tf.data): one batch, fixed, for a loss that can drop
batch_x, batch_y = next(iter(masked_lm_dataset(m.preprocessor, x["texts"], batch_size=6, seed=0)))
batch_x, batch_y = ({k: v.numpy() for k, v in d.items()} for d in (batch_x, batch_y))
train("pretrainer", m, batch_x, batch_y, batch_x, batch_y, batch_size=6, shuffle=False)
finish("pretrainer", m, predicts["pretrainer"])

# TensorFlow-only entry points: each refuses with a UsageError naming the backend.
from keras_bert_zoo import export_saved_model, finetune, pretrain
from keras_bert_zoo.errors import UsageError
from keras_bert_zoo.training import make_strategy

refusals = {
    "export_saved_model": lambda: export_saved_model(models["classifier"], os.path.join(out, "served")),
    "make_strategy": lambda: make_strategy("mirrored"),
    "finetune": lambda: finetune("classify", os.path.join(out, "classifier"), "train.tsv", "dev.tsv",
                                 out=os.path.join(out, "job")),
    "pretrain": lambda: pretrain("corpus.txt", os.path.join(out, "pretrain_job"), preset="bert_tiny_uncased"),
}
messages = []
for what, call in refusals.items():
    try:
        call()
        messages.append(f"{what}: no error")
    except UsageError as e:
        messages.append(f"{what}: {e}")
results["refusals"] = np.array(messages)
save(**results)
'''
