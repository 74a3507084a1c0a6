"""The models dialog: the bundles the app can use, their cards and figures, and switching.

:func:`~edge_translator.store.catalog.find_bundles` lists the embedded bundles,
``$EDGE_TRANSLATOR_MODEL`` and the user's models folder (the one ``edge-translator models``
manages), each checked (a broken one carries its error). :class:`ModelsDialog` shows them and returns the chosen path; the
window then loads it through the :class:`~edge_translator.gui.session.ModelSession`, so a
model is switched without a restart. Scanning (checksums) and adding run off the UI thread;
Add… takes every source ``edge-translator models add`` takes (:mod:`..store.install`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices, QFont
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from ..core.bundle import load_bundle
from ..core.errors import EdgeTranslatorError
from ..core.locations import user_models_dir
from ..store.catalog import BundleEntry, describe, entry_markdown, find_bundles  # noqa: F401 - re-exported

logger = logging.getLogger(__name__)

_ENTRY_ROLE = Qt.ItemDataRole.UserRole


class _Worker(QObject):
    """Reports a background scan or copy back to the dialog (queued to the UI thread)."""

    scanned = Signal(list, object)
    """The entries, and the path to select (or ``None``)."""
    added = Signal(object, str)
    """The bundle's path in the user folder, or ``None`` with the reason it was refused
    (empty when the add was cancelled)."""
    progressed = Signal(str, float, object)
    """An add's stage, amount done and total (or ``None``)."""

    def send(self, name: str, *args) -> None:
        try:
            getattr(self, name).emit(*args)
        except RuntimeError:  # the dialog was closed meanwhile
            pass


class _Cancelled(Exception):
    """Raised from an add's progress report when its Cancel was pressed: the add unwinds
    and leaves nothing behind."""


class ModelsDialog(QDialog):
    """Choose the model bundle; after ``exec()`` returns Accepted, :attr:`chosen` is its path."""

    refreshed = Signal()
    """The list was (re)filled."""
    cancelled = Signal()
    """An add was stopped by its progress dialog's Cancel; nothing was installed."""

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
        self._worker.progressed.connect(self._progressed)
        self.progress: QProgressDialog | None = None
        self._stop_add = threading.Event()
        self.stages: list[str] = []
        """Every stage an add reported, in order (for the tests, and a log of what ran)."""
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
        self.add_button = QPushButton("&Add…")
        self.add_button.setAccessibleName("Add a model")
        self.add_button.setToolTip("Install a model into your models folder, converting it if needed: a Hugging "
                                   "Face id or folder, a Marian release, a bundle or a packed .tar")
        self.add_button.clicked.connect(self.choose_source)
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
    def choose_source(self) -> None:
        """Ask what to add (:class:`~.addmodel.AddModelDialog`) and add it."""
        from .addmodel import AddModelDialog

        dialog = AddModelDialog(self)
        if dialog.exec() == QDialog.DialogCode.Accepted and dialog.source():
            self.add_source(dialog.source(), dialog.name())

    def add_folder(self, folder: Path) -> None:
        """Add a folder (see :meth:`add_source`)."""
        self.add_source(str(folder))

    def add_source(self, source: str, name: str | None = None) -> None:
        """Convert if needed, verify and install ``source`` into the user models folder, as
        ``edge-translator models add`` does, on a worker thread behind a progress dialog whose
        Cancel stops it; the model is then listed and selected, or the error is shown. A
        bundle already in the user folder is only selected."""
        from ..store import install

        self.add_button.setEnabled(False)
        self.status.setText(f"Adding {source}…")
        self.progress = QProgressDialog(f"Adding {source}…", "Cancel", 0, 0, self)
        self.progress.setWindowTitle("Adding a model")
        self.progress.setAccessibleName("Adding a model")
        self.progress.setWindowModality(Qt.WindowModality.WindowModal)
        self.progress.setMinimumDuration(0)
        self.progress.setAutoClose(False)
        self.progress.setAutoReset(False)
        cancelled = self._stop_add = threading.Event()
        # a slot of this dialog, not the Event's own bound method: Qt then owns the
        # connection, and nothing is left for the collector to undo from another thread
        self.progress.canceled.connect(self._cancel_add)
        self.progress.show()
        worker, options = self._worker, install.AddOptions(name=name, folder=self.user_dir)

        def report(stage: str, done: float, total: float | None) -> None:
            if cancelled.is_set():
                raise _Cancelled
            worker.send("progressed", stage, float(done), total)

        def add() -> None:
            try:
                path = Path(source).expanduser()
                if path.is_dir() and path.resolve().parent == options.folder.resolve():
                    load_bundle(path)  # already installed: checked, then selected
                    target = path.resolve()
                else:
                    install.check_converter(source)
                    target = install.add(source, options, report)
            except _Cancelled:
                worker.send("added", None, "")
            except EdgeTranslatorError as exc:
                worker.send("added", None, str(exc))
            except OSError as exc:
                worker.send("added", None, f"cannot add {source} to {options.folder}: {exc.strerror or exc}")
            else:
                worker.send("added", target, "")

        threading.Thread(target=add, name="edge-translator-add-model", daemon=True).start()

    @Slot()
    def _cancel_add(self) -> None:
        self._stop_add.set()

    @Slot(str, float, object)
    def _progressed(self, stage: str, done: float, total) -> None:
        self.stages.append(stage)
        if self.progress is None:
            return
        self.progress.setLabelText(f"{stage[:1].upper()}{stage[1:]}…")
        if total:
            self.progress.setRange(0, 1000)
            self.progress.setValue(min(1000, int(1000 * done / total)))
        else:
            self.progress.setRange(0, 0)  # busy: the total is not known

    @Slot(object, str)
    def _added(self, path, error: str) -> None:
        self.add_button.setEnabled(True)
        if self.progress is not None:
            self.progress.close()
            self.progress = None
        if path is None:
            if not error:
                self.status.setText("Adding the model was cancelled; nothing was installed.")
                self.cancelled.emit()
                return
            self.status.setText("The model was not added.")
            self.show_error("The model was not added", error)
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
