"""glue's reporting: where each recipe's run lives, and the tables of the finished runs next to HF's reference
figures (REFERENCE_RESULTS.md) with the record rows they back. Not a benchmark (`run.py glue` is).
"""

import json
import os

HF_SOURCE = "HF transformers, same checkpoint and recipe, end of training, REFERENCE_RESULTS.md"


# HF transformers fine-tuning all-MiniLM-L6-v2 on this kind of machine, same recipe, end of training
# (REFERENCE_RESULTS.md; measured in a different session: the examples/s ratio crosses sessions).
HF_REFERENCE = {
    "sst2": dict(metrics={"accuracy": 0.872}, train_seconds=448, examples_per_second=44.7, epochs=1),
    "mrpc": dict(metrics={"accuracy": 0.789, "f1": 0.856}, train_seconds=491, examples_per_second=22.4, epochs=3),
    "rte": dict(metrics={"accuracy": 0.563}, train_seconds=519, examples_per_second=14.4, epochs=3),
}


# Dev metrics shown per GLUE task (the first one is the task's primary metric).
TASK_METRICS = {
    "sst2": ("accuracy",),
    "mrpc": ("f1", "accuracy"),
    "rte": ("accuracy",),
    "stsb": ("spearman", "pearson"),
}


# Context only, not like-for-like (other models, GLUE test set): Turc et al., google-research/bert README.
PUBLISHED = {
    "sst2": "BERT-Mini 0.859, BERT-Small 0.897 (accuracy)",
    "mrpc": "BERT-Mini 0.811, BERT-Small 0.834 (F1)",
    "rte": "BERT-Mini 0.579, BERT-Small 0.618 (accuracy)",
}


def run_dir(root, name, select):
    return os.path.join(root, name if select == "final" else f"{name}-best")


def _load(root, name, select):
    out = run_dir(root, name, select)
    paths = [os.path.join(out, f) for f in ("metrics.json", "recipe.json")]
    if not all(os.path.exists(p) for p in paths):
        return None
    with open(paths[0]) as f, open(paths[1]) as g:
        return json.load(f), json.load(g), paths[0]


def _scores(metrics, names):
    return " / ".join(f"{n} {metrics[n]:.3f}" for n in names if n in metrics)


def _recipe_text(name, recipe):
    mods = ", ".join(f"{k}={recipe[k]}" for k in recipe.get("modified", []))
    return f"`{name}`" + (f" (MODIFIED: {mods}; not the named recipe)" if mods else "")


def _load_note(recipe):
    before, after = recipe.get("loadavg_before"), recipe.get("loadavg_after")
    return f"load {before[0]:.1f}→{after[0]:.1f}" if before and after else ""


def print_tables(root, recipes, names=None):
    """The tables of the finished runs of `names` (default: every recipe of `recipes` that ran); returns the record's
    rows (recipes with an HF reference figure)."""
    names = names or [n for n in recipes if n != "stsb" or _load(root, n, "final")]
    hf_rows, other_rows, best_rows, records = [], [], [], []
    for name in names:
        spec = recipes[name]
        metric_names = TASK_METRICS[spec["task"]]
        final = _load(root, name, "final")
        if spec["hf"]:
            _hf_rows(name, spec, final, metric_names, hf_rows, records)
        else:
            if final is None:
                other_rows.append(f"| `{name}` | {spec['data']} | (not run) | | | |")
            else:
                m, r, path = final
                other_rows.append(
                    f"| {_recipe_text(name, r)} | {spec['data']}, {r['epochs']} ep | {_scores(m, metric_names)} | "
                    f"{m['train_seconds']:.0f} | {m['train_examples_per_second']:.1f} | "
                    f"`{path}` ({r['date'][:10]}, {_load_note(r)}) |"
                )
        best = _load(root, name, "best")
        if best is not None:
            m, r, path = best
            end = _scores(final[0], metric_names) if final else "(no `select=final` run)"
            best_rows.append(
                f"| {_recipe_text(name, r)} | {r['dev_evaluations']} (every {r['eval_every']} steps + epoch ends) | "
                f"{_scores(m, metric_names)} (step {m['best_step']} of {m['steps']}) | {end} | `{path}` |"
            )
    _print_tables(hf_rows, other_rows, best_rows)
    return records


