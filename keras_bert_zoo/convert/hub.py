"""Preset names and `hf://ORG/NAME[@REVISION]` resolved to a local directory, through `huggingface_hub`.

Nothing here fetches a file by hand: `huggingface_hub.snapshot_download` does it, so its
cache (`HF_HUB_CACHE` / `HF_HOME`), its offline switch (`HF_HUB_OFFLINE=1`) and its auth
token (`HF_TOKEN`, `hf auth login`) apply exactly as they do for `transformers`. A repo
already in the cache loads offline; one that is not gives one line naming the repo and the
two fixes. `huggingface_hub` is an optional dependency: `pip install "keras-bert-zoo[hub]"`.

Only the files a BERT loads are asked for (config, safetensors weights, vocabulary,
tokenizer and sentence-transformers settings): never `pytorch_model.bin`, a pickle.

Examples:
>>> from keras_bert_zoo.convert.hub import parse_hf_uri
>>> parse_hf_uri("hf://google-bert/bert-base-uncased@86b5e09")
('google-bert/bert-base-uncased', '86b5e09')
"""

import os

from keras_bert_zoo.errors import CheckpointError, UsageError
from keras_bert_zoo.models import loading
from keras_bert_zoo.models.presets import BACKBONE_PRESETS, pretrained_repo

__all__ = ["parse_hf_uri", "download", "resolve"]

_HF_SCHEME = "hf://"
# What a BERT directory needs; glob patterns as `snapshot_download(allow_patterns=...)` takes them.
_WANTED_FILES = [
    "config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json",
    "modules.json", "sentence_bert_config.json", "config_sentence_transformers.json", "1_Pooling/config.json",
]


def parse_hf_uri(uri):
    """`("ORG/NAME", revision or None)` from `hf://ORG/NAME[@REVISION]`."""
    rest = uri[len(_HF_SCHEME):]
    repo_id, _, revision = rest.partition("@")
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise UsageError(f"{uri!r} is not a Hub address; write hf://ORG/NAME or hf://ORG/NAME@REVISION "
                         "(e.g. hf://google-bert/bert-base-uncased).")
    return repo_id, (revision or None)


def download(repo_id, revision=None, what=None):
    """Local directory of `repo_id` at `revision` (cached or fetched by `huggingface_hub`).

    Raises:
        CheckpointError: `huggingface_hub` is missing, or the repo is neither cached nor
            reachable (offline, no network), unknown, gated, or the revision does not exist;
            one line naming the repo and the fixes.
    """
    what = what or repo_id
    try:
        import huggingface_hub
        from huggingface_hub import errors
    except ImportError:
        raise CheckpointError(f"{what}: loading {repo_id} from the Hugging Face Hub needs huggingface_hub; "
                              'pip install "keras-bert-zoo[hub]", or pass a local directory.') from None
    from huggingface_hub import constants

    label = f"{repo_id}@{revision}" if revision else repo_id
    try:
        return huggingface_hub.snapshot_download(repo_id, revision=revision, allow_patterns=_WANTED_FILES,
                                                 library_name="keras-bert-zoo")
    except errors.RevisionNotFoundError:
        raise CheckpointError(f"{what}: revision {revision!r} does not exist in {repo_id}; "
                              "give a branch, tag or commit of that repo.") from None
    except (errors.GatedRepoError, errors.RepositoryNotFoundError):
        raise CheckpointError(f"{what}: {repo_id} is not on the Hub or needs access; check the name, or log in "
                              "(`hf auth login` or HF_TOKEN) if it is private or gated.") from None
    except (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled, OSError) as e:
        # LocalEntryNotFoundError: offline (HF_HUB_OFFLINE=1 or no network) and not cached.
        offline = "HF_HUB_OFFLINE=1" if constants.HF_HUB_OFFLINE else "the Hub could not be reached"
        if not isinstance(e, (errors.LocalEntryNotFoundError, errors.OfflineModeIsEnabled)):
            offline = f"{offline} ({' '.join(str(e).split())[:120]})"
        raise CheckpointError(
            f"{what}: {label} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and {offline}; "
            f"go online once to cache it{' (unset HF_HUB_OFFLINE)' if constants.HF_HUB_OFFLINE else ''}, or pass a "
            "local directory holding "
            "config.json + model.safetensors + vocab.txt."
        ) from None


def resolve(name_or_path, load_weights=True):
    """What `from_preset` reads: a local directory, or the preset name itself (architecture only).

    - a preset name with `load_weights=False`: the name (the table's architecture, random weights);
    - a preset name: the cached snapshot of its official Hub repo; a preset with no official
      checkpoint raises `CheckpointError` saying so (and that `load_weights=False` builds it);
    - `hf://ORG/NAME[@REVISION]`: that repo's cached snapshot (with `load_weights=False` too:
      the architecture comes from its `config.json`);
    - anything else: unchanged (a local directory).
    """
    if isinstance(name_or_path, str) and name_or_path.startswith(_HF_SCHEME):
        repo_id, revision = parse_hf_uri(name_or_path)
        return download(repo_id, revision, what=name_or_path)
    if isinstance(name_or_path, str) and name_or_path in BACKBONE_PRESETS and not os.path.isdir(name_or_path):
        if not load_weights:
            return name_or_path
        repo_id = pretrained_repo(name_or_path)
        if repo_id is None:
            raise CheckpointError(
                f"{name_or_path}: Google released no pretrained checkpoint of this size and casing, so there is "
                "none to load; pass load_weights=False (bert-zoo pretrain --preset) to build it from scratch, or "
                "a local checkpoint directory."
            )
        return download(repo_id, what=name_or_path)
    return name_or_path


loading.register_resolver(resolve)
