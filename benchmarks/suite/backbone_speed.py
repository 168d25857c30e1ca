"""Training and inference throughput of the BERT backbone, ours vs KerasHub vs HF, and the
model FLOP utilisation (MFU) of each against this machine's matmul peak measured in the same run.

Any preset shape (`--preset bert_mini_uncased`, `bert_base_uncased`, ...), batch and sequence
length; random token ids, a 2-class head on the pooled output, AdamW. Keras models train with
`model.fit`; HF trains with a plain PyTorch loop (AdamW + global clipping), eager.

Systems are measured in interleaved rounds, each one's median reported with ratios to the first
system; the matmul peak (a large `tf.matmul`, float32 and bfloat16, best of each round) in the same rounds.

Model FLOPs (what MFU counts; matmuls only, the convention of the PaLM/Megatron papers), per token,
L layers, width h, FFN width i, sequence s:

    forward  = L * (8 h^2 + 4 h i + 4 s h)   [Q,K,V,output projections 4 x 2h^2; FFN 2 x 2hi;
                                               scores QK^T 2sh and probabilities x V 2sh]
             + 2 h^2 / s                      [pooler, one position per sequence]
    training = 3 x forward                    [backward = 2 x forward: input and weight gradients]

Embedding lookups, LayerNorm, softmax, GELU, dropout and the optimizer are not counted (they are
memory-bound and small in FLOPs). MFU = achieved model FLOP/s / measured matmul peak FLOP/s.

    python benchmarks/run.py backbone_speed --systems ours_nojit,ours_bf16   # bf16 vs float32 (no XLA)
    python benchmarks/run.py backbone_speed --preset bert_tiny_uncased --batch 2 --seq 16 --rounds 1 --steps 1 \
        --systems ours_nojit,keras_hub_nojit,hf --no-summary                 # smoke
"""

import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import common  # noqa: E402
import numpy as np  # noqa: E402
from common import git_commit, now, uptime, versions, write_json  # noqa: E402
from suite import backbone_speed_report  # noqa: E402


def shape_of(preset, layers=None):
    """The backbone constructor arguments of a preset name (no TensorFlow needed); `layers`
    keeps the width and takes that many layers."""
    return {**common.lib("backbone_config")(preset), **({"num_layers": layers} if layers else {})}


def random_batch(batch, seq, vocabulary_size, seed=0):
    rng = np.random.default_rng(seed)
    return {
        "token_ids": rng.integers(1000, vocabulary_size, (batch, seq)).astype("int32"),
        "segment_ids": np.zeros((batch, seq), "int32"),
        "padding_mask": np.ones((batch, seq), "int32"),
    }, rng.integers(0, 2, batch).astype("int32")


