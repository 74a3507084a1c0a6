"""Translating what another app holds: the clipboard or the selection, on request from outside the window.

A :class:`~.instance.Request` (from a later ``gui --clipboard``/``--selection`` start,
the tray or the global shortcut) brings the window forward, reads the clipboard or the
X11 PRIMARY selection, puts it in the source pane and translates it. When the request
says ``copy`` (``--copy``) or the "copy translations" setting is on, the translation
goes onto the clipboard once that run is done, and only that run's: a translation the
user started by typing meanwhile is not copied. Nothing else writes the clipboard, and
the app never simulates a copy in another app.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject
from PySide6.QtGui import QClipboard, QGuiApplication

from . import clipwatch
from .instance import Request

logger = logging.getLogger(__name__)


def read(source: str) -> tuple[str, str | None]:
    """The text of ``source`` (``"clipboard"`` or ``"selection"``) and a note for the status
    bar, or ``""`` and why there is none.

    Where the desktop has no selection (Windows, macOS, a Wayland compositor without
    primary selection), ``"selection"`` reads the clipboard and the note says so.
    """
    clipboard = QGuiApplication.clipboard()
    if source == "selection":
        if clipboard.supportsSelection():
            text = clipboard.text(QClipboard.Mode.Selection)
            return (text, None) if text.strip() else ("", "Nothing is selected: select some text first")
        text = clipboard.text(QClipboard.Mode.Clipboard)
        note = "This desktop has no selection to read: translated the clipboard"
        return (text, note) if text.strip() else ("", note.split(":")[0] + ", and the clipboard holds no text")
    text = clipboard.text(QClipboard.Mode.Clipboard)
    return (text, None) if text.strip() else ("", "The clipboard holds no text")


class OutsideRequests(QObject):
    """Carries out requests on the main window."""

    def __init__(self, window, copy: bool = False):
        """Args:
            window: The :class:`~.window.MainWindow`.
            copy: Copy the translation of every request (``--copy`` for this run, or the
                setting); a request may also ask for it itself.
        """
        super().__init__(window)
        self.window = window
        self.copy = copy
        self._copy_source: str | None = None
        self._popup = None
        window.pane.translation_finished.connect(self._on_finished)

    def handle(self, request: Request) -> None:
        """Bring the window forward and translate what ``request`` names."""
        window = self.window
        if window.isMinimized():
            window.showNormal()
        window.show()
        window.raise_()
        window.activateWindow()
        if request.source == "show":
            return
        text, note = read(request.source)
        if note:
            window.notify(note, 5000)
        if not text:
            return
        window.translate_text(text)
        copy = request.copy or self.copy or window.settings.copy_result
        self._copy_source = window.pane.alignment.source if copy else None

    def shortcut(self) -> None:
        """The global shortcut: the selection (or, where there is none or it is empty, the
        clipboard) translated in the popup near the pointer, and the translation put on the
        clipboard when it is done."""
        text, note = read("selection")
        if not text:
            text, note = read("clipboard")
        if not text:
            self.window.notify("Nothing is selected and the clipboard holds no text", 5000)
            return
        self.popup().translate(text, self.window.pane.options())

    def popup(self):
        """The popup (made on first use)."""
        if self._popup is None:
            from .popup import Popup

            self._popup = Popup(self.window.session, self.window)
            self._popup.done.connect(self._on_popup_done)
            self._popup.open_in_window.connect(lambda text: self.handle_text(text))
        return self._popup

    def handle_text(self, text: str) -> None:
        """Bring the window forward with ``text`` translated in it."""
        self.handle(Request("show"))
        self.window.translate_text(text)

    def _on_popup_done(self, source: str, translation: str) -> None:
        clipwatch.write(translation)

    def _on_finished(self, info: dict) -> None:
        source, self._copy_source = self._copy_source, None
        pane = self.window.pane
        if source is not None and pane.alignment.source == source:
            clipwatch.write(pane.target.toPlainText())
            self.window.notify("Translation copied to the clipboard", 3000)
