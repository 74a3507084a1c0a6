"""One window per user, reached from outside: ``edge-translator gui`` as people start it, on a
real X server (Xvfb), with xclip as the other app that copied or selected the text.

Each test has a runtime folder of its own (the channel lives there), so the windows of
different tests never meet, and a data and config home of its own, so no window stores in
the run's translation memory. The tests wait on the channel and the clipboard, never for a
fixed time.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time

import pytest

from edge_translator.gui import instance
from edge_translator.gui.instance import Channel, Request

from .conftest import ROOT
from .waiting import wait_until
from .xdisplay import x_display

pytest.importorskip("PySide6")

CJK = re.compile(r"[\u4e00-\u9fff]")
COPIED = "Where is the train station?"


@pytest.fixture
def x():
    with x_display() as display:
        yield display


@pytest.fixture
def runtime(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    return folder


class Gui:
    """``edge-translator gui ARGS`` started in the test's display and runtime folder."""

    def __init__(self, x, runtime, *args: str, env: dict | None = None):
        home = runtime.parent  # the test's own: a fresh home, never the run's (its memory, its settings)
        self.env = dict(x.env, XDG_RUNTIME_DIR=str(runtime), XDG_DATA_HOME=str(home / "data"),
                        XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"), **(env or {}))
        self.started = time.monotonic()
        self.process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "gui", *args], cwd=ROOT,
                                        env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def wait(self, timeout: float = 60) -> tuple[int, float, str]:
        """Its exit code, the seconds from start to exit, and its standard error."""
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, time.monotonic() - self.started, err

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.terminate()
        _, err = self.process.communicate(timeout=30)
        return err


@pytest.fixture
def window(x, runtime):
    """A running window (``gui`` with no flags), ready: its channel answers."""
    gui = Gui(x, runtime)
    channel = Channel(runtime / "edge-translator-gui")
    ready = instance.hand_over(channel, Request(), wait=90)
    assert ready, f"the window never answered: {gui.stop()[-2000:]}"
    yield gui
    err = gui.stop()
    assert "Traceback" not in err, err


def _translated(x, source: str) -> str:
    """Wait until the clipboard holds something other than ``source``; return it."""
    seen = []

    def changed() -> bool:
        seen.append(x.clipboard())
        return seen[-1] not in (None, source)
    wait_until(changed, timeout=60, what="the translation on the clipboard")
    return seen[-1]


def test_clipboard_copy_hands_over_within_5_s_and_the_translation_is_on_the_clipboard(x, runtime, window):
    x.set_clipboard(COPIED)
    code, seconds, err = Gui(x, runtime, "--clipboard", "--copy").wait()
    assert code == 0 and not err.strip(), err
    assert seconds < 5, f"the hand-over took {seconds:.1f} s"
    text = _translated(x, COPIED)
    assert CJK.search(text) and "train" not in text, text
    assert window.process.poll() is None, "the window is still the one running"


def test_a_hand_over_imports_nothing_of_qt(x, runtime, window, tmp_path):
    # A PySide6 that cannot be imported stands before the real one: the hand-over to a running
    # window must not need it (a shortcut bound to `gui --selection` answers without loading Qt).
    shim = tmp_path / "no-qt" / "PySide6"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('Qt was imported')\n")
    no_qt = {"PYTHONPATH": str(shim.parent)}
    x.set_clipboard(COPIED)
    code, seconds, err = Gui(x, runtime, "--clipboard", "--copy", env=no_qt).wait()
    assert (code, err.strip()) == (0, ""), err
    assert CJK.search(_translated(x, COPIED))
    # the shim does stop what needs Qt: a self-test is a window of its own, never a hand-over
    code, _, err = Gui(x, runtime, "--self-test", env=no_qt).wait()
    assert code != 0 and "PySide6" in err and "Traceback" not in err, err


