"""``edge-translator-gui --self-test``: prove a built or installed app works, then quit.

The check goes through the window the user sees: the text is put in the source pane, the
Translate action runs it through the same stream, and the check waits for the pane's own
``translation_finished``. It passes when the translation pane then holds Chinese; it prints
the translation (or one line saying what went wrong) and gives the exit status. Nothing is
saved: not the settings, and not the translation memory (the app runs without it).
"""

from __future__ import annotations

import re
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

#: What ``--self-test`` translates when it is given no text.
DEFAULT_TEXT = "Hello. Where is the station?"
#: How long the translation may take before the check fails.
TIMEOUT_MS = 60_000
_CHINESE = re.compile(r"[\u4e00-\u9fff]")


def run(app: QApplication, window, text: str = DEFAULT_TEXT, timeout_ms: int = TIMEOUT_MS) -> int:
    """Translate ``text`` in ``window`` and quit.

    Args:
        app: The running application.
        window: The shown :class:`~edge_translator.gui.window.MainWindow`, its model loaded.
        text: What to translate.
        timeout_ms: How long to wait for the translation.

    Returns:
        0 if the translation pane holds Chinese at the end, else 1.
    """
    outcome: dict[str, object] = {}

    def finished(info: dict) -> None:
        result = window.pane.target.toPlainText()
        if _CHINESE.search(result):
            outcome.update(status=0, line=result)
        else:
            outcome.update(status=1, line=f"self-test failed: the translation holds no Chinese: {result!r} ({info})")
        app.exit()

    def timed_out() -> None:
        outcome.update(status=1, line=f"self-test failed: no translation within {timeout_ms / 1000:g} s")
        app.exit()

    window.pane.translation_finished.connect(finished)
    timer = QTimer(window, singleShot=True, interval=timeout_ms)
    timer.timeout.connect(timed_out)
    timer.start()
    window.pane.source.setPlainText(text)
    QTimer.singleShot(0, window.pane.translate)
    app.exec()
    timer.stop()
    line = outcome.get("line", "self-test failed: the app quit before the translation finished")
    stream = sys.stdout if outcome.get("status") == 0 else sys.stderr
    print(line, file=stream, flush=True)
    return int(outcome.get("status", 1))
