"""The models dialog: the bundles the app can use, their cards and figures, and switching.

:func:`find_bundles` lists the embedded bundles, ``$EDGE_TRANSLATOR_MODEL`` and the user's
models folder, each checked with :func:`~edge_translator.core.bundle.load_bundle` (a broken
one carries its error). :class:`ModelsDialog` shows them and returns the chosen path; the
window then loads it through the :class:`~edge_translator.gui.session.ModelSession`, so a
model is switched without a restart. Scanning (checksums) and copying run off the UI thread.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

from PySide6.QtCore import QObject, QStandardPaths, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..core.bundle import MANIFEST, load_bundle, read_manifest, scheme_name
from ..core.errors import EdgeTranslatorError
from ..core.translator import ENV_MODEL, models_dir

logger = logging.getLogger(__name__)

#: Keys of ``bundle.json`` whose figures the dialog shows.
FIGURE_KEYS = ("validation", "evaluation")
_ENTRY_ROLE = Qt.ItemDataRole.UserRole


@dataclass(frozen=True)
class BundleEntry:
    """A model bundle the app found, and what its manifest says about it."""

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


def user_models_dir() -> Path:
    """The user's models folder: ``<AppDataLocation>/models`` (not created here)."""
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    return Path(base or Path.home() / ".edge-translator") / "models"


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
    """The bundles the app can offer: embedded ones, ``$EDGE_TRANSLATOR_MODEL``, and the
    sub-folders of the user's models folder that hold a ``bundle.json``.

    Every bundle is verified (its files' checksums), so call it off the UI thread.

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
    """The text the dialog shows for a bundle: a line of facts, the card, the figures."""
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


class _Worker(QObject):
    """Reports a background scan or copy back to the dialog (queued to the UI thread)."""

    scanned = Signal(list, object)
    """The entries, and the path to select (or ``None``)."""
    added = Signal(object, str)
    """The bundle's path in the user folder, or ``None`` with the reason it was refused."""

    def send(self, name: str, *args) -> None:
        try:
            getattr(self, name).emit(*args)
        except RuntimeError:  # the dialog was closed meanwhile
            pass


