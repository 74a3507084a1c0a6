"""The main window: English in one pane, the translation streaming into the other.

The window is a thin front end. It reads the source pane, builds
:class:`~edge_translator.core.translator.TranslateOptions`, and hands the text to a
:class:`~.stream.TranslationStream`, which submits it to the shared model and brings each
sentence back to the UI thread. :class:`~.alignment.Alignment` knows which translation
belongs to which sentence, for highlighting and for shading doubtful sentences. A second
tab hosts the documents panel, which is created the first time it is needed.

"Use translation as source" (the issue's *swap*): a bundle translates in one direction, so
feeding its output back in only makes sense for a model whose source and target language
are the same (a variant converter, say). The action is there for such bundles and disabled,
with a tooltip saying why, for every other (the demo English→Chinese model included).
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from PySide6.QtCore import QByteArray, QEvent, QObject, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import (QAction, QColor, QGuiApplication, QKeySequence, QPalette, QTextCharFormat, QTextCursor,
                           QTextFormat)
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QInputDialog, QLabel, QMainWindow, QMessageBox,
                               QPlainTextEdit, QProgressBar, QPushButton, QSplitter, QTabWidget, QTextEdit,
                               QToolTip, QVBoxLayout, QWidget)

from ..core.translator import TranslateOptions
from . import settings as settings_store
from .alignment import Alignment, from_utf16, to_utf16
from .session import ModelSession
from .settings import Settings
from .stream import TranslationStream

logger = logging.getLogger(__name__)

#: Below this width (pixels) the panes are stacked instead of side by side.
NARROW_WIDTH = 700
#: Milliseconds of quiet typing before translate-as-you-type starts a run.
DEBOUNCE_MS = 150
#: Most milliseconds a delivered sentence waits before it is written to the translation pane.
FLUSH_MS = 40
#: Texts of at least this many sentences show a progress bar.
LONG_TEXT = 10
#: ``QTextFormat.UserProperty`` value of the extra selections this window adds.
ALIGNED, DOUBTFUL = "aligned", "doubtful"
SELECTION_ROLE = int(QTextFormat.Property.UserProperty)


def ask(parent: QWidget | None, icon: QMessageBox.Icon, title: str, text: str, buttons: list[tuple[str, object]],
        details: str | None = None) -> str | None:
    """Show a modal message box and return the label of the button chosen.

    Args:
        parent: The window the box belongs to.
        icon: ``QMessageBox.Icon.Warning`` and the like.
        title: The box's title.
        text: What happened, in a sentence or two.
        buttons: ``(label, QMessageBox.ButtonRole)`` pairs, the first being the default.
        details: A longer explanation, shown under the text.

    Returns:
        The chosen button's label, or ``None`` if the box was closed otherwise.
    """
    box = QMessageBox(icon, title, text, QMessageBox.StandardButton.NoButton, parent)
    box.setAccessibleName(title)
    if details:
        box.setInformativeText(details)
    labels = {}
    for n, (label, role) in enumerate(buttons):
        button = box.addButton(label, role)
        button.setAccessibleName(label.replace("&", ""))
        labels[id(button)] = label
        if n == 0:
            box.setDefaultButton(button)
    box.exec()
    clicked = box.clickedButton()
    return labels.get(id(clicked)) if clicked is not None else None


def _bare(text: str) -> str:
    return text.replace("&", "").replace("…", "").strip()


class MainWindow(QMainWindow):
    """Source and translation panes, the documents tab, menus and a status bar."""

    translation_started = Signal(int)
    """A run started; the number of sentences (0 while it waits for room in the queue)."""
    translation_finished = Signal(dict)
    """A run finished; the figures of :attr:`TranslationStream.finished`."""

    def __init__(self, session: ModelSession, settings: Settings, qsettings: QSettings,
                 parent: QWidget | None = None):
        """Args:
            session: The loaded model (shared with the documents panel).
            settings: The preferences to start from.
            qsettings: Where to save them on close.
            parent: The Qt parent.
        """
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.qsettings = qsettings
        self.stream = TranslationStream(self)
        self.alignment = Alignment("")
        self._loading = False
        self._pending_model: Path | None = None
        self._source_dirty = False
        self._documents = None
        self._documents_busy = False
        self._highlight: int | None = None
        self._writing = False
        self._last_focus: tuple[str, int] | None = None
        self._doubtful_source: list[QTextEdit.ExtraSelection] = []

        self.setWindowTitle("Edge Translator")
        self.setAccessibleName("Edge Translator")
        self.setAcceptDrops(True)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self.translate)
        # QProgressBar.setValue repaints at once; bursts of sentences update it at most every 100 ms.
        self._progress_timer = QTimer(self)
        self._progress_timer.setSingleShot(True)
        self._progress_timer.setInterval(100)
        self._progress_timer.timeout.connect(lambda: self.progress.setValue(self.stream.done))
        # Appending to the pane relays out its paragraph; sentences arriving together are written
        # together, at most every FLUSH_MS.
        self._flush_timer = QTimer(self)
        self._flush_timer.setSingleShot(True)
        self._flush_timer.setInterval(FLUSH_MS)
        self._flush_timer.timeout.connect(self._flush)
        self._pending: list[str] = []
        self._fresh: list = []
        self._written = 0

        self._make_actions()
        self._make_widgets()
        self._make_menus()
        self._make_status_bar()

        self.stream.sentence.connect(self._on_sentence)
        self.stream.finished.connect(self._on_finished)
        self.stream.failed.connect(self._on_failed)
        self.stream.sized.connect(self._on_sized)
        session.loaded.connect(self._on_loaded)
        session.failed.connect(self._on_load_failed)

        if settings.geometry:
            self.restoreGeometry(QByteArray(settings.geometry))
        else:
            self.resize(1000, 640)
        self._model_changed()
        self._update_orientation()

    # -- construction -------------------------------------------------------------------------------

    def _action(self, text: str, slot, shortcuts=(), tip: str = "") -> QAction:
        action = QAction(text, self)
        if shortcuts:
            action.setShortcuts([QKeySequence(s) for s in shortcuts])
        if tip:
            action.setToolTip(tip)
            action.setStatusTip(tip)
        action.triggered.connect(slot)
        self.addAction(action)
        return action

    def _make_actions(self) -> None:
        self.translate_action = self._action("&Translate", self.translate, ("Ctrl+Return", "Ctrl+Enter"),
                                             "Translate the source text (Ctrl+Enter)")
        self.cancel_action = self._action("&Cancel", self.cancel_translation, ("Esc",),
                                          "Stop the translation; what is done stays (Esc)")
        self.copy_action = self._action("C&opy translation", self.copy_translation, ("Ctrl+Shift+C",),
                                        "Copy the translation to the clipboard (Ctrl+Shift+C)")
        self.swap_action = self._action("&Use translation as source", self.use_translation_as_source,
                                        ("Ctrl+Shift+S",))
        self.as_you_type_action = self._action("Translate as you &type", self._on_as_you_type)
        self.as_you_type_action.setCheckable(True)
        self.as_you_type_action.setChecked(self.settings.as_you_type)
        self.open_action = self._action("&Open documents…", self.open_documents, (QKeySequence.StandardKey.Open,))
        self.output_action = self._action("Choose output &folder…", self.choose_output_folder)
        self.quit_action = self._action("&Quit", self.close, ("Ctrl+Q",))
        self.model_action = self._action("&Choose model…", self.choose_model, ("Ctrl+M",))
        self.threads_action = self._action("&Threads…", self.ask_threads)
        self.cancel_action.setEnabled(False)

    def _button(self, action: QAction) -> QPushButton:
        button = QPushButton(action.text(), self)
        button.setAccessibleName(_bare(action.text()))
        button.setToolTip(action.toolTip())
        button.clicked.connect(action.trigger)

        def sync():
            button.setEnabled(action.isEnabled())
            button.setToolTip(action.toolTip())

        action.changed.connect(sync)
        sync()
        return button

    def _make_widgets(self) -> None:
        self.source = QPlainTextEdit(self)
        self.source.setPlaceholderText("Type or paste English text here…")
        self.source.setAccessibleName("Source text")
        self.source.setAccessibleDescription("The text to translate")
        self.source.setTabChangesFocus(True)
        self.target = QPlainTextEdit(self)
        self.target.setReadOnly(True)
        self.target.setPlaceholderText("The translation appears here, sentence by sentence.")
        self.target.setAccessibleName("Translation")
        self.target.setAccessibleDescription("The translation; doubtful sentences are shaded")
        self.target.setTabChangesFocus(True)
        for edit in (self.source, self.target):
            edit.viewport().setMouseTracking(True)
            edit.viewport().installEventFilter(self)
        self.source.textChanged.connect(self._on_source_changed)
        self.source.cursorPositionChanged.connect(lambda: self._focus("source", self.source.textCursor().position()))
        self.target.cursorPositionChanged.connect(self._on_target_caret)

        self.splitter = QSplitter(Qt.Orientation.Horizontal, self)
        self.splitter.setAccessibleName("Source and translation")
        self.splitter.setChildrenCollapsible(False)
        self.splitter.addWidget(self.source)
        self.splitter.addWidget(self.target)

        self.translate_button = self._button(self.translate_action)
        self.translate_button.setDefault(True)
        self.cancel_button = self._button(self.cancel_action)
        self.copy_button = self._button(self.copy_action)
        self.swap_button = self._button(self.swap_action)
        self.variant_label = QLabel("&Variant:", self)
        self.variant_box = QComboBox(self)
        self.variant_box.setAccessibleName("Chinese variant")
        self.variant_box.setToolTip("Simplified or Traditional characters")
        self.variant_label.setBuddy(self.variant_box)
        self.variant_box.currentIndexChanged.connect(self._on_variant)
        self.progress = QProgressBar(self)
        self.progress.setAccessibleName("Translation progress")
        self.progress.setFormat("%v of %m sentences")
        self.progress.setVisible(False)

        row = QHBoxLayout()
        row.addWidget(self.translate_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.progress, 1)
        row.addStretch(0)
        row.addWidget(self.variant_label)
        row.addWidget(self.variant_box)
        row.addWidget(self.copy_button)
        row.addWidget(self.swap_button)

        text_tab = QWidget(self)
        text_tab.setAccessibleName("Text")
        layout = QVBoxLayout(text_tab)
        layout.addWidget(self.splitter, 1)
        layout.addLayout(row)

        self.documents_tab = QWidget(self)
        self.documents_tab.setAccessibleName("Documents")
        QVBoxLayout(self.documents_tab)
        self.tabs = QTabWidget(self)
        self.tabs.setAccessibleName("Text and documents")
        self.tabs.addTab(text_tab, "Te&xt")
        self.tabs.addTab(self.documents_tab, "&Documents")
        self.tabs.currentChanged.connect(self._on_tab)
        self.setCentralWidget(self.tabs)
        self.source.setFocus()

    def _make_menus(self) -> None:
        bar = self.menuBar()
        bar.setAccessibleName("Menu bar")
        file_menu = bar.addMenu("&File")
        file_menu.addAction(self.open_action)
        file_menu.addAction(self.output_action)
        file_menu.addSeparator()
        file_menu.addAction(self.quit_action)
        translate_menu = bar.addMenu("T&ranslate")
        for action in (self.translate_action, self.cancel_action, self.copy_action, self.swap_action):
            translate_menu.addAction(action)
        model_menu = bar.addMenu("&Model")
        model_menu.addAction(self.model_action)
        settings_menu = bar.addMenu("&Settings")
        settings_menu.addAction(self.threads_action)
        settings_menu.addAction(self.as_you_type_action)

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
        """Refresh everything that depends on the loaded model."""
        translator = self.session.translator
        self.variant_box.blockSignals(True)
        self.variant_box.clear()
        if translator is not None:
            bundle = translator.bundle
            for name in bundle.targets:
                self.variant_box.addItem(_variant_label(name), name)
            wanted = self.settings.variant if self.settings.variant in bundle.targets else bundle.default_target
            self.variant_box.setCurrentIndex(max(0, self.variant_box.findData(wanted)))
            several = len(bundle.targets) > 1
            self.setWindowTitle(f"{bundle.name} — Edge Translator")
            self.source.setAccessibleName(f"Source text ({bundle.source_language})")
            self.target.setAccessibleName(f"Translation ({bundle.target_language})")
            same = bundle.source_language == bundle.target_language
            self.swap_action.setToolTip("Translate the translation again (Ctrl+Shift+S)" if same else
                                        f"This model translates {bundle.source_language} → "
                                        f"{bundle.target_language} only; its output cannot be fed back in")
        else:
            several = False
            self.setWindowTitle("Edge Translator")
        self.variant_box.blockSignals(False)
        self.variant_box.setVisible(several)
        self.variant_label.setVisible(several)
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
        ready = self.session.translator is not None and not self._loading
        self.translate_action.setEnabled(ready)
        self.cancel_action.setEnabled(self.stream.running)
        self.copy_action.setEnabled(bool(self.target.document().characterCount() > 1))
        translator = self.session.translator
        same = translator is not None and translator.bundle.source_language == translator.bundle.target_language
        self.swap_action.setEnabled(ready and same and self.copy_action.isEnabled())
        self.model_action.setEnabled(not self._loading and not self._documents_busy)
        self.threads_action.setEnabled(not self._loading and not self._documents_busy)

    def load_model(self, path: str | Path | None, threads: int | None = None, remember: bool = True) -> None:
        """Switch to another bundle (or thread count) on a worker thread; translating is
        disabled until :attr:`ModelSession.loaded` or :attr:`ModelSession.failed` arrives.

        Args:
            path: The bundle directory (``None``: the core's default lookup).
            threads: ONNX Runtime threads (``None``: one per physical core).
            remember: Once loaded, make ``path`` the model of the saved settings.
        """
        self._loading = True
        self._pending_model = Path(path) if path and remember else None
        self.stream.cancel()
        self._end_run()
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
        self._loading = False
        if self._pending_model is not None:
            self._change_settings(model=str(self._pending_model))
        self._pending_model = None
        self.statusBar().showMessage(f"Loaded {translator.bundle.name}", 5000)
        self.stream.cancel()
        self._model_changed()
        if self.source.toPlainText().strip():
            self.translate()

    def _on_load_failed(self, path: str, reason: str) -> None:
        self._loading = False
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

    # -- translating --------------------------------------------------------------------------------

    def _options(self) -> TranslateOptions:
        variant = self.variant_box.currentData()
        translator = self.session.translator
        if translator is None or variant not in translator.bundle.targets:
            variant = None
        return TranslateOptions(target=variant)

    def translate(self) -> None:
        """Translate the source pane (cancelling a run in progress)."""
        self._debounce.stop()
        translator = self.session.translator
        if translator is None or self._loading:
            return
        text = self.source.toPlainText()
        self.stream.cancel()
        self._clear_output(text)
        if not text.strip():
            self._end_run()
            return
        total = self.stream.start(translator, text, self._options())
        self._update_actions()
        if total is not None:
            self.translation_started.emit(total)

    def cancel_translation(self) -> None:
        """Stop the running translation; the sentences already shown stay."""
        self._debounce.stop()
        if not self.stream.running:
            return
        done, total = self.stream.done, self.stream.total
        self.stream.cancel()
        self._flush()
        self._end_run()
        self.statusBar().showMessage(f"Cancelled: {done} of {total} sentences translated", 5000)

    def copy_translation(self) -> None:
        """Put the translation on the clipboard."""
        QGuiApplication.clipboard().setText(self.target.toPlainText())
        self.statusBar().showMessage("Translation copied", 3000)

    def use_translation_as_source(self) -> None:
        """Move the translation into the source pane and translate it (same-language models only)."""
        if not self.swap_action.isEnabled():
            return
        self.source.setPlainText(self.target.toPlainText())
        self.translate()

    def _clear_output(self, text: str) -> None:
        self.alignment = Alignment(text)
        self._source_dirty = False
        self._highlight = None
        self._doubtful_source = []
        self._pending, self._written, self._fresh = [], 0, []
        self._flush_timer.stop()
        if self._last_focus is not None and self._last_focus[0] == "target":
            self._last_focus = None
        self._writing = True
        try:
            self.target.clear()
        finally:
            self._writing = False
        self.source.setExtraSelections([])
        self.target.setExtraSelections([])

    def _end_run(self) -> None:
        self._progress_timer.stop()
        self.progress.setVisible(False)
        self._update_actions()

    def _on_sized(self, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(self.stream.done)
        self.progress.setVisible(total >= LONG_TEXT)

    def _write_pending(self) -> None:
        """Write the sentences delivered since the last write to the translation pane."""
        if not self._pending:
            return
        chunk, self._pending = "".join(self._pending), []
        self._writing = True
        try:
            cursor = QTextCursor(self.target.document())
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertText(chunk, QTextCharFormat())  # plain, not the shading of a doubtful sentence before it
        finally:
            self._writing = False

    def _flush(self) -> None:
        """Write pending sentences, shade the doubtful ones among them and refresh the highlight."""
        self._flush_timer.stop()
        block = QTextCursor(self.target.document())
        block.beginEditBlock()  # the pane lays its text out once, after the sentences and their shading
        try:
            changed = self._write_and_shade()
        finally:
            block.endEditBlock()
        if self._highlight is None and self._last_focus is not None:
            self._focus(*self._last_focus)  # the sentence under the caret may have arrived
        elif changed:
            self._paint()
        if self._fresh and self._written == len(self._fresh):
            self._update_actions()

    def _write_and_shade(self) -> bool:
        """Write the pending sentences; shade the doubtful ones; whether any was."""
        self._write_pending()
        fresh = self._fresh = self.alignment.pairs[self._written:]
        self._written = len(self.alignment.pairs)
        changed = False
        if any(pair.doubtful for pair in fresh):
            rendered = self.alignment.text
            self._writing = True
            try:
                for pair in fresh:
                    if pair.doubtful:
                        changed = True
                        # In the translation pane, the shading goes into the text itself: as extra
                        # selections, every repaint of a long translation laid out all of them again
                        # (a UI stall of 60-90 ms per batch of sentences on a 2-core AMD EPYC).
                        shade = self._selection(self.target, rendered, pair.target, DOUBTFUL)
                        shade.cursor.mergeCharFormat(shade.format)
                        self._doubtful_source.append(self._selection(self.source, self.alignment.source,
                                                                     pair.source, DOUBTFUL))
            finally:
                self._writing = False
        return changed

    def _on_sentence(self, result) -> None:
        self._pending.append(self.alignment.append(result))
        if not self._flush_timer.isActive():
            self._flush_timer.start()
        if self.progress.isVisible() and not self._progress_timer.isActive():
            self._progress_timer.start()

    def _on_finished(self, info: dict) -> None:
        self._pending.append(self.alignment.finish())
        self._flush()
        if info.get("tokens"):
            self.speed_label.setText(f"{info['tokens_per_second']:.0f} tokens/s")
        elif info.get("sentences"):
            self.speed_label.setText("from memory")
        self._end_run()
        self.translation_finished.emit(info)

    def _on_failed(self, message: str) -> None:
        self._flush()
        self._end_run()
        ask(self, QMessageBox.Icon.Warning, "Translation failed", "The text could not be translated.",
            [("OK", QMessageBox.ButtonRole.AcceptRole)], details=message)

    def _on_source_changed(self) -> None:
        self._source_dirty = True
        if self._highlight is not None or self._doubtful_source:
            self._doubtful_source = []
            self._set_highlight(None)
        if self.as_you_type_action.isChecked():
            self._debounce.start()

    def _on_as_you_type(self, checked: bool) -> None:
        self._change_settings(as_you_type=bool(checked))
        if not checked:
            self._debounce.stop()

    def _on_variant(self, index: int) -> None:
        variant = self.variant_box.itemData(index)
        self._change_settings(variant=variant)
        if self.source.toPlainText().strip() and self.session.translator is not None:
            self.translate()

    # -- alignment highlighting ---------------------------------------------------------------------

    def _on_target_caret(self) -> None:
        if not self._writing:
            self._focus("target", self.target.textCursor().position())

    def _focus(self, pane: str, qt_pos: int) -> None:
        """Highlight the sentence at ``qt_pos`` in ``pane`` and its counterpart."""
        self._last_focus = (pane, qt_pos)
        if pane == "source":
            if self._source_dirty:
                index = None
            else:
                index = self.alignment.pair_at_source(from_utf16(self.alignment.source, qt_pos))
        else:
            index = self.alignment.pair_at_target(from_utf16(self.alignment.text, qt_pos))
        self._set_highlight(index)

    def _set_highlight(self, index: int | None) -> None:
        if index == self._highlight and index is not None:
            return
        self._highlight = index
        self._paint()

    def _selection(self, edit: QPlainTextEdit, text: str, span: tuple[int, int], role: str):
        selection = QTextEdit.ExtraSelection()
        cursor = QTextCursor(edit.document())
        cursor.setPosition(to_utf16(text, span[0]))
        cursor.setPosition(to_utf16(text, span[1]), QTextCursor.MoveMode.KeepAnchor)
        selection.cursor = cursor
        fmt = QTextCharFormat()
        palette = edit.palette()
        if role == ALIGNED:
            colour = QColor(palette.color(QPalette.ColorRole.Highlight))
            colour.setAlpha(90)
        else:
            colour = QColor(palette.color(QPalette.ColorRole.Mid))
            colour.setAlpha(110)
            fmt.setUnderlineStyle(QTextCharFormat.UnderlineStyle.WaveUnderline)
            fmt.setUnderlineColor(palette.color(QPalette.ColorRole.Link))
        fmt.setBackground(colour)
        fmt.setProperty(SELECTION_ROLE, role)
        selection.format = fmt
        return selection

    def _paint(self) -> None:
        self._write_pending()
        source = [] if self._source_dirty else list(self._doubtful_source)
        target = []
        index = self._highlight
        if index is not None and index < len(self.alignment):
            pair = self.alignment.pairs[index]
            if not self._source_dirty:
                source.append(self._selection(self.source, self.alignment.source, pair.source, ALIGNED))
            target.append(self._selection(self.target, self.alignment.text, pair.target, ALIGNED))
        self.source.setExtraSelections(source)
        self.target.setExtraSelections(target)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802 - Qt's name
        """Hover highlighting, and file drops on the panes going to the documents panel."""
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop) and _local_files(event):
            if kind == QEvent.Type.Drop:
                self.dropEvent(event)
            else:
                event.acceptProposedAction()
            return True
        for name, edit in (("source", self.source), ("target", self.target)):
            if watched is edit.viewport():
                if kind == QEvent.Type.MouseMove:
                    pos = edit.cursorForPosition(event.position().toPoint()).position()
                    self._focus(name, pos)
                    self._tooltip(edit, event)
                elif kind == QEvent.Type.Leave:
                    active = self.target if self.target.hasFocus() else self.source
                    self._focus("target" if active is self.target else "source", active.textCursor().position())
                break
        return super().eventFilter(watched, event)

    def _tooltip(self, edit: QPlainTextEdit, event) -> None:
        index = self._highlight
        if index is None or index >= len(self.alignment):
            return
        pair = self.alignment.pairs[index]
        if pair.doubtful:
            QToolTip.showText(edit.viewport().mapToGlobal(event.position().toPoint()),
                              f"Sentence {index + 1}: doubtful translation (score {pair.score:.2f})", edit)

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
        if _local_files(event):
            event.acceptProposedAction()
        else:
            super().dragEnterEvent(event)

    def dragMoveEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Keep accepting local files while they move over the window."""
        self.dragEnterEvent(event)

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Queue dropped local files in the documents panel."""
        files = _local_files(event)
        if files:
            event.acceptProposedAction()
            self.add_documents(files)
        else:
            super().dropEvent(event)

    # -- the window ---------------------------------------------------------------------------------

    def _change_settings(self, **changes) -> None:
        """Replace some settings and pass them on to the documents panel."""
        self.settings = dataclasses.replace(self.settings, **changes)
        setter = getattr(self._documents, "set_settings", None)
        if callable(setter):
            setter(self.settings)

    def notify(self, message: str, timeout_ms: int = 0) -> None:
        """Show a message in the status bar (until replaced, or for ``timeout_ms``)."""
        self.statusBar().showMessage(message, timeout_ms)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Stack the panes when the window is narrow."""
        super().resizeEvent(event)
        self._update_orientation()

    def _update_orientation(self) -> None:
        wanted = Qt.Orientation.Vertical if self.width() < NARROW_WIDTH else Qt.Orientation.Horizontal
        if self.splitter.orientation() != wanted:
            self.splitter.setOrientation(wanted)

    def save_settings(self) -> None:
        """Write the settings (and the window geometry) to the store."""
        self._change_settings(geometry=bytes(self.saveGeometry().data()))
        settings_store.save(self.settings, self.qsettings)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        """Stop translating and remember the settings; ask first if documents are being translated."""
        if self._documents_busy:
            choice = ask(self, QMessageBox.Icon.Question, "Quit", "Documents are still being translated.",
                         [("Keep translating", QMessageBox.ButtonRole.RejectRole),
                          ("Quit", QMessageBox.ButtonRole.DestructiveRole)],
                         details="Quitting stops the job; translating the same files again resumes it.")
            if choice != "Quit":
                event.ignore()
                return
        self._debounce.stop()
        self.stream.cancel()
        shutdown = getattr(self._documents, "shutdown", None)
        if callable(shutdown):
            shutdown()
        self.save_settings()
        super().closeEvent(event)


def _variant_label(name: str) -> str:
    return {"zh-Hans": "Simplified", "zh-Hant": "Traditional"}.get(name, name)


def _local_files(event) -> list[Path]:
    mime = event.mimeData() if hasattr(event, "mimeData") else None
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
