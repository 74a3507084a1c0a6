"""The desktop's global shortcut (#51): the spec people write, X11 for real under Xvfb,
Windows with user32 faked, and the one-line refusals where no program may take a key.

The X11 tests drive ``tests/shortcutapp.py`` in processes of their own on the xcb
platform (this process draws offscreen) and press keys with xdotool through XTest. They
wait on the app's lines, never for a fixed time: after N presses the next line must be
``activated N``, so an extra activation or a missing one fails the test.
"""

from __future__ import annotations

import dataclasses
import queue
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("PySide6")
pytest.importorskip("pytestqt")

from edge_translator.core.errors import EdgeTranslatorError  # noqa: E402
from edge_translator.gui import globalkeys, winkeys  # noqa: E402
from edge_translator.gui.globalkeys import GlobalShortcut, ShortcutError, backend_for, parse_keys  # noqa: E402
from edge_translator.gui.keyspec import NAMED_KEYS, Keys  # noqa: E402
from edge_translator.gui.portalkeys import PortalShortcut  # noqa: E402
from edge_translator.gui.winkeys import HOTKEY_ID, MOD_ALT, MOD_CONTROL, MOD_NOREPEAT, MOD_SHIFT, MOD_WIN, \
    WM_HOTKEY, WM_QUIT, WindowsHotkey, hotkey_codes  # noqa: E402
from edge_translator.gui.x11keys import X11Grab, keysym_name  # noqa: E402
from tests.xdisplay import x_display  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TAKEN = "ctrl+alt+e is taken by another program; choose another in Settings"


# -- the spec ---------------------------------------------------------------------------

@pytest.mark.parametrize("spec, modifiers, key", [
    ("ctrl+alt+e", {"ctrl", "alt"}, "e"),
    ("Ctrl+Alt+E", {"ctrl", "alt"}, "e"),
    ("  Ctrl + Alt + E ", {"ctrl", "alt"}, "e"),
    ("<Ctrl><Alt>e", {"ctrl", "alt"}, "e"),
    ("<Primary><Shift>space", {"ctrl", "shift"}, "space"),
    ("<Super>F9", {"super"}, "f9"),
    ("Control+Alt+E", {"ctrl", "alt"}, "e"),
    ("CONTROL+SHIFT+T", {"ctrl", "shift"}, "t"),
    ("Meta+E", {"super"}, "e"),
    ("Super+e", {"super"}, "e"),
    ("Win+Shift+E", {"super", "shift"}, "e"),
    ("alt+7", {"alt"}, "7"),
    ("F9", set(), "f9"),
    ("f24", set(), "f24"),
    ("shift+F3", {"shift"}, "f3"),
    ("ctrl+alt+Return", {"ctrl", "alt"}, "enter"),
    ("ctrl+alt+Esc", {"ctrl", "alt"}, "escape"),
    ("Alt+PgUp", {"alt"}, "pageup"),
    ("ctrl+alt+,", {"ctrl", "alt"}, "comma"),
    ("CTRL+ALT+DEL", {"ctrl", "alt"}, "delete"),
    ("ctrl+ctrl+e", {"ctrl"}, "e"),
])
def test_parse_keys_reads_the_forms_people_write(spec, modifiers, key):
    keys = parse_keys(spec)
    assert keys == Keys(frozenset(modifiers), key)
    assert parse_keys(str(keys)) == keys  # what settings store reads back the same


def test_keys_are_written_in_one_order_and_frozen():
    assert str(parse_keys("<Super><Shift><Alt><Ctrl>e")) == "ctrl+alt+shift+super+e"
    assert str(parse_keys("Control+Alt+E")) == "ctrl+alt+e"
    with pytest.raises(dataclasses.FrozenInstanceError):
        parse_keys("ctrl+alt+e").key = "r"