class ModelsDialog(QDialog):
    """Choose the model bundle; after ``exec()`` returns Accepted, :attr:`chosen` is its path."""

    refreshed = Signal()
    """The list was (re)filled."""

    def __init__(self, current: Path | None, parent: QWidget | None = None, user_dir: Path | None = None):
        """Args:
            current: The loaded bundle, preselected and marked.
            parent: The Qt parent.
            user_dir: The user's models folder; ``None``: :func:`user_models_dir`.
        """
        super().__init__(parent)
        self.current = Path(current) if current else None
        self.user_dir = Path(user_dir) if user_dir else user_models_dir()
        self.chosen: Path | None = None
        self.entries: list[BundleEntry] = []
        self._worker = _Worker(self)
        self._worker.scanned.connect(self._fill)
        self._worker.added.connect(self._added)
        self.setWindowTitle("Models")
        self.setAccessibleName("Models")
        self.resize(860, 560)
        self._build()
        self.refresh(select=self.current)

    def _build(self) -> None:
        layout = QVBoxLayout(self)
        splitter = QSplitter()
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        label = QLabel("&Bundles:")
        left_layout.addWidget(label)
        self.list = QListWidget()
        self.list.setAccessibleName("Model bundles")
        label.setBuddy(self.list)
        self.list.currentItemChanged.connect(self._selected)
        self.list.itemActivated.connect(self._activated)
        left_layout.addWidget(self.list, 1)
        splitter.addWidget(left)
        self.card = QTextBrowser()
        self.card.setAccessibleName("Model card")
        self.card.setOpenExternalLinks(True)
        splitter.addWidget(self.card)
        splitter.setStretchFactor(1, 2)
        layout.addWidget(splitter, 1)

        self.status = QLabel("Looking for models…")
        self.status.setAccessibleName("Models status")
        self.status.setWordWrap(True)
        layout.addWidget(self.status)

        row = QHBoxLayout()
        self.add_button = QPushButton("&Add folder…")
        self.add_button.setAccessibleName("Add a model bundle folder")
        self.add_button.setToolTip("Copy a bundle made by `edge-translator export` into your models folder")
        self.add_button.clicked.connect(self.choose_folder)
        row.addWidget(self.add_button)
        self.user_button = QPushButton("Open &user models folder")
        self.user_button.setAccessibleName("Open the user models folder")
        self.user_button.setToolTip(str(self.user_dir))
        self.user_button.clicked.connect(self._open_user_dir)
        row.addWidget(self.user_button)
        row.addStretch(1)
        self.buttons = QDialogButtonBox()
        self.switch_button = self.buttons.addButton("&Switch", QDialogButtonBox.ButtonRole.AcceptRole)
        self.switch_button.setAccessibleName("Switch to the selected model")
        self.switch_button.setEnabled(False)
        self.switch_button.setDefault(True)
        cancel = self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        cancel.setAccessibleName("Cancel")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        row.addWidget(self.buttons)
        layout.addLayout(row)

    # -- scanning --------------------------------------------------------------------------

    def refresh(self, select: Path | None = None) -> None:
        """Look for bundles again on a worker thread; :attr:`refreshed` follows."""
        self.status.setText("Looking for models…")
        worker, user_dir, current = self._worker, self.user_dir, self.current

        def scan() -> None:
            try:
                entries = find_bundles(user_dir)
                known = {e.path.resolve() for e in entries}
                if current is not None and current.resolve() not in known:
                    entries.append(describe(current, "other"))
            except Exception:  # noqa: BLE001 - an empty list, never a crash
                logger.exception("looking for models failed")
                entries = []
            worker.send("scanned", entries, select)

        threading.Thread(target=scan, name="edge-translator-models", daemon=True).start()

    @Slot(list, object)
    def _fill(self, entries: list, select) -> None:
        self.entries = list(entries)
        self.list.clear()
        want = Path(select).resolve() if select else None
        current = self.current.resolve() if self.current else None
        chosen_row = None
        for entry in self.entries:
            here = entry.path.resolve()
            text = f"{entry.name}\n{entry.origin} · {entry.scheme} · {entry.size_mb:.1f} MB"
            if here == current:
                text = text.replace("\n", " (current)\n", 1)
            if entry.error:
                text += f"\nerror: {entry.error}"
            item = QListWidgetItem(text)
            item.setData(_ENTRY_ROLE, entry)
            item.setToolTip(entry.error or str(entry.path))
            item.setData(Qt.ItemDataRole.AccessibleTextRole,
                         f"{entry.name}, {entry.origin}, {entry.scheme}, {entry.size_mb:.1f} megabytes"
                         + (", current" if here == current else "") + (", broken" if entry.error else ""))
            if here == current:
                font = QFont(item.font())
                font.setBold(True)
                item.setFont(font)
            if entry.error:
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled & ~Qt.ItemFlag.ItemIsSelectable)
            self.list.addItem(item)
            if here == want and not entry.error:
                chosen_row = self.list.count() - 1
        if chosen_row is not None:
            self.list.setCurrentRow(chosen_row)
        else:
            self._selected(None, None)
        usable = sum(1 for e in self.entries if not e.error)
        broken = len(self.entries) - usable
        self.status.setText(f"{usable} usable bundle(s)" + (f", {broken} broken" if broken else "")
                            + f". Your models folder: {self.user_dir}")
        self.refreshed.emit()

    # -- selection -------------------------------------------------------------------------

    def selected_entry(self) -> BundleEntry | None:
        """The selected bundle, or ``None``."""
        item = self.list.currentItem()
        return item.data(_ENTRY_ROLE) if item is not None else None

    def select_path(self, path: Path) -> bool:
        """Select the bundle at ``path``; ``False`` when it is not listed or is broken."""
        want = Path(path).resolve()
        for row in range(self.list.count()):
            entry = self.list.item(row).data(_ENTRY_ROLE)
            if entry.path.resolve() == want and not entry.error:
                self.list.setCurrentRow(row)
                return True
        return False

    def _usable(self) -> bool:
        entry = self.selected_entry()
        return entry is not None and entry.error is None

    @Slot(QListWidgetItem, QListWidgetItem)
    def _selected(self, item, _previous) -> None:
        entry = item.data(_ENTRY_ROLE) if item is not None else None
        self.switch_button.setEnabled(entry is not None and entry.error is None)
        if entry is None:
            self.card.setMarkdown("Select a model to see its card.")
            return
        is_current = self.current is not None and entry.path.resolve() == self.current.resolve()
        self.card.setMarkdown(entry_markdown(entry, is_current))

    @Slot(QListWidgetItem)
    def _activated(self, _item) -> None:
        self.accept()

    @Slot()
    def accept(self) -> None:
        """Accept with the selected bundle as :attr:`chosen` (nothing happens without one)."""
        if not self._usable():
            return
        self.chosen = self.selected_entry().path
        super().accept()

    # -- adding ----------------------------------------------------------------------------

    @Slot()
    def choose_folder(self) -> None:
        """Ask for a bundle directory and add it."""
        folder = QFileDialog.getExistingDirectory(self, "Model bundle folder", str(Path.home()))
        if folder:
            self.add_folder(Path(folder))

    def add_folder(self, folder: Path) -> None:
        """Check ``folder`` with ``load_bundle`` and copy it into the user models folder
        (on a worker thread); it is then listed and selected, or the error is shown."""
        self.add_button.setEnabled(False)
        self.status.setText(f"Checking {folder}…")
        worker, user_dir = self._worker, self.user_dir

        def add() -> None:
            try:
                load_bundle(folder)
                source = folder.resolve()
                if source.parent == user_dir.resolve():
                    worker.send("added", source, "")
                    return
                target = user_dir / source.name
                if target.exists():
                    raise EdgeTranslatorError(f"{target} already exists; rename the bundle folder or remove "
                                              "the one in your models folder")
                user_dir.mkdir(parents=True, exist_ok=True)
                partial = user_dir / f".{source.name}.copying"
                shutil.rmtree(partial, ignore_errors=True)
                shutil.copytree(source, partial)
                partial.rename(target)
            except EdgeTranslatorError as exc:
                worker.send("added", None, str(exc))
            except OSError as exc:
                worker.send("added", None, f"cannot copy {folder} into {user_dir}: {exc}")
            else:
                worker.send("added", target, "")

        threading.Thread(target=add, name="edge-translator-add-model", daemon=True).start()

    @Slot(object, str)
    def _added(self, path, error: str) -> None:
        self.add_button.setEnabled(True)
        if path is None:
            self.status.setText("The folder was not added.")
            self.show_error("Not a usable model bundle", error)
            return
        self.refresh(select=Path(path))

    @Slot()
    def _open_user_dir(self) -> None:
        try:
            self.user_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            self.show_error("Cannot open the models folder", f"cannot create {self.user_dir}: {exc}")
            return
        self.open_folder(self.user_dir)

    def open_folder(self, path: Path) -> None:
        """Show a folder in the desktop's file manager."""
        QDesktopServices.openUrl(QUrl.fromLocalFile(str(path)))

    def show_error(self, title: str, text: str) -> None:
        """Tell the user about an error (a dialog; tests intercept it)."""
        QMessageBox.warning(self, title, text)
