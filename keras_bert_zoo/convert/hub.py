"""Preset names and `hf://ORG/NAME[@REVISION]` resolved to a local directory, through `huggingface_hub`.

Nothing here fetches a file by hand: `huggingface_hub.snapshot_download` does it, so its
cache (`HF_HUB_CACHE` / `HF_HOME`), its offline switch (`HF_HUB_OFFLINE=1`) and its auth
token (`HF_TOKEN`, `hf auth login`) apply exactly as they do for `transformers`. A repo
already in the cache loads offline; one that is not gives one line naming the repo and the
two fixes. `huggingface_hub` is an optional dependency: `pip install "keras-bert-zoo[hub]"`.

Only the files a BERT loads are asked for (config, one weight file, vocabulary, tokenizer and
sentence-transformers settings): never `pytorch_model.bin`, a pickle. The weight file is the
first of `model.safetensors`, `tf_model.h5` (HF's TF2 file, HDF5: data, as safe to read) that
the repo holds, so Google's Turc et al. miniatures (`google/bert_uncased_L-2_H-128_A-2`, ...),
which predate safetensors, load from their `tf_model.h5`. Which files a repo holds is asked of
the Hub (`HfApi.model_info`); offline, or when the Hub cannot be reached, the cached snapshot
is looked at instead.

Examples:
>>> from keras_bert_zoo.convert.hub import parse_hf_uri
>>> parse_hf_uri("hf://google-bert/bert-base-uncased@86b5e09")
('google-bert/bert-base-uncased', '86b5e09')
"""

import os

from keras_bert_zoo.convert.checkpoint import HF_WEIGHT_FILES, hf_weights_file
from keras_bert_zoo.convert.safetensors_io import SAFE_FILE_FIXES
from keras_bert_zoo.errors import CheckpointError, MissingPathError, UnsafeFileError, UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.presets import known_presets_hint, pretrained_repo, tokenizer_settings
from keras_bert_zoo.preprocessing.preset_source import register_tokenizer_resolver

__all__ = ["parse_hf_uri", "download", "resolve", "resolve_tokenizer"]

_HF_SCHEME = "hf://"
# What a BERT directory needs besides its weight file (`_weights_file`); glob patterns as
# `snapshot_download(allow_patterns=...)` takes them.
_WANTED_FILES = [
    "config.json",
    "vocab.txt",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
]
# What a tokenizer reads (`config.json`: to check the vocabulary fits the model's embedding table).
_TOKENIZER_FILES = ["vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "config.json"]
# What the local directory that replaces a repo must hold, in the offline message.
_NEEDS = {
    "model": f"config.json + {' or '.join(HF_WEIGHT_FILES)} + vocab.txt",
    "tokenizer": "vocab.txt (+ tokenizer_config.json)",
}


def parse_hf_uri(uri):
    """`("ORG/NAME", revision or None)` from `hf://ORG/NAME[@REVISION]`."""
    rest = uri[len(_HF_SCHEME) :]
    repo_id, _, revision = rest.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UsageError(
            f"{uri!r} is not a Hub address; write hf://ORG/NAME or hf://ORG/NAME@REVISION "
            "(e.g. hf://google-bert/bert-base-uncased)."
        )
    return repo_id, (revision or None)


def download(repo_id, revision=None, what=None, files="model"):
    """Local directory of `repo_id` at `revision` (cached or fetched by `huggingface_hub`).

    `files="model"`: the files a BERT loads (`_WANTED_FILES` and one weight file);
    `"tokenizer"`: only those a tokenizer reads (`_TOKENIZER_FILES`), no weights.

    Raises:
        CheckpointError: `huggingface_hub` is missing, or the repo is neither cached nor
            reachable (offline, no network), unknown, gated, or the revision does not exist;
            one line naming the repo and the fixes.
        UnsafeFileError: the repo holds no `model.safetensors` or `tf_model.h5` (only a pickle).
    """
    what = what or repo_id
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        raise CheckpointError(
            f"{what}: loading {repo_id} from the Hugging Face Hub needs huggingface_hub; "
            'pip install "keras-bert-zoo[hub]", or pass a local directory.'
        ) from None

    label = f"{repo_id}@{revision}" if revision else repo_id
    try:
        patterns = _TOKENIZER_FILES
        if files == "model":
            weights, unreachable = _weights_file(repo_id, revision, what, label)
            if weights is None:
                config = huggingface_hub.try_to_load_from_cache(repo_id, "config.json", revision=revision)
                raise _not_cached(what, label, unreachable, partly=isinstance(config, str))
            patterns = _WANTED_FILES + [weights]
        return huggingface_hub.snapshot_download(
            repo_id, revision=revision, allow_patterns=patterns, library_name="keras-bert-zoo"
        )
    except errors.RevisionNotFoundError:
        raise CheckpointError(
            f"{what}: revision {revision!r} does not exist in {repo_id}; give a branch, tag or commit of that repo."
        ) from None
    except (errors.GatedRepoError, errors.RepositoryNotFoundError):
        raise CheckpointError(
            f"{what}: {repo_id} is not on the Hub or needs access; check the name, or log in "
            "(`hf auth login` or HF_TOKEN) if it is private or gated."
        ) from None
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled, OSError) as e:
        # LocalEntryNotFoundError: offline (HF_HUB_OFFLINE=1 or no network) and not cached.
        reason = None
        if not isinstance(e, (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)):
            reason = f"the Hub could not be reached ({' '.join(str(e).split())[:120]})"
        raise _not_cached(what, label, reason, needs=_NEEDS[files]) from None