class _BatchTimer:  # a Keras callback recording the wall time at the end of every training batch
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
    """A Keras backbone + 2-class head, compiled with `jit_compile` under dtype `policy`.

    `grappler_bf16`: float32 model, and TensorFlow's graph rewrite
    `auto_mixed_precision_onednn_bfloat16` turns its ops to bfloat16 (non-XLA only)."""

    def __init__(
        self,
        name,
        make_backbone,
        jit_compile,
        policy="float32",
        batch=32,
        seq=128,
        vocabulary_size=30522,
        grappler_bf16=False,
    ):
        import keras
        import tensorflow as tf

        create_optimizer = common.lib("create_optimizer")
        self.name, self.batch, self.seq, self.policy = name, batch, seq, policy
        self.grappler_bf16 = grappler_bf16
        keras.config.set_dtype_policy(policy)
        backbone = make_backbone()
        inputs = {k: keras.Input((seq,), dtype="int32", name=k) for k in ("token_ids", "segment_ids", "padding_mask")}
        logits = keras.layers.Dense(2, dtype="float32")(backbone(inputs)["pooled_output"])
        self.model = keras.Model(inputs, logits)
        keras.config.set_dtype_policy("float32")
        self.model.compile(
            optimizer=create_optimizer(5e-5, total_steps=10_000),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            jit_compile=jit_compile,
        )
        x, y = random_batch(batch, seq, vocabulary_size)
        self.x, self.y = x, y
        self.dataset = tf.data.Dataset.from_tensors((x, y)).repeat()
        with self._rewrite():  # functions are optimised when first run
            self.model.fit(self.dataset, steps_per_epoch=1, epochs=1, verbose=0)  # compile / trace
            self.model.predict_on_batch(x)

    def _rewrite(self):
        import contextlib

        import tensorflow as tf

        if not self.grappler_bf16:
            return contextlib.nullcontext()

        @contextlib.contextmanager
        def on():
            tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": True})
            try:
                yield
            finally:
                tf.config.optimizer.set_experimental_options({"auto_mixed_precision_onednn_bfloat16": False})

        return on()

    def train_tokens_per_second(self, steps):
        timer = _BatchTimer()
        cpu = time.process_time()
        self.model.fit(self.dataset, steps_per_epoch=steps + 1, epochs=1, verbose=0, callbacks=[timer])
        self.train_tokens_per_cpu_second = (steps + 1) * self.batch * self.seq / (time.process_time() - cpu)
        return steps * self.batch * self.seq / (timer.times[-1] - timer.times[0])

    def infer_tokens_per_second(self, steps):
        start = time.perf_counter()
        for _ in range(steps):
            out = self.model.predict_on_batch(self.x)
        np.asarray(out)
        return steps * self.batch * self.seq / (time.perf_counter() - start)


class HFSystem:
    def __init__(self, shape, batch=32, seq=128):
        import torch
        import transformers

        torch.set_num_threads(os.cpu_count())
        self.name, self.batch, self.seq, self.policy = "HF transformers (PyTorch eager)", batch, seq, "float32"
        self.torch = torch
        config = transformers.BertConfig(
            vocab_size=shape["vocabulary_size"],
            hidden_size=shape["hidden_dim"],
            num_hidden_layers=shape["num_layers"],
            num_attention_heads=shape["num_heads"],
            intermediate_size=shape["intermediate_dim"],
            max_position_embeddings=shape["max_sequence_length"],
            num_labels=2,
        )
        self.model = transformers.BertForSequenceClassification(config)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=5e-5, weight_decay=0.01, eps=1e-6)
        x, y = random_batch(batch, seq, shape["vocabulary_size"])
        self.batch_inputs = dict(
            input_ids=torch.tensor(x["token_ids"]).long(),
            token_type_ids=torch.tensor(x["segment_ids"]).long(),
            attention_mask=torch.tensor(x["padding_mask"]).long(),
        )
        self.labels = torch.tensor(y).long()
        self.train_tokens_per_second(1)
        self.infer_tokens_per_second(1)

    def train_tokens_per_second(self, steps):
        self.model.train()
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(steps):
            loss = self.model(**self.batch_inputs, labels=self.labels).loss
            loss.backward()
            self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.optimizer.zero_grad()
        self.train_tokens_per_cpu_second = steps * self.batch * self.seq / (time.process_time() - cpu)
        return steps * self.batch * self.seq / (time.perf_counter() - start)

    def infer_tokens_per_second(self, steps):
        self.model.eval()
        start = time.perf_counter()
        with self.torch.inference_mode():
            for _ in range(steps):
                self.model(**self.batch_inputs).logits.numpy()
        return steps * self.batch * self.seq / (time.perf_counter() - start)


def _hf_worker(conn, shape, batch, seq):
    # Without it, PyTorch's OpenMP threads spin at every barrier and, on this shared 2-core
    # machine, HF trained 20-40x slower than with it (1,613 vs 36 tokens/s, bert_tiny, load 8).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    system = HFSystem(shape, batch, seq)
    conn.send(system.name)
    while True:
        command = conn.recv()
        if command is None:
            return
        what, steps = command
        rate = getattr(system, f"{what}_tokens_per_second")(steps)
        conn.send((rate, getattr(system, "train_tokens_per_cpu_second", None)))


