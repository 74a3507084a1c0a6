"""Capture the window translating a real paragraph, for the docs (``docs/screenshot*.png``).

Run under a real X server, e.g. ``xvfb-run -s "-screen 0 1400x900x24" python -m
edge_translator.gui.screenshot docs/screenshot.png`` (add ``--dark`` for the dark theme).
The caret is put in the second sentence, so its alignment highlight shows.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer
from PySide6.QtWidgets import QApplication

from .session import ModelSession
from .settings import Settings

#: A paragraph of the everyday sentences the demo model was trained for.
PARAGRAPH = ("I have two brothers and a sister. My father is a doctor, and my mother teaches English. "
             "We live in a small house near the station. Every Sunday we eat dinner together. "
             "Where is the nearest bank? I want to buy a new bicycle.")


def dark_palette():
    """A dark palette like the desktops' dark themes, for a server that has no theme."""
    from PySide6.QtGui import QColor, QPalette

    palette = QPalette()
    roles = QPalette.ColorRole
    for role, colour in ((roles.Window, "#2b2b2b"), (roles.WindowText, "#e8e8e8"), (roles.Base, "#1e1e1e"),
                         (roles.AlternateBase, "#262626"), (roles.Text, "#e8e8e8"), (roles.Button, "#353535"),
                         (roles.ButtonText, "#e8e8e8"), (roles.Highlight, "#3d6fb4"),
                         (roles.HighlightedText, "#ffffff"), (roles.ToolTipBase, "#353535"),
                         (roles.ToolTipText, "#e8e8e8"), (roles.PlaceholderText, "#8a8a8a")):
        palette.setColor(role, QColor(colour))
    for role in (roles.WindowText, roles.Text, roles.ButtonText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#7a7a7a"))
    return palette


def main(argv: list[str] | None = None) -> int:
    """Show the window, translate :data:`PARAGRAPH`, save a screenshot of it."""
    parser = argparse.ArgumentParser(prog="python -m edge_translator.gui.screenshot")
    parser.add_argument("out", help="PNG to write")
    parser.add_argument("--dark", action="store_true", help="the dark colour scheme")
    args = parser.parse_args(argv)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setStyle("Fusion")
    app.styleHints().setColorScheme(Qt.ColorScheme.Dark if args.dark else Qt.ColorScheme.Light)
    if args.dark:  # a bare X server has no desktop theme to follow: give the palette one would
        app.setPalette(dark_palette())
    from .app import icon_path
    from .window import MainWindow

    if icon_path():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon_path())))
    store = QSettings(str(Path(tempfile.mkdtemp()) / "screenshot.ini"), QSettings.Format.IniFormat)
    session = ModelSession(app)
    session.load_now()
    window = MainWindow(session, Settings(as_you_type=False), store)
    window.resize(1180, 560)
    window.show()
    pane = window.pane
    pane.source.setPlainText(PARAGRAPH)

    def capture(_info=None) -> None:
        cursor = pane.source.textCursor()
        cursor.setPosition(PARAGRAPH.index("My father") + 3)
        pane.source.setTextCursor(cursor)
        pane.source.setFocus()
        QTimer.singleShot(400, lambda: (window.grab().save(args.out), app.quit()))

    pane.translation_finished.connect(capture)
    QTimer.singleShot(300, pane.translate)
    QTimer.singleShot(60000, app.quit)
    app.exec()
    session.close()
    if not Path(args.out).is_file():
        print(f"no screenshot was written to {args.out}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
