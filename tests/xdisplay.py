"""A real X server for the desktop tests: Xvfb, with xclip and xdotool to act as other apps.

:func:`x_display` starts ``Xvfb`` on a free display number (``-displayfd``: the server
picks it and says which), and gives an environment for the processes under test: that
``DISPLAY``, the xcb platform (not offscreen: the clipboard, the selection and key grabs
are the X server's), and no Wayland. tests/setup.sh installs xvfb, xclip and xdotool;
a missing one fails in one line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class XDisplay:
    """A running X server: its ``DISPLAY`` and an environment to run clients with."""

    name: str
    env: dict

    def run(self, *args: str, text_in: str | None = None, timeout: float = 30) -> str:
        """Run an X client (``xclip``, ``xdotool``) against this display; its standard output."""
        result = subprocess.run(args, input=None if text_in is None else text_in.encode(), env=self.env,
                                capture_output=True, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {result.returncode}: {result.stderr.decode()[-500:]}")
        return result.stdout.decode("utf-8", "replace")

    def set_clipboard(self, text: str, selection: str = "clipboard") -> None:
        """Own ``selection`` (``clipboard`` or ``primary``) with ``text``, as another app would
        (xclip keeps serving it until another client takes it)."""
        subprocess.run(["xclip", "-selection", selection, "-in"], input=text.encode(), env=self.env, timeout=30,
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def clipboard(self, selection: str = "clipboard") -> str | None:
        """What ``selection`` holds now as text, ``None`` when nobody owns it."""
        result = subprocess.run(["xclip", "-selection", selection, "-out"], env=self.env, capture_output=True,
                                timeout=30)
        return result.stdout.decode("utf-8", "replace") if result.returncode == 0 else None


def _require(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        raise AssertionError(f"{', '.join(missing)} not installed: run tests/setup.sh (it installs xvfb, xclip "
                             "and xdotool)")


@contextmanager
def x_display() -> Iterator[XDisplay]:
    """An Xvfb server for the block's duration (stopped and reaped at the end)."""
    _require("Xvfb", "xclip", "xdotool")
    read, write = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1280x800x24", "-nolisten", "tcp"],
                              pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write)
    try:
        with os.fdopen(read) as pipe:
            number = pipe.readline().strip()  # written once the server accepts clients
        if not number:
            raise AssertionError(f"Xvfb did not start: {server.stderr.read().decode()[-500:]}")
        env = dict(os.environ, DISPLAY=f":{number}", QT_QPA_PLATFORM="xcb", XDG_SESSION_TYPE="x11")
        env.pop("WAYLAND_DISPLAY", None)
        yield XDisplay(f":{number}", env)
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
