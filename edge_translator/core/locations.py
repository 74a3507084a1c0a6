"""Where model bundles live, and which one a call without ``--model`` gets.

Three places, the same ones the desktop app lists: the embedded bundles inside the package,
``$EDGE_TRANSLATOR_MODEL``, and the user's models folder that ``edge-translator models add``
installs into (``$EDGE_TRANSLATOR_MODELS_DIR``, else the platform's application-data
folder, the one Qt's ``AppDataLocation`` names for the desktop app). Nothing here creates a
folder or reads the environment before it is called.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from .errors import BundleError

ENV_MODEL = "EDGE_TRANSLATOR_MODEL"
ENV_MODELS_DIR = "EDGE_TRANSLATOR_MODELS_DIR"
#: Name of the embedded default bundle under ``models/``.
DEFAULT_MODEL = "tatoeba-en-zh-small"
#: The file in the user's models folder that names the default model (``models default NAME``).
DEFAULT_FILE = "default"
#: The application's folder names, as the desktop app gives them to Qt (organization, application).
APP_FOLDERS = ("edge-translator", "edge-translator")


def models_dir() -> Path:
    """Where the embedded bundles live: inside the installed package, or the source tree."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "models", package.parent / "models"):
        if candidate.is_dir():
            return candidate
    return package / "models"


def _app_data() -> Path:
    """The platform's per-user application-data folder (Qt's ``GenericDataLocation``)."""
    home = Path.home()
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    if sys.platform == "darwin":
        return home / "Library" / "Application Support"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share")


def user_models_dir() -> Path:
    """The user's models folder (not created here): ``$EDGE_TRANSLATOR_MODELS_DIR``, else
    ``<application data>/edge-translator/edge-translator/models``."""
    override = os.environ.get(ENV_MODELS_DIR)
    if override:
        return Path(override).expanduser()
    return _app_data().joinpath(*APP_FOLDERS, "models")


def valid_name(name: str) -> bool:
    """Whether ``name`` can be an installed model's folder name: no separators, no dots first."""
    return bool(name) and name == Path(name).name and not name.startswith(".") and len(name) <= 128 \
        and all(c.isalnum() or c in "-_.+" for c in name)


def installed(name: str, folder: Path | None = None) -> Path | None:
    """The installed bundle called ``name`` in the user's models folder, or ``None``."""
    if not valid_name(name):
        return None
    path = (folder or user_models_dir()) / name
    return path if (path / "bundle.json").is_file() else None


def default_name(folder: Path | None = None) -> str | None:
    """The model ``edge-translator models default NAME`` chose, or ``None``."""
    try:
        name = ((folder or user_models_dir()) / DEFAULT_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return name or None


def resolve_model(path: str | Path | None = None) -> Path:
    """The bundle to use: ``path`` (a bundle directory, or the name of an installed model),
    else ``$EDGE_TRANSLATOR_MODEL``, else the user's default (``models default``), else the
    embedded default.

    Raises:
        BundleError: If the user's default is no longer installed, or no path is given and
            the embedded default is missing.
    """
    for given in (path, os.environ.get(ENV_MODEL)):
        if given:
            given_path = Path(given).expanduser()
            if not given_path.exists() and isinstance(given, str):
                found = installed(given)
                if found is not None:
                    return found
            return given_path
    chosen = default_name()
    if chosen:
        found = installed(chosen)
        if found is None and (models_dir() / chosen / "bundle.json").is_file():
            found = models_dir() / chosen
        if found is None:
            raise BundleError(f"the default model {chosen!r} (set by `edge-translator models default`) is not "
                              f"installed in {user_models_dir()}; run `edge-translator models default "
                              f"{DEFAULT_MODEL}` or add it again")
        return found
    default = models_dir() / DEFAULT_MODEL
    if not default.is_dir():
        raise BundleError(
            f"the embedded default model is missing ({default}); reinstall edge-translator or "
            f"pass --model / set {ENV_MODEL} to a bundle made by `edge-translator export`"
        )
    return default