@pytest.mark.parametrize("spec, says", [
    ("", "the global shortcut is empty"),
    ("   ", "the global shortcut is empty"),
    ("e", "has no modifier: it would take that key from every program"),
    ("space", "has no modifier"),
    ("Shift+E", "has only shift as its modifier"),
    ("ctrl+alt", "has no key after its modifiers"),
    ("<Ctrl><Alt>", "has no key after its modifiers"),
    ("ctrl+alt+e+r", "has 2 keys (e, r)"),
    ("ctrl+hyper+e", "unknown key 'hyper'"),
    ("ctrl+alt+f25", "unknown key 'f25'"),
    ("ctrl+alt+é", "unknown key 'é'"),
    ("ctrl++e", "an empty part between its '+'"),
    ("ctrl+alt+", "an empty part between its '+'"),
    ("<Ctrl><Alt", "an unclosed or empty <...>"),
    ("<Ctrl><>e", "an unclosed or empty <...>"),
])
def test_a_bad_spec_is_one_line_with_a_good_example(spec, says):
    with pytest.raises(ShortcutError) as caught:
        parse_keys(spec)
    message = str(caught.value)
    assert says in message
    assert "ctrl+alt+e" in message and "\n" not in message
    assert isinstance(caught.value, EdgeTranslatorError)


# -- which way, per platform ------------------------------------------------------------

def test_x11_windows_and_wayland_get_their_backend():
    keys = parse_keys("ctrl+alt+e")
    assert isinstance(backend_for(keys, "xcb", {"XDG_SESSION_TYPE": "x11", "DISPLAY": ":0"}), X11Grab)
    assert isinstance(backend_for(keys, "windows", {}), WindowsHotkey)
    # Wayland, and XWayland under a Wayland session: the portal, which refuses on start where
    # the desktop does not offer it (tests/test_portalkeys.py)
    for platform, environ in (("wayland", {}), ("wayland-egl", {}), ("xcb", {"WAYLAND_DISPLAY": "wayland-0"}),
                              ("xcb", {"XDG_SESSION_TYPE": "wayland"})):
        backend = backend_for(keys, platform, dict(environ, DBUS_SESSION_BUS_ADDRESS="unix:path=/bus"))
        assert isinstance(backend, PortalShortcut) and backend.address == "unix:path=/bus"


@pytest.mark.parametrize("platform, environ, says", [
    ("cocoa", {}, "cannot take a global shortcut on macOS; bind `edge-translator gui --selection` (or "
                  "`--clipboard`) to it in a Shortcuts app shortcut"),
    ("offscreen", {}, "there is no display (Qt platform 'offscreen')"),
    ("minimal", {}, "there is no display"),
    ("", {}, "there is no display (Qt platform 'none')"),
    ("eglfs", {}, "Qt platform 'eglfs' has no global shortcuts; bind `edge-translator gui --selection`"),
])
def test_a_platform_without_global_shortcuts_is_one_line(platform, environ, says):
    with pytest.raises(ShortcutError) as caught:
        backend_for(parse_keys("ctrl+alt+e"), platform, environ)
    message = str(caught.value)
    assert message.startswith("global shortcut ctrl+alt+e: ") and says in message
    assert "\n" not in message
    if platform != "offscreen" and platform != "minimal" and platform:
        assert "docs/desktop.md" in message


def test_no_display_refuses_in_one_line(qapp):
    shortcut = GlobalShortcut(parse_keys("ctrl+alt+e"))  # this process draws offscreen
    shortcut.stop()  # not started: nothing to do
    with pytest.raises(ShortcutError, match=r"^global shortcut ctrl\+alt\+e: there is no display \(Qt platform "
                                            r"'offscreen'\); run the app in an X11 or Windows desktop session$"):
        shortcut.start()
    assert not shortcut.active


def test_an_x_display_that_cannot_be_opened_is_one_line():
    grab = X11Grab(parse_keys("ctrl+alt+e"), display=":4093")
    with pytest.raises(ShortcutError, match=r"^global shortcut ctrl\+alt\+e: cannot open the X display ':4093'; "
                                            r"run the app in a desktop session$"):
        grab.start(lambda: None)
    grab.stop()


# -- Windows, with user32 faked ---------------------------------------------------------

