"""The translate pane: English in one editor, the translation streaming into the other.

The pane is a thin front end. It reads the source editor, builds
:class:`~edge_translator.core.translator.TranslateOptions`, and hands the text to a
:class:`~.stream.TranslationStream`, which submits it to the shared model and brings each
sentence back to the UI thread. :class:`~.alignment.Alignment` knows which translation
belongs to which sentence, for highlighting and for shading doubtful sentences. The
window around it keeps the menus (the pane's actions go in them), the model and the
settings; the pane tells it what changed through signals.

"Use translation as source" (the issue's *swap*): a bundle translates in one direction, so
feeding its output back in only makes sense for a model whose source and target language
are the same (a variant converter, say). The action is there for such bundles and disabled,
with a tooltip saying why, for every other (the demo English→Chinese model included).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import (QAction, QColor, QGuiApplication, QKeySequence, QPalette, QTextCharFormat, QTextCursor,
                           QTextFormat)
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QMessageBox, QPlainTextEdit, QProgressBar,
                               QPushButton, QSplitter, QTextEdit, QToolTip, QVBoxLayout, QWidget)

from ..core.errors import EdgeTranslatorError
from ..core.translator import TranslateOptions, is_term
from . import clipwatch
from .alignment import Alignment, from_utf16, to_utf16
from .dialogs import ask
from .drops import local_files
from .entries import EntriesView
from .session import ModelSession
from .settings import Settings
from .stream import TranslationStream

logger = logging.getLogger(__name__)

#: Milliseconds of quiet typing before translate-as-you-type starts a run.
DEBOUNCE_MS = 150
#: Most milliseconds a delivered sentence waits before it is written to the translation pane.
FLUSH_MS = 40
#: Texts of at least this many sentences show a progress bar.
LONG_TEXT = 10
#: ``QTextFormat.UserProperty`` value of the extra selections this pane adds.
ALIGNED, DOUBTFUL = "aligned", "doubtful"
SELECTION_ROLE = int(QTextFormat.Property.UserProperty)


def _bare(text: str) -> str:
    return text.replace("&", "").replace("…", "").strip()


def _variant_label(name: str) -> str:
    return {"zh-Hans": "Simplified", "zh-Hant": "Traditional"}.get(name, name)


class TranslatePane(QWidget):
    """The source and translation editors, their buttons, the variant and the progress bar."""

    translation_started = Signal(int)
    """A run started; the number of sentences (0 while it waits for room in the queue)."""
    translation_finished = Signal(dict)
    """A run finished; the figures of :attr:`TranslationStream.finished`."""
    variant_changed = Signal(object)
    """The user chose another target variant (its name), to remember it."""
    as_you_type_changed = Signal(bool)
    """The user turned translate-as-you-type on or off, to remember it."""
    message = Signal(str, int)
    """A line for the status bar and how many milliseconds it stays (0: until replaced)."""
    files_dropped = Signal(list)
    """Local files were dropped on an editor: they are documents to translate."""

    def __init__(self, session: ModelSession, settings: Settings, parent: QWidget | None = None):
        """Args:
            session: The loaded model (shared with the rest of the app).
            settings: The preferences to start from; read are ``variant`` and ``as_you_type``.
            parent: The Qt parent.
        """
        super().__init__(parent)
        self.session = session
        self.settings = settings
        self.stream = TranslationStream(self)
        self.alignment = Alignment("")
        self.loading = False
        """Set by the window while a model loads: translating is disabled meanwhile."""
        self._source_dirty = False
        self._highlight: int | None = None
        self._writing = False
        self._last_focus: tuple[str, int] | None = None
        self._doubtful_source: list[QTextEdit.ExtraSelection] = []

        self.setAccessibleName("Text")
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

        self.stream.sentence.connect(self._on_sentence)
        self.stream.finished.connect(self._on_finished)
        self.stream.failed.connect(self._on_failed)
        self.stream.sized.connect(self._on_sized)
        self.model_changed()

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

        self.entries = EntriesView(self)

        layout = QVBoxLayout(self)
        layout.addWidget(self.splitter, 1)
        layout.addWidget(self.entries)
        layout.addLayout(row)

    # -- what the window tells the pane -------------------------------------------------------------

    def set_settings(self, settings: Settings) -> None:
        """Take the app's settings as they are now (the variant to prefer for a new model)."""
        self.settings = settings

    def set_stacked(self, stacked: bool) -> None:
        """Put the editors one above the other (a narrow window) or side by side."""
        wanted = Qt.Orientation.Vertical if stacked else Qt.Orientation.Horizontal
        if self.splitter.orientation() != wanted:
            self.splitter.setOrientation(wanted)

    def model_changed(self) -> None:
        """Refresh the variants, names and actions that depend on the loaded model."""
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
            self.source.setAccessibleName(f"Source text ({bundle.source_language})")
            self.target.setAccessibleName(f"Translation ({bundle.target_language})")
            same = bundle.source_language == bundle.target_language
            self.swap_action.setToolTip("Translate the translation again (Ctrl+Shift+S)" if same else
                                        f"This model translates {bundle.source_language} → "
                                        f"{bundle.target_language} only; its output cannot be fed back in")
        else:
            several = False
        self.variant_box.blockSignals(False)
        self.variant_box.setVisible(several)
        self.variant_label.setVisible(several)
        self.update_actions()

    def model_loaded(self) -> None:
        """A model was (re)loaded: drop the old model's run, refresh, and translate the source again."""
        self.stream.cancel()
        self.model_changed()
        if self.source.toPlainText().strip():
            self.translate()

    def halt(self) -> None:
        """Stop the run and hide its progress (the model is about to change)."""
        self.stream.cancel()
        self._end_run()

    def shutdown(self) -> None:
        """Stop the run and any pending translate-as-you-type (the window is closing)."""
        self._debounce.stop()
        self.stream.cancel()

    def update_actions(self) -> None:
        """Enable what can be done now: translate with a model, cancel a run, copy a translation."""
        ready = self.session.translator is not None and not self.loading
        self.translate_action.setEnabled(ready)
        self.cancel_action.setEnabled(self.stream.running)
        self.copy_action.setEnabled(bool(self.target.document().characterCount() > 1))
        translator = self.session.translator
        same = translator is not None and translator.bundle.source_language == translator.bundle.target_language
        self.swap_action.setEnabled(ready and same and self.copy_action.isEnabled())

    # -- translating --------------------------------------------------------------------------------

    def options(self) -> TranslateOptions:
        """The options of a run: the chosen variant, where the model has it."""
        variant = self.variant_box.currentData()
        translator = self.session.translator
        if translator is None or variant not in translator.bundle.targets:
            variant = None
        return TranslateOptions(target=variant)

    def translate(self) -> None:
        """Translate the source pane (cancelling a run in progress)."""
        self._debounce.stop()
        translator = self.session.translator
        if translator is None or self.loading:
            return
        text = self.source.toPlainText()
        self.stream.cancel()
        self._clear_output(text)
        if not text.strip():
            self._end_run()
            return
        total = self.stream.start(translator, text, self.options())
        self.update_actions()
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
        self.message.emit(f"Cancelled: {done} of {total} sentences translated", 5000)

    def copy_translation(self) -> None:
        """Put the translation on the clipboard."""
        clipwatch.write(self.target.toPlainText())
        self.message.emit("Translation copied", 3000)

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
        self.update_actions()

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
            self.update_actions()

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
                        # selections, every repaint of a long translation laid out all of them again,
                        # which stalled the UI thread at each batch of sentences.
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
        self._end_run()
        self._show_entries()
        self.translation_finished.emit(info)

    def _show_entries(self) -> None:
        """The dictionary's entries of a lone word or term, under its translation."""
        text, translator = self.alignment.source, self.session.translator
        entries = []
        if translator is not None and not self._source_dirty and is_term(text):
            try:
                entries = translator.lookup(text)
            except EdgeTranslatorError:
                entries = []
        self.entries.show_entries(text, entries, self.options().target)

    def _on_failed(self, message: str) -> None:
        self._flush()
        self._end_run()
        ask(self.window(), QMessageBox.Icon.Warning, "Translation failed", "The text could not be translated.",
            [("OK", QMessageBox.ButtonRole.AcceptRole)], details=message)

    def _on_source_changed(self) -> None:
        self._source_dirty = True
        self.entries.clear_entries()
        if self._highlight is not None or self._doubtful_source:
            self._doubtful_source = []
            self._set_highlight(None)
        if self.as_you_type_action.isChecked():
            self._debounce.start()

    def _on_as_you_type(self, checked: bool) -> None:
        self.as_you_type_changed.emit(bool(checked))
        if not checked:
            self._debounce.stop()

    def _on_variant(self, index: int) -> None:
        self.variant_changed.emit(self.variant_box.itemData(index))
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
        """Hover highlighting, and file drops on the editors going on as :attr:`files_dropped`."""
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove, QEvent.Type.Drop) and local_files(event):
            event.acceptProposedAction()
            if kind == QEvent.Type.Drop:
                self.files_dropped.emit(local_files(event))
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
