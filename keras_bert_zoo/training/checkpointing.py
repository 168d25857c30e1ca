"""Training checkpoints under `OUT/checkpoints/`: written atomically, found again, checked.

A checkpoint holds everything the next step depends on: every model variable (the
weights, and the dropout seed-generator states, which Keras keeps as model
variables), every optimizer variable (moments, step counter), the position in the
input (the `tf.data` iterator itself, or the number of batches consumed, see
`training.loop`), and a small JSON state of the job (epoch, best dev score, ...).

Layout (one directory per checkpoint; `latest` names the newest complete one):

    OUT/checkpoints/ckpt-000120/state.index, state.data-00000-of-00001, meta.json
    OUT/checkpoints/latest                  -> "ckpt-000120"

Atomic: a checkpoint is written into `tmp-...` and renamed to `ckpt-N` only when
complete (`meta.json` last), then `latest` is replaced (write + rename). A kill at
any point leaves the previous checkpoint and a `latest` that names a complete one;
left-over `tmp-*` directories are removed by the next writer. A write that fails (a
full disk) removes its `tmp-*` and raises `OutputError` naming the checkpoint and the
last complete one, which the next run resumes from.

Damaged afterwards (a truncated tensor file, an edited `meta.json`): `restore_newest`
validates the newest checkpoint while reading it and, if it is damaged, falls back to
the next older intact one and says so on stderr; with none left it raises
`DamagedCheckpointError` naming the damaged checkpoint and the two ways out (restore
it, or `--no-resume`). The two newest complete checkpoints are kept (`KEEP_CHECKPOINTS`),
so that fallback exists in every run that has saved twice: with one kept, a damaged
newest left nothing to fall back to. The cost is a second copy of the weights and Adam
moments on disk while a run is going (BERT-base: ~1.3 GB each); both go when it finishes.

Examples:
>>> import keras, numpy as np, tempfile
>>> from keras_bert_zoo.training.checkpointing import RunCheckpoints
>>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
>>> model.compile("sgd", "mse")
>>> ckpts = RunCheckpoints(tempfile.mkdtemp(), model, signature={"lr": 0.1})
>>> path = ckpts.save(step=3, state={"epoch": 0})
>>> _ = model.layers[0].kernel.assign(np.zeros((2, 1)))
>>> ckpts.restore(ckpts.latest())["step"]
3
"""

import json
import os
import shutil
import sys

from keras_bert_zoo.errors import CheckpointError, InvalidInputError, OutputError

__all__ = [
    "KEEP_CHECKPOINTS",
    "CheckpointMismatchError",
    "DamagedCheckpointError",
    "resume_point",
    "set_resume_point",
    "RunCheckpoints",
    "run_directory",
    "is_run_directory",
    "reruns_without_overwrite",
    "prepare_run_directory",
    "keep_run_files",
]

_LATEST = "latest"
# Complete checkpoints kept: the newest and the one before, which a damaged newest falls back to.
KEEP_CHECKPOINTS = 2
_META = "meta.json"
_META_KEYS = {"step": int, "state": dict, "signature": dict, "model": list, "optimizer": list, "iterator": bool}


class CheckpointMismatchError(ValueError):
    """The checkpoints in a directory come from a different run (other flags or model)."""


class DamagedCheckpointError(CheckpointError):
    """Every checkpoint of a run is unreadable (truncated tensors, a broken `meta.json`)."""


_resume_point = {"path": None}  # the checkpoint a rerun would resume from (see `resume_point`)


def resume_point():
    """The newest checkpoint this process wrote or resumed from (None: none yet).

    What `bert-zoo` names when a run is interrupted (Ctrl-C, SIGTERM): rerunning the same
    command resumes there.
    """
    return _resume_point["path"]


def set_resume_point(path):
    """Records `path` (a checkpoint directory, or None: nothing to resume from) as what
    `resume_point` names. `RunCheckpoints` calls it when a run starts, saves and resumes; a
    training loop of one's own that writes its checkpoints can call it too, so an interrupted
    `bert-zoo` command names the checkpoint a rerun resumes from."""
    _resume_point["path"] = None if path is None else str(path)