class FakeUser32:
    """user32's hot key and message calls: a queue of messages for the shortcut's thread."""

    def __init__(self, registers: bool = True, messages=()):
        self.registers = registers
        self.queue: queue.Queue = queue.Queue()
        for message in messages:
            self.queue.put(message)
        self.registered: list[tuple] = []
        self.unregistered: list[tuple] = []
        self.posted: list[tuple] = []
        self.got = 0
        self.thread = None

    def PeekMessageW(self, message, hwnd, first, last, remove):
        self.thread = threading.get_ident()
        return 0

    def RegisterHotKey(self, hwnd, ident, mods, vk):
        self.registered.append((hwnd, ident, mods, vk, threading.get_ident()))
        return int(self.registers)

    def UnregisterHotKey(self, hwnd, ident):
        self.unregistered.append((hwnd, ident, threading.get_ident()))
        return 1

    def GetMessageW(self, message, hwnd, first, last):
        self.got += 1
        kind, wparam = self.queue.get(timeout=30)
        message.contents.message, message.contents.wParam = kind, wparam
        return 0 if kind == WM_QUIT else 1

    def PostThreadMessageW(self, thread_id, kind, wparam, lparam):
        self.posted.append((thread_id, kind))
        self.queue.put((kind, wparam))
        return 1


class FakeKernel32:
    def GetCurrentThreadId(self):
        return threading.get_ident() % 2**32


@pytest.mark.parametrize("spec, mods, vk", [
    ("ctrl+alt+e", MOD_CONTROL | MOD_ALT, 0x45),
    ("super+F9", MOD_WIN, 0x78),
    ("f24", 0, 0x87),
    ("ctrl+shift+space", MOD_CONTROL | MOD_SHIFT, 0x20),
    ("alt+7", MOD_ALT, 0x37),
    ("ctrl+alt+pageup", MOD_CONTROL | MOD_ALT, 0x21),
    ("ctrl+alt+/", MOD_CONTROL | MOD_ALT, 0xBF),
])
def test_windows_codes(spec, mods, vk):
    assert hotkey_codes(parse_keys(spec)) == (mods | MOD_NOREPEAT, vk)


def test_every_key_has_a_code_on_both_systems():
    import ctypes
    import ctypes.util

    libx11 = ctypes.CDLL(ctypes.util.find_library("X11"))
    libx11.XStringToKeysym.restype, libx11.XStringToKeysym.argtypes = ctypes.c_ulong, [ctypes.c_char_p]
    names = [*NAMED_KEYS, *"abcxyz0189", "f1", "f12", "f24"]
    codes = {}
    for name in names:
        keys = Keys(frozenset({"ctrl"}), name)
        assert libx11.XStringToKeysym(keysym_name(keys).encode()), name  # a keysym X knows
        codes[name] = hotkey_codes(keys)[1]
    assert len(set(codes.values())) == len(names)  # no two keys share a virtual key


def _shortcut_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("windows-shortcut")]


def test_windows_registers_on_its_thread_activates_per_hotkey_and_stops():
    other = (WM_HOTKEY, HOTKEY_ID + 1)  # another hot key of this thread: not ours
    keydown = (0x0100, HOTKEY_ID)  # WM_KEYDOWN: not a hot key at all
    user32 = FakeUser32(messages=[(WM_HOTKEY, HOTKEY_ID), other, keydown, (WM_HOTKEY, HOTKEY_ID)])
    pressed: list[int] = []
    two = threading.Event()

    def on_press():
        pressed.append(threading.get_ident())
        if len(pressed) == 1:
            raise RuntimeError("a slot failed")  # logged; the loop goes on
        two.set()

    hotkey = WindowsHotkey(parse_keys("ctrl+alt+e"), user32, FakeKernel32())
    hotkey.start(on_press)
    hotkey.start(on_press)  # started already: nothing more
    assert two.wait(10)
    hotkey.stop()
    hotkey.stop()  # stopped already: nothing more
    (hwnd, ident, mods, vk, thread), = user32.registered
    assert (hwnd, ident, mods, vk) == (None, HOTKEY_ID, MOD_CONTROL | MOD_ALT | MOD_NOREPEAT, 0x45)
    assert thread != threading.get_ident() and thread == user32.thread  # its queue existed before it registered
    assert set(pressed) == {thread} and len(pressed) == 2
    assert user32.posted == [(thread % 2**32, WM_QUIT)]  # to the shortcut's thread, not the caller's
    assert user32.unregistered == [(None, HOTKEY_ID, thread)]
    assert user32.queue.empty() and user32.got == 5  # every message read, up to WM_QUIT
    assert not _shortcut_threads()


