"""The main window: the translate pane and the documents panel in tabs, menus and a status bar.

The window is a thin frame. The :class:`~.translatepane.TranslatePane` translates the text
in its editors; the :class:`~.documents.DocumentsPanel` translates files, and is created
the first time it is needed. The window owns what they share: the model (loaded and
switched on a worker thread by :class:`~.session.ModelSession`), the settings, the menus
that hold both their actions, and the status bar.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QFileDialog, QInputDialog, QLabel, QMainWindow, QMessageBox, QTabWidget, QVBoxLayout,
                               QWidget)

from . import settings as settings_store
from .dialogs import ask
from .session import ModelSession
from .settings import Settings
from .drops import local_files
from .clipwatch import ClipboardWatcher
from .history import HistoryPanel
from .translatepane import TranslatePane

logger = logging.getLogger(__name__)

#: Below this width (pixels) the panes are stacked instead of side by side.
NARROW_WIDTH = 700


class MainWindow(QMainWindow):
    """The text and documents tabs, menus and a status bar."""

    def __init__(self, session: ModelSession, settings: Settings, qsettings: QSettings,
                 parent: QWidget | None = None, history=None):
        """Args:
            session: The loaded model (shared with the documents panel).
            settings: The preferences to start from.
            qsettings: Where to save them on close.
            parent: The Qt parent.
            history: The :class:`~.history.HistoryGate` over the translation memory the
                session's cache stores in, for the History tab (``None``: no memory).
        """
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.qsettings = qsettings
        self._loading = False
        self._pending_model: Path | None = None
        self._documents = None
        self._documents_busy = False
        self._quitting = False
        self._tray = None
        self.watcher = ClipboardWatcher(self)
        """Clipboard watching (:mod:`.clipwatch`), off until switched on."""
        self.history = HistoryPanel(history, self)
        """The History tab."""
        self.history.message.connect(self.notify)
        self.history.keep_changed.connect(lambda keep: self._change_settings(keep_history=keep))

        self.setWindowTitle("Edge Translator")
        self.setAccessibleName("Edge Translator")
        self.setAcceptDrops(True)
        self.pane = TranslatePane(session, settings, self)
        """The source and translation editors."""
        # First, so the speed is shown before anyone else hears that a run finished.
        self.pane.translation_finished.connect(self._on_translation_finished)
        self.pane.message.connect(self.notify)
        self.pane.files_dropped.connect(self.add_documents)
        self.pane.variant_changed.connect(lambda variant: self._change_settings(variant=variant))
        self.pane.as_you_type_changed.connect(lambda checked: self._change_settings(as_you_type=checked))

        self._make_actions()
        self._make_widgets()
        self._make_menus()
        self._make_status_bar()

        session.loaded.connect(self._on_loaded)
        session.failed.connect(self._on_load_failed)

        if settings.geometry:
            self.restoreGeometry(QByteArray(settings.geometry))
        else:
            self.resize(1000, 640)
        self._model_changed()
        self._update_orientation()

    # -- construction -------------------------------------------------------------------------------

    def _action(self, text: str, slot, shortcuts=()) -> QAction:
        action = QAction(text, self)
        if shortcuts:
            action.setShortcuts([QKeySequence(s) for s in shortcuts])
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _make_actions(self) -> None:
        self.open_action = self._action("&Open documents…", self.open_documents, (QKeySequence.StandardKey.Open,))
        self.output_action = self._action("Choose output &folder…", self.choose_output_folder)
        self.quit_action = self._action("&Quit", self.quit, ("Ctrl+Q",))
        self.model_action = self._action("&Choose model…", self.choose_model, ("Ctrl+M",))
        self.threads_action = self._action("&Threads…", self.ask_threads)
        self.copy_result_action = self._action("&Copy translations of the clipboard and selection",
                                               lambda checked: self._change_settings(copy_result=bool(checked)))
        self.copy_result_action.setCheckable(True)
        self.copy_result_action.setChecked(self.settings.copy_result)
        self.close_to_tray_action = self._action("Close to the &tray",
                                                 lambda checked: self._change_settings(close_to_tray=bool(checked)))
        self.close_to_tray_action.setCheckable(True)
        self.close_to_tray_action.setChecked(self.settings.close_to_tray)
        self.close_to_tray_action.setEnabled(False)  # until a tray icon is shown (set_tray)
        self.watch_action = self._action("&Watch the clipboard: translate what is copied", self._on_watch)
        self.watch_action.setCheckable(True)
        self.shortcut_action = self._action("&Global shortcut…",
                                            lambda: self.shortcut_setting and self.shortcut_setting.ask())
        self.shortcut_setting = None
        """The :class:`~.shortcutsetting.ShortcutSetting` (set by the app)."""
        # The pane's shortcuts work wherever the focus is in the window, the documents tab included.
        for action in self.pane.actions():
            self.addAction(action)

    def _make_widgets(self) -> None:
        self.documents_tab = QWidget(self)
        self.documents_tab.setAccessibleName("Documents")
        QVBoxLayout(self.documents_tab)
        self.tabs = QTabWidget(self)
        self.tabs.setAccessibleName("Text and documents")
        self.tabs.addTab(self.pane, "Te&xt")
        self.tabs.addTab(self.documents_tab, "&Documents")
        self.tabs.addTab(self.history, "&History")
        self.tabs.currentChanged.connect(self._on_tab)
        self.setCentralWidget(self.tabs)
        self.pane.source.setFocus()

    def _make_menus(self) -> None:
        pane = self.pane
        bar = self.menuBar()
        bar.setAccessibleName("Menu bar")
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self.open_action)
        file_menu.addAction(self.output_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        translate_menu = bar.addMenu("T&ranslate")
        for action in (pane.translate_action, pane.cancel_action, pane.copy_action, pane.swap_action):
            translate_menu.addAction(action)
        model_menu = bar.addMenu("&Model")
        model_menu.addAction(self.model_action)
        settings_menu = bar.addMenu("&Settings")
        settings_menu.addAction(self.threads_action)
        settings_menu.addAction(pane.as_you_type_action)
        settings_menu.addAction(self.copy_result_action)
        settings_menu.addAction(self.close_to_tray_action)
        settings_menu.addAction(self.shortcut_action)
        settings_menu.addAction(self.watch_action)

    def _make_status_bar(self) -> None:
        self.model_label = QLabel(self)
        self.model_label.setAccessibleName("Model")
        self.speed_label = QLabel(self)
        self.speed_label.setAccessibleName("Speed")
        self.statusBar().setAccessibleName("Status")
        self.statusBar().addPermanentWidget(self.model_label)
        self.statusBar().addPermanentWidget(self.speed_label)

    # -- the model ----------------------------------------------------------------------------------

    def _model_changed(self) -> None:
        """Refresh the title, the status bar and the actions that depend on the loaded model
        (the pane refreshes its own)."""
        translator = self.session.translator
        if translator is not None:
            self.setWindowTitle(f"{translator.bundle.name} — Edge Translator")
        else:
            self.setWindowTitle("Edge Translator")
        self._update_status()
        self._update_actions()

    def _update_status(self) -> None:
        translator = self.session.translator
        if translator is None:
            self.model_label.setText("No model loaded")
            return
        bundle = translator.bundle
        scheme = bundle.scheme
        threads = self.session.threads
        if threads:
            cores = f"{threads} thread{'s' if threads != 1 else ''}"
        else:
            from ..core.sessions import physical_cores

            cores = f"{physical_cores()} threads (auto)"
        self.model_label.setText(f"{bundle.name} · {scheme} · {cores}")
        self.model_label.setToolTip(str(bundle.path))

    def _update_actions(self) -> None:
        self.pane.update_actions()
        self.model_action.setEnabled(not self._loading and not self._documents_busy)
        self.threads_action.setEnabled(not self._loading and not self._documents_busy)

    def _set_loading(self, loading: bool) -> None:
        self._loading = self.pane.loading = loading

    def load_model(self, path: str | Path | None, threads: int | None = None, remember: bool = True) -> None:
        """Switch to another bundle (or thread count) on a worker thread; translating is
        disabled until :attr:`ModelSession.loaded` or :attr:`ModelSession.failed` arrives.

        Args:
            path: The bundle directory (``None``: the core's default lookup).
            threads: ONNX Runtime threads (``None``: one per physical core).
            remember: Once loaded, make ``path`` the model of the saved settings.
        """
        self._set_loading(True)
        self._pending_model = Path(path) if path and remember else None
        self.pane.halt()
        self.statusBar().showMessage(f"Loading {path or 'the default model'}…")
        self._update_actions()
        self.session.load(path, threads)

    def choose_model(self) -> None:
        """Open the model chooser; on accept, load the bundle chosen."""
        try:
            from .models import ModelsDialog
        except Exception as exc:  # noqa: BLE001 - a missing piece of the app is a message, not a crash
            logger.exception("the model chooser is unavailable")
            ask(self, QMessageBox.Icon.Warning, "Choose model", f"The model chooser is unavailable: {exc}",
                [("OK", QMessageBox.ButtonRole.AcceptRole)])
            return
        dialog = ModelsDialog(self.session.path, self)
        if dialog.exec() == ModelsDialog.DialogCode.Accepted and getattr(dialog, "chosen", None):
            self.load_model(dialog.chosen, self.settings.threads)

    def ask_threads(self) -> None:
        """Ask for the number of ONNX Runtime threads (0: one per physical core) and reload."""
        import os

        current = self.settings.threads or 0
        value, ok = QInputDialog.getInt(self, "Threads", "Threads for translation (0 = one per physical core):",
                                        current, 0, max(os.cpu_count() or 1, current, 1), 1)
        if ok:
            self.set_threads(value or None)

    def set_threads(self, threads: int | None) -> None:
        """Remember a thread count and reload the current model with it."""
        self._change_settings(threads=threads)
        if self.session.translator is not None or self.session.path is not None:
            self.load_model(self.session.path, threads, remember=False)

    def _on_loaded(self, translator) -> None:
        self._set_loading(False)
        if self._pending_model is not None:
            self._change_settings(model=str(self._pending_model))
        self._pending_model = None
        self.statusBar().showMessage(f"Loaded {translator.bundle.name}", 5000)
        self._model_changed()
        self.pane.model_loaded()

    def _on_load_failed(self, path: str, reason: str) -> None:
        self._set_loading(False)
        self._pending_model = None
        self.statusBar().clearMessage()
        self._update_actions()
        keep = ("The current model stays loaded." if self.session.translator is not None
                else "No model is loaded, so nothing can be translated until one is.")
        choice = ask(self, QMessageBox.Icon.Warning, "The model could not be loaded",
                     f"The model at {path or 'the default location'} could not be loaded.",
                     [("Choose another model…", QMessageBox.ButtonRole.AcceptRole),
                      ("Close", QMessageBox.ButtonRole.RejectRole)],
                     details=f"{reason}\n\n{keep}")
        if choice == "Choose another model…":
            self.choose_model()

    def _on_translation_finished(self, info: dict) -> None:
        if info.get("tokens"):
            self.speed_label.setText(f"{info['tokens_per_second']:.0f} tokens/s")
        elif info.get("sentences"):
            self.speed_label.setText("from memory")
        if self.tabs.currentWidget() is self.history:
            self.history.refresh()

    # -- documents ----------------------------------------------------------------------------------

    def documents_panel(self):
        """The documents panel, created on first use (``None`` if it cannot be created)."""
        if self._documents is not None:
            return self._documents
        layout = self.documents_tab.layout()
        try:
            from .documents import DocumentsPanel

            panel = DocumentsPanel(self.session, self.settings, self.documents_tab)
        except Exception as exc:  # noqa: BLE001 - the text tab keeps working
            logger.exception("the documents panel could not be created")
            if layout.count() == 0:
                label = QLabel(f"The documents panel is unavailable: {exc}", self.documents_tab)
                label.setAccessibleName("Documents unavailable")
                label.setWordWrap(True)
                layout.addWidget(label)
            return None
        layout.addWidget(panel)
        busy = getattr(panel, "busy_changed", None)
        if busy is not None:
            busy.connect(self._on_documents_busy)
        folder_changed = getattr(panel, "output_folder_changed", None)
        if folder_changed is not None:
            folder_changed.connect(lambda folder: self._change_settings(output_folder=str(folder) or None))
        self._documents = panel
        return panel

    def _on_tab(self, index: int) -> None:
        if self.tabs.widget(index) is self.documents_tab:
            self.documents_panel()
        elif self.tabs.widget(index) is self.history:
            self.history.refresh()

    def _on_documents_busy(self, busy: bool) -> None:
        self._documents_busy = bool(busy)
        self._update_actions()

    def add_documents(self, paths: list[Path]) -> None:
        """Show the documents tab and queue ``paths`` there."""
        panel = self.documents_panel()
        self.tabs.setCurrentWidget(self.documents_tab)
        if panel is not None and paths:
            panel.add_files([Path(p) for p in paths])

    def open_documents(self) -> None:
        """Ask for documents to translate and queue them."""
        from ..documents import FORMATS

        patterns = " ".join(f"*{s}" for info in FORMATS for s in info.suffixes)
        start = self.settings.open_folder or str(Path.home())
        names, _ = QFileDialog.getOpenFileNames(self, "Open documents", start,
                                                f"Documents ({patterns});;All files (*)")
        if names:
            self._change_settings(open_folder=str(Path(names[0]).parent))
            self.add_documents([Path(n) for n in names])

    def choose_output_folder(self) -> None:
        """Ask where translated documents go."""
        start = self.settings.output_folder or self.settings.open_folder or str(Path.home())
        folder = QFileDialog.getExistingDirectory(self, "Choose output folder", start)
        if folder:
            self._change_settings(output_folder=folder)
            self.statusBar().showMessage(f"Translated documents go to {folder}", 5000)

    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Accept local files: they are queued as documents."""
        if local_files(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Keep accepting local files while they move over the window."""
        self.dragEnterEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Queue dropped local files in the documents panel."""
        files = local_files(event)
        if files:
            event.acceptProposedAction()
            self.add_documents(files)
        else:
            super().dropEvent(event)

    # -- the window ---------------------------------------------------------------------------------

    def _change_settings(self, **changes) -> None:
        """Replace some settings and pass them on to the pane and the documents panel."""
        self.settings = dataclasses.replace(self.settings, **changes)
        self.pane.set_settings(self.settings)
        setter = getattr(self._documents, "set_settings", None)
        if callable(setter):
            setter(self.settings)

    def translate_text(self, text: str) -> None:
        """Show the text tab with ``text`` in the source pane, and translate it."""
        self.tabs.setCurrentWidget(self.pane)
        self.pane.source.setPlainText(text)
        self.pane.translate()

    def notify(self, message: str, timeout_ms: int = 0) -> None:
        """Show a message in the status bar (until replaced, or for ``timeout_ms``)."""
        self.statusBar().showMessage(message, timeout_ms)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Stack the panes when the window is narrow."""
        super().resizeEvent(event)
        self._update_orientation()

    def _update_orientation(self) -> None:
        self.pane.set_stacked(self.width() < NARROW_WIDTH)

    def save_settings(self) -> None:
        """Write the settings (and the window geometry) to the store."""
        self._change_settings(geometry=bytes(self.saveGeometry().data()))
        settings_store.save(self.settings, self.qsettings)

    @property
    def tray(self):
        """The :class:`~.tray.Tray` whose icon is shown, or ``None``."""
        return self._tray

    @tray.setter
    def tray(self, tray) -> None:
        self._tray = tray
        self.close_to_tray_action.setEnabled(tray is not None)

    def watch_clipboard(self, on: bool, remember: bool = True) -> None:
        """Switch clipboard watching on or off (``remember``: keep the choice for later runs)."""
        self.watch_action.setChecked(on)
        self.watcher.set_enabled(on)
        if remember:
            self._change_settings(watch_clipboard=on)

    def _on_watch(self, checked: bool) -> None:
        self.watch_clipboard(bool(checked))

    def quit(self) -> None:
        """Close the window and end the app, even with "close to the tray" on."""
        self._quitting = True
        if not self.close():
            self._quitting = False

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Stop translating and remember the settings; ask first if documents are being translated.
        With "close to the tray" on and a tray icon shown, hide instead (Quit ends the app)."""
        if self.settings.close_to_tray and self._tray is not None and not self._quitting:
            self.save_settings()
            event.ignore()
            self.hide()
            return
        if self._documents_busy:
            choice = ask(self, QMessageBox.Icon.Question, "Quit", "Documents are still being translated.",
                         [("Keep translating", QMessageBox.ButtonRole.RejectRole),
                          ("Quit", QMessageBox.ButtonRole.DestructiveRole)],
                         details="Quitting stops the job; translating the same files again resumes it.")
            if choice != "Quit":
                event.ignore()
                return
        self.pane.shutdown()
        shutdown = getattr(self._documents, "shutdown", None)
        if callable(shutdown):
            shutdown()
        self.save_settings()
        if self._tray is not None:
            self._tray.hide()
        super().closeEvent(event)