def _read_meta(path):
    """`path/meta.json` as a dict with the keys `save` writes, or `InvalidInputError` saying what is wrong."""
    from keras_bert_zoo.files import read_json

    meta = read_json(os.path.join(path, _META), _META, "the checkpoint is damaged", expect=dict)
    wrong = [k for k, kind in _META_KEYS.items() if not isinstance(meta.get(k), kind)]
    if wrong:
        raise InvalidInputError(
            f"{os.path.join(path, _META)}: {wrong[0]!r} is missing or not a {_META_KEYS[wrong[0]].__name__}"
        )
    return meta


def _read_errors():
    """What reading a damaged TF checkpoint raises: `IndexError: Read less bytes than
    requested` (a truncated data file), `DataLossError`/`NotFoundError` (OpError), ..."""
    import tensorflow as tf

    return (IndexError, ValueError, KeyError, OSError, AssertionError, tf.errors.OpError)


def _manifest(variables):
    return [[v.path, list(v.shape), str(v.dtype)] for v in variables]


class RunCheckpoints:
    """Saves and restores one training run's state in `directory`.

    Args:
        directory: `OUT/checkpoints`.
        model: a compiled Keras model; its optimizer's variables are saved too
            (built first if the optimizer has not stepped yet).
        iterator: optional `tf.data` iterator whose position is saved with the
            variables (None: the caller records the position in `state`).
        signature: JSON-able dict of what must be equal for a resume to make
            sense (recipe flags, data sizes); compared on `restore`.
        writer: False on multi-worker non-chief workers: they write to a private
            temporary directory (the save must still run everywhere), never to `directory`.
        keep: complete checkpoints kept (the newest); default `KEEP_CHECKPOINTS` (2), so a
            damaged newest one falls back to the one before.
    """

    def __init__(self, directory, model, iterator=None, signature=None, writer=True, keep=KEEP_CHECKPOINTS):
        self.directory = os.path.abspath(directory)
        self.model, self.iterator, self.writer, self.keep = model, iterator, writer, max(1, int(keep))
        self.signature = json.loads(json.dumps(signature or {}))
        self._scratch = None
        if writer:
            set_resume_point(None)  # a new run: nothing to resume from until it saves or resumes

    # --- what is saved ----------------------------------------------------------------
    def _variables(self):
        optimizer = self.model.optimizer
        if optimizer is not None and not optimizer.built:
            optimizer.build(self.model.trainable_variables)
        model_vars = list(self.model.variables)
        opt_vars = list(optimizer.variables) if optimizer is not None else []
        return model_vars, opt_vars

    def _checkpoint(self):
        import tensorflow as tf

        model_vars, opt_vars = self._variables()
        # Keyed by position: Keras paths are not unique (every dropout's seed state is
        # "seed_generator/seed_generator_state"); the manifest in meta.json checks them.
        objects = {f"model_{i:05d}": v for i, v in enumerate(model_vars)}
        objects.update({f"optimizer_{i:05d}": v for i, v in enumerate(opt_vars)})
        if self.iterator is not None:
            objects["iterator"] = self.iterator
        return tf.train.Checkpoint(**objects), model_vars, opt_vars

    # --- write -------------------------------------------------------------------------
    def save(self, step, state=None):
        """Writes the checkpoint of `step`; returns its directory (or None off the chief)."""
        checkpoint, model_vars, opt_vars = self._checkpoint()
        name = f"ckpt-{int(step):06d}"
        if not self.writer:  # multi-worker: every worker saves (collectives), only the chief keeps it
            import tempfile

            self._scratch = self._scratch or tempfile.mkdtemp(prefix="bert-zoo-worker-ckpt-")
            checkpoint.write(os.path.join(self._scratch, "state"))
            return None
        import tensorflow as tf

        tmp = os.path.join(self.directory, f"tmp-{name}-{os.getpid()}")
        try:
            os.makedirs(self.directory, exist_ok=True)
            self._remove_partial()
            os.makedirs(tmp)
            checkpoint.write(os.path.join(tmp, "state"))
            meta = {
                "step": int(step),
                "state": state or {},
                "signature": self.signature,
                "model": _manifest(model_vars),
                "optimizer": _manifest(opt_vars),
                "iterator": self.iterator is not None,
            }
            with open(os.path.join(tmp, _META), "w", encoding="utf-8") as f:
                json.dump(meta, f)
                f.flush()
                os.fsync(f.fileno())
        except (OSError, tf.errors.OpError) as e:  # a full disk: TF's ResourceExhaustedError from SaveV2
            shutil.rmtree(tmp, ignore_errors=True)
            reason = getattr(e, "strerror", None) or getattr(e, "message", None) or str(e)
            reason = "No space left on device" if "No space left" in str(reason) else " ".join(str(reason).split())
            last = self.latest()
            kept = f"the run can resume from {last}, the last complete one" if last else "no checkpoint was kept yet"
            raise OutputError(
                f"cannot write checkpoint {os.path.join(self.directory, name)} ({reason}); {kept}. "
                "Free some space (or raise --checkpoint-every) and rerun the same command."
            ) from None
        final = os.path.join(self.directory, name)
        if os.path.exists(final):  # the same step saved twice (resumed exactly at a save point)
            shutil.rmtree(final)
        os.replace(tmp, final)
        from keras_bert_zoo.files import write_text

        write_text(os.path.join(self.directory, _LATEST), name + "\n")
        self._prune(keep_name=name)
        set_resume_point(final)
        return final

    def _remove_partial(self):
        for entry in os.listdir(self.directory):
            incomplete = entry.startswith("ckpt-") and not os.path.isfile(os.path.join(self.directory, entry, _META))
            if entry.startswith("tmp-") or incomplete:
                shutil.rmtree(os.path.join(self.directory, entry), ignore_errors=True)

    def _complete(self):
        if not os.path.isdir(self.directory):
            return []
        names = [
            e
            for e in os.listdir(self.directory)
            if e.startswith("ckpt-") and os.path.isfile(os.path.join(self.directory, e, _META))
        ]
        return sorted(names, key=lambda e: int(e.split("-")[1]))

    def _prune(self, keep_name):
        for name in self._complete()[: -self.keep]:
            if name != keep_name:
                shutil.rmtree(os.path.join(self.directory, name), ignore_errors=True)

    # --- read --------------------------------------------------------------------------
    def latest(self):
        """The newest complete checkpoint directory, or None."""
        pointer = os.path.join(self.directory, _LATEST)
        if os.path.isfile(pointer):
            with open(pointer, encoding="utf-8") as f:
                name = f.read().strip()
            if os.path.isfile(os.path.join(self.directory, name, _META)):
                return os.path.join(self.directory, name)
        complete = self._complete()  # `latest` lost or stale: fall back to the newest complete one
        return os.path.join(self.directory, complete[-1]) if complete else None

    def restore(self, path):
        """Loads `path` into the model, optimizer and iterator; returns its meta dict.

        Raises:
            InvalidInputError: `meta.json` is damaged.
            CheckpointMismatchError: the checkpoint is another run's.
            IndexError, tf.errors.OpError, ...: the tensor files are damaged (`_read_errors`).
        """
        meta = _read_meta(path)
        self._check(meta, path)
        checkpoint, _, _ = self._checkpoint()
        checkpoint.read(os.path.join(path, "state")).assert_consumed()
        return meta

    def restore_newest(self):
        """Restores the newest intact checkpoint: `(path, meta)`, or `(None, None)` when there is none.

        A damaged newer checkpoint is passed over for the next older one, and stderr says so.
        A checkpoint of another run is not passed over (`CheckpointMismatchError`): older
        ones are that run's too.

        Raises:
            DamagedCheckpointError: checkpoints exist, but none can be read; the message names
                the newest and the two ways out.
        """
        newest = self.latest()
        if newest is None:
            return None, None
        older = [os.path.join(self.directory, n) for n in reversed(self._complete())]
        candidates = [newest] + [p for p in older if p != newest]
        damaged = []
        for path in candidates:
            try:
                meta = self.restore(path)
            except CheckpointMismatchError:
                raise
            except (InvalidInputError, *_read_errors()) as e:
                damaged.append((path, " ".join(str(e).split()) or type(e).__name__))
                continue
            set_resume_point(path)
            if damaged:
                print(
                    f"warning: checkpoint {damaged[0][0]} is damaged ({_short(damaged[0][1])}); resumed from the "
                    f"older intact checkpoint {path} instead.",
                    file=sys.stderr,
                    flush=True,
                )
            return path, meta
        path, reason = damaged[0]
        raise DamagedCheckpointError(
            f"checkpoint {path} is damaged ({_short(reason)}) and no older intact checkpoint is left to resume "
            f"from. Either restore {path} (e.g. from a backup), or pass --no-resume to start over (it deletes "
            f"{self.directory})."
        )

    def _check(self, meta, path):
        fix = "pass --no-resume to start over, or use another --out"
        differing = sorted(
            k for k in set(meta["signature"]) | set(self.signature) if meta["signature"].get(k) != self.signature.get(k)
        )
        if differing:
            shown = ", ".join(
                f"{k}: {meta['signature'].get(k)!r} there, {self.signature.get(k)!r} now" for k in differing
            )
            raise CheckpointMismatchError(f"{path} was written by a different run ({shown}); {fix}.")
        model_vars, opt_vars = self._variables()
        for part, now in (("model", model_vars), ("optimizer", opt_vars)):
            # Shapes and dtypes: paths carry Keras' per-process name suffixes (dense_1, ...).
            if [entry[1:] for entry in meta[part]] != [entry[1:] for entry in _manifest(now)]:
                raise CheckpointMismatchError(
                    f"{path} holds {len(meta[part])} {part} variables that do not match this run's "
                    f"{len(now)} (another architecture or vocabulary); {fix}."
                )
        if meta["iterator"] != (self.iterator is not None):
            raise CheckpointMismatchError(f"{path} records the input position differently; {fix}.")

    def clear(self):
        """Deletes every checkpoint (`--no-resume`); the chief only."""
        if self.writer and os.path.isdir(self.directory):
            shutil.rmtree(self.directory)


