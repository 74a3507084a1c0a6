"""Installing a model into the user's models folder from any of its forms, in one step.

A source is a Hugging Face hub id, a Hugging Face MarianMT folder, an OPUS-MT /
Tatoeba-Challenge Marian release (its ``.zip`` or its folder), a bundle folder, a ``.tar``
made by ``models pack``, or an https URL to a ``.tar`` or a release ``.zip``. Whatever it
is, the work happens in a staging folder inside the models folder (so the last step is a
rename on one file system), the result is verified, and only then does it take its name:
if anything fails, or the process is stopped, nothing is left behind and an installed
model of the same name is untouched. Every file and folder of the new model is fsynced
before that rename, and the models folder after it, so a power cut leaves the old model
or the whole new one. A full disk is one line (:class:`~edge_translator.core.errors.NoSpace`),
with the staging folder removed and an installed model of the name kept.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..core import diskspace, durable
from ..core.bundle import MANIFEST, load_bundle
from ..core.errors import InputError, MissingDependencyError
from ..core.locations import DEFAULT_FILE, DEFAULT_MODEL, installed, models_dir, user_models_dir, valid_name
from . import archive, fetch

logger = logging.getLogger(__name__)

#: A progress report: (what is being done, amount done, total amount or ``None``).
Progress = Callable[[str, float, float | None], None]

#: Prefixes of the folders an unfinished add or remove leaves (cleaned by the next one).
STAGING, REMOVING = ".adding-", ".removing-"
#: In a staging folder, the model that a replacement moved aside, before its name.
REPLACED = "replaced-"

#: What to do when the models folder's disk is full.
FULL_ADVICE = ("free some space and run the same command again: nothing was installed, and a model already "
               "installed under that name is kept")

#: Kinds of source :func:`identify` tells apart.
KINDS = ("hub", "hf-folder", "marian-folder", "marian-zip", "bundle", "archive", "url")


@dataclass(frozen=True)
class Source:
    """What ``models add`` was given, and the name it installs under by default."""

    kind: str
    """One of :data:`KINDS`."""
    location: str
    """The hub id, path or URL."""
    name: str
    """The installed model's default folder name."""


@dataclass(frozen=True)
class AddOptions:
    """How ``models add`` converts and installs."""

    name: str | None = None
    """Folder name of the installed model; ``None``: from the source (a hub id's model name,
    a folder's or archive's name)."""
    force: bool = False
    """Replace an installed model of that name (it stays until the new one is complete)."""
    folder: Path | None = None
    """The models folder; ``None``: :func:`~edge_translator.core.locations.user_models_dir`."""
    export: object = field(default=None)
    """``toolchain.export.ExportOptions`` for sources that are converted (``None``: the
    exporter's defaults, the int8r scheme with full validation)."""


#: Kinds of source that are installed as they are; the others are converted.
AS_THEY_ARE = ("bundle", "archive", "url")


def check_converter(source: str) -> None:
    """Fail in one line, before any work, when ``source`` must be converted and the
    ``convert`` extra is not installed.

    Raises:
        MissingDependencyError: Naming the missing module and the extra to install.
    """
    from importlib.util import find_spec

    kind = identify(source).kind
    if kind in AS_THEY_ARE:
        return
    needed = ["onnx"] + (["yaml"] if kind.startswith("marian") else []) + (["huggingface_hub"] if kind == "hub" else [])
    for module in needed:
        if find_spec(module) is None:
            raise MissingDependencyError(f"converting {source} needs the convert extra (no module {module}): "
                                         "pip install 'edge-translator[convert]'")


def _release_folder(path: Path) -> bool:
    npz = [p for p in path.glob("*.npz") if not p.name.endswith(".optimizer.npz")]
    return bool(npz) and (any(path.glob("*.vocab.yml")) or (path / "decoder.yml").is_file())


def _clean_name(text: str) -> str:
    name = "".join(c if c.isalnum() or c in "-_.+" else "-" for c in text).strip("-.")
    return name[:128] or "model"


