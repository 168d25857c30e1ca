"""Wall time of `bert-zoo --help` (and a verb's) in fresh processes.

Each run is a new process, as a user's shell starts it: the installed `bert-zoo` script
(beside this Python; `python -m keras_bert_zoo.cli` where there is none) with the checkout
on `PYTHONPATH`. Rounds interleave the commands and, with `--repos`, the checkouts, so a
change can be timed against the code before it on a shared machine:

    git worktree add /tmp/before HEAD~1
    python benchmarks/cli_startup.py --repos .,/tmp/before --rounds 5

Prints the median, lowest and highest wall time per command and checkout.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

COMMANDS = (["--help"], ["finetune", "--help"], ["finetune", "classify", "--help"], ["pretrain", "--help"])


def _entry():
    script = os.path.join(os.path.dirname(sys.executable), "bert-zoo")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "keras_bert_zoo.cli"]


def time_once(repo, args):
    """Seconds from start to exit of one `bert-zoo ARGS` process run on `repo`'s code."""
    env = {**os.environ, "PYTHONPATH": os.path.abspath(repo)}
    start = time.perf_counter()
    done = subprocess.run(_entry() + args, env=env, capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"bert-zoo {' '.join(args)} on {repo} failed:\n{done.stderr[-2000:]}")
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", default=common.REPO, help="comma-separated checkouts to time (default: this one)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    repos = args.repos.split(",")
    print(f"machine: {common.machine_line()}; commit {common.git_commit()}; {common.now()}")
    times = {(repo, i): [] for repo in repos for i in range(len(COMMANDS))}
    for _ in range(args.rounds):
        for i, command in enumerate(COMMANDS):
            for repo in repos:
                times[repo, i].append(time_once(repo, command))
    print(f"| command | checkout | median s | min s | max s | runs |\n|---|---|---|---|---|---|")
    for i, command in enumerate(COMMANDS):
        for repo in repos:
            t = times[repo, i]
            print(f"| bert-zoo {' '.join(command)} | {repo} | {statistics.median(t):.2f} | {min(t):.2f} | "
                  f"{max(t):.2f} | {len(t)} |")
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