def test_windows_hotkey_taken_is_one_line_and_leaves_no_thread():
    user32 = FakeUser32(registers=False)
    hotkey = WindowsHotkey(parse_keys("Control+Alt+E"), user32, FakeKernel32())
    with pytest.raises(ShortcutError) as caught:
        hotkey.start(lambda: pytest.fail("activated"))
    assert str(caught.value) == TAKEN
    assert len(user32.registered) == 1 and user32.got == 0 and user32.unregistered == []
    assert not _shortcut_threads()
    hotkey.stop()
    assert user32.posted == []


def test_global_shortcut_on_windows_emits_on_the_gui_thread(qapp, qtbot, monkeypatch):
    user32 = FakeUser32(messages=[(WM_HOTKEY, HOTKEY_ID)])
    monkeypatch.setattr(globalkeys, "_platform", lambda: "windows")
    monkeypatch.setattr(winkeys, "_system_libraries", lambda: (user32, FakeKernel32()))
    shortcut = GlobalShortcut(parse_keys("ctrl+alt+e"))
    threads: list = []
    shortcut.activated.connect(lambda: threads.append(threading.current_thread()))
    with qtbot.waitSignal(shortcut.activated, timeout=10000):
        shortcut.start()
    assert shortcut.active and threads == [threading.main_thread()]
    shortcut.stop()
    assert not shortcut.active and user32.unregistered and not _shortcut_threads()


# -- X11, for real ----------------------------------------------------------------------

