"""The documents panel: drop files and folders, watch them translate, open the results.

A :class:`DocumentsPanel` runs one :class:`~edge_translator.documents.job.DocumentJob` at
a time on a worker thread. The job reports through a :class:`_JobRelay`, whose methods
(the job's ``Progress`` protocol) only emit Qt signals; the connected slots run on the UI
thread and are the only code that touches widgets. Files dropped while a job runs wait in
a queue and go as the next job.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Qt, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ..core.errors import EdgeTranslatorError
from ..core.translator import TranslateOptions
from ..documents import FORMATS
from ..documents.job import DocumentJob
from ..documents.plan import JobOptions, Summary, discover
from .drops import local_files

logger = logging.getLogger(__name__)

#: Columns of the file list.
NAME, PROGRESS, STATUS, OPEN = range(4)
_PATH_ROLE = Qt.ItemDataRole.UserRole
_OUTPUT_ROLE = Qt.ItemDataRole.UserRole + 1


def file_filter() -> str:
    """The filter of the "Add files" dialog: every supported suffix, then each format."""
    suffixes = " ".join(f"*{s}" for info in FORMATS for s in info.suffixes)
    each = ";;".join(f"{info.name} ({' '.join('*' + s for s in info.suffixes)})" for info in FORMATS)
    return f"Documents ({suffixes});;{each};;All files (*)"


class _JobRelay(QObject):
    """The job's ``Progress``: every call becomes a signal, queued to the UI thread."""

    planned = Signal(list)
    """``[(input, output, status, message), ...]``: the files the job found."""
    started = Signal(int, int)
    """Files to translate and the sentences they hold."""
    advanced = Signal(str, int, int)
    """Input path, sentences just translated, the file's sentences."""
    file_finished = Signal(str, str, str, str)
    """Input path, status, message, output path."""
    note = Signal(str)
    """A line for the user."""
    ended = Signal(object)
    """The :class:`Summary`, or ``None`` after an error."""
    crashed = Signal(str, str)
    """A title and a message: the job stopped on an error."""

    # -- the Progress protocol (called on the worker thread) ---------------------------

    def start(self, files: int, sentences: int) -> None:
        self.send("started", files, sentences)

    def advance(self, sentences: int, plan) -> None:
        self.send("advanced", str(plan.input), sentences, plan.sentences)

    def finished(self, plan) -> None:
        self.send("file_finished", str(plan.input), plan.status, plan.message, str(plan.output))

    def message(self, text: str) -> None:
        self.send("note", text)

    def send(self, name: str, *args) -> None:
        """Emit a signal; nothing when the panel (and this relay with it) is gone."""
        try:
            getattr(self, name).emit(*args)
        except RuntimeError:  # the C++ object was deleted: the app is closing
            pass


def _run_job(job: DocumentJob, relay: _JobRelay) -> None:
    """The worker thread: list the files for the rows, run the job, report how it ended."""
    summary = None
    try:
        plans = discover(job.inputs, job.options, job.target)
        relay.send("planned", [(str(p.input), str(p.output), p.status, p.message) for p in plans])
        summary = job.run(relay)
    except EdgeTranslatorError as exc:
        relay.send("crashed", "Translation stopped", str(exc))
    except Exception as exc:  # noqa: BLE001 - shown in a dialog, never a crash
        logger.exception("the document job failed")
        relay.send("crashed", "Translation stopped", f"{type(exc).__name__}: {exc}")
    finally:
        relay.send("ended", summary)


