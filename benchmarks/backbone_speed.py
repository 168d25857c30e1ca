"""Training and inference throughput of the BERT backbone, ours vs KerasHub vs HF.

`bert_mini_uncased` shape (4 layers, hidden 256, 4 heads, FFN 1024), batch 32 x 128,
random token ids, a 2-class head on the pooled output, AdamW. Keras models train with
`model.fit`; HF trains with a plain PyTorch loop (AdamW + global clipping), eager.

The machine is shared and noisy, so systems are measured in interleaved rounds and
each one's median is reported, with ratios to ours.

Usage:
    python benchmarks/backbone_speed.py [--rounds 3] [--steps 6] [--systems ours_nojit,ours,keras_hub,...]
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

BATCH, SEQ = 32, 128
SHAPE = dict(vocabulary_size=30522, num_layers=4, num_heads=4, hidden_dim=256, intermediate_dim=1024,
             max_sequence_length=512)


def random_batch(seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(1000, SHAPE["vocabulary_size"], (BATCH, SEQ)).astype("int32"),
        "segment_ids": np.zeros((BATCH, SEQ), "int32"),
        "padding_mask": np.ones((BATCH, SEQ), "int32"),
    }, rng.integers(0, 2, BATCH).astype("int32")


class _BatchTimer:
    """Keras callback recording the wall time at the end of every training batch."""

    def __new__(cls):
        import keras

        class Timer(keras.callbacks.Callback):
            def __init__(self):
                super().__init__()
                self.times = []

            def on_train_batch_end(self, batch, logs=None):
                self.times.append(time.perf_counter())

        return Timer()


class KerasSystem:
    def __init__(self, name, make_backbone, jit_compile, policy="float32"):
        import keras
        import tensorflow as tf

        from keras_bert_zoo.training import create_optimizer

        self.name = name
        keras.config.set_dtype_policy(policy)
        backbone = make_backbone()
        inputs = {k: keras.Input((SEQ,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
        logits = keras.layers.Dense(2, dtype="float32")(backbone(inputs)["pooled_output"])
        self.model = keras.Model(inputs, logits)
        keras.config.set_dtype_policy("float32")
        self.model.compile(
            optimizer=create_optimizer(5e-5, total_steps=10_000),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit_compile,
        )
        x, y = random_batch()
        self.x, self.y = x, y
        self.dataset = tf.data.Dataset.from_tensors((x, y)).repeat()
        self.model.fit(self.dataset, steps_per_epoch=2, epochs=1, verbose=0)  # compile / trace
        self.model.predict_on_batch(x)

    def train_tokens_per_second(self, steps):
        timer = _BatchTimer()
        self.model.fit(self.dataset, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[timer])
        return steps * BATCH * SEQ / (timer.times[-1] - timer.times[0])

    def infer_tokens_per_second(self, steps):
        start = time.perf_counter()
        for _ in range(steps):
            out = self.model.predict_on_batch(self.x)
        np.asarray(out)
        return steps * BATCH * SEQ / (time.perf_counter() - start)


class HFSystem:
    def __init__(self):
        import torch
        import transformers

        torch.set_num_threads(os.cpu_count())
        self.name = "HF transformers (PyTorch eager)"
        self.torch = torch
        config = transformers.BertConfig(
            vocab_size=SHAPE["vocabulary_size"], hidden_size=SHAPE["hidden_dim"],
            num_hidden_layers=SHAPE["num_layers"], num_attention_heads=SHAPE["num_heads"],
            intermediate_size=SHAPE["intermediate_dim"], num_labels=2)
        self.model = transformers.BertForSequenceClassification(config)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=5e-5, weight_decay=0.01, eps=1e-6)
        x, y = random_batch()
        self.batch = dict(input_ids=torch.tensor(x["token_ids"]).long(),
                          token_type_ids=torch.tensor(x["segment_ids"]).long(),
                          attention_mask=torch.tensor(x["padding_mask"]).long())
        self.labels = torch.tensor(y).long()
        self.train_tokens_per_second(1)
        self.infer_tokens_per_second(1)

    def train_tokens_per_second(self, steps):
        self.model.train()
        start = time.perf_counter()
        for _ in range(steps):
            loss = self.model(**self.batch, labels=self.labels).loss
            loss.backward()
            self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad()
        return steps * BATCH * SEQ / (time.perf_counter() - start)

    def infer_tokens_per_second(self, steps):
        self.model.eval()
        start = time.perf_counter()
        with self.torch.inference_mode():
            for _ in range(steps):
                self.model(**self.batch).logits.numpy()
        return steps * BATCH * SEQ / (time.perf_counter() - start)


def build_systems(names):
    import keras_hub

    from keras_bert_zoo import BertBackbone

    def ours():
        return BertBackbone.from_preset("bert_mini_uncased")

    def theirs():
        return keras_hub.models.BertBackbone(**SHAPE)

    makers = {
        "ours": lambda: KerasSystem("keras-bert-zoo (XLA)", ours, jit_compile=True),
        "ours_nojit": lambda: KerasSystem("keras-bert-zoo (no XLA)", ours, jit_compile=False),
        "ours_bf16": lambda: KerasSystem("keras-bert-zoo (XLA, bf16)", ours, True, "mixed_bfloat16"),
        "keras_hub": lambda: KerasSystem("KerasHub BertBackbone (XLA)", theirs, jit_compile=True),
        "keras_hub_nojit": lambda: KerasSystem("KerasHub BertBackbone (no XLA)", theirs, jit_compile=False),
        "hf": HFSystem,
    }
    return [makers[n]() for n in names]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6, help="batches per measurement")
    parser.add_argument("--systems", default="ours_nojit,ours,keras_hub,keras_hub_nojit,hf",
                        help="first is the reference of the ratios; both jit settings of each Keras model")
    args = parser.parse_args()
    systems = build_systems(args.systems.split(","))
    train = {s.name: [] for s in systems}
    infer = {s.name: [] for s in systems}
    for r in range(args.rounds):
        for s in systems:
            train[s.name].append(s.train_tokens_per_second(args.steps))
            infer[s.name].append(s.infer_tokens_per_second(args.steps))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    ref = systems[0].name
    tr_ref, in_ref = statistics.median(train[ref]), statistics.median(infer[ref])
    print(f"\nbert_mini shape, batch {BATCH} x {SEQ}, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    print(f"{'system':36s} {'train tok/s':>12s} {'ours/this':>10s} {'infer tok/s':>12s} {'ours/this':>10s}")
    for s in systems:
        t, i = statistics.median(train[s.name]), statistics.median(infer[s.name])
        print(f"{s.name:36s} {t:12,.0f} {tr_ref / t:10.2f} {i:12,.0f} {in_ref / i:10.2f}")


if __name__ == "__main__":
    main()
