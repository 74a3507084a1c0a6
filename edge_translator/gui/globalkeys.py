"""A global keyboard shortcut for the desktop app: a Qt signal whenever a key combination
is pressed, whichever program has the focus.

The way depends on Qt's platform: on X11 the key is grabbed (:mod:`.x11keys`), on Windows
a hot key is registered (:mod:`.winkeys`). Wayland lets no client take a key from the
others (XWayland clients included: they see keys only while one of theirs has the focus),
so there the desktop is asked through its portal (:mod:`.portalkeys`), which refuses where
the desktop does not offer it. macOS has no such call without a dependency, and offscreen
there are no keys; there, as on a Wayland desktop without the portal,
:meth:`GlobalShortcut.start` refuses in one line that says to bind ``edge-translator gui
--selection`` in the desktop's own keyboard settings instead (docs/desktop.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QGuiApplication

from .keyspec import Keys, ShortcutError, bind_advice, parse_keys
from .portalkeys import PortalShortcut, session_bus_address
from .winkeys import WindowsHotkey
from .x11keys import X11Grab

__all__ = ["GlobalShortcut", "Keys", "ShortcutError", "parse_keys", "backend_for"]


class Backend(Protocol):
    """What takes a combination on one platform: :class:`X11Grab`, :class:`WindowsHotkey`,
    :class:`PortalShortcut`."""

    def start(self, on_press: Callable[[], None]) -> None: ...

    def stop(self) -> None: ...


def backend_for(keys: Keys, platform: str, environ: Mapping[str, str]) -> Backend:
    """The backend for Qt's platform ``platform`` (``QGuiApplication.platformName()``).

    Args:
        keys: The combination.
        platform: Qt's platform plugin: ``"xcb"``, ``"windows"``, ``"wayland"``, ``"cocoa"``...
        environ: The environment, to tell an X11 session from XWayland under a Wayland one,
            and to find the session bus of a Wayland desktop's portal.

    Returns:
        A backend, not started. On Wayland it is the portal's, whose ``start`` refuses
        where the desktop does not offer one.

    Raises:
        ShortcutError: The platform lets no program take a global shortcut, or has no display.
    """
    if platform == "xcb":
        if environ.get("WAYLAND_DISPLAY") or environ.get("XDG_SESSION_TYPE") == "wayland":
            return PortalShortcut(keys, session_bus_address(environ))
        return X11Grab(keys)
    if platform == "windows":
        return WindowsHotkey(keys)
    if platform.startswith("wayland"):
        return PortalShortcut(keys, session_bus_address(environ))
    if platform == "cocoa":
        raise ShortcutError(f"global shortcut {keys}: the app cannot take a global shortcut on macOS; "
                            + bind_advice("a Shortcuts app shortcut (Run Shell Script)"))
    if platform in ("", "offscreen", "minimal"):
        raise ShortcutError(f"global shortcut {keys}: there is no display (Qt platform {platform or 'none'!r}); "
                            "run the app in an X11 or Windows desktop session")
    raise ShortcutError(f"global shortcut {keys}: Qt platform {platform!r} has no global shortcuts; "
                        + bind_advice("the desktop's keyboard settings"))


def _platform() -> str:
    return QGuiApplication.platformName() if QGuiApplication.instance() is not None else ""


class GlobalShortcut(QObject):
    """Emits :attr:`activated` once per press of ``keys``, whichever program has the focus.

    :meth:`start` takes the combination and :meth:`stop` gives it back; both may be called
    again. The press is noticed on a thread of the shortcut's own, and the signal is
    queued to the receivers' threads. The shortcut stops by itself when the application
    is about to quit.

    Args:
        keys: The combination, from :func:`parse_keys`.
        parent: The Qt parent.
    """

    activated = Signal()

    def __init__(self, keys: Keys, parent: QObject | None = None):
        super().__init__(parent)
        self.keys = keys
        self._backend: Backend | None = None

    @property
    def active(self) -> bool:
        """Whether the combination is taken now."""
        return self._backend is not None

    def start(self) -> None:
        """Take the combination; nothing happens if it is taken already.

        Raises:
            ShortcutError: Another program holds the combination, the platform lets no
                program take one (macOS, Wayland without the portal), the person cancelled
                the Wayland desktop's dialog, or there is no display. One line.
        """
        if self._backend is not None:
            return
        backend = backend_for(self.keys, _platform(), os.environ)
        backend.start(self.activated.emit)
        self._backend = backend
        application = QGuiApplication.instance()
        if application is not None:
            application.aboutToQuit.connect(self.stop)

    def stop(self) -> None:
        """Give the combination back and end the thread; nothing happens if it is not taken."""
        if self._backend is None:
            return
        backend, self._backend = self._backend, None
        application = QGuiApplication.instance()
        if application is not None:
            application.aboutToQuit.disconnect(self.stop)
        backend.stop()