class HFProcess:
    """`HFSystem` in its own process (spawned, no TensorFlow in it, `OMP_WAIT_POLICY=PASSIVE`),
    measured in turn like the others."""

    def __init__(self, shape, batch=32, seq=128):
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_hf_worker, args=(child, shape, batch, seq), daemon=True)
        self.process.start()
        self.name = self.conn.recv()
        self.batch, self.seq, self.policy = batch, seq, "float32"

    def train_tokens_per_second(self, steps):
        self.conn.send(("train", steps))
        rate, self.train_tokens_per_cpu_second = self.conn.recv()
        return rate

    def infer_tokens_per_second(self, steps):
        self.conn.send(("infer", steps))
        return self.conn.recv()[0]

    def close(self):
        self.conn.send(None)
        self.process.join(timeout=60)


def matmul_peak(dtype, n=2048, repeats=4):
    """FLOP/s of an `n x n` by `n x n` `tf.matmul` (oneDNN, no XLA), best of `repeats`."""
    import tensorflow as tf

    a = tf.cast(tf.random.stateless_normal((n, n), seed=(1, 2)), dtype)
    b = tf.cast(tf.random.stateless_normal((n, n), seed=(3, 4)), dtype)
    f = tf.function(tf.matmul)
    f(a, b).numpy()
    return max(2 * n**3 / common.timed(lambda: f(a, b).numpy())[1] for _ in range(repeats))


SYSTEMS = {
    # name: (label, library, jit_compile, policy, grappler_bf16)
    "ours": ("keras-bert-zoo (XLA)", "ours", True, "float32", False),
    "ours_nojit": ("keras-bert-zoo (no XLA)", "ours", False, "float32", False),
    "ours_bf16": ("keras-bert-zoo (no XLA, mixed_bfloat16)", "ours", False, "mixed_bfloat16", False),
    "ours_bf16_xla": ("keras-bert-zoo (XLA, mixed_bfloat16)", "ours", True, "mixed_bfloat16", False),
    "ours_bf16_vars": ("keras-bert-zoo (no XLA, bfloat16 variables too)", "ours", False, "bfloat16", False),
    "ours_grappler_bf16": ("keras-bert-zoo (no XLA, float32 + grappler bf16 rewrite)", "ours", False, "float32", True),
    "keras_hub": ("KerasHub BertBackbone (XLA)", "keras_hub", True, "float32", False),
    "keras_hub_nojit": ("KerasHub BertBackbone (no XLA)", "keras_hub", False, "float32", False),
    "keras_hub_bf16": ("KerasHub BertBackbone (no XLA, mixed_bfloat16)", "keras_hub", False, "mixed_bfloat16", False),
}


def build_systems(names, shape, batch, seq):
    def maker(library):
        if library == "ours":
            from keras_bert_zoo import BertBackbone

            return lambda: BertBackbone(**shape)
        import keras_hub

        return lambda: keras_hub.models.BertBackbone(**shape)

    systems = []
    for n in names:
        if n == "hf":
            systems.append(HFProcess(shape, batch, seq))
            continue
        if n not in SYSTEMS:
            raise SystemExit(f"--systems: unknown {n!r}; choose from {', '.join([*SYSTEMS, 'hf'])}")
        label, library, jit, policy, grappler = SYSTEMS[n]
        systems.append(
            KerasSystem(
                label, maker(library), jit, policy, batch, seq, shape["vocabulary_size"], grappler_bf16=grappler
            )
        )
    for s, n in zip(systems, names, strict=True):
        s.key = n
    return systems


