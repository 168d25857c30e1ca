"""`bert-zoo --help` (and every verb's) starts without TensorFlow, Keras or numpy.

Importing TensorFlow takes 5-15 s on 2 cores; the parser needs none of it. Each check
runs the console script's steps (`argv[0]` is `bert-zoo`, then `keras_bert_zoo.cli.main`)
in a fresh process and reads `sys.modules` afterwards: untimed, so it cannot flake on a
loaded machine. `benchmarks/run.py cli_startup` measures the wall time.
"""

import json
import os
import subprocess
import sys

from keras_bert_zoo.cli import VERBS

HEAVY = (
    "tensorflow",
    "keras",
    "tensorflow_text",
    "numpy",
    "jax",
    "torch",
    "keras_hub",
    "transformers",
    "huggingface_hub",
    "safetensors",
    "tokenizers",
)

# Every help screen, the finetune tasks' included.
HELP_COMMANDS = [[]] + [[verb] for verb in VERBS] + [["finetune", task] for task in ("classify", "tag", "qa", "choice")]

# One process runs them all and reports, after each, the heavy modules loaded so far.
_PROBE = """
import contextlib, io, json, sys
sys.argv = ["/usr/local/bin/bert-zoo"]  # what the console script sees
from keras_bert_zoo.cli import main
heavy, report = {heavy!r}, []
for argv in {commands!r}:
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        try:
            main(argv + ["--help"])
        except SystemExit:
            pass
    report.append([argv, len(shown.getvalue()), sorted(m for m in heavy if m in sys.modules)])
print(json.dumps(report))
"""


def _probe(commands, heavy=HEAVY):
    code = _PROBE.format(heavy=heavy, commands=commands)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_no_help_screen_imports_tensorflow_keras_or_numpy():
    report = _probe(HELP_COMMANDS)
    assert [argv for argv, _, _ in report] == HELP_COMMANDS
    for argv, shown, loaded in report:
        assert shown > 200, f"bert-zoo {' '.join(argv)} --help printed {shown} characters"
        assert loaded == [], f"bert-zoo {' '.join(argv)} --help imported {loaded}"


def test_the_probe_sees_a_loaded_module():
    # The check above is only as good as the probe: argparse is loaded by any help screen.
    assert _probe([["vocab"]], heavy=("argparse", "tensorflow")) == [
        [["vocab"], _probe([["vocab"]])[0][1], ["argparse"]]
    ]


def test_python_dash_m_help_imports_no_tensorflow_either(tmp_path):
    # `python -m keras_bert_zoo.cli` (no console script). A sitecustomize module (Python imports it at
    # start-up) prints the loaded modules at exit; -X importtime would miss importlib.import_module's.
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        "atexit.register(lambda: print('MODULES', ' '.join(sorted(sys.modules)), file=sys.__stdout__))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.cli", "finetune", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert done.returncode == 0 and "TASK" in done.stdout, done.stderr[-2000:]
    loaded = set(done.stdout.rsplit("MODULES ", 1)[1].split())
    assert "keras_bert_zoo.commands.finetune" in loaded  # the verb's parser was built
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
