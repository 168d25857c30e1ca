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
- `keras_hub`: `keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=
  BertTextClassifierPreprocessor(BertTokenizer(vocab.txt), sequence_length=128))`, its
  `compile()` defaults, `fit(texts, labels, batch_size=32)`; the backbone has MiniLM's shape
  (6 layers, hidden 384, 12 heads, FFN 1536) with random weights (KerasHub reads no local HF
  directory offline): the same compute, so its speed, not its accuracy, is reported;
- `hf` / `hf1`: `AutoTokenizer(truncation, max_length=128)` + `DataCollatorWithPadding` +
  `DataLoader(shuffle=True)` + torch `AdamW` with linear warm-up/decay and clipping at 1.0
  (what `Trainer` does), at 2 threads (`hf`) and 1 thread (`hf1`, often faster on this shared
  2-core machine); then the dev set through the tokenizer + model under `torch.no_grad`
  (batch 64, dynamic padding), its time the reference for `predict` and `evaluate`.

Each system runs in its own process (nothing else of the benchmark loaded), rounds
interleaved (ours, keras_hub, hf, hf1, ours, ...) so machine load hits all alike; ratios are
medians of per-round ratios, of wall time and of the process's CPU time (the work done, which
other processes on a loaded machine disturb less). Sentences/s count examples, never padded tokens.
`ours_bf16` / `hf_bf16` are each side at its best on a bf16 host: `keras.mixed_precision.
set_global_policy("mixed_bfloat16")` before the model is built, and `torch.autocast("cpu",
dtype=torch.bfloat16)` around HF's forward passes (`--reference ours_bf16` reports ratios to it);
`ours_jax_bf16` / `ours_torch_bf16` are `ours_bf16` on the JAX / torch backends (the record's rows
name each system's backend and precision). `SYSTEM@REF` (say `ours@f92a29f`) is the same script on the
package as it was at git `REF` (exported once into the temp directory and put first on the worker's
PYTHONPATH; its data come read by today's package): before and after a change, in one run.

    python benchmarks/run.py fit_speed --task classify --rounds 2
    python benchmarks/run.py fit_speed --task tag --rounds 2 --examples 800
    python benchmarks/run.py fit_speed --task classify --systems ours,ours_bucketed --seeds 0,1,2   # accuracy
    python benchmarks/run.py fit_speed --task classify --systems ours_jax,ours_torch,ours_jax_bf16,ours_torch_bf16
    python benchmarks/run.py fit_speed --systems ours,ours@f92a29f --rounds 3   # float32 now vs at a commit
    python benchmarks/run.py fit_speed --shape bert_base --systems ours,hf,ours_bf16,hf_bf16   # BERT-base, random
    python benchmarks/run.py fit_speed --systems ours,ours@f92a29f --predict-batch 32 --name fit_speed_first_call
    python benchmarks/run.py fit_speed --smoke    # every system on 64 examples, 1 round, no record: a check

Writes `benchmarks/results/fit_speed_TASK.HOSTKIND.json` (rows + every run) and prints a markdown table.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import common
from suite import fit_speed_systems
from suite.fit_speed_systems import BATCH, FILES, KERAS_BACKENDS, LENGTH, READ, SYSTEMS, read

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # torch's spinning OpenMP workers, see finetune_speed.py


def dump_data(args):
    """Writes what `read` returns for the training and dev files (today's package reads them) to `args.dump_data`."""
    train, dev = FILES[args.task]
    common.write_json(
        args.dump_data, {train: read(args.task, train, args.examples), dev: read(args.task, dev, args.dev_examples)}
    )


def worker(args):
    fit_speed_systems.DEV_EXAMPLES = args.dev_examples
    fit_speed_systems.PREDICT_BATCH, fit_speed_systems.SHAPE = args.predict_batch, args.shape
    if args.data:
        READ.update(common.read_json(args.data))
    load = os.getloadavg()
    result = SYSTEMS[args.worker.partition("@")[0]](args.task, args.examples, args.seed)
    result.update(system=args.worker, seed=args.seed, loadavg_before=list(load), loadavg_after=list(os.getloadavg()))
    result["package"] = (
        os.path.dirname(sys.modules["keras_bert_zoo"].__file__) if "keras_bert_zoo" in sys.modules else None
    )
    if "keras" in sys.modules:
        result["keras_backend"] = sys.modules["keras"].backend.backend()
    print("RESULT " + json.dumps(result), flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run.py fit_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(FILES), default="classify")
    parser.add_argument("--systems", default="ours,keras_hub,hf,hf1", help=f"comma-separated, of {', '.join(SYSTEMS)}")
    parser.add_argument("--reference", default="ours", help="the system whose speed-ups over the others are reported")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--examples", type=int, default=1600)
    parser.add_argument("--dev-examples", type=int, default=None, help="the first N dev examples (default: all)")
    parser.add_argument("--name", default=None, help="the record's name (default fit_speed_TASK[_SHAPE])")
    parser.add_argument("--predict-batch", type=int, default=64, help="predict's batch (its first and second call)")
    parser.add_argument(
        "--shape",
        choices=["minilm", *fit_speed_systems.SHAPES],
        default="minilm",
        help="minilm: the all-MiniLM-L6-v2 checkpoint; bert_base: random weights of BERT-base's shape (speed only)",
    )
    parser.add_argument("--seeds", default="0", help="comma-separated; each round uses the next seed")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every system (or --systems) on 64 training and 64 dev "
        "examples, 1 round, no record: checks that each runs",
    )
    parser.add_argument("--table", metavar="RUN", help="the table of a run's detail JSON (its `runs`), re-summarized")
    parser.add_argument("--record", action="store_true", help="with --table: write its rows as the current record")
    parser.add_argument("--worker", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", default=None, help=argparse.SUPPRESS)  # a worker's examples, read by today's package
    parser.add_argument("--dump-data", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.table:
        return table(args.table, args.record)
    if args.dump_data:
        return dump_data(args)
    if args.worker:  # first, before anything imports keras
        os.environ["KERAS_BACKEND"] = KERAS_BACKENDS.get(args.worker.partition("@")[0], "tensorflow")
        return worker(args)
    if args.smoke:
        args.examples, args.dev_examples, args.rounds = 64, 64, 1
        args.systems = args.systems if "--systems" in (sys.argv if argv is None else argv) else ",".join(SYSTEMS)
    measure(args, argv)


def workers(args):
    """The systems to run, their seeds, the environments of `SYSTEM@REF` systems, the dev option and the file
    of today's reading of the examples (for those environments)."""
    systems, seeds = args.systems.split(","), [int(s) for s in args.seeds.split(",")]
    unknown = [s for s in systems if s.partition("@")[0] not in SYSTEMS]
    if unknown:
        raise SystemExit(
            f"fit_speed: unknown systems {', '.join(unknown)}; choose from {', '.join(SYSTEMS)} "
            "(SYSTEM@REF: the same on the package at a git commit)"
        )
    envs = {s: common.package_env(s.partition("@")[2]) for s in systems if "@" in s}
    dev = ["--dev-examples", args.dev_examples] if args.dev_examples else []
    data = os.path.join(tempfile.mkdtemp(prefix="fit_speed."), "examples.json")
    if envs:  # an older package may read files differently: its workers get today's reading
        subprocess.run(
            common.self_cmd("fit_speed", "--task", args.task, "--examples", args.examples, "--dump-data", data, *dev),
            check=True,
        )
    bf16_hardware = common.bf16_hardware()
    if any("bf16" in s for s in systems) and not bf16_hardware:
        print(
            "note: this CPU has no native bf16 (neither amx_bf16 nor avx512_bf16): bf16 systems run emulated "
            "bfloat16 here, slower than float32; compare them on a bf16 host",
            flush=True,
        )
    return systems, seeds, envs, dev, data


def measure(args, argv):
    """Every system in interleaved rounds, each in its worker process; the table and (unless --smoke) the record."""
    systems, seeds, envs, dev, data = workers(args)
    started, info_before = common.now(), common.machine_line()

    def run_one(system, k):
        extra = dev + (["--data", data] if system in envs else [])
        return common.run_worker(
            common.self_cmd(
                "fit_speed",
                "--worker",
                system,
                "--task",
                args.task,
                "--examples",
                args.examples,
                "--seed",
                seeds[k % len(seeds)],
                "--predict-batch",
                args.predict_batch,
                "--shape",
                args.shape,
                *extra,
            ),
            system,
            env=envs.get(system),
        )

    runs = common.interleave(systems, args.rounds, run_one)
    record = dict(
        task=args.task,
        command=common.command_line("fit_speed", argv),
        examples=args.examples,
        dev_examples=args.dev_examples,
        shape=args.shape,
        predict_batch=args.predict_batch,
        batch_size=BATCH,
        sequence_length=LENGTH,
        started=started,
        machine_before=info_before,
        versions=common.versions("tensorflow", "keras", "keras-hub", "torch", "transformers", "jax"),
        bf16_hardware=common.bf16_hardware(),
        runs=runs,
        reference=args.reference,
        summary=summarize(runs, systems, args.reference),
    )
    print_table(record, info_before)
    if not args.smoke:
        print(
            common.write_result(
                args.name or f"fit_speed_{args.task}" + ("" if args.shape == "minilm" else f"_{args.shape}"),
                rows(record),
                record["command"],
                started=started,
                machine_info=info_before,
                detail=record,
            )
        )


def table(path, record=False):
    """Prints the table of a finished run (`detail` of a record, or a detail file) summarized again."""
    run = common.read_json(path)
    run = run.get("detail", run)
    run["summary"] = summarize(run["runs"], list(dict.fromkeys(r["system"] for r in run["runs"])), run["reference"])
    print_table(run, run.get("machine_before", ""))
    for row in rows(run):
        print(
            f"{row['what']}: {row['ours']} vs {row['peer']} {row['unit']}"
            + (f" ({row['note']})" if row.get("note") else "")
        )
    if record:
        print(
            common.write_result(
                f"fit_speed_{run['task']}",
                rows(run),
                run.get("command", ""),
                source=path,
                started=run.get("started"),
                machine_info=run.get("machine_before", ""),
            )
        )


def summarize(runs, systems, reference="ours"):
    """Per system: its backend and precision, median examples/s of fit, median seconds of evaluate/predict,
    dev scores, and the median per-round ratios of `reference`'s speed to every other system's (wall and CPU)."""
    out = {}
    for s in systems:
        mine = [r for r in runs if r["system"] == s]
        out[s] = dict(
            fit_examples_per_s=statistics.median(r["train_examples"] / r["fit_s"] for r in mine),
            backend="torch" if s.startswith("hf") else KERAS_BACKENDS.get(s.partition("@")[0], "tensorflow"),
            precision="bf16" if "bf16" in s else "float32",
        )
        for key in ("evaluate_s", "predict_s", "predict2_s"):
            if all(key in r for r in mine):
                out[s][key] = statistics.median(r[key] for r in mine)
        if all("dev_score" in r for r in mine):
            out[s]["dev_scores"] = [round(r["dev_score"], 4) for r in mine]
        for key in ("fit", "evaluate", "predict", "predict2", "fit_cpu", "evaluate_cpu", "predict_cpu", "predict2_cpu"):
            ratio = common.paired_ratios(runs, reference, s, f"{key}_s") if s != reference else None
            if ratio is not None:
                out[s][f"ours_{key}_speedup"] = ratio
    return out


def rows(record):
    """The record's rows: the reference system against each peer (fit examples/s; `evaluate` and
    `predict` seconds of the dev set, first call of the process), and each of our other systems (another
    backend, precision or batching) in rows of its own (fit, predict); each names its backend and precision."""
    ref, summary, task = record["reference"], record["summary"], record["task"]
    mine, out = summary[ref], []
    for s, v in summary.items():
        setting = f"{s} ({v.get('backend', '?')}, {v.get('precision', '?')})"
        if (s.startswith("ours") and "@" not in s) or s == ref:  # our other backends / precisions: their own figures
            out.append(
                dict(
                    what=f"{task} fit, {setting}",
                    unit="examples/s",
                    ours=round(v["fit_examples_per_s"], 1),
                    peer=None,
                    peer_name=None,
                    higher_is_better=True,
                )
            )
            for key, call in (("predict_s", "predict"), ("predict2_s", "predict, second call")):
                if key in v:
                    out.append(
                        dict(
                            what=f"{task} {call}, {setting}",
                            unit="s",
                            ours=round(v[key], 2),
                            peer=None,
                            peer_name=None,
                            higher_is_better=False,
                        )
                    )
            continue
        for key, unit in (("fit", "examples/s"), ("evaluate", "s"), ("predict", "s"), ("predict2", "s")):
            figure = "fit_examples_per_s" if key == "fit" else f"{key}_s"
            if figure in mine and figure in v:
                wall, cpu = v.get(f"ours_{key}_speedup"), v.get(f"ours_{key}_cpu_speedup")
                out.append(
                    dict(
                        what=f"{task} {key.replace('predict2', 'predict (second call)')}, {ref} vs {setting}",
                        unit=unit,
                        ours=round(mine[figure], 2),
                        peer=round(v[figure], 2),
                        peer_name=s,
                        higher_is_better=key == "fit",
                        note=wall
                        and f"median of per-round ratios: wall {wall}" + (f", CPU seconds {cpu}" if cpu else ""),
                    )
                )
    return out


def print_table(record, machine):
    print(
        f"\n{record['task']}: {record['examples']} examples, batch {record['batch_size']}, length "
        f"{record['sequence_length']}, 1 epoch; {machine}"
    )
    reference = record.get("reference", "ours")
    print(
        f"| system | backend | precision | fit examples/s | evaluate s | predict s | dev score | {reference}'s fit / "
        "evaluate / predict speed-up | the same in CPU seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for s, v in record["summary"].items():
        ups = "/".join(str(v.get(f"ours_{k}_speedup", "-")) for k in ("fit", "evaluate", "predict"))
        cpu = "/".join(str(v.get(f"ours_{k}_cpu_speedup", "-")) for k in ("fit", "evaluate", "predict"))
        print(
            f"| {s} | {v['backend']} | {v['precision']} | {v['fit_examples_per_s']:.1f} | "
            f"{v.get('evaluate_s', float('nan')):.1f} | {v.get('predict_s', float('nan')):.1f} | "
            f"{v.get('dev_scores', '-')} | {ups} | {cpu} |"
        )