def test_selection_translates_the_primary_selection(x, runtime, window):
    x.set_clipboard("This stays on the clipboard.")
    x.set_clipboard("The red lamp is broken.", selection="primary")
    code, _, err = Gui(x, runtime, "--selection", "--copy").wait()
    assert code == 0, err
    text = _translated(x, "This stays on the clipboard.")
    assert CJK.search(text), text
    # the selection's translation, not the clipboard's: translate the clipboard for comparison
    x.set_clipboard("The red lamp is broken.")
    assert Gui(x, runtime, "--clipboard", "--copy").wait()[0] == 0
    assert _translated(x, "The red lamp is broken.") == text


def test_a_plain_second_start_hands_over_and_leaves_one_window(x, runtime, window):
    code, seconds, err = Gui(x, runtime).wait()
    assert (code, err.strip()) == (0, "") and seconds < 5
    assert window.process.poll() is None


def test_without_copy_the_clipboard_is_left_alone(x, runtime, window):
    x.set_clipboard(COPIED)
    assert Gui(x, runtime, "--clipboard").wait()[0] == 0
    # A request with --copy after it is handled after it: once its translation is on the
    # clipboard, the first request's run is over, and it wrote nothing.
    x.set_clipboard("The red lamp is broken.", selection="primary")
    assert Gui(x, runtime, "--selection", "--copy").wait()[0] == 0
    history = []
    wait_until(lambda: history.append(x.clipboard()) or history[-1] != COPIED, timeout=60,
               what="the second request's translation")
    assert all(h in (COPIED, history[-1]) for h in history)


def test_the_first_start_with_clipboard_starts_the_window_and_translates(x, runtime):
    x.set_clipboard(COPIED)
    gui = Gui(x, runtime, "--clipboard", "--copy")
    try:
        text = _translated(x, COPIED)
        assert CJK.search(text)
        assert gui.process.poll() is None, "it is the window"
    finally:
        assert "Traceback" not in gui.stop()


def test_two_starts_at_once_leave_one_window(x, runtime):
    first, second = Gui(x, runtime), Gui(x, runtime)
    try:
        wait_until(lambda: first.process.poll() is not None or second.process.poll() is not None, timeout=90,
                   what="one of the two to hand over and exit")
        gone, kept = (first, second) if first.process.poll() is not None else (second, first)
        code, _, err = gone.wait()
        assert code == 0, err
        assert instance.hand_over(Channel(runtime / "edge-translator-gui"), Request(), wait=30)
        assert kept.process.poll() is None
    finally:
        first.stop()
        second.stop()


def test_a_window_that_died_leaves_no_lock_that_counts(x, runtime):
    dead = Gui(x, runtime)
    channel = Channel(runtime / "edge-translator-gui")
    assert instance.hand_over(channel, Request(), wait=90)
    dead.process.kill()
    dead.process.wait(30)
    assert channel.lock.exists() and channel.path.exists()  # left behind by the kill
    x.set_clipboard(COPIED)
    gui = Gui(x, runtime, "--clipboard", "--copy")
    try:
        assert CJK.search(_translated(x, COPIED))
        assert gui.process.poll() is None
    finally:
        gui.stop()


