"""The X11 global shortcut: a passive key grab on the root window, through libX11 by ctypes.

The grab has its own connection to the X server, apart from Qt's, and a thread of its own
that waits on that connection and on a pipe (so :meth:`X11Grab.stop` ends it at once).
The connection is used by one thread at a time: the caller's while grabbing and
ungrabbing, the thread's in between, so Xlib needs no ``XInitThreads``.

The X server answers a grab that another client holds with a BadAccess error, and the
default Xlib handler for errors prints and exits the process; so the grab installs a
handler of its own for the length of the requests and an ``XSync`` that collects them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import select
import threading
from collections.abc import Callable

from .keyspec import Keys, ShortcutError

logger = logging.getLogger(__name__)

_SHIFT, _LOCK, _CONTROL, _MOD1, _MOD2, _MOD4 = 1, 2, 4, 8, 16, 64
_MASKS = {"shift": _SHIFT, "ctrl": _CONTROL, "alt": _MOD1, "super": _MOD4}
_KEY_PRESS, _KEY_RELEASE = 2, 3
_GRAB_MODE_ASYNC = 1
_BAD_ACCESS = 10

#: Canonical key names (:mod:`.keyspec`) whose X keysym name is not the name itself.
_KEYSYMS = {
    "enter": "Return", "escape": "Escape", "tab": "Tab", "backspace": "BackSpace", "delete": "Delete",
    "insert": "Insert", "home": "Home", "end": "End", "pageup": "Prior", "pagedown": "Next", "up": "Up",
    "down": "Down", "left": "Left", "right": "Right", "print": "Print", "pause": "Pause",
}


class _XErrorEvent(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("display", ctypes.c_void_p), ("resourceid", ctypes.c_ulong),
                ("serial", ctypes.c_ulong), ("error_code", ctypes.c_ubyte), ("request_code", ctypes.c_ubyte),
                ("minor_code", ctypes.c_ubyte)]


class _XKeyEvent(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("serial", ctypes.c_ulong), ("send_event", ctypes.c_int),
                ("display", ctypes.c_void_p), ("window", ctypes.c_ulong), ("root", ctypes.c_ulong),
                ("subwindow", ctypes.c_ulong), ("time", ctypes.c_ulong), ("x", ctypes.c_int), ("y", ctypes.c_int),
                ("x_root", ctypes.c_int), ("y_root", ctypes.c_int), ("state", ctypes.c_uint),
                ("keycode", ctypes.c_uint), ("same_screen", ctypes.c_int)]


class _XEvent(ctypes.Union):
    _fields_ = [("type", ctypes.c_int), ("xkey", _XKeyEvent), ("pad", ctypes.c_long * 24)]


class _XModifierKeymap(ctypes.Structure):
    _fields_ = [("max_keypermod", ctypes.c_int), ("modifiermap", ctypes.POINTER(ctypes.c_ubyte))]


_ERROR_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(_XErrorEvent))


def _libx11(keys: Keys):
    """libX11 with the prototypes used here (64-bit pointers must not be cut to ints)."""
    path = ctypes.util.find_library("X11")
    if path is None:
        raise ShortcutError(f"global shortcut {keys}: libX11 is not installed; install it (Debian, Ubuntu: "
                            "sudo apt install libx11-6) or bind the key in the desktop's keyboard settings")
    x = ctypes.CDLL(path)
    pointer, ulong, c_int = ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int
    for name, result, args in (
        ("XOpenDisplay", pointer, [ctypes.c_char_p]), ("XCloseDisplay", c_int, [pointer]),
        ("XDisplayString", ctypes.c_char_p, [pointer]), ("XDefaultRootWindow", ulong, [pointer]),
        ("XConnectionNumber", c_int, [pointer]), ("XStringToKeysym", ulong, [ctypes.c_char_p]),
        ("XKeysymToKeycode", ctypes.c_ubyte, [pointer, ulong]),
        ("XGrabKey", c_int, [pointer, c_int, ctypes.c_uint, ulong, c_int, c_int, c_int]),
        ("XUngrabKey", c_int, [pointer, c_int, ctypes.c_uint, ulong]), ("XSync", c_int, [pointer, c_int]),
        ("XPending", c_int, [pointer]), ("XNextEvent", c_int, [pointer, ctypes.POINTER(_XEvent)]),
        ("XSetErrorHandler", pointer, [pointer]),
        ("XGetModifierMapping", ctypes.POINTER(_XModifierKeymap), [pointer]),
        ("XFreeModifiermap", c_int, [ctypes.POINTER(_XModifierKeymap)]),
        ("XkbSetDetectableAutoRepeat", c_int, [pointer, c_int, ctypes.POINTER(c_int)]),
    ):
        function = getattr(x, name)
        function.restype, function.argtypes = result, args
    return x


class X11Grab:
    """Takes one key combination on an X display for as long as it runs.

    Args:
        keys: The combination.
        display: The X display to open, e.g. ``":0"``; ``None`` for ``$DISPLAY``, as Qt does.
    """

    def __init__(self, keys: Keys, display: str | None = None):
        self.keys = keys
        self.display_name = display
        self._x = None
        self._display = None
        self._keycode = 0
        self._masks: tuple[int, ...] = ()
        self._thread: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None

    def start(self, on_press: Callable[[], None]) -> None:
        """Grab the combination and call ``on_press`` (from the grab's thread) once per press.

        A held key is one press: the X server's auto-repeat is made detectable, and repeats
        are dropped.

        Raises:
            ShortcutError: No libX11 or no display; the keyboard has no such key; another
                program holds the combination.
        """
        if self._thread is not None:
            return
        x = self._x = _libx11(self.keys)
        name = self.display_name
        display = x.XOpenDisplay(name.encode() if name is not None else None)
        if not display:
            shown = name if name is not None else os.environ.get("DISPLAY", "")
            raise ShortcutError(f"global shortcut {self.keys}: cannot open the X display {shown!r}; run the app "
                                "in a desktop session")
        try:
            self._keycode = self._keycode_of(x, display)
            self._masks = _variants(_modifier_mask(self.keys), _numlock_mask(x, display))
            self._grab(x, display)
        except BaseException:
            x.XCloseDisplay(display)
            raise
        x.XkbSetDetectableAutoRepeat(display, 1, None)
        self._display = display
        self._wake = os.pipe()
        self._thread = threading.Thread(target=self._run, args=(on_press,), name=f"x11-shortcut {self.keys}",
                                        daemon=True)
        self._thread.start()
        logger.info("global shortcut %s grabbed on %s", self.keys, x.XDisplayString(display).decode())

    def stop(self) -> None:
        """Release the grab and end the thread; nothing happens if it is not running."""
        if self._thread is None:
            return
        os.write(self._wake[1], b"x")
        self._thread.join()
        x, display = self._x, self._display
        for mask in self._masks:
            x.XUngrabKey(display, self._keycode, mask, x.XDefaultRootWindow(display))
        x.XSync(display, 0)
        x.XCloseDisplay(display)
        for fd in self._wake:
            os.close(fd)
        self._thread = self._display = self._wake = None
        logger.info("global shortcut %s released", self.keys)

    def _keycode_of(self, x, display) -> int:
        keysym = x.XStringToKeysym(keysym_name(self.keys).encode())
        keycode = x.XKeysymToKeycode(display, keysym) if keysym else 0
        if not keycode:
            raise ShortcutError(f"global shortcut {self.keys}: this keyboard has no {self.keys.key} key; choose "
                                "another in Settings")
        return keycode

    def _grab(self, x, display) -> None:
        """Grab every variant, collecting the server's errors with our handler, not Xlib's."""
        errors: list[int] = []

        def record(error_display, event) -> int:
            if error_display == display:
                errors.append(event.contents.error_code)
            return 0

        handler = _ERROR_HANDLER(record)  # kept alive until the handler is restored
        previous = x.XSetErrorHandler(ctypes.cast(handler, ctypes.c_void_p))
        try:
            root = x.XDefaultRootWindow(display)
            for mask in self._masks:
                x.XGrabKey(display, self._keycode, mask, root, 0, _GRAB_MODE_ASYNC, _GRAB_MODE_ASYNC)
            x.XSync(display, 0)
            if errors:
                for mask in self._masks:  # the variants that were granted
                    x.XUngrabKey(display, self._keycode, mask, root)
                x.XSync(display, 0)
        finally:
            x.XSetErrorHandler(previous)
        if _BAD_ACCESS in errors:
            raise ShortcutError(f"{self.keys} is taken by another program; choose another in Settings")
        if errors:
            raise ShortcutError(f"global shortcut {self.keys}: the X server refused the key grab (error "
                                f"{errors[0]}); choose another in Settings")

    def _run(self, on_press: Callable[[], None]) -> None:
        x, display, wake = self._x, self._display, self._wake[0]
        connection = x.XConnectionNumber(display)
        event = _XEvent()
        down = False
        while True:
            while x.XPending(display):
                x.XNextEvent(display, ctypes.byref(event))
                if event.type not in (_KEY_PRESS, _KEY_RELEASE) or event.xkey.keycode != self._keycode:
                    continue
                if event.type == _KEY_RELEASE:
                    down = False
                elif down:  # the server's auto-repeat of a held key, detectable: no release before it
                    logger.debug("global shortcut %s: auto-repeat dropped", self.keys)
                else:
                    down = True
                    try:
                        on_press()
                    except Exception:
                        logger.exception("global shortcut %s: the handler failed", self.keys)
            readable, _, _ = select.select([connection, wake], [], [])
            if wake in readable:
                return


def keysym_name(keys: Keys) -> str:
    """The X keysym name of the combination's key: ``e``, ``F9``, ``Return``, ``comma``."""
    if keys.is_function_key:
        return keys.key.upper()
    return _KEYSYMS.get(keys.key, keys.key)


def _modifier_mask(keys: Keys) -> int:
    mask = 0
    for modifier in keys.modifiers:
        mask |= _MASKS[modifier]
    return mask


def _variants(mask: int, numlock: int) -> tuple[int, ...]:
    """The mask with and without NumLock and CapsLock: a grab matches the exact state."""
    return tuple(sorted({mask | extra for extra in (0, _LOCK, numlock, _LOCK | numlock)}))


def _numlock_mask(x, display) -> int:
    """The modifier bit that NumLock sets on this server (Mod2 almost everywhere)."""
    keycode = x.XKeysymToKeycode(display, x.XStringToKeysym(b"Num_Lock"))
    mapping = x.XGetModifierMapping(display)
    if not keycode or not mapping:
        return _MOD2
    try:
        per = mapping.contents.max_keypermod
        for bit in range(8):
            if any(mapping.contents.modifiermap[bit * per + i] == keycode for i in range(per)):
                return 1 << bit
    finally:
        x.XFreeModifiermap(mapping)
    return _MOD2
