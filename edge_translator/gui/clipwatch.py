"""Clipboard watching, opt-in: what another app copies is translated in the window.

It ignores, so that it never loops or surprises:

- the app's own writes (a copied translation: :func:`write` records them);
- what the clipboard held when watching was switched on;
- the same text again (copying twice translates once), and the text of the source pane
  (copied from it);
- blank text, and text longer than :data:`MAX_CHARS` (a whole document copied by
  accident): the status bar says why it was not translated.

The text goes into the window's source pane and is translated there, without raising the
window. On Wayland a program learns of clipboard changes only while one of its windows has
the focus, so there it works only then, and switching it on says so.
"""

from __future__ import annotations

import os
from collections import deque

from PySide6.QtCore import QObject
from PySide6.QtGui import QClipboard, QGuiApplication

#: Longest copied text translated by itself, in characters.
MAX_CHARS = 5000

_written: deque[str] = deque(maxlen=8)


def write(text: str) -> None:
    """Put ``text`` on the clipboard as the app's own write (a watcher ignores it)."""
    _written.append(text)
    QGuiApplication.clipboard().setText(text, QClipboard.Mode.Clipboard)


def on_wayland() -> bool:
    return QGuiApplication.platformName() == "wayland" or os.environ.get("XDG_SESSION_TYPE") == "wayland"


class ClipboardWatcher(QObject):
    """Translates each new text on the clipboard while :attr:`enabled`."""

    def __init__(self, window):
        """Args:
            window: The :class:`~.window.MainWindow` whose pane translates, and whose status
                bar explains what is skipped.
        """
        super().__init__(window)
        self.window = window
        self.enabled = False
        self._seen: str | None = None
        QGuiApplication.clipboard().dataChanged.connect(self._changed)

    def set_enabled(self, on: bool) -> None:
        """Start or stop watching; what the clipboard holds now is not translated."""
        self.enabled = on
        self._seen = QGuiApplication.clipboard().text(QClipboard.Mode.Clipboard) if on else None
        if on and on_wayland():
            self.window.notify("Watching the clipboard: on Wayland only while this window has the focus", 10000)

    def _changed(self) -> None:
        if not self.enabled:
            return
        text = QGuiApplication.clipboard().text(QClipboard.Mode.Clipboard)
        if (not text.strip() or text == self._seen or text in _written
                or text == self.window.pane.source.toPlainText()):  # copied from the pane itself
            return
        self._seen = text
        if len(text) > MAX_CHARS:
            self.window.notify(f"Not translated: the copied text has {len(text):,} characters, more than "
                               f"{MAX_CHARS:,}; paste it to translate it", 10000)
            return
        self.window.translate_text(text)
