"""Chinese named-entity recognition with `BertTagger` on MSRA

Fine-tune a Chinese BERT to find people, places and organisations in People's Daily text, character by character.

What you will learn:
- reading a Chinese NER file as it is distributed: one character and its tag a line, BMES tags (`B-`, `M-`,
  `E-`, `S-`); `read_tagged` detects the scheme, keeps the file's tags (a `M-` is BIOES's `I-`) and tells you,
  in one line, about tags that continue no entity (the real MSRA file has 6) instead of refusing the file;
- `BertTagger.fit` on lists of characters and their tags: every CJK character is a word of its own;
- entity F1 by the conlleval rules, and `predict_entities` on a raw Chinese string with no spaces, whose entity
  offsets slice the string.

Default checkpoint `bert_base_chinese` (Google's Chinese BERT-base, 12 layers; downloaded from the Hugging Face
Hub on first use), with its usual fine-tuning rate 5e-5. `--model DIR` takes any checkpoint directory in HF's
layout (e.g. HFL's `chinese-roberta-wwm-ext` as downloaded, or `hf://hfl/chinese-bert-wwm-ext`).

Measured figures: nothing on the machine these were measured on can download Google's checkpoint, so they come
from the small Chinese checkpoint the benchmarks build (`benchmarks/zh_checkpoint.py`: 4 layers, hidden 256, a
character vocabulary learned from the MSRA training text, briefly pretrained with HF's masked LM). A checkpoint
this small gives figures for checking the code runs and learns, far below what Chinese BERT-base reaches
(public reports: about 95 entity F1 on MSRA's test set after several epochs).
`python examples/chinese_ner.py --model DIR --learning-rate 5e-4` with that checkpoint (`zh_mini-v2`), 20,000
sentences, 1 epoch, on a 2-core AVX2 CPU:
    trained on 20000 sentences in 248 s (80.7 sentences/s)
    dev entity F1 0.2580 (precision 0.2226, recall 0.3068); LOC 0.295, ORG 0.121, PER 0.345
    LOC 北京 [3:5], LOC 安门 [6:8], LOC 广场 [8:10], LOC 中国 [13:15], LOC 国 [15:16]   (the raw sentence below)
The same recipe through HF's `BertForTokenClassification` reached 0.268 at 0.71x our speed in that run
(`benchmarks/run.py chinese`, docs/benchmarks.md).

    python examples/chinese_ner.py                                      # bert_base_chinese, 20,000 sentences
    python examples/chinese_ner.py --model DIR --learning-rate 5e-4     # the small checkpoint's recipe
    python examples/chinese_ner.py --smoke --model DIR                  # a few sentences, a couple of steps
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_bert_zoo import BertTagger  # noqa: E402
from keras_bert_zoo.tasks.tagger.data import read_tagged  # noqa: E402
from keras_bert_zoo.tasks.tagger.metrics import entity_scores  # noqa: E402
from keras_bert_zoo.training import create_optimizer  # noqa: E402

DEFAULT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=os.path.normpath(DEFAULT_DATA), help="folder holding msra_ner/")
    parser.add_argument("--model", default="bert_base_chinese", help="preset name or checkpoint directory")
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="peak rate (bert_base_chinese: 5e-5)")
    parser.add_argument("--train-sentences", type=int, default=20_000, help="first N training sentences")
    parser.add_argument("--smoke", action="store_true", help="tiny budget: a few sentences, a couple of steps")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    folder = os.path.join(args.data_dir, "msra_ner")
    if not os.path.isdir(folder):
        raise SystemExit(f"{folder} not found: pass --data-dir pointing at the folder that holds msra_ner/")
    limit, dev_limit, batch = (16, 16, 8) if args.smoke else (args.train_sentences, None, 32)
    keras.utils.set_random_seed(0)

    # ## The data: one character a line, BMES tags
    # `北 B-LOC` then `京 E-LOC` is one place; a one-character entity is tagged `S-`. The reader detects the
    # scheme from the tags; the model is trained on the file's own tags and predicts them.
    train = read_tagged(os.path.join(folder, "train.txt"), max_examples=limit)
    dev = read_tagged(os.path.join(folder, "dev.txt"), label_names=train.label_names, max_examples=dev_limit)
    print(f"{len(train)} training sentences, {len(dev)} dev; scheme {train.scheme}; tags {train.label_names}")
    print(list(zip(train.words[0][:12], train.tags[0][:12], strict=True)))

    # ## The model: one tag per character
    # A Chinese vocabulary holds each character as a piece, so every word (character) is one piece and carries
    # its own tag; runs of Latin letters or digits ("2024", "GDP") split into pieces, the first one tagged.
    # `from_preset` takes a preset name (downloaded once) or a directory, and attaches the checkpoint's tokenizer
    # (128 pieces a window; a longer sentence is read in overlapping windows). `scheme` tells the model how its
    # labels make entities (BMES: `M-` continues one, `S-` is one by itself).
    model = BertTagger.from_preset(args.model, label_names=train.label_names, scheme=train.scheme)
    model.compile(optimizer=create_optimizer(args.learning_rate))  # warm-up 10%, linear decay, clip 1.0
    start = time.time()
    model.fit(train.words, train.tags, batch_size=batch, epochs=1, verbose=2)
    seconds = time.time() - start
    print(f"trained on {len(train)} sentences in {seconds:.0f} s ({len(train) / seconds:.1f} sentences/s)")

    # ## Entity F1 on the dev set, by the conlleval rules (an entity counts if its type and both ends are right)
    predicted = model.predict_tags(dev.words)
    scores = entity_scores(dev.tags, predicted, scheme=dev.scheme)
    types = sorted(k[3:] for k in scores if k.startswith("f1_"))
    print(
        f"dev entity F1 {scores['f1']:.4f} (precision {scores['precision']:.4f}, recall {scores['recall']:.4f}); "
        + ", ".join(f"{t} {scores['f1_' + t]:.3f}" for t in types)
    )

    # ## Raw Chinese text: no spaces, each character a word; offsets slice the string
    text = "我们在北京天安门广场见到了中国国家主席习近平。"
    for entity in model.predict_entities([text])[0]:
        piece = text[entity["start"] : entity["end"]]
        print(f"{entity['type']:>4} {entity['text']} [{entity['start']}:{entity['end']}] {piece} {entity['score']:.2f}")
    print(f"RESULT f1={scores['f1']:.4f}")


if __name__ == "__main__":
    main()