class DocumentsPanel(QWidget):
    """Files to translate, their progress, and where the results go."""

    output_folder_changed = Signal(str)
    """The output folder the user chose (``""``: beside the inputs), to persist it."""
    busy_changed = Signal(bool)
    """A job started (``True``) or the last queued job ended (``False``)."""
    job_ended = Signal(object)
    """A job ended with its :class:`Summary` (``None`` when it stopped on an error)."""

    def __init__(self, session, settings, parent: QWidget | None = None):
        """Args:
            session: The :class:`~edge_translator.gui.session.ModelSession` whose model
                translates.
            settings: The app's settings; read are ``output_folder``, ``variant`` and
                ``open_folder`` (where the "Add files" dialog starts).
            parent: The Qt parent.
        """
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self._output_folder = str(getattr(settings, "output_folder", "") or "")
        self._queue: list[Path] = []
        self._job: DocumentJob | None = None
        self._relay: _JobRelay | None = None
        self._thread: threading.Thread | None = None
        self._rows: dict[str, QTreeWidgetItem] = {}
        self._running: set[str] = set()
        self._done: dict[str, int] = {}
        self._cancelling = False
        self._folders: list[str] = []
        self._busy_shown = False
        self._model_changed = False
        # Direct: runs in the loading thread before the old model is closed, so the job is
        # cancelled cleanly instead of losing its model mid-window.
        session.loaded.connect(self._on_model_loaded, Qt.ConnectionType.DirectConnection)
        self.setAcceptDrops(True)
        self.setAccessibleName("Documents")
        self._build()

    # -- layout ----------------------------------------------------------------------------

    def _build(self) -> None:
        layout = QVBoxLayout(self)

        top = QHBoxLayout()
        self.add_button = QPushButton("&Add files…")
        self.add_button.setAccessibleName("Add files to translate")
        self.add_button.setToolTip("Choose documents to translate (or drop files and folders here)")
        self.add_button.clicked.connect(self.choose_files)
        top.addWidget(self.add_button)
        label = QLabel("&Output folder:")
        top.addWidget(label)
        self.output_edit = QLineEdit(self._output_folder)
        self.output_edit.setReadOnly(True)
        self.output_edit.setPlaceholderText("Beside the inputs")
        self.output_edit.setAccessibleName("Output folder")
        label.setBuddy(self.output_edit)
        top.addWidget(self.output_edit, 1)
        self.choose_button = QPushButton("C&hoose…")
        self.choose_button.setAccessibleName("Choose the output folder")
        self.choose_button.clicked.connect(self.choose_output_folder)
        top.addWidget(self.choose_button)
        self.beside_button = QPushButton("&Beside inputs")
        self.beside_button.setAccessibleName("Write outputs beside the inputs")
        self.beside_button.setToolTip("Write each translation beside its input file")
        self.beside_button.clicked.connect(self.write_beside_inputs)
        top.addWidget(self.beside_button)
        layout.addLayout(top)

        self.tree = QTreeWidget()
        self.tree.setAccessibleName("Files")
        self.tree.setColumnCount(4)
        self.tree.setHeaderLabels(["File", "Progress", "Status", ""])
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(True)
        header = self.tree.header()
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Interactive)
        header.setSectionResizeMode(STATUS, QHeaderView.ResizeMode.Stretch)
        header.setStretchLastSection(False)
        self.tree.setColumnWidth(NAME, 220)
        self.tree.setColumnWidth(PROGRESS, 140)
        self.tree.itemActivated.connect(self._activated)
        layout.addWidget(self.tree, 1)

        bottom = QHBoxLayout()
        self.progress = QProgressBar()
        self.progress.setAccessibleName("Progress of all files")
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        bottom.addWidget(self.progress, 1)
        self.cancel_button = QPushButton("Ca&ncel")
        self.cancel_button.setAccessibleName("Cancel the translation of the documents")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancel)
        bottom.addWidget(self.cancel_button)
        layout.addLayout(bottom)

        self.summary_label = QLabel("Drop documents or folders here, or add files.")
        self.summary_label.setAccessibleName("Documents status")
        self.summary_label.setWordWrap(True)
        self.summary_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.summary_label)

    # -- public API ------------------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a job is running."""
        return self._job is not None

    @property
    def output_folder(self) -> str:
        """The chosen output folder, ``""`` for beside the inputs."""
        return self._output_folder

    def set_settings(self, settings) -> None:
        """Take new settings (the window's settings changed); the output folder follows them."""
        self.settings = settings
        folder = str(getattr(settings, "output_folder", "") or "")
        if folder != self._output_folder:
            self._output_folder = folder
            self.output_edit.setText(folder)

    @Slot()
    def write_beside_inputs(self) -> None:
        """Write the next jobs' outputs beside their inputs."""
        self.set_output_folder("")

    def set_output_folder(self, folder: str | Path) -> None:
        """Write the next jobs' outputs to ``folder`` (``""``: beside the inputs)."""
        folder = str(folder or "")
        self.output_edit.setText(folder)
        if folder != self._output_folder:
            self._output_folder = folder
            self.output_folder_changed.emit(folder)

    @Slot()
    def choose_output_folder(self) -> None:
        """Ask for the output folder."""
        folder = QFileDialog.getExistingDirectory(self, "Output folder", self._output_folder or str(Path.home()))
        if folder:
            self.set_output_folder(folder)

    @Slot()
    def choose_files(self) -> None:
        """Ask for documents to translate."""
        start = str(getattr(self.settings, "open_folder", "") or "")
        paths, _ = QFileDialog.getOpenFileNames(self, "Translate documents", start, file_filter())
        if paths:
            self.add_files([Path(p) for p in paths])

    def add_files(self, paths: list[Path]) -> None:
        """Queue files and folders for translation; they start now, or after the running job.

        Args:
            paths: Files and folders (a folder's supported files are translated, not its
                sub-folders').
        """
        paths = [Path(p).absolute() for p in paths]
        if not paths:
            return
        if self.session.translator is None:
            self.show_error("No model loaded",
                            "No translation model is loaded yet. Wait until it has loaded, or choose "
                            "one with Models…, then add the files again.")
            return
        for path in paths:
            key = str(path)
            if key in self._running:
                continue  # it is in the running job; its row is reset when it runs again
            item = self._row(key)
            if path.is_dir():
                item.setText(NAME, path.name + "/")
                item.setData(NAME, _PATH_ROLE, "folder")
            self._set_status(item, "queued")
        self._queue.extend(paths)
        if self._job is None:
            self._start_next()
        else:
            self.summary_label.setText(f"{len(self._queue)} queued after the running job.")

    @Slot()
    def cancel(self) -> None:
        """Cancel the running job and drop the queued files (a rerun resumes them)."""
        for path in self._queue:
            item = self._rows.get(str(path))
            if item is not None and str(path) not in self._running:
                self._set_status(item, "cancelled")
        self._queue.clear()
        if self._job is not None:
            self._cancelling = True
            self.cancel_button.setEnabled(False)
            self.summary_label.setText("Cancelling…")
            self._job.cancel()

    def shutdown(self) -> None:
        """Cancel everything (the window is closing); the worker ends on its own."""
        self._queue.clear()
        if self._job is not None:
            self._job.cancel()

    @Slot(object)
    def _on_model_loaded(self, translator) -> None:
        """Another model was loaded (any thread): cancel a job that runs on the old one.
        Touches no widget; the job's end reports it on the UI thread."""
        job = self._job
        if job is not None and job.translator is not translator:
            self._model_changed = True
            job.cancel()

    def open_result(self, path: Path) -> None:
        """Open a translated file (or a folder) with the desktop's application for it."""
        if not QDesktopServices.openUrl(QUrl.fromLocalFile(str(path))):
            self.show_error("Cannot open", f"No application opened {path}.")

    def show_error(self, title: str, text: str) -> None:
        """Tell the user about an error (a dialog; tests intercept it)."""
        QMessageBox.warning(self, title, text)

    def row(self, path: str | Path) -> QTreeWidgetItem | None:
        """The list's row of an input file, or ``None``."""
        return self._rows.get(str(Path(path).absolute()))

    def row_progress(self, item: QTreeWidgetItem) -> QProgressBar:
        """The progress bar of a row."""
        return self.tree.itemWidget(item, PROGRESS)

    def open_button(self, item: QTreeWidgetItem) -> QPushButton | None:
        """The "Open" button of a finished row, or ``None``."""
        return self.tree.itemWidget(item, OPEN)

    # -- drops -----------------------------------------------------------------------------

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if local_files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dragMoveEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if local_files(event):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt's name
        paths = local_files(event)
        if not paths:
            event.ignore()
            return
        event.acceptProposedAction()
        self.add_files(paths)

    # -- rows ------------------------------------------------------------------------------

    def _row(self, key: str) -> QTreeWidgetItem:
        """The row of ``key`` (created, or reset to nothing done)."""
        item = self._rows.get(key)
        if item is None:
            item = QTreeWidgetItem([Path(key).name, "", "", ""])
            item.setToolTip(NAME, key)
            item.setData(NAME, _PATH_ROLE, "file")
            self.tree.addTopLevelItem(item)
            bar = QProgressBar()
            bar.setAccessibleName(f"Progress of {Path(key).name}")
            bar.setRange(0, 1)
            self.tree.setItemWidget(item, PROGRESS, bar)
            self._rows[key] = item
        else:
            self.tree.removeItemWidget(item, OPEN)
            item.setData(NAME, _OUTPUT_ROLE, None)
        bar = self.row_progress(item)
        bar.setRange(0, 1)
        bar.setValue(0)
        self._done[key] = 0
        return item

    def _set_status(self, item: QTreeWidgetItem, status: str, message: str = "") -> None:
        text = status if not message or status in ("done", "up to date", "cancelled") else f"{status}: {message}"
        item.setText(STATUS, text)
        item.setToolTip(STATUS, message or status)

    @Slot(str, str, str, str)
    def _finish_row(self, key: str, status: str, message: str, output: str) -> None:
        item = self._rows.get(key) or self._row(key)
        bar = self.row_progress(item)
        self._set_status(item, status, message)
        if status in ("done", "up to date"):
            bar.setValue(bar.maximum())
            item.setData(NAME, _OUTPUT_ROLE, output)
            item.setToolTip(NAME, f"{key}\n→ {output}")
            if self.open_button(item) is None:
                button = QPushButton("Open")
                button.setAccessibleName(f"Open the translation of {Path(key).name}")
                button.setProperty("input", key)
                button.clicked.connect(self._open_clicked)
                self.tree.setItemWidget(item, OPEN, button)

    @Slot()
    def _open_clicked(self) -> None:
        item = self._rows.get(self.sender().property("input"))
        if item is not None:
            self._open_item(item)

    def _open_item(self, item: QTreeWidgetItem) -> None:
        output = item.data(NAME, _OUTPUT_ROLE)
        if output:
            self.open_result(Path(output))

    @Slot(QTreeWidgetItem, int)
    def _activated(self, item: QTreeWidgetItem, _column: int) -> None:
        self._open_item(item)

    # -- the job ---------------------------------------------------------------------------

    def _start_next(self) -> None:
        inputs, self._queue = self._queue, []
        translator = self.session.translator
        if translator is None:
            for path in inputs:
                item = self._rows.get(str(path))
                if item is not None:
                    self._set_status(item, "failed", "no model loaded")
            self.show_error("No model loaded", "The model was closed; load one and add the files again.")
            self._set_busy(False)
            return
        variant = getattr(self.settings, "variant", None) or None
        note = ""
        if variant is not None and variant not in translator.bundle.targets:
            note = f" (this model offers {', '.join(sorted(translator.bundle.targets))}, not {variant})"
            variant = None
        output_dir = Path(self._output_folder) if self._output_folder else None
        try:
            options = JobOptions(output_dir=output_dir, translate=TranslateOptions(target=variant))
            job = DocumentJob(translator, self.session.cache, inputs, options)
        except (EdgeTranslatorError, ValueError) as exc:
            self.show_error("Cannot translate the documents", str(exc))
            self._set_busy(False)
            return
        relay = _JobRelay(self)  # owned by the panel, deleted when the job has ended
        relay.planned.connect(self._on_planned)
        relay.started.connect(self._on_started)
        relay.advanced.connect(self._on_advanced)
        relay.file_finished.connect(self._finish_row)
        relay.note.connect(self._on_note)
        relay.crashed.connect(self._on_crashed)
        relay.ended.connect(self._on_ended)
        self._job, self._relay, self._cancelling, self._model_changed = job, relay, False, False
        self._running = {str(p) for p in inputs}
        self._folders = [str(p) for p in inputs if p.is_dir()]
        self.progress.setRange(0, 0)  # busy until the scan is done
        self.cancel_button.setEnabled(True)
        self.summary_label.setText(f"Reading {len(inputs)} item(s)…{note}")
        self._thread = threading.Thread(target=_run_job, args=(job, relay), name="edge-translator-docs", daemon=True)
        self._thread.start()
        self._set_busy(True)

    @Slot(list)
    def _on_planned(self, plans: list) -> None:
        for folder in self._folders:
            item = self._rows.pop(folder, None)
            if item is not None:
                self.tree.takeTopLevelItem(self.tree.indexOfTopLevelItem(item))
        for source, output, status, message in plans:
            self._running.add(source)
            item = self._row(source)
            self._set_status(item, "reading" if status == "todo" else status, message)

    @Slot(int, int)
    def _on_started(self, files: int, sentences: int) -> None:
        self.progress.setRange(0, max(sentences, 1))
        self.progress.setValue(0)
        for key in self._running:
            item = self._rows.get(key)
            if item is not None and item.text(STATUS) == "reading":
                self._set_status(item, "waiting")
        if not self._cancelling:
            self.summary_label.setText(f"Translating {files} file(s), {sentences} sentence(s)…")

    @Slot(str, int, int)
    def _on_advanced(self, source: str, sentences: int, total: int) -> None:
        item = self._rows.get(source) or self._row(source)
        self._done[source] = self._done.get(source, 0) + sentences
        bar = self.row_progress(item)
        bar.setRange(0, max(total, 1))
        bar.setValue(min(self._done[source], max(total, 1)))
        if item.text(STATUS) in ("", "queued", "reading", "waiting"):
            self._set_status(item, "translating")
        self.progress.setValue(min(self.progress.value() + sentences, self.progress.maximum()))

    @Slot(str, str)
    def _on_crashed(self, title: str, text: str) -> None:
        if self._cancelling or self._model_changed:  # the model was closed under a cancelled job
            logger.info("the cancelled job ended with: %s", text)
            return
        self.show_error(title, text)

    @Slot(str)
    def _on_note(self, text: str) -> None:
        """A file failed or was skipped while the job read it: show it on its row now."""
        logger.info("%s", text)
        for key in self._running:
            if not text.startswith(key + ": "):
                continue
            rest = text[len(key) + 2:]
            item = self._rows.get(key)
            for status in ("failed", "skipped"):
                if item is not None and rest.startswith(status + ": "):
                    self._set_status(item, status, rest[len(status) + 2:])
            if item is not None and rest == "up to date":
                self._set_status(item, "up to date")
            break

    @Slot(object)
    def _on_ended(self, summary: Summary | None) -> None:
        if summary is not None:
            for plan in summary.files:
                self._finish_row(str(plan.input), plan.status, plan.message, str(plan.output))
            self.summary_label.setText(self.summary_text(summary))
            if self._model_changed:
                self.summary_label.setText(self.summary_text(summary) + " The model changed: add the "
                                           "cancelled files again to translate them with it.")
            self.progress.setRange(0, max(self.progress.maximum(), 1))
            if summary.count("cancelled") == 0:
                self.progress.setValue(self.progress.maximum())
        else:
            cancelled = self._cancelling or self._model_changed
            for key in self._running:
                item = self._rows.get(key)
                if item is not None and item.text(STATUS) in ("queued", "reading", "waiting", "translating"):
                    self._set_status(item, *(("cancelled",) if cancelled else ("failed", "the job stopped")))
            self.progress.setRange(0, 1)
            self.progress.setValue(0)
            if self._model_changed:
                self.summary_label.setText("Cancelled. The model changed: add the cancelled files again to "
                                           "translate them with it.")
            else:
                self.summary_label.setText("Cancelled." if cancelled else "The job stopped on an error.")
        if self._relay is not None:
            self._relay.deleteLater()
        self._job = self._relay = self._thread = None
        self._running = set()
        self.cancel_button.setEnabled(False)
        self.job_ended.emit(summary)
        if self._queue:
            self._start_next()
        else:
            self._set_busy(False)

    @staticmethod
    def summary_text(summary: Summary) -> str:
        """One line on what a job did: counts per status and the time it took."""
        parts = [f"{summary.count('done')} done", f"{summary.count('failed')} failed",
                 f"{summary.count('skipped')} skipped"]
        for status in ("up to date", "cancelled"):
            if summary.count(status):
                parts.append(f"{summary.count(status)} {status}")
        return f"{', '.join(parts)} in {summary.seconds:.1f} s ({summary.sentences} sentences)."

    def _set_busy(self, busy: bool) -> None:
        if self._busy_shown == busy:
            return
        self._busy_shown = busy
        self.busy_changed.emit(busy)