def _short(reason, limit=200):
    """A TF error's first sentence, cut to `limit` characters, for a one-line message."""
    return reason if len(reason) <= limit else reason[:limit].rstrip() + "..."


def run_directory(out):
    """Where a run's live files (`checkpoints/`, `logs/`) go while it trains.

    `out` itself when it does not exist yet or already holds a run's checkpoints (the
    issue's `OUT/checkpoints/`); when `out` is an earlier output being overwritten, a
    hidden sibling `.NAME.run`, so the old output stays untouched until the new one
    replaces it. Rerunning the same command finds the checkpoints in either place.
    """
    out = os.path.abspath(os.fspath(out))
    sibling = os.path.join(os.path.dirname(out), f".{os.path.basename(out)}.run")
    if os.path.isdir(os.path.join(sibling, "checkpoints")):
        return sibling
    if not os.path.exists(out) or os.path.isdir(os.path.join(out, "checkpoints")):
        return out
    return sibling


def is_run_directory(out):
    """True when `out` (or its hidden `.NAME.run` sibling) holds a `finetune`/`pretrain` run's checkpoints."""
    return os.path.isdir(os.path.join(run_directory(out), "checkpoints"))


def reruns_without_overwrite(out, resume):
    """True when rerunning into an existing `out` needs no `--overwrite`: `out` is a killed run
    of ours (only its `checkpoints/` and `logs/`), which a rerun continues or, with
    `--no-resume`, starts over; or a killed `--overwrite` run waits in `.NAME.run` to resume."""
    if not is_run_directory(out):
        return False
    return resume or os.path.isdir(os.path.join(os.path.abspath(os.fspath(out)), "checkpoints"))


def prepare_run_directory(run_dir, out):
    """Creates `run_dir/checkpoints`, or raises `OutputError` naming `--out` and the fix."""
    from keras_bert_zoo.errors import OutputError

    try:
        os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
    except OSError as e:
        raise OutputError(f"cannot write --out {out}: {e.strerror} ({e.filename}); choose a writable path.") from None


def keep_run_files(run_dir, staged):
    """At the end of a successful run: its `logs/` move into the staged output directory
    (same file system) and its checkpoints are deleted (a finished output holds the model,
    not the optimizer's state; rerunning it needs `--overwrite`)."""
    if os.path.isdir(os.path.join(run_dir, "logs")):
        os.replace(os.path.join(run_dir, "logs"), os.path.join(staged, "logs"))
    shutil.rmtree(os.path.join(run_dir, "checkpoints"), ignore_errors=True)
    if os.path.basename(run_dir).endswith(".run") and os.path.isdir(run_dir) and not os.listdir(run_dir):
        os.rmdir(run_dir)
