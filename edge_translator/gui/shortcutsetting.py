"""The global shortcut as a setting: which keys, taken when the app starts and when they change.

:class:`ShortcutSetting` holds the running :class:`~.globalkeys.GlobalShortcut` and calls
:meth:`~.outside.OutsideRequests.shortcut` when it is pressed. A combination that cannot
be taken (another program holds it, a Wayland desktop without the portal or whose dialog
was cancelled, macOS) is one line in the status bar and in the log, never a crash; the app runs on without it. Settings → "Global
shortcut…" asks for the keys (empty: none), checks them and takes them at once.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QInputDialog, QLineEdit

from .globalkeys import GlobalShortcut, ShortcutError, parse_keys

logger = logging.getLogger(__name__)


class ShortcutSetting(QObject):
    """The window's global shortcut, if one is set and could be taken."""

    def __init__(self, window, outside):
        """Args:
            window: The :class:`~.window.MainWindow` (its status bar and settings).
            outside: The :class:`~.outside.OutsideRequests` whose ``shortcut`` a press calls.
        """
        super().__init__(window)
        self.window = window
        self.outside = outside
        self.shortcut: GlobalShortcut | None = None

    def take(self, text: str | None) -> str | None:
        """Release the current combination and take ``text`` (``None`` or empty: none).

        Returns:
            ``None``, or the one line saying why it could not be taken (also shown in the
            status bar and logged).
        """
        if self.shortcut is not None:
            self.shortcut.stop()
            self.shortcut = None
        if not text or not text.strip():
            return None
        try:
            shortcut = GlobalShortcut(parse_keys(text), self)
            shortcut.activated.connect(self.outside.shortcut)
            shortcut.start()
        except ShortcutError as exc:
            logger.warning("%s", exc)
            self.window.notify(f"Global shortcut not set: {exc}", 30000)
            return str(exc)
        self.shortcut = shortcut
        return None

    def ask(self) -> None:
        """Settings → Global shortcut…: ask for the keys, take them and remember them."""
        current = self.window.settings.global_shortcut or ""
        while True:
            text, ok = QInputDialog.getText(
                self.window, "Global shortcut",
                "Keys that translate the selection (or the clipboard) from any program,\n"
                "such as ctrl+alt+e; empty for none:", QLineEdit.EchoMode.Normal, current)
            if not ok:
                return
            text = text.strip()
            try:
                if text:
                    parse_keys(text)
            except ShortcutError as exc:
                self.window.notify(str(exc), 10000)
                current = text
                continue
            break
        problem = self.take(text)
        if problem is None:
            self.window._change_settings(global_shortcut=text or None)
            self.window.notify(f"Global shortcut: {text}" if text else "No global shortcut", 5000)

    def stop(self) -> None:
        if self.shortcut is not None:
            self.shortcut.stop()