def identify(source: str) -> Source:
    """Tell what kind of model source ``source`` is.

    Raises:
        InputError: One line: it does not exist, or is none of the kinds, and what would be.
    """
    if fetch.is_url(source):
        stem = fetch.file_name(source)
        for suffix in (*archive.SUFFIXES, ".zip"):
            if stem.lower().endswith(suffix):
                stem = stem[: -len(suffix)]
        return Source("url", source, _clean_name(stem))
    path = Path(source).expanduser()
    if path.is_file():
        if archive.is_archive(path):
            return Source("archive", str(path), _clean_name(path.name.split(".tar")[0].removesuffix(".tgz")))
        if path.suffix.lower() == ".zip":
            return Source("marian-zip", str(path), _clean_name(path.stem))
        raise InputError(f"{path} is neither a packed bundle (.tar) nor a Marian release (.zip); give a "
                         "model folder, a .tar made by `edge-translator models pack`, a release .zip or a hub id")
    if path.is_dir():
        name = _clean_name(path.resolve().name)
        if (path / MANIFEST).is_file():
            return Source("bundle", str(path), name)
        if (path / "config.json").is_file():
            return Source("hf-folder", str(path), name)
        if _release_folder(path):
            return Source("marian-folder", str(path), name)
        raise InputError(f"{path} holds no model: a bundle has bundle.json, a Hugging Face model config.json "
                         "and its weights, a Marian release a .npz with its vocab.yml and decoder.yml")
    if path.exists():
        raise InputError(f"{path} is not a file or a folder")
    parts = source.split("/")
    if len(parts) == 2 and all(parts) and not source.startswith((".", "~")) and "\\" not in source:
        return Source("hub", source, _clean_name(parts[1]))
    raise InputError(f"{source} does not exist; give a model folder, a .tar or .zip file, an https URL or a "
                     "Hugging Face hub id such as Helsinki-NLP/opus-mt-en-zh")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_leftovers(folder: Path) -> None:
    """Remove what adds and removes stopped midway left in ``folder`` (their process is gone).

    A replacement stopped between its two renames (a power cut, a kill) left the old model
    in its staging folder and none under the name: that model is put back first.
    """
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith((STAGING, REMOVING)) or not entry.is_dir():
            continue
        pid = entry.name.split("-")[1] if entry.name.count("-") >= 2 else ""
        if pid.isdigit() and _alive(int(pid)) and int(pid) != os.getpid():
            continue
        if entry.name.startswith(STAGING):
            _restore_replaced(entry, folder)
        logger.info("removing %s, left by a stopped add or remove", entry)
        shutil.rmtree(entry, ignore_errors=True)


def _restore_replaced(staging: Path, folder: Path) -> None:
    """Put back a model that a stopped replacement had moved aside, where nothing took its name."""
    for moved in staging.glob(REPLACED + "*"):
        name = moved.name[len(REPLACED):]
        if not valid_name(name) or (folder / name).exists():
            continue
        try:
            os.replace(moved, folder / name)
            durable.fsync_dir(folder)
        except OSError as exc:
            logger.warning("could not put back %s, which a stopped replacement moved aside: %s", name, exc)
            continue
        logger.warning("put back the model %s: a replacement of it stopped midway", name)


def _copy_bundle(source: Path, dest: Path, progress: Progress | None) -> None:
    """Copy a verified bundle's own files (manifest, listed files, card) and verify the copy."""
    names = archive.bundle_members(source)
    dest.mkdir()
    total = sum((source / n).stat().st_size for n in names)
    done = 0
    for name in names:
        shutil.copyfile(source / name, dest / name)
        done += (dest / name).stat().st_size
        if progress:
            progress("copying", done, total)
    load_bundle(dest)


def _convert(location: str, out: Path, name: str, options: AddOptions, progress: Progress | None) -> None:
    from dataclasses import replace

    from ..toolchain.export import ExportOptions, export

    export_options = replace(options.export or ExportOptions(), force=True, name=name)
    export(location, out, export_options, progress=progress)


