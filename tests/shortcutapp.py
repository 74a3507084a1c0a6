"""A tiny Qt app holding a GlobalShortcut, for the tests to drive as another process would.

    python -m tests.shortcutapp ctrl+alt+e

It prints ``ready`` once the combination is taken, or ``error: <the one line>`` and exits
3. Then ``activated N`` on the N-th activation. The shortcut's log records come as
``log: LEVEL message`` lines, between the others. Commands on standard input, one a line:
``stop`` (prints ``stopped threads=N``, the threads still alive), ``start`` (``ready`` or
``error: ...``) and ``quit`` (stops the shortcut through the application's aboutToQuit
and exits 0).
"""

from __future__ import annotations

import logging
import sys
import threading

logger = logging.getLogger("shortcutapp")


class _Lines(logging.Formatter):
    """The app's own lines as they are, the shortcut's log records after ``log: ``."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.name == logger.name else f"log: {record.levelname} {text}"


def main(spec: str) -> int:
    from PySide6.QtCore import QSocketNotifier
    from PySide6.QtGui import QGuiApplication

    from edge_translator.gui.globalkeys import GlobalShortcut, ShortcutError, parse_keys

    handler = logging.StreamHandler(sys.stdout)  # one lock for the app's lines and the shortcut's thread
    handler.setFormatter(_Lines())
    logging.basicConfig(level=logging.DEBUG, handlers=[handler])
    app = QGuiApplication([sys.argv[0]])
    shortcut = GlobalShortcut(parse_keys(spec))
    count = 0

    def say(line: str) -> None:
        logger.info(line)

    def activated() -> None:
        nonlocal count
        assert threading.current_thread() is threading.main_thread(), "activated off the GUI thread"
        count += 1
        say(f"activated {count}")

    def start() -> bool:
        try:
            shortcut.start()
        except ShortcutError as exc:
            say(f"error: {exc}")
            return False
        say("ready")
        return True

    def command() -> None:
        line = sys.stdin.readline().strip()
        if line == "stop":
            shortcut.stop()
            say(f"stopped threads={threading.active_count()}")
        elif line == "start":
            start()
        elif line in ("quit", ""):
            app.quit()

    shortcut.activated.connect(activated)
    if not start():
        return 3
    notifier = QSocketNotifier(sys.stdin.fileno(), QSocketNotifier.Type.Read)
    notifier.activated.connect(command)
    app.exec()
    say(f"quit active={shortcut.active} threads={threading.active_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
