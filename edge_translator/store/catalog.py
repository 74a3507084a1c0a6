"""The model bundles there are: the embedded ones, ``$EDGE_TRANSLATOR_MODEL`` and the user's
models folder, each described from its manifest and checked (a broken one carries its error).

The desktop app's Models dialog and ``edge-translator models list`` show the same list.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.bundle import MANIFEST, load_bundle, read_manifest, scheme_name
from ..core.errors import EdgeTranslatorError
from ..core.locations import ENV_MODEL, models_dir, user_models_dir

logger = logging.getLogger(__name__)

#: Keys of ``bundle.json`` whose figures a listing shows.
FIGURE_KEYS = ("validation", "evaluation")


@dataclass(frozen=True)
class BundleEntry:
    """A model bundle found in one of the places, and what its manifest says about it."""

    path: Path
    """The bundle directory."""
    name: str
    """The model's name (the folder's name when the manifest cannot be read)."""
    origin: str
    """``"embedded"``, ``"environment"`` or ``"user folder"`` (``"other"``: the current
    bundle, found in none of them)."""
    scheme: str
    """Quantization mode of the weights (``"none"`` for FP32, ``"?"`` when unknown)."""
    size_mb: float
    """Size of the files in the folder, in megabytes (10⁶ bytes)."""
    targets: tuple[str, ...] = ()
    """Target variants it offers."""
    card: str = ""
    """The model card (Markdown): the bundle's README.md, else the embedded models' README."""
    figures: dict = field(default_factory=dict)
    """The manifest's ``validation`` and ``evaluation`` records."""
    error: str | None = None
    """Why :func:`load_bundle` refuses it; ``None`` for a usable bundle."""


def _folder_size(path: Path) -> float:
    try:
        return sum(p.stat().st_size for p in path.iterdir() if p.is_file()) / 1e6
    except OSError:
        return 0.0


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def describe(path: Path, origin: str) -> BundleEntry:
    """Check one bundle directory and describe it (its error too, when it is broken).

    Args:
        path: The bundle directory.
        origin: Where it was found.

    Returns:
        The :class:`BundleEntry`.
    """
    path = Path(path)
    error = None
    try:
        bundle = load_bundle(path)
        manifest = bundle.manifest
    except EdgeTranslatorError as exc:
        error = str(exc)
        try:
            manifest = read_manifest(path)
        except EdgeTranslatorError:
            manifest = {}
    except Exception as exc:  # noqa: BLE001 - a broken bundle is listed, never a crash
        logger.warning("reading %s failed", path, exc_info=True)
        error = f"{type(exc).__name__}: {exc}"
        manifest = {}
    model = manifest.get("model") if isinstance(manifest.get("model"), dict) else {}
    quantization = manifest.get("quantization") if isinstance(manifest.get("quantization"), dict) else {}
    targets = manifest.get("targets") if isinstance(manifest.get("targets"), dict) else {}
    card = _read_text(path / "README.md")
    if not card and origin == "embedded":
        card = _read_text(path.parent / "README.md")
    return BundleEntry(
        path=path,
        name=str(model.get("name") or path.name),
        origin=origin,
        scheme=scheme_name(str(quantization.get("mode") or ("none" if manifest else "?"))),
        size_mb=_folder_size(path) if path.is_dir() else 0.0,
        targets=tuple(targets),
        card=card,
        figures={key: manifest[key] for key in FIGURE_KEYS if key in manifest},
        error=error,
    )


def _bundle_dirs(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
    except OSError:
        return []


def find_bundles(user_dir: Path | None = None) -> list[BundleEntry]:
    """The bundles there are to choose from: embedded ones, ``$EDGE_TRANSLATOR_MODEL``, and the
    sub-folders of the user's models folder that hold a ``bundle.json``.

    Every bundle is verified (its files' checksums), so a GUI calls it off its UI thread.

    Args:
        user_dir: The user's models folder; ``None``: :func:`user_models_dir`.

    Returns:
        One entry per bundle directory (a directory found twice is listed once, under its
        first origin), broken bundles included with their ``error``.
    """
    found: list[tuple[Path, str]] = [(p, "embedded") for p in _bundle_dirs(models_dir())]
    env = os.environ.get(ENV_MODEL)
    if env:
        found.append((Path(env), "environment"))
    found += [(p, "user folder") for p in _bundle_dirs(Path(user_dir) if user_dir else user_models_dir())]
    entries, seen = [], set()
    for path, origin in found:
        key = path.resolve()
        if key in seen:
            continue
        seen.add(key)
        entries.append(describe(path, origin))
    return entries


def _figure_lines(value, prefix: str = "") -> list[str]:
    if isinstance(value, dict):
        lines = []
        for key, sub in value.items():
            lines += _figure_lines(sub, f"{prefix}.{key}" if prefix else str(key))
        return lines
    if isinstance(value, float):
        value = f"{value:.4g}"
    return [f"- {prefix}: {value}"]


def entry_markdown(entry: BundleEntry, current: bool = False) -> str:
    """What the desktop app shows for a bundle: a line of facts, the card, the figures."""
    facts = [entry.origin, f"weights {entry.scheme}", f"{entry.size_mb:.1f} MB"]
    if entry.targets:
        facts.append("targets " + ", ".join(entry.targets))
    head = f"**{entry.name}**{' (current)' if current else ''} — {' · '.join(facts)}  \n`{entry.path}`"
    parts = [head]
    if entry.error:
        parts.append(f"**Cannot be used:** {entry.error}")
    if entry.card:
        parts.append("---\n\n" + entry.card.strip())
    if entry.figures:
        figures = ["## Figures recorded in bundle.json"]
        for key, value in entry.figures.items():
            figures.append(f"### {key}\n\n" + "\n".join(_figure_lines(value)))
        parts.append("\n\n".join(figures))
    return "\n\n".join(parts) + "\n"