def _hf_rows(name, spec, final, metric_names, hf_rows, records):
    """A recipe HF has a reference figure for: its table row into `hf_rows`, and its record rows into `records`."""
    hf = HF_REFERENCE[spec["hf"]]
    hf_speed = hf["examples_per_second"]
    if final is None:
        hf_rows.append(
            f"| `{name}` | {spec['data']}, {hf['epochs']} ep | (not run) | "
            f"{_scores(hf['metrics'], metric_names)} | | | {hf_speed} | | |"
        )
    else:
        m, r, path = final
        ours_speed = m["train_examples_per_second"]
        delta = m[metric_names[0]] - hf["metrics"][metric_names[0]]
        note = (
            f"ours: commit {r.get('git_commit', '?')}, {r.get('date', '?')[:16]}; HF figure from "
            "REFERENCE_RESULTS.md (another session, other load)"
        )
        records += [
            {
                "what": f"{name} dev {metric_names[0]} (end of training)",
                "unit": "fraction",
                "ours": m[metric_names[0]],
                "peer": hf["metrics"][metric_names[0]],
                "peer_name": "HF transformers",
                "higher_is_better": True,
                "command": f"python benchmarks/run.py glue {name}",
                "source": path,
                "note": note,
                "side_by_side": False,
            },
            {
                "what": f"{name} fine-tuning speed",
                "unit": "train examples/s",
                "ours": ours_speed,
                "peer": hf_speed,
                "peer_name": "HF transformers",
                "higher_is_better": True,
                "command": f"python benchmarks/run.py glue {name}",
                "source": path,
                "note": note,
                "side_by_side": False,
            },
        ]
        hf_rows.append(
            f"| {_recipe_text(name, r)} | {spec['data']}, {r['epochs']} ep | {_scores(m, metric_names)} | "
            f"{_scores(hf['metrics'], metric_names)} | {delta:+.3f} | {ours_speed:.1f} | {hf_speed} | "
            f"{ours_speed / hf_speed:.2f}x | `{path}` ({r['date'][:10]}, {_load_note(r)}) |"
        )


def _print_tables(hf_rows, other_rows, best_rows):
    if hf_rows:
        print('\nHF\'s reference recipes, dev score of the model at the end of training (`select="final"`):\n')
        print(
            f"| recipe | training data | ours, end of training (dev) | {HF_SOURCE} | ours − HF "
            "(primary) | ours train ex/s | HF train ex/s | ours/HF speed | our run (metrics.json) |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        print("\n".join(hf_rows))
        print(
            "\nHF's examples/s are from REFERENCE_RESULTS.md (another session): the speed ratio crosses sessions "
            "and machine load. Context only, not like-for-like (other models, GLUE test set): "
            + "; ".join(f"{t.upper()} {v}" for t, v in PUBLISHED.items())
        )
    if other_rows:
        print("\nOther budgets (different recipes: no HF figure exists for them), end of training:\n")
        print(
            "| recipe | training data | ours, end of training (dev) | train s | train ex/s | our run (metrics.json) |"
        )
        print("|---|---|---|---|---|---|")
        print("\n".join(other_rows))
    if best_rows:
        print(
            "\nBest-of-dev selection (`--select best`): the kept model is the best of N dev evaluations, "
            "chosen on the dev set it is scored on (optimistic; not comparable with HF's end-of-training "
            "figure):\n"
        )
        print(
            "| recipe | N dev evaluations | ours, best of N dev evaluations (selection on dev) | "
            "ours, end of training (same recipe, `select=final` run) | our run (metrics.json) |"
        )
        print("|---|---|---|---|---|")
        print("\n".join(best_rows))