def add(source: str, options: AddOptions | None = None, progress: Progress | None = None) -> Path:
    """Convert (when needed), verify and install a model; see the module docstring.

    Args:
        source: Hub id, folder, ``.tar``, ``.zip`` or https URL.
        options: Name, replacement, where, and the conversion's options.
        progress: Called as the work goes on.

    Returns:
        The installed bundle's folder.

    Raises:
        InputError: A source that is not a model, a bad name, or a name already installed.
        NoSpace: If the models folder's disk is full; nothing is installed then.
        EdgeTranslatorError: Whatever the download, unpacking, conversion or verification
            refused (one line); nothing is installed then.
    """
    options = options or AddOptions()
    folder = Path(options.folder) if options.folder else user_models_dir()
    found = identify(source)
    name = found.name if options.name is None else options.name
    if not valid_name(name):
        raise InputError(f"{name!r} cannot name a model folder; use letters, digits, '-', '_', '.' or '+' "
                         "(--name NAME)")
    final = folder / name
    if final.exists() and not options.force:
        raise InputError(f"a model called {name} is already installed ({final}); pass --force to replace it, "
                         "or --name to add this one under another name")
    try:
        durable.make_dirs(folder)
    except OSError as exc:
        if diskspace.is_full(exc):
            raise diskspace.no_space(folder, FULL_ADVICE) from None
        raise InputError(f"the models folder {folder} cannot be created ({exc.strerror or exc}); set "
                         "EDGE_TRANSLATOR_MODELS_DIR to a writable folder") from None
    clean_leftovers(folder)
    staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=folder))
    try:
        _stage(source, found, name, options, progress, staging, final)
    except OSError as exc:
        if diskspace.is_full(exc):
            raise diskspace.no_space(final, FULL_ADVICE) from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    logger.info("installed %s as %s", source, final)
    return final


def _stage(source: str, found: Source, name: str, options: AddOptions, progress: Progress | None,
           staging: Path, final: Path) -> None:
    """Fetch, unpack, copy or convert into ``staging``, verify, and install at ``final``."""
    bundle = staging / "bundle"
    kind, location = found.kind, found.location
    if kind == "url":
        def fetched(done, total):
            if progress:
                progress("downloading", done, total)
        file = fetch.download(location, staging / fetch.file_name(location), fetched)
        kind, location = identify(str(file)).kind, str(file)
        if kind not in ("archive", "marian-zip"):
            raise InputError(f"{source} is not a .tar or a .zip; give the address of a packed bundle or a "
                             "Marian release")
    if kind == "archive":
        archive.unpack(Path(location), bundle,
                       (lambda done, total: progress("unpacking", done, total)) if progress else None)
    elif kind == "bundle":
        _copy_bundle(Path(location), bundle, progress)
    else:  # a hub id is fetched by the exporter, through huggingface_hub's cache
        _convert(location, bundle, name, options, progress)
    load_bundle(bundle)
    _install(bundle, final, staging)


def _install(bundle: Path, final: Path, staging: Path) -> None:
    """Put the finished bundle at ``final``: renames only, the old one (if any) kept until then;
    the bundle's files and folders are fsynced before, the models folder after."""
    durable.fsync_tree(bundle)
    old = None
    if final.exists():  # named in the staging folder, so that a stop before the next rename can put it back
        old = staging / (REPLACED + final.name)
        os.replace(final, old)
    try:
        os.replace(bundle, final)
    except BaseException:
        if old is not None:
            os.replace(old, final)
        raise
    durable.fsync_dir(final.parent)


def remove(name: str, folder: Path | None = None) -> Path:
    """Remove an installed model (and forget it as the default).

    Raises:
        InputError: If no model of that name is installed (the embedded ones cannot be removed).
    """
    folder = Path(folder) if folder else user_models_dir()
    path = installed(name, folder)
    if path is None:
        if valid_name(name) and (models_dir() / name / MANIFEST).is_file():
            raise InputError(f"{name} is embedded in edge-translator and cannot be removed")
        raise InputError(f"no model called {name!r} is installed in {folder}; `edge-translator models list` "
                         "shows them")
    doomed = folder / f"{REMOVING}{os.getpid()}-{name}"
    os.replace(path, doomed)
    shutil.rmtree(doomed, ignore_errors=True)
    default = folder / DEFAULT_FILE
    if _read(default) == name:
        default.unlink(missing_ok=True)
    return path


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def set_default(name: str, folder: Path | None = None) -> Path:
    """Make ``name`` (installed or embedded) the model calls without ``--model`` use.

    Returns:
        The default model's bundle folder.

    Raises:
        InputError: If no such model is installed or embedded.
    """
    folder = Path(folder) if folder else user_models_dir()
    path = installed(name, folder)
    if path is None and valid_name(name) and (models_dir() / name / MANIFEST).is_file():
        path = models_dir() / name
    if path is None:
        raise InputError(f"no model called {name!r} is installed or embedded; `edge-translator models list` "
                         "shows them")
    load_bundle(path)
    durable.make_dirs(folder)
    target = folder / DEFAULT_FILE
    if name == DEFAULT_MODEL and path.parent == models_dir():
        target.unlink(missing_ok=True)  # back to the built-in default
        return path
    durable.write_atomic(target, name + "\n", temp=folder / f".{DEFAULT_FILE}.{os.getpid()}")
    return path