def measure(systems, rounds, steps, infer_steps=None, log=print):
    """Interleaved rounds: each system's train and inference tokens/s per round, and the matmul
    peaks (float32, bfloat16) measured between them in the same rounds. Also tokens per
    CPU-second of training (the fourth item): on a machine shared with other jobs the
    wall time includes time the process waited for a core; its CPU time does not."""
    train = {s.name: [] for s in systems}
    infer = {s.name: [] for s in systems}
    train_cpu = {s.name: [] for s in systems}
    peaks = {"float32": [], "bfloat16": []}
    for r in range(rounds):
        for dtype in peaks:
            peaks[dtype].append(matmul_peak(dtype))
        for s in systems:
            train[s.name].append(s.train_tokens_per_second(steps))
            train_cpu[s.name].append(s.train_tokens_per_cpu_second)
            if infer_steps:
                infer[s.name].append(s.infer_tokens_per_second(infer_steps))
        log(f"round {r + 1}/{rounds} done ({uptime()})")
    return train, infer, peaks, train_cpu  # train_cpu: tokens per CPU-second (all threads of the process)


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="run.py backbone_speed", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--preset", default="bert_mini_uncased")
    parser.add_argument("--layers", type=int, default=None, help="the preset's width with this many layers")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=6, help="batches per measurement")
    parser.add_argument(
        "--systems",
        default="ours_nojit,ours,keras_hub,keras_hub_nojit,hf",
        help="first is the reference of the ratios; both jit settings of each Keras model",
    )
    parser.add_argument("--json", default=None, help="detailed results (default /tmp/backbone_speed_PRESET_SEQ.json)")
    parser.add_argument("--no-summary", action="store_true", help="do not write the benchmarks/results/ record")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    started, load_before, uptime_before, machine = now(), os.getloadavg(), uptime(), common.machine_line()
    command = common.command_line("backbone_speed", argv)
    shape = shape_of(args.preset, args.layers)
    names = args.systems.split(",")
    systems = build_systems(names, shape, args.batch, args.seq)
    train, infer, peaks, train_cpu = measure(systems, args.rounds, args.steps, args.steps)
    rows, peak = backbone_speed_report.summarise(
        systems,
        train,
        infer,
        peaks,
        backbone_speed_report.train_flops_per_token(shape, args.seq),
        backbone_speed_report.forward_flops_per_token(shape, args.seq),
        train_cpu,
    )
    title = (
        f"{args.preset}{f' ({args.layers} layers)' if args.layers else ''}, batch {args.batch} x {args.seq}, {os.cpu_count()} cores; medians of {args.rounds} "
        f"rounds of {args.steps} steps; load before: {uptime_before}; after: {uptime()}"
    )
    backbone_speed_report.print_table(rows, peak, title)
    path = args.json or f"/tmp/backbone_speed_{args.preset}_{args.seq}.json"
    write_json(
        path,
        {
            "command": command,
            "started": started,
            "ended": now(),
            "git_commit": git_commit(),
            "uptime_before": uptime_before,
            "uptime_after": uptime(),
            "preset": args.preset,
            "shape": shape,
            "batch": args.batch,
            "seq": args.seq,
            "rounds": args.rounds,
            "steps": args.steps,
            "train_flops_per_token": backbone_speed_report.train_flops_per_token(shape, args.seq),
            "forward_flops_per_token": backbone_speed_report.forward_flops_per_token(shape, args.seq),
            "matmul_peak_flops": peak,
            "matmul_peak_rounds": peaks,
            "rows": rows,
            "versions": versions("tensorflow", "keras", "keras-hub", "torch", "transformers"),
        },
    )
    print(f"results: {path}")
    for s in systems:
        if isinstance(s, HFProcess):
            s.close()
    if not args.no_summary:
        # A run with --layers is its own record (it must not replace the full model's).
        layers = f" {args.layers}layer{'s' if args.layers != 1 else ''}" if args.layers else ""
        out = backbone_speed_report.record_rows(rows, f"{args.preset}{layers}", args.batch, args.seq)
        name = f"backbone_speed_{args.preset}{layers.replace(' ', '_')}_{args.seq}"
        print(
            common.write_result(
                name,
                out,
                command,
                source=path,
                started=started,
                machine_info=machine,
                load=[load_before[0], os.getloadavg()[0]],
            )
        )


if __name__ == "__main__":
    main()
