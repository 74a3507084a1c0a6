"""The compact popup near the pointer that a global shortcut's translation streams into.

It is a small frameless window, kept above the others, placed at the pointer and moved
inside the screen. The translation streams into it sentence by sentence, as in the main
pane (the same :class:`~.stream.TranslationStream` and :class:`~.alignment.Alignment`);
Esc or Close closes it (and cancels a run in progress); "Open in window" hands
the text to the main window; :attr:`Popup.done` gives the finished translation (copied
to the clipboard by the caller when it is asked to).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QCursor, QGuiApplication, QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from .alignment import Alignment
from .stream import TranslationStream

#: The popup's size in pixels at 100% scale.
WIDTH, HEIGHT = 420, 180


class Popup(QWidget):
    """One translation at a time, near the pointer."""

    done = Signal(str, str)
    """A run finished: its source text and its translation."""
    open_in_window = Signal(str)
    """The user asked for the full window, with this source text."""
    first_sentence = Signal()
    """The run's first sentence is on screen (for the keystroke-to-sentence measure)."""

    def __init__(self, session, parent: QWidget | None = None):
        """Args:
            session: The :class:`~.session.ModelSession` whose translator it uses.
            parent: The Qt parent (the main window; the popup is a window of its own).
        """
        super().__init__(parent, Qt.WindowType.Tool | Qt.WindowType.FramelessWindowHint
                         | Qt.WindowType.WindowStaysOnTopHint)
        self.session = session
        self.setAccessibleName("Translation popup")
        self.setAttribute(Qt.WidgetAttribute.WA_ShowWithoutActivating, False)
        self.stream = TranslationStream(self)
        self.alignment = Alignment("")
        self.source_label = QLabel(self)
        self.source_label.setAccessibleName("Translated text")
        self.source_label.setTextFormat(Qt.TextFormat.PlainText)
        self.source_label.setStyleSheet("color: palette(mid);")
        self.target = QPlainTextEdit(self)
        self.target.setAccessibleName("Translation")
        self.target.setReadOnly(True)
        self.open_button = QPushButton("&Open in window", self)
        self.open_button.setAccessibleName("Open in window")
        self.open_button.clicked.connect(self._open)
        self.close_button = QPushButton("Close", self)
        self.close_button.setAccessibleName("Close")
        self.close_button.clicked.connect(self.close)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addWidget(self.source_label)
        layout.addWidget(self.target, 1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addWidget(self.open_button)
        row.addWidget(self.close_button)
        layout.addLayout(row)
        self.resize(WIDTH, HEIGHT)
        QShortcut(QKeySequence(Qt.Key.Key_Escape), self, self.close)
        self.stream.sentence.connect(self._on_sentence)
        self.stream.finished.connect(self._on_finished)
        self.stream.failed.connect(lambda message: self.target.setPlainText(f"Not translated: {message}"))
        self._first = False

    def translate(self, text: str, options=None) -> None:
        """Show the popup at the pointer and stream ``text``'s translation into it."""
        self.stream.cancel()
        self.alignment = Alignment(text)
        self._first = True
        first_line = " ".join(text.split())
        self.source_label.setText(first_line if len(first_line) <= 80 else first_line[:79] + "…")
        self.target.clear()
        self.move(self._place(QCursor.pos()))
        self.show()
        self.raise_()
        self.activateWindow()
        translator = self.session.translator
        if translator is None:
            self.target.setPlainText("The model is still loading; try again in a moment.")
            return
        self.stream.start(translator, text, options)

    def _place(self, pointer: QPoint) -> QPoint:
        """Just below and right of the pointer, moved inside the screen it is on."""
        screen = QGuiApplication.screenAt(pointer) or QGuiApplication.primaryScreen()
        area = screen.availableGeometry()
        x = min(max(pointer.x() + 12, area.left()), area.right() - self.width())
        y = pointer.y() + 16
        if y + self.height() > area.bottom():
            y = pointer.y() - 16 - self.height()
        return QPoint(x, max(y, area.top()))

    def _on_sentence(self, result) -> None:
        self.target.moveCursor(self.target.textCursor().MoveOperation.End)
        self.target.insertPlainText(self.alignment.append(result))
        if self._first:
            self._first = False
            self.first_sentence.emit()

    def _on_finished(self, info: dict) -> None:
        self.target.moveCursor(self.target.textCursor().MoveOperation.End)
        self.target.insertPlainText(self.alignment.finish())
        self.done.emit(self.alignment.source, self.target.toPlainText())

    def _open(self) -> None:
        source = self.alignment.source
        self.close()
        self.open_in_window.emit(source)

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        self.stream.cancel()
        super().closeEvent(event)
