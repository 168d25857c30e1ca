"""docs/failures.md rows 109-: the outside probe's cases (issue 27) and what a careful user tries with
the verbs that came after the first table (tag, qa, choice, embed, evaluate-embeddings, resume).

`test_probe_failure` runs each CLI case as `test_cli_failure` does (in-process `main`, the
documented exit code, one final `bert-zoo VERB: error:` line, no traceback, every flag it
suggests exists on that verb, the whole directory byte-identical afterwards). The other tests
cover what is not one bad input: damaged checkpoints on resume, a full disk during a
checkpoint, signals, file modes, two runs on one `--out`, and the flag specs of every verb.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.failures import test_cli_failures
from tests.failures.helpers import check_case, check_failure, run_cli
from tests.failures.test_cli_failures import VOCAB, World, latin1

models = test_cli_failures.models  # the tiny checkpoints' fixture, shared with the CLI failure tests


@pytest.fixture(scope="module")
def task_models(models, tmp_path_factory):
    """A span-QA (v1.1), a pretrainer and a sentence-embedder directory on the tiny backbone."""
    from keras_bert_zoo import BertPreprocessor, BertPretrainer, BertSpanQA

    root = tmp_path_factory.mktemp("task_models")
    qa = str(root / "qa")
    BertSpanQA.from_preset(models["tiny"]).save_to_preset(qa)
    pretrainer = str(root / "pretrainer")
    BertPretrainer.from_preset(
        models["tiny"], preprocessor=BertPreprocessor.from_preset(models["tiny"], sequence_length=16)
    ).save_to_preset(pretrainer)
    return {**models, "qa": qa, "pretrainer": pretrainer}


def squad(w, name, answers=None, impossible=False):
    """A one-question SQuAD file; `answers` replaces the official list of answer objects."""
    context = "the film was good"
    qa = {"id": "q1", "question": "the film was", "answers": [{"text": "good", "answer_start": 13}]}
    if answers is not None:
        qa["answers"] = answers
    if impossible:
        qa.update(answers=[], is_impossible=True)
    data = {
        "version": "2.0" if impossible else "1.1",
        "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [qa]}]}],
    }
    return w.write(name, json.dumps(data))


SWAG_HEADER = ",video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,label\n"
SWAG_ROW = "{i},v,{i},the film,the film,was,gen,good,bad,0\n"


def swag(w, name, broken_row=None):
    rows = [SWAG_ROW.format(i=i) for i in range(4)]
    if broken_row is not None:
        rows[broken_row] = f'{broken_row},v,{broken_row},"the film,the film,was,gen,good,bad,0\n'
    return w.write(name, SWAG_HEADER + "".join(rows))


def damage(w, source, name, file, content):
    """A copy of model directory `source` with `file` replaced by `content` (bytes or str)."""
    path = w.copy_model(source, name)
    w.write(os.path.join(name, file), content)
    return path


def truncated_copy(w, source, name, file):
    path = w.copy_model(source, name)
    with open(os.path.join(path, file), "rb") as f:
        data = f.read()
    w.write(os.path.join(name, file), data[: len(data) // 2])
    return path


def sentence_transformers_dir(w, modules):
    path = w.copy_model(w.tiny, "st")
    w.write("st/modules.json", modules)
    return path


def embed(w, *extra, model=None, data=None, out=None):
    return [
        "embed",
        "--model",
        model or w.tiny,
        "--data",
        data or w.write("texts.txt", "the film\ngood\n"),
        "--out",
        out or w.path("e.npy"),
        *extra,
    ]


def sts(w, content=None):
    return w.write(
        "sts.csv",
        content
        if content is not None
        else "main\tf\t2012\t0\t5.0\tthe film was good\tthe film was great\n"
        "main\tf\t2012\t1\t1.0\tthe film was good\tthe plot was bad\n",
    )


def beside_predictions(w):
    """`--out m.json` in a folder that already holds a `predictions.json` (an earlier evaluation's)."""
    w.write("predictions.json", '{"q1": "earlier"}')
    return w.path("m.json")


def qa_finetune(w, *extra, train=None):
    return w.finetune(
        "--doc-stride",
        "4",
        "--max-query-length",
        "4",
        *extra,
        task="qa",
        train=train or squad(w, "t.json"),
        dev=squad(w, "d.json"),
    )


CASES = [
    # --- tracebacks before: now one line naming the file (and line) and the fix
    (
        "squad-negative-answer-start",
        lambda w: qa_finetune(w, train=squad(w, "t.json", answers=[{"text": "good", "answer_start": -4}])),
        1,
        r"t\.json: .*answer 0 has answer_start -4, outside the context",
    ),
    (
        "squad-hf-answers-ragged",
        lambda w: qa_finetune(w, train=squad(w, "t.json", answers={"text": ["good"], "answer_start": [13, 0]})),
        1,
        r"t\.json: .*Hugging Face layout needs lists \"text\" and \"answer_start\" of equal length",
    ),
    (
        "swag-unclosed-quote",
        lambda w: w.finetune(task="choice", train=swag(w, "t.csv", broken_row=1), dev=swag(w, "d.csv")),
        1,
        r"t\.csv:3: cannot be read as CSV: unexpected end of data \(an unclosed quote\?",
    ),
    (
        "swag-latin1",
        lambda w: w.finetune(
            task="choice",
            train=swag(w, "t.csv"),
            dev=w.write("d.csv", latin1(SWAG_HEADER + "0,v,0,caf\xe9,the film,was,gen,good,bad,0\n")),
        ),
        1,
        r"d\.csv:2: not UTF-8 text",
    ),
    (
        "config-json-list",
        lambda w: ["evaluate", "--model", damage(w, w.classifier, "m", "config.json", "[1, 2]"), "--data", w.dev],
        1,
        r"m/config\.json: holds a JSON list, not a JSON object",
    ),
    (
        "predict-vocab-beyond-embeddings",
        lambda w: [
            "predict",
            "--model",
            damage(w, w.classifier, "m", "vocab.txt", "\n".join(VOCAB + ["extra", "more"]) + "\n"),
            "the film",
        ],
        1,
        r"vocab\.txt has 19 entries but the model's embedding table has 17 rows",
    ),
    (
        "export-top-k-beyond-vocab",
        lambda w: ["export", "--model", w.pretrainer, "--out", w.out, "--top-k", "500"],
        2,
        r"--top-k 500 .*asks for more tokens than the model's vocabulary of 17; use 1 to 17",
    ),
    ("embed-batch-size-zero", lambda w: embed(w, "--batch-size", "0"), 2, r"--batch-size: 0 is out of range"),
    (
        "embed-sequence-length-huge",
        lambda w: embed(w, "--sequence-length", "100000"),
        2,
        r"--sequence-length: 100000 is out of range",
    ),
    (
        "embed-sequence-length-beyond-positions",
        lambda w: embed(w, "--sequence-length", "64"),
        2,
        r"--sequence-length 64 is longer than the model's 32 learned positions",
    ),
    # --- bad input accepted silently before
    (
        "tag-bioes-on-iob1",
        lambda w: w.finetune(
            "--scheme", "BIOES", task="tag", train=w.write("t.conll", "the O\nfilm I-MISC\nwas O\n"), dev=w.conll
        ),
        1,
        r"t\.conll:2: tag 'I-MISC' continues no MISC entity, which BIOES does not allow.*--scheme",
    ),
    (
        "tag-bioes-unfinished-entity",
        lambda w: w.finetune(
            "--scheme", "BIOES", task="tag", train=w.write("t.conll", "the B-MISC\nfilm O\n"), dev=w.conll
        ),
        1,
        r"t\.conll:2: tag 'O' follows an unfinished MISC entity",
    ),
    (
        "tag-strict-tags-noisy",
        lambda w: w.finetune(
            "--strict-tags",
            task="tag",
            train=w.write("t.txt", "北 B-LOC\n京 E-LOC\n\n李 O\n明 M-PER\n人 E-PER\n\n上 S-LOC\n"),
            dev=w.conll,
        ),
        1,
        r"t\.txt:5: tag 'M-PER' continues no PER entity, which BMES does not allow.*--strict-tags",
    ),
    (
        "qa-null-threshold-nan",
        lambda w: qa_finetune(w, "--null-threshold", "nan"),
        2,
        r"--null-threshold: nan is out of range",
    ),
    ("qa-doc-stride-zero", lambda w: qa_finetune(w, "--doc-stride", "0"), 2, r"--doc-stride: 0 is out of range"),
    (
        "evaluate-embeddings-max-examples-zero",
        lambda w: ["evaluate-embeddings", "--model", w.tiny, "--data", sts(w), "--max-examples", "0"],
        2,
        r"--max-examples: 0 is out of range",
    ),
    ("seed-negative", lambda w: w.finetune("--seed", "-1"), 2, r"--seed: -1 is out of range"),
    # --- the user's data replaced before
    (
        "embed-out-exists",
        lambda w: embed(w, out=w.write("e.npy", b"\x93NUMPY old")),
        2,
        r"--out .*e\.npy already exists \(a file\).*--overwrite",
    ),
    (
        "evaluate-embeddings-out-exists",
        lambda w: ["evaluate-embeddings", "--model", w.tiny, "--data", sts(w), "--out", w.write("m.json", "{}")],
        2,
        r"m\.json already exists",
    ),
    # --- errors that did not name the file or the fix
    (
        "modules-json-truncated",
        lambda w: embed(w, model=sentence_transformers_dir(w, '[{"idx": 0, "type": "sent')),
        1,
        r"st/modules\.json:1: not valid JSON at column 21 \(Unterminated string",
    ),
    (
        "modules-json-object",
        lambda w: embed(w, model=sentence_transformers_dir(w, '{"idx": 0}')),
        1,
        r"st/modules\.json: holds a JSON object, not a JSON list",
    ),
    (
        "tokenizer-config-truncated",
        lambda w: ["predict", "--model", truncated_copy(w, w.classifier, "m", "tokenizer_config.json"), "the film"],
        1,
        r"m/tokenizer_config\.json:\d+: not valid JSON",
    ),
    (
        "preprocessor-json-truncated",
        lambda w: ["predict", "--model", truncated_copy(w, w.classifier, "m", "preprocessor.json"), "the film"],
        1,
        r"m/preprocessor\.json:\d+: not valid JSON",
    ),
    (
        "sts-binary",
        lambda w: ["evaluate-embeddings", "--model", w.tiny, "--data", sts(w, b"\x00\x01\xff\xfe\x89PNG")],
        1,
        r"sts\.csv:1: not UTF-8 text",
    ),
    (
        "embed-data-latin1",
        lambda w: embed(w, data=w.write("t.txt", latin1("good\ncaf\xe9\n"))),
        1,
        r"t\.txt:2: not UTF-8 text",
    ),
    (
        "evaluate-v2-file-on-v1-model",
        lambda w: ["evaluate", "--model", w.qa, "--data", squad(w, "v2.json", impossible=True)],
        1,
        r"fine-tune one for v2\.0 with `bert-zoo finetune qa "
        r"--version-2-with-negative`",
    ),
    (
        "predict-question-without-context",
        lambda w: ["predict", "--model", w.qa, "--question", "where?"],
        2,
        r"--context \(the passage to answer from\) is missing",
    ),
    # --- what a careful user tries with the later verbs
    (
        "squad-truncated",
        lambda w: qa_finetune(w, train=w.write("t.json", '{"version": "1.1", "data": [{"tit')),
        1,
        r"t\.json:1: not valid JSON at column \d+ \(Unterminated string",
    ),
    (
        "squad-json-list",
        lambda w: qa_finetune(w, train=w.write("t.json", "[]")),
        1,
        r"t\.json: holds a JSON list, not a JSON object",
    ),
    (
        "swag-ragged-row",
        lambda w: w.finetune(
            task="choice",
            train=w.write(
                "t.csv", SWAG_HEADER + SWAG_ROW.format(i=0) + "1,v,1,the film, the plot,the film,was,gen,good,bad,0\n"
            ),
            dev=swag(w, "d.csv"),
        ),
        1,
        r"t\.csv:3: the row has 11 fields, the header 10",
    ),
    ("embed-data-empty", lambda w: embed(w, data=w.write("t.txt", "")), 1, r"t\.txt' is empty; give one text per line"),
    (
        "evaluate-predictions-json-exists",
        lambda w: ["evaluate", "--model", w.qa, "--data", squad(w, "d.json"), "--out", beside_predictions(w)],
        2,
        r"--out's predictions\.json .*predictions\.json already exists \(a file\).*--overwrite",
    ),
    (
        "predict-data-and-text",
        lambda w: ["predict", "--model", w.classifier, "--data", w.dev, "good"],
        2,
        r"--data` does not apply to BertClassifier",
    ),
]


class TaskWorld(World):
    def __init__(self, root, models):
        super().__init__(root, models)
        self.qa, self.pretrainer = models["qa"], models["pretrainer"]


@pytest.mark.parametrize("case_id, argv, code, pattern", CASES, ids=[c[0] for c in CASES])
def test_probe_failure(case_id, argv, code, pattern, task_models, tmp_path, capsys):
    w = TaskWorld(tmp_path / "w", task_models)
    check_case(w.root, argv(w), code, pattern, capsys)


def test_ids_are_unique():
    ids = [c[0] for c in CASES]
    assert len(ids) == len(set(ids))


# --- a resumed run whose checkpoint is damaged ------------------------------------------------------
def finished_epoch_checkpoints(w, capsys, monkeypatch):
    """A finetune run stopped after its epoch-end checkpoint, as a kill would stop it: its
    `OUT/checkpoints/ckpt-N` is on disk, `--out` holds nothing else."""
    # Where finetune looks the name up (it imports it at the top of its module).
    import keras_bert_zoo.training.curves as curves

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(curves, "plot_finetuning", killed)
        code, _, err = run_cli(w.finetune("--epochs", "1", "--batch-size", "8"), capsys)
    assert code == 130, err
    (name,) = [n for n in os.listdir(os.path.join(w.out, "checkpoints")) if n.startswith("ckpt-")]
    return os.path.join(w.out, "checkpoints", name)


@pytest.mark.parametrize("how", ["truncated-tensors", "meta-not-json", "meta-not-a-run"])
def test_a_damaged_checkpoint_is_named_with_the_two_ways_out(how, models, tmp_path, capsys, monkeypatch):
    w = World(tmp_path / "w", models)
    ckpt = finished_epoch_checkpoints(w, capsys, monkeypatch)
    if how == "truncated-tensors":
        data = os.path.join(ckpt, "state.data-00000-of-00001")
        with open(data, "r+b") as f:
            f.truncate(os.path.getsize(data) // 2)
    else:
        w.write(os.path.join(ckpt, "meta.json"), '{"step": 3, "state": {"cal' if how == "meta-not-json" else "[]")
    check_case(
        w.root,
        w.finetune("--epochs", "1", "--batch-size", "8"),
        1,
        rf"checkpoint .*{os.path.basename(ckpt)} is damaged \(.+\) and no older intact checkpoint is left.*"
        r"restore .*, or pass --no-resume to start over",
        capsys,
    )
    if how == "truncated-tensors":  # the second way out works (once: it is one more training run)
        code, _, err = run_cli(w.finetune("--epochs", "1", "--batch-size", "8", "--no-resume"), capsys)
        assert code == 0, err


def test_by_default_a_truncated_latest_checkpoint_falls_back_to_the_one_before(models, tmp_path, capsys, monkeypatch):
    """A real run keeps its two newest checkpoints, so the fallback happens without any option."""
    import keras_bert_zoo.training.curves as curves

    w = World(tmp_path / "w", models)
    run = w.finetune("--epochs", "2", "--batch-size", "8")
    with monkeypatch.context() as patch:  # stopped after its last checkpoint, as a kill would stop it
        patch.setattr(curves, "plot_finetuning", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
        code, _, err = run_cli(run, capsys)
    assert code == 130, err
    directory = os.path.join(w.out, "checkpoints")
    names = sorted(n for n in os.listdir(directory) if n.startswith("ckpt-"))
    assert len(names) == 2, names  # the epoch-end checkpoints of both epochs
    with open(os.path.join(directory, names[-1], "state.data-00000-of-00001"), "r+b") as f:
        f.truncate(f.seek(0, 2) // 2)
    code, _, err = run_cli(run, capsys)
    assert code == 0, err
    assert f"checkpoint {os.path.join(directory, names[-1])} is damaged" in err, err
    assert f"resumed from the older intact checkpoint {os.path.join(directory, names[0])}" in err, err
    assert os.path.isfile(os.path.join(w.out, "metrics.json"))


def test_resume_falls_back_to_an_older_intact_checkpoint_and_says_so(tmp_path, capsys):
    import numpy as np

    from keras_bert_zoo.training.checkpointing import RunCheckpoints
    from tests.training.test_checkpointing import tiny_model

    model = tiny_model()
    ckpts = RunCheckpoints(str(tmp_path), model, signature={"lr": 1}, keep=2)
    ckpts.save(step=4, state={})
    kept = [v.numpy().copy() for v in model.weights]
    model.layers[0].kernel.assign(np.zeros(model.layers[0].kernel.shape))
    newest = ckpts.save(step=8, state={})
    with open(os.path.join(newest, "state.data-00000-of-00001"), "r+b") as f:
        f.truncate(10)
    model.layers[0].kernel.assign(np.ones(model.layers[0].kernel.shape))
    capsys.readouterr()
    path, meta = RunCheckpoints(str(tmp_path), model, signature={"lr": 1}, keep=2).restore_newest()
    err = capsys.readouterr().err
    assert meta["step"] == 4 and path.endswith("ckpt-000004")
    assert f"checkpoint {newest} is damaged" in err and "resumed from the older intact checkpoint" in err, err
    for now, before in zip(model.weights, kept, strict=True):
        np.testing.assert_array_equal(now.numpy(), before)


def test_a_full_disk_during_a_checkpoint_is_one_line_and_keeps_out(models, tmp_path, capsys, monkeypatch):
    """TF's `ResourceExhaustedError ... No space left on device [Op:SaveV2]` at the epoch-end
    checkpoint: one line naming the checkpoint, no `tmp-*` left, nothing at `--out` but the run's
    (empty) checkpoint directory, which the rerun resumes in."""
    import tensorflow as tf

    def disk_full(self, *args, **kwargs):
        raise tf.errors.ResourceExhaustedError(
            None,
            None,
            "/x/state_temp/part-00000-of-00001.data-00000-of-00001.tempstate; No space left on device [Op:SaveV2]",
        )

    w = World(tmp_path / "w", models)
    monkeypatch.setattr(tf.train.Checkpoint, "write", disk_full)
    code, _, err = run_cli(w.finetune("--epochs", "1", "--batch-size", "8"), capsys)
    check_failure(
        code,
        err,
        1,
        r"cannot write checkpoint .*ckpt-\d+ \(No space left on device\); no checkpoint was "
        r"kept yet\. Free some space",
    )
    assert os.listdir(os.path.join(w.out, "checkpoints")) == []


def test_a_resume_with_other_flags_is_refused_naming_no_resume(models, tmp_path, capsys, monkeypatch):
    w = World(tmp_path / "w", models)
    finished_epoch_checkpoints(w, capsys, monkeypatch)
    check_case(
        w.root,
        w.finetune("--epochs", "1", "--batch-size", "8", "--learning-rate", "1e-3"),
        1,
        r"ckpt-\d+ was written by a different run \(learning_rate: .*\); pass --no-resume to start over",
        capsys,
    )


# --- signals ------------------------------------------------------------------------------------------
def test_sigterm_and_ctrl_c_end_with_one_line_naming_the_resume_point(tmp_path, capsys, monkeypatch):
    import keras_bert_zoo.commands.vocab as vocab_command
    from keras_bert_zoo.training import checkpointing

    point = tmp_path / "out" / "checkpoints" / "ckpt-000012"
    point.mkdir(parents=True)

    def terminated(args):
        checkpointing.set_resume_point(point)
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill PID` would, mid-run
        raise AssertionError("SIGTERM did not stop the run")

    monkeypatch.setattr(vocab_command, "run", terminated)
    code, _, err = run_cli(["vocab", "--corpus", "c.txt", "--size", "50", "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 143 and "Traceback" not in err, err
    assert err.strip().splitlines() == [
        f"bert-zoo vocab: terminated (SIGTERM); --out was left as it was. Rerun the "
        f"same command to resume from {point}."
    ]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler does not outlive the command

    def interrupted(args):
        checkpointing.set_resume_point(None)
        raise KeyboardInterrupt

    monkeypatch.setattr(vocab_command, "run", interrupted)
    code, _, err = run_cli(["vocab", "--corpus", "c.txt", "--size", "50", "--out", str(tmp_path / "v.txt")], capsys)
    assert code == 130 and err.strip() == "bert-zoo vocab: interrupted; outputs were left as they were.", err


@pytest.mark.slow  # a real pretrain process, killed with SIGTERM once it has written a checkpoint
def test_sigterm_to_a_real_pretrain(models, tmp_path):
    import time

    w = World(tmp_path / "w", models)
    argv = w.pretrain("--checkpoint-every", "1")
    argv[argv.index("--steps") + 1] = "100000"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    process = subprocess.Popen(
        [sys.executable, "-m", "keras_bert_zoo.cli", *argv],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    latest = os.path.join(w.out, "checkpoints", "latest")
    deadline = time.time() + 240
    while not os.path.exists(latest) and time.time() < deadline and process.poll() is None:
        time.sleep(0.5)
    process.send_signal(signal.SIGTERM)
    err = process.communicate(timeout=120)[1]
    assert process.returncode == 143, err
    last = [line for line in err.splitlines() if line.strip()][-1]
    assert last.startswith(
        "bert-zoo pretrain: terminated (SIGTERM); --out was left as it was. Rerun the same "
        f"command to resume from {os.path.join(w.out, 'checkpoints', 'ckpt-')}"
    ), err


# --- file modes ---------------------------------------------------------------------------------------
def test_model_directories_are_readable_by_others_under_umask_022(models, tmp_path, capsys):
    """Staged files are created 0600 (mkstemp); outputs get the umask's modes, as any tool's files."""
    previous = os.umask(0o022)
    try:
        out = str(tmp_path / "converted")
        code, _, err = run_cli(["convert", "--from", models["tiny"], "--out", out], capsys)
        assert code == 0, err
        modes = {}
        for root, dirs, files in os.walk(out):
            for name in dirs + files:
                modes[os.path.relpath(os.path.join(root, name), out)] = (
                    os.stat(os.path.join(root, name)).st_mode & 0o777
                )
    finally:
        os.umask(previous)
    assert {"config.json", "model.safetensors", "vocab.txt"} <= set(modes), modes
    unreadable = {name: oct(mode) for name, mode in modes.items() if mode & 0o044 != 0o044}
    assert not unreadable, unreadable
    assert os.stat(out).st_mode & 0o777 == 0o755


# --- two runs on one --out -------------------------------------------------------------------------
# Holds the lock until the test closes its stdin (or kills it): a fixed sleep (it was 60 s) could
# end, releasing the lock, while a starved nice-19 run on a loaded host is still checking.
HOLD_LOCK = textwrap.dedent("""
    import sys
    from keras_bert_zoo.locking import output_lock
    with output_lock(sys.argv[1]):
        print("locked", flush=True)
        sys.stdin.read()
""")


@pytest.mark.parametrize("parent", ["", "new/deeper"])  # an --out whose parent folders do not exist yet too
def test_a_second_run_on_the_same_out_is_refused_while_the_first_writes(models, tmp_path, capsys, parent):
    w = World(tmp_path / "w", models)
    out = os.path.join(w.root, parent, "out")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert first.stdout.readline().strip() == "locked"
        check_case(
            w.root,
            w.finetune(out=out),
            1,
            r"--out .*out is being written by another run right now \(pid "
            rf"{first.pid}\); wait for it to finish",
            capsys,
        )
        code, _, err = run_cli(w.finetune("--overwrite", out=out), capsys)  # --overwrite does not take it over
        check_failure(code, err, 1, r"is being written by another run")
    finally:
        first.kill()
        first.wait()
    assert not os.path.exists(out)


@pytest.mark.parametrize("job", ["finetune", "pretrain"])
def test_the_python_jobs_take_the_lock_of_their_out_too(tmp_path, job):
    """`finetune(...)` and `pretrain(...)` called from Python (not through the CLI, which locks
    too) refuse an --out another run is writing, before looking at any other argument."""
    import keras_bert_zoo
    from keras_bert_zoo.locking import OutputBusyError

    out = str(tmp_path / "out")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    first = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, out], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert first.stdout.readline().strip() == "locked"
        missing = str(tmp_path / "missing")
        with pytest.raises(OutputBusyError, match="is being written by another run"):
            if job == "finetune":
                keras_bert_zoo.finetune("classify", missing, missing, missing, out=out)
            else:
                keras_bert_zoo.pretrain(missing, out=out)
    finally:
        first.kill()
        first.wait()


def test_the_lock_is_released_and_reentrant_in_one_process(tmp_path):
    from keras_bert_zoo.locking import lock_path, output_lock

    out = str(tmp_path / "out")
    with output_lock(out):
        with output_lock(out):  # the CLI and the library function it calls
            assert os.path.exists(lock_path(out))
        assert os.path.exists(lock_path(out))
    assert os.listdir(tmp_path) == []


def test_a_lock_under_missing_folders_makes_them_and_removes_them_when_left_empty(tmp_path):
    """The lock of an --out whose parent does not exist yet is taken like any other (the
    folders are made for it); a run that wrote nothing there leaves no folder behind."""
    from keras_bert_zoo.locking import lock_path, output_lock

    out = str(tmp_path / "a" / "b" / "out")
    with output_lock(out):
        assert os.path.exists(lock_path(out))
    assert os.listdir(tmp_path) == []
    with output_lock(out):
        os.makedirs(out)  # the run's output: its folder stays
    assert os.listdir(tmp_path / "a" / "b") == ["out"]


# --- flag specs -------------------------------------------------------------------------------------
def _every_parser():
    import argparse

    from keras_bert_zoo.cli import VERBS, build_parser

    for verb in VERBS:
        verb_parser = next(
            a for a in build_parser([verb])._actions if isinstance(a, argparse._SubParsersAction)
        ).choices[verb]
        tasks = [a for a in verb_parser._actions if isinstance(a, argparse._SubParsersAction)]
        if tasks:
            yield from ((f"{verb} {name}", p) for name, p in tasks[0].choices.items())
        else:
            yield verb, verb_parser


def test_every_numeric_flag_of_every_verb_carries_its_range():
    """A plain `type=int`/`float` takes 0, negatives and NaN; `keras_bert_zoo.flags` types refuse them."""
    plain = [
        f"bert-zoo {verb} {action.option_strings[0]}"
        for verb, parser in _every_parser()
        for action in parser._actions
        if action.type in (int, float)
    ]
    assert not plain, f"numeric flags without a range: {plain}"
    ranged = [action for _, parser in _every_parser() for action in parser._actions if hasattr(action.type, "bounds")]
    assert len(ranged) > 40


# --- SQuAD as Hugging Face datasets exports it --------------------------------------------------------
def test_squad_in_the_hugging_face_answers_layout_reads_as_the_official_one(models, tmp_path):
    from keras_bert_zoo.tasks.span_qa.data import read_squad

    w = World(tmp_path / "w", models)
    official = read_squad(
        squad(w, "a.json", answers=[{"text": "good", "answer_start": 13}, {"text": "was good", "answer_start": 9}])
    )
    hf = read_squad(squad(w, "b.json", answers={"text": ["good", "was good"], "answer_start": [13, 9]}))
    assert hf == official and hf.answers == [["good", "was good"]] and hf.gold_starts == [[13, 9]]
