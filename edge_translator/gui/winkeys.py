"""The Windows global shortcut: ``RegisterHotKey`` in a thread with its own message loop.

A hot key registered without a window posts ``WM_HOTKEY`` to the thread that registered
it, so registering, the ``GetMessageW`` loop and unregistering all happen on the
shortcut's own thread; :meth:`WindowsHotkey.stop` posts ``WM_QUIT`` to it. user32 and
kernel32 are passed in, so that tests run this code with fakes on any system.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable

from .keyspec import Keys, ShortcutError

logger = logging.getLogger(__name__)

WM_HOTKEY = 0x0312
WM_QUIT = 0x0012
WM_USER = 0x0400
PM_NOREMOVE = 0
MOD_ALT, MOD_CONTROL, MOD_SHIFT, MOD_WIN, MOD_NOREPEAT = 0x1, 0x2, 0x4, 0x8, 0x4000
_MODS = {"alt": MOD_ALT, "ctrl": MOD_CONTROL, "shift": MOD_SHIFT, "super": MOD_WIN}
HOTKEY_ID = 0x4554  # any id in 0x0000-0xBFFF; one per thread is enough

#: Virtual-key codes of the canonical key names (:mod:`.keyspec`) other than letters,
#: digits and F-keys (for those: the letter's capital, the digit, VK_F1 + n - 1).
_VK = {
    "space": 0x20, "enter": 0x0D, "escape": 0x1B, "tab": 0x09, "backspace": 0x08, "delete": 0x2E,
    "insert": 0x2D, "home": 0x24, "end": 0x23, "pageup": 0x21, "pagedown": 0x22, "left": 0x25, "up": 0x26,
    "right": 0x27, "down": 0x28, "print": 0x2C, "pause": 0x13, "semicolon": 0xBA, "equal": 0xBB, "comma": 0xBC,
    "minus": 0xBD, "period": 0xBE, "slash": 0xBF, "grave": 0xC0, "bracketleft": 0xDB, "backslash": 0xDC,
    "bracketright": 0xDD, "apostrophe": 0xDE,
}


class POINT(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int32), ("y", ctypes.c_int32)]


class MSG(ctypes.Structure):
    """user32's MSG, spelled without ``ctypes.wintypes`` so that it loads on every system."""

    _fields_ = [("hwnd", ctypes.c_void_p), ("message", ctypes.c_uint32), ("wParam", ctypes.c_size_t),
                ("lParam", ctypes.c_ssize_t), ("time", ctypes.c_uint32), ("pt", POINT),
                ("lPrivate", ctypes.c_uint32)]


def hotkey_codes(keys: Keys) -> tuple[int, int]:
    """``RegisterHotKey``'s modifiers (with MOD_NOREPEAT: a held key is one press) and virtual key."""
    mods = MOD_NOREPEAT
    for modifier in keys.modifiers:
        mods |= _MODS[modifier]
    key = keys.key
    if keys.is_function_key:
        vk = 0x70 + int(key[1:]) - 1
    elif len(key) == 1:
        vk = ord(key.upper())
    else:
        vk = _VK[key]
    return mods, vk


def _system_libraries():
    return ctypes.WinDLL("user32"), ctypes.WinDLL("kernel32")


class WindowsHotkey:
    """Takes one key combination on Windows for as long as it runs.

    Args:
        keys: The combination.
        user32: user32 (or a fake with ``RegisterHotKey``, ``UnregisterHotKey``,
            ``GetMessageW``, ``PeekMessageW`` and ``PostThreadMessageW``); ``None`` loads it.
        kernel32: kernel32 (or a fake with ``GetCurrentThreadId``); ``None`` loads it.
    """

    def __init__(self, keys: Keys, user32=None, kernel32=None):
        self.keys = keys
        self._user32 = user32
        self._kernel32 = kernel32
        self._thread: threading.Thread | None = None
        self._thread_id = 0

    def start(self, on_press: Callable[[], None]) -> None:
        """Register the hot key and call ``on_press`` (from the shortcut's thread) once per press.

        Raises:
            ShortcutError: Another program holds the combination.
        """
        if self._thread is not None:
            return
        if self._user32 is None or self._kernel32 is None:
            self._user32, self._kernel32 = _system_libraries()
        registered = threading.Event()
        outcome: list[bool] = []
        thread = threading.Thread(target=self._run, args=(on_press, registered, outcome),
                                  name=f"windows-shortcut {self.keys}", daemon=True)
        thread.start()
        registered.wait()
        if not outcome[0]:
            thread.join()
            raise ShortcutError(f"{self.keys} is taken by another program; choose another in Settings")
        self._thread = thread
        logger.info("global shortcut %s registered", self.keys)

    def stop(self) -> None:
        """Unregister the hot key and end the thread; nothing happens if it is not running."""
        if self._thread is None:
            return
        self._user32.PostThreadMessageW(self._thread_id, WM_QUIT, 0, 0)
        self._thread.join()
        self._thread = None
        logger.info("global shortcut %s unregistered", self.keys)

    def _run(self, on_press: Callable[[], None], registered: threading.Event, outcome: list[bool]) -> None:
        user32 = self._user32
        message = MSG()
        self._thread_id = self._kernel32.GetCurrentThreadId()
        # The thread's message queue must exist before stop() can post WM_QUIT to it.
        user32.PeekMessageW(ctypes.pointer(message), None, WM_USER, WM_USER, PM_NOREMOVE)
        mods, vk = hotkey_codes(self.keys)
        outcome.append(bool(user32.RegisterHotKey(None, HOTKEY_ID, mods, vk)))
        registered.set()
        if not outcome[0]:
            return
        try:
            while user32.GetMessageW(ctypes.pointer(message), None, 0, 0) > 0:  # 0: WM_QUIT, -1: error
                if message.message == WM_HOTKEY and message.wParam == HOTKEY_ID:
                    try:
                        on_press()
                    except Exception:
                        logger.exception("global shortcut %s: the handler failed", self.keys)
        finally:
            user32.UnregisterHotKey(None, HOTKEY_ID)