def test_a_window_that_holds_the_lock_but_does_not_answer_is_one_line(x, runtime):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfrom PySide6.QtCore import QLockFile\nlock = QLockFile(sys.argv[1])\n"
         "assert lock.tryLock(0)\nprint('held', flush=True)\nsys.stdin.read()\n",
         str(Channel(runtime / "edge-translator-gui").lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, seconds, err = Gui(x, runtime, "--clipboard").wait()
        assert code == 1 and "holds" in err and "does not answer" in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    finally:
        holder.stdin.close()
        holder.wait(30)


def test_what_is_not_a_request_is_ignored_and_the_window_goes_on(x, runtime, window):
    path = str(runtime / "edge-translator-gui")
    for junk in (b"hello\n", b'{"source": "rm -rf", "copy": false}\n', b"x" * 10000, b""):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
            try:
                sock.sendall(junk)
                sock.shutdown(socket.SHUT_WR)
                answer = sock.recv(64)
            except (BrokenPipeError, ConnectionResetError):  # closed before reading it all
                answer = b""
            assert answer == b"", junk[:20]  # closed without an answer
    x.set_clipboard(COPIED)
    assert Gui(x, runtime, "--clipboard", "--copy").wait()[0] == 0
    assert CJK.search(_translated(x, COPIED))


def test_the_channel_is_the_users_own(runtime, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    assert instance.channel() == Channel(runtime / "edge-translator-gui")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert instance.channel().path.name == f"edge-translator-gui-{os.getuid()}"
    sock, token = instance.listen(Channel(runtime / "sock"))
    try:
        assert token == "" and (os.stat(runtime / "sock").st_mode & 0o777) == 0o600
    finally:
        sock.close()


def test_the_global_shortcut_translates_the_primary_selection_onto_the_clipboard(x, runtime):
    gui = Gui(x, runtime, "--global-shortcut", "ctrl+alt+e")
    try:
        assert instance.hand_over(Channel(runtime / "edge-translator-gui"), Request(), wait=90)
        x.set_clipboard("This stays until the shortcut.")
        x.set_clipboard("The red lamp is broken.", selection="primary")
        pressed = time.monotonic()
        x.run("xdotool", "key", "ctrl+alt+e")
        text = _translated(x, "This stays until the shortcut.")
        print(f"\nctrl+alt+e to the translation on the clipboard: {time.monotonic() - pressed:.2f} s")
        assert CJK.search(text) and "lamp" not in text
        # nothing selected: the clipboard is translated instead
        x.set_clipboard("Where is the train station?")
        x.set_clipboard("", selection="primary")
        x.run("xdotool", "key", "ctrl+alt+e")
        other = _translated(x, "Where is the train station?")
        assert CJK.search(other) and other != text
    finally:
        err = gui.stop()
    assert "Traceback" not in err and "not set" not in err, err


def test_a_global_shortcut_that_is_taken_is_one_line_and_the_window_runs(x, runtime, tmp_path):
    holder = subprocess.Popen([sys.executable, "-m", "tests.shortcutapp", "ctrl+alt+e"], cwd=ROOT, env=x.env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in holder.stdout:  # its log lines, then "ready"
            if not line.startswith("log: "):
                break
        assert line.strip() == "ready", line
        gui = Gui(x, runtime, "--global-shortcut", "ctrl+alt+e")
        assert instance.hand_over(Channel(runtime / "edge-translator-gui"), Request(), wait=90)
        err = gui.stop()
        lines = [line for line in err.splitlines() if "taken" in line]
        assert len(lines) == 1 and "ctrl+alt+e is taken by another program; choose another in Settings" in lines[0]
        assert "Traceback" not in err
    finally:
        holder.stdin.close()  # it quits at the end of its input
        holder.wait(30)


@pytest.mark.parametrize("keys", ["e", "ctrl+hyper+e", "ctrl+alt"])
def test_a_bad_global_shortcut_is_one_line_and_exit_2(x, runtime, keys):
    code, _, err = Gui(x, runtime, "--global-shortcut", keys).wait()
    assert code == 2 and len(err.strip().splitlines()) == 1 and "write one such as ctrl+alt+e" in err, err


def test_watching_translates_what_another_app_copies(x, runtime, tmp_path):
    import sqlite3

    data = runtime.parent / "data"  # the Gui's own home
    x.set_clipboard("This was copied before.")
    gui = Gui(x, runtime, "--watch-clipboard")
    memory = data / "edge-translator" / "memory.sqlite"

    def stored() -> set[str]:
        if not memory.exists():
            return set()
        db = sqlite3.connect(memory)
        try:
            return {source for (source,) in db.execute("SELECT source FROM entries")}
        except sqlite3.Error:
            return set()
        finally:
            db.close()
    try:
        assert instance.hand_over(Channel(runtime / "edge-translator-gui"), Request(), wait=90)
        x.set_clipboard("The red lamp is broken.")
        wait_until(lambda: "The red lamp is broken." in stored(), timeout=60, what="the copied text translated")
        assert "This was copied before." not in stored()
        assert x.clipboard() == "The red lamp is broken."  # watching never writes the clipboard
    finally:
        assert "Traceback" not in gui.stop()