class App:
    """``tests/shortcutapp.py`` holding ``spec`` on the display; its lines read with a timeout."""

    def __init__(self, x, spec: str, env: dict | None = None):
        self.process = subprocess.Popen([sys.executable, "-m", "tests.shortcutapp", spec], cwd=ROOT,
                                        env=env or x.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.logs: queue.Queue = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            (self.logs if line.startswith("log: ") else self.lines).put(line.rstrip("\n"))
        self.lines.put(None)

    def line(self, timeout: float = 30) -> str | None:
        """The app's next line (``None`` once it has ended)."""
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line from the app in {timeout} s") from None

    def log(self, fragment: str, timeout: float = 30) -> str:
        """Wait for a log record of the shortcut that holds ``fragment``."""
        while True:
            try:
                record = self.logs.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no log record with {fragment!r} in {timeout} s") from None
            if fragment in record:
                return record

    def send(self, command: str) -> None:
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        """Its exit code (it must exit by itself) and its standard error."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise AssertionError(f"the app did not exit within {timeout} s") from None
        self._reader.join(timeout)
        return code, self.process.stderr.read()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def x():
    with x_display() as display:
        yield display


@pytest.fixture
def apps():
    started: list[App] = []
    yield started
    for app in started:
        app.kill()


def _start(x, apps, spec: str, env: dict | None = None) -> App:
    app = App(x, spec, env)
    apps.append(app)
    return app


def _quit(app: App) -> None:
    app.send("quit")
    assert app.line() == "quit active=False threads=1"  # aboutToQuit stopped it, its thread ended
    code, errors = app.finish()
    assert code == 0 and errors == "", errors


def test_x11_one_activation_per_press_whatever_numlock_and_capslock(x, apps):
    app = _start(x, apps, "ctrl+alt+e")
    assert app.line() == "ready"
    # none, NumLock, NumLock+CapsLock, CapsLock, none: the grab must hold in every state
    for presses, toggle in enumerate([None, "Num_Lock", "Caps_Lock", "Num_Lock", "Caps_Lock"], 1):
        if toggle:
            x.run("xdotool", "key", toggle)
        x.run("xdotool", "key", "ctrl+alt+e")
        assert app.line() == f"activated {presses}"
    _quit(app)


def test_x11_other_keys_do_not_activate(x, apps):
    app = _start(x, apps, "<Ctrl><Alt>e")
    assert app.line() == "ready"
    for other in ("e", "ctrl+e", "alt+e", "ctrl+alt+r", "ctrl+alt+shift+e", "super+e", "ctrl+alt+super+e"):
        x.run("xdotool", "key", other)
    x.run("xdotool", "key", "ctrl+alt+e")
    assert app.line() == "activated 1"  # an earlier activation would have made this one 2
    _quit(app)


def test_x11_a_held_key_is_one_press(x, apps):
    app = _start(x, apps, "ctrl+alt+e")
    assert app.line() == "ready"
    x.run("xdotool", "keydown", "ctrl+alt+e")
    assert app.line() == "activated 1"
    app.log("auto-repeat dropped")  # the server repeats the held key (after about 660 ms)
    x.run("xdotool", "keyup", "ctrl+alt+e")
    app.send("stop")
    assert app.line() == "stopped threads=1"  # no activation from the repeats came before it
    app.send("start")
    assert app.line() == "ready"
    x.run("xdotool", "key", "ctrl+alt+e")
    assert app.line() == "activated 2"
    _quit(app)


def test_x11_a_combination_held_by_another_program_is_one_line(x, apps):
    first = _start(x, apps, "ctrl+alt+e")
    assert first.line() == "ready"
    second = _start(x, apps, "Control+Alt+E")
    assert second.line() == f"error: {TAKEN}"
    code, errors = second.finish()
    assert code == 3 and errors == "", errors  # Xlib's own handler would print and exit 1
    x.run("xdotool", "key", "ctrl+alt+e")
    assert first.line() == "activated 1"  # the first still holds it
    first.send("stop")
    assert first.line() == "stopped threads=1"
    third = _start(x, apps, "ctrl+alt+e")  # given back: another program can take it now
    assert third.line() == "ready"
    x.run("xdotool", "key", "ctrl+alt+e")
    assert third.line() == "activated 1"
    _quit(third)
    first.send("start")  # and the first can take it back
    assert first.line() == "ready"
    x.run("xdotool", "key", "ctrl+alt+e")
    assert first.line() == "activated 2"
    _quit(first)


def test_x11_stop_ends_the_thread_and_gives_the_key_back(x, apps):
    app = _start(x, apps, "super+F9")
    assert app.line() == "ready"
    x.run("xdotool", "key", "super+F9")
    assert app.line() == "activated 1"
    app.send("stop")
    assert app.line() == "stopped threads=1"
    x.run("xdotool", "key", "super+F9")  # not taken now: nothing
    app.send("stop")
    assert app.line() == "stopped threads=1"
    app.send("start")
    assert app.line() == "ready"
    x.run("xdotool", "key", "super+F9")
    assert app.line() == "activated 2"
    _quit(app)


def test_x11_under_a_wayland_session_refuses_in_one_line(x, apps):
    # no session bus (the run's XDG_RUNTIME_DIR has no user bus socket): no portal to ask
    app = _start(x, apps, "ctrl+alt+e", env=dict(x.env, WAYLAND_DISPLAY="wayland-0", XDG_SESSION_TYPE="wayland",
                                                 DBUS_SESSION_BUS_ADDRESS=""))
    line = app.line()
    assert line.startswith("error: global shortcut ctrl+alt+e: a Wayland desktop lets no program take a global "
                           "shortcut unless it offers the GlobalShortcuts portal, and this one does not (no session "
                           "bus); bind `edge-translator gui --selection`"), line
    code, errors = app.finish()
    assert code == 3 and errors == "", errors