def _not_cached(what, label, reason=None, partly=False, needs=_NEEDS["model"]):
    """The error for a repo the cache lacks (`partly`: it holds the repo but no weight file), the same
    line for a backbone, a task model and a tokenizer; `needs`: what a local directory must hold."""
    from huggingface_hub import constants

    reason = reason or ("HF_HUB_OFFLINE=1" if constants.HF_HUB_OFFLINE else "the Hub could not be reached")
    where = (
        f"the Hugging Face cache ({constants.HF_HUB_CACHE}) holds {label} without {' or '.join(HF_WEIGHT_FILES)}"
        if partly
        else f"{label} is not in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    )
    return CheckpointError(
        f"{what}: its files come from the Hub repo {label}, which could not be fetched: {where} and {reason}; "
        f"go online once to cache it{' (unset HF_HUB_OFFLINE)' if constants.HF_HUB_OFFLINE else ''}, or pass the "
        f"path of a local directory holding {needs} instead of {what!r}."
    )


def _weights_file(repo_id, revision, what, label):
    """`(name, why the Hub was not asked)`: the first of `HF_WEIGHT_FILES` the repo holds.

    The Hub lists the repo's files; offline (`HF_HUB_OFFLINE=1`) or when it cannot be reached,
    the cached snapshot of `revision` is looked at, and `name` is None when it holds neither file.
    """
    import huggingface_hub
    from huggingface_hub import constants, errors

    unreachable = None
    if not constants.HF_HUB_OFFLINE:
        try:
            info = huggingface_hub.HfApi(library_name="keras-bert-zoo").model_info(repo_id, revision=revision)
        except (errors.RepositoryNotFoundError, errors.RevisionNotFoundError):
            raise  # download's own messages (GatedRepoError is a RepositoryNotFoundError)
        except Exception as e:  # no network, Hub down, proxy: the cache decides, as in snapshot_download
            unreachable = f"the Hub could not be reached ({type(e).__name__}: {' '.join(str(e).split())[:100]})"
        else:
            files = sorted(sibling.rfilename for sibling in info.siblings or ())
            name = hf_weights_file(files)
            if name is None:
                raise UnsafeFileError(
                    f"{what}: {label} holds no {' or '.join(HF_WEIGHT_FILES)} (its files: {', '.join(files[:8])}"
                    f"{', ...' if len(files) > 8 else ''}); a pickle (pytorch_model.bin) can run code when "
                    f"opened, so it is never loaded, and sharded weights are not read. {SAFE_FILE_FIXES}"
                )
            return name, None
    for name in HF_WEIGHT_FILES:
        if isinstance(huggingface_hub.try_to_load_from_cache(repo_id, name, revision=revision), str):
            return name, unreachable
    return None, unreachable


def resolve(name_or_path, load_weights=True):
    """What `from_preset` reads: a local directory, or the preset name itself (architecture only).

    - a preset name with `load_weights=False`: the name (the table's architecture, random weights);
    - a preset name: the cached snapshot of its official Hub repo; a preset with no official
      checkpoint raises `CheckpointError` saying so (and that `load_weights=False` builds it);
    - `hf://ORG/NAME[@REVISION]`: that repo's cached snapshot (with `load_weights=False` too:
      the architecture comes from its `config.json`);
    - anything else: unchanged (a local directory; one named like a preset is a directory, not
      the preset: `loading.is_preset_name`).
    """
    if isinstance(name_or_path, str) and name_or_path.startswith(_HF_SCHEME):
        repo_id, revision = parse_hf_uri(name_or_path)
        return download(repo_id, revision, what=name_or_path)
    if loading.is_preset_name(name_or_path):  # an existing directory of that name is read instead
        if not load_weights:
            return name_or_path
        fix = "pass load_weights=False (bert-zoo pretrain --preset) to build it from scratch, or a local checkpoint"
        return download(_preset_repo(name_or_path, f"none to load; {fix} directory"), what=name_or_path)
    return name_or_path


def resolve_tokenizer(name_or_path):
    """`(directory, defaults)` a tokenizer reads, resolved as `resolve` resolves a backbone's checkpoint.

    A preset name fetches its official repo's tokenizer files only (no weights); `defaults` are the
    preset's `tokenizer_settings`, which stand in for a missing `tokenizer_config.json` (HF's defaults
    for the Turc et al. repos). `hf://ORG/NAME[@REV]` fetches that repo's. A local directory (one named
    like a preset included) comes back as it is; any other string is neither, and says so.
    """
    if isinstance(name_or_path, str) and name_or_path.startswith(_HF_SCHEME):
        repo_id, revision = parse_hf_uri(name_or_path)
        return download(repo_id, revision, what=name_or_path, files="tokenizer"), {}
    if loading.is_preset_name(name_or_path):
        repo_id = _preset_repo(name_or_path, "no vocabulary to load; pass a directory holding its vocab.txt")
        return download(repo_id, what=name_or_path, files="tokenizer"), tokenizer_settings(name_or_path)
    if isinstance(name_or_path, str) and not os.path.isdir(name_or_path):
        raise MissingPathError(
            f"preset directory not found: {name_or_path!r} is neither a directory nor a preset name; give a "
            f"directory holding vocab.txt, or a preset name. {known_presets_hint(name_or_path)}"
        )
    return name_or_path, {}


def _preset_repo(name, none_to_load):
    """The Hub repo of preset `name`; a preset Google released no checkpoint of raises, ending with `none_to_load`."""
    repo_id = pretrained_repo(name)
    if repo_id is None:
        raise CheckpointError(
            f"{name}: Google released no pretrained checkpoint of this size and casing, so there is {none_to_load}."
        )
    return repo_id


loading.register_resolver(resolve)
register_tokenizer_resolver(resolve_tokenizer)
