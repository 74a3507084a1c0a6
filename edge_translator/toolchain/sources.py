"""Where the exporter's weights come from: a Hugging Face folder, a Marian release (folder or
``.zip``) or a hub id, each read with numpy alone into :class:`.marian.MarianWeights`,
beside a folder holding the tokenizer files (``source.spm``, ``target.spm``, ``vocab.json``,
``generation_config.json``) that the bundle is made with.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..core.errors import ExportError, require
from .marian import MarianWeights, check_source_dir, looks_local

logger = logging.getLogger(__name__)

#: What a hub model's download takes: the config, the weights in either form, the tokenizer.
HUB_FILES = ("config.json", "generation_config.json", "*.safetensors", "model.safetensors.index.json",
             "pytorch_model.bin", "source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "README.md")


def source_kind(src: str | Path) -> str:
    """``"hf-folder"``, ``"marian-folder"``, ``"marian-zip"`` or ``"hub"``.

    Raises:
        ExportError: A local path that is none of them.
    """
    path = Path(src)
    if path.is_file() and path.suffix.lower() == ".zip":
        return "marian-zip"
    if path.is_dir() and not (path / "config.json").is_file() and any(
            p for p in path.glob("*.npz") if not p.name.endswith(".optimizer.npz")):
        return "marian-folder"
    if path.exists() or looks_local(str(src)):
        check_source_dir(path)  # one line on what is missing
        return "hf-folder"
    return "hub"


def check_source(src: str | Path) -> str:
    """:func:`source_kind`, checking a release's files too before any long work starts."""
    kind = source_kind(src)
    if kind == "marian-folder":
        from .marianrelease import release_files

        release_files(Path(src))
    return kind


def hub_snapshot(repo: str) -> Path:
    """A hub model's files, through huggingface_hub's cache (resumed when interrupted).

    Raises:
        ExportError: One line: unknown or gated repository, or no network.
    """
    hub = require("huggingface_hub", "convert")
    from huggingface_hub import errors

    try:
        return Path(hub.snapshot_download(repo, allow_patterns=list(HUB_FILES)))
    except (errors.RepositoryNotFoundError, errors.GatedRepoError) as exc:
        raise ExportError(f"{repo} is not a model the Hugging Face hub lets this machine download "
                          f"({type(exc).__name__}); check the id, or log in with `hf auth login`") from None
    except Exception as exc:  # noqa: BLE001 - offline, no route, a proxy, a timeout: all mean the same here
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0][:200]
        raise ExportError(f"the Hugging Face hub cannot be reached for {repo} ({reason}); on a machine with a "
                          f"network, download the model folder (`hf download {repo} --local-dir DIR`), copy it "
                          "here and run `edge-translator models add FOLDER`") from None


def open_source(src: str | Path, scratch: Path) -> tuple[MarianWeights, Path]:
    """Read a model's weights and find (or write, under ``scratch``) its tokenizer folder.

    Args:
        src: A Hugging Face folder, a Marian release folder or ``.zip``, or a hub id.
        scratch: An empty folder for what a release unpacks to; the caller removes it.

    Returns:
        ``(weights, tokenizer folder)``.

    Raises:
        ExportError: One line naming what is missing, unreadable or not converted.
    """
    kind = source_kind(src)
    if kind == "hub":
        src, kind = hub_snapshot(str(src)), "hf-folder"
    if kind == "hf-folder":
        from .statedict import read_hf_dir

        return read_hf_dir(Path(src)), Path(src)
    from .marianrelease import prepare_release, read_release, unpack_release

    folder = unpack_release(Path(src), scratch / "release") if kind == "marian-zip" else Path(src)
    weights, _, _ = read_release(folder)
    return weights, prepare_release(folder, scratch / "tokenizer")
