"""The tray icon, where the desktop has a tray: translate the clipboard or the selection, show, quit.

Its menu sends the same requests as ``gui --clipboard`` and ``gui --selection``
(:class:`~.outside.OutsideRequests`); a click on the icon shows or hides the window. With
the "close to the tray" setting, closing the window hides it and the app stays in the
tray until Quit. Without a tray (``QSystemTrayIcon.isSystemTrayAvailable()`` is false:
GNOME without the AppIndicator extension, a bare window manager) there is no icon, the
setting is disabled and closing the window quits, as before.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSystemTrayIcon

from .instance import Request


class Tray(QObject):
    """The icon and its menu; :attr:`icon` is ``None`` where the desktop has no tray."""

    def __init__(self, window, outside):
        """Args:
            window: The :class:`~.window.MainWindow`.
            outside: The :class:`~.outside.OutsideRequests` that carries out the menu's requests.
        """
        super().__init__(window)
        self.window = window
        self.icon: QSystemTrayIcon | None = None
        if not QSystemTrayIcon.isSystemTrayAvailable():
            return
        self.menu = QMenu(window)
        self.actions: dict[str, QAction] = {}
        for name, text, request in (("clipboard", "Translate the &clipboard", Request("clipboard")),
                                    ("selection", "Translate the &selection", Request("selection")),
                                    ("show", "&Show the window", Request("show"))):
            action = self.menu.addAction(text)
            action.triggered.connect(lambda _=False, r=request: outside.handle(r))
            self.actions[name] = action
        self.menu.addSeparator()
        self.actions["quit"] = self.menu.addAction("&Quit")
        self.actions["quit"].triggered.connect(window.quit)
        self.icon = QSystemTrayIcon(window.windowIcon(), self)
        self.icon.setToolTip("Edge Translator")
        self.icon.setContextMenu(self.menu)
        self.icon.activated.connect(self._on_activated)
        self.icon.show()
        window.tray = self

    def _on_activated(self, reason: QSystemTrayIcon.ActivationReason) -> None:
        if reason != QSystemTrayIcon.ActivationReason.Trigger:
            return
        if self.window.isVisible() and not self.window.isMinimized():
            self.window.hide()
        else:
            self.window.showNormal()
            self.window.raise_()
            self.window.activateWindow()

    def hide(self) -> None:
        if self.icon is not None:
            self.icon.hide()
