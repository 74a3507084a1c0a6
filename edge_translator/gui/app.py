"""Entry point of the desktop app: ``edge-translator-gui`` (or ``python -m edge_translator.gui.app``).

:func:`main` creates the application, loads the settings and the model (before the window
shows, so the first translation is instant), explains a model that cannot be loaded and
lets the user pick another, then runs the window. High-DPI scaling is on by default in
Qt 6, so there is nothing to set for it; since Qt 6.5 the default style follows the
system's light or dark colour scheme, so no style is forced either.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase, QIcon
from PySide6.QtWidgets import QApplication, QFileDialog, QMessageBox, QWidget

from ..core.cache import ChainedCache, LRUCache
from ..core.errors import EdgeTranslatorError
from . import instance
from . import settings as settings_store
from .dialogs import ask
from .globalkeys import ShortcutError, parse_keys
from .instance import Request
from .outside import OutsideRequests
from .requestserver import RequestServer
from .shortcutsetting import ShortcutSetting
from .tray import Tray
from .session import ModelSession
from .settings import Settings

logger = logging.getLogger(__name__)

#: The icon's file names, in order of preference (the lead ships a PNG and/or an SVG).
ICON_NAMES = ("edge-translator.png", "edge-translator.svg")
FONT_HINT = "No font for Chinese characters was found: install a CJK font, e.g. `sudo apt install fonts-noto-cjk`"


def icon_path() -> Path | None:
    """The app icon: ``edge-translator.png`` (or ``.svg``) among the package's resources, or in
    ``assets/`` of the source tree; ``None`` if there is none."""
    package = Path(__file__).resolve().parent.parent
    folders = (package / "gui" / "resources", package / "assets", package.parent / "assets")
    for name in ICON_NAMES:
        for folder in folders:
            if (folder / name).is_file():
                return folder / name
    return None


def open_memory(keep: bool = True):
    """The user's translation memory (the one ``edge-translator docs`` fills), so sentences
    translated anywhere are reused here, behind the "keep a history" switch.

    Returns:
        ``(gate, None)`` with the :class:`~.history.HistoryGate` over the memory;
        ``(gate, note)`` when a damaged memory file was set aside and a new one started;
        ``(None, note)`` when the memory cannot be opened (the app then keeps its cache in
        memory only). The status bar shows the note.
    """
    from ..core.errors import EdgeTranslatorError
    from ..core.memory import TranslationMemory
    from .history import HistoryGate

    try:
        memory = TranslationMemory()
        return HistoryGate(memory, keep), memory.notice
    except EdgeTranslatorError as exc:
        return None, f"Translation memory not used: {exc}"


def check_fonts() -> str | None:
    """Whether Chinese text can be shown.

    Returns:
        A hint to install a CJK font when no font family supports Simplified Chinese,
        else ``None``.
    """
    if QFontDatabase.families(QFontDatabase.WritingSystem.SimplifiedChinese):
        return None
    return FONT_HINT


def missing_display(environ=None, platform: str = sys.platform) -> str | None:
    """Why no window can be shown, if that is plain before Qt tries (and aborts).

    On Linux and the BSDs Qt needs an X11 or Wayland session unless a platform is chosen;
    without one it aborts the process with a message that suggests reinstalling.

    Returns:
        One line saying what is wrong and what to do, or ``None``.
    """
    env = os.environ if environ is None else environ
    if not platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return None
    if env.get("QT_QPA_PLATFORM") or env.get("DISPLAY") or env.get("WAYLAND_DISPLAY"):
        return None
    return ("no desktop session to show the window in (neither DISPLAY nor WAYLAND_DISPLAY is set): start it "
            "from a desktop, or on a headless machine use `edge-translator` (translate, serve, docs)")


def load_first_model(session: ModelSession, settings: Settings, parent: QWidget | None = None) -> Settings | None:
    """Load the model of ``settings`` (or the default) on this thread, asking for another
    bundle for as long as loading fails.

    Args:
        session: The session to load into.
        settings: Which bundle (``model``) and how many ``threads``.
        parent: The parent of the dialogs.

    Returns:
        The settings to go on with (``model`` is the bundle the user chose, if they chose
        one), or ``None`` if the user chose to quit.
    """
    path: str | None = settings.model
    while True:
        try:
            session.load_now(path, settings.threads)
            return settings if path == settings.model else dataclasses.replace(settings, model=path)
        except EdgeTranslatorError as exc:
            reason = str(exc)
        except Exception as exc:  # noqa: BLE001 - shown in a dialog, never a crash
            logger.exception("loading %s failed", path)
            reason = f"{type(exc).__name__}: {exc}"
        choice = ask(parent, QMessageBox.Icon.Critical, "Edge Translator cannot start",
                     f"The translation model at {path or 'the default location'} could not be loaded.",
                     [("Choose a model…", QMessageBox.ButtonRole.AcceptRole),
                      ("Quit", QMessageBox.ButtonRole.RejectRole)],
                     details=f"{reason}\n\nChoose a model bundle folder (one made by `edge-translator export`), "
                             "or quit.")
        if choice != "Choose a model…":
            return None
        folder = QFileDialog.getExistingDirectory(parent, "Choose a model bundle", str(path or Path.home()))
        if not folder:
            return None
        path = folder


def main(argv: list[str] | None = None) -> int:
    """Run the app.

    Args:
        argv: Command-line arguments (``sys.argv`` by default); Qt's own options are accepted.
            ``--self-test [TEXT]`` translates TEXT (or a default sentence) in the window,
            prints the translation and quits, saving nothing (see :mod:`.selftest`).
            ``--clipboard`` or ``--selection`` translates what the clipboard or the X11
            selection holds, and ``--copy`` puts the translation on the clipboard; when a
            window already runs, the request is handed to it and this call returns at once
            (:mod:`.instance`).

    Returns:
        The exit status: 0, or 1 if no model could be loaded and the user quit (or the
        self-test failed, or a running window did not answer), or 2 if there is no desktop
        session (a self-test then runs offscreen).
    """
    import argparse

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv if argv is None else argv)
    parser = argparse.ArgumentParser(prog="edge-translator gui", add_help=False)
    parser.add_argument("--model")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--no-tm", action="store_true")
    parser.add_argument("--self-test", nargs="?", const="", metavar="TEXT")
    parser.add_argument("--clipboard", action="store_true")
    parser.add_argument("--selection", action="store_true")
    parser.add_argument("--copy", action="store_true")
    parser.add_argument("--global-shortcut", metavar="KEYS")
    parser.add_argument("--watch-clipboard", action="store_true")
    chosen, rest = parser.parse_known_args(argv[1:])
    if chosen.global_shortcut:
        try:
            parse_keys(chosen.global_shortcut)
        except ShortcutError as exc:
            print(f"edge-translator-gui: {exc}", file=sys.stderr, flush=True)
            return 2
    self_test = chosen.self_test is not None
    request = Request.asked(chosen.clipboard, chosen.selection, chosen.copy)
    where = instance.channel()
    lock = None
    if not self_test:  # a self-test is a window of its own, beside a running one
        lock = instance.claim(where)
        if lock is None:
            if instance.hand_over(where, request):
                return 0
            print(f"edge-translator-gui: another Edge Translator window holds {where.lock} but does not answer; "
                  "close it (or end its process) and start again", file=sys.stderr, flush=True)
            return 1
    try:
        return _run(argv, chosen, rest, request, where, lock is not None)
    finally:
        if lock is not None:
            lock.unlock()


def _run(argv: list[str], chosen, rest: list[str], request: Request, where: instance.Channel, listen: bool) -> int:
    """The rest of :func:`main`, once this app is the user's window (or a self-test)."""
    if QApplication.instance() is None and (problem := missing_display()):
        if chosen.self_test is None:
            print(f"edge-translator-gui: {problem}", file=sys.stderr, flush=True)
            return 2
        os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a self-test needs no screen
    app = QApplication.instance() or QApplication(argv[:1] + rest)
    app.setApplicationName(settings_store.APPLICATION)
    app.setOrganizationName(settings_store.ORGANIZATION)
    app.setApplicationDisplayName("Edge Translator")
    icon = icon_path()
    if icon is not None:
        app.setWindowIcon(QIcon(str(icon)))

    qsettings = settings_store.default_qsettings()
    settings = settings_store.load(qsettings)
    if chosen.model or chosen.threads:  # this run only, until the user saves other choices
        settings = dataclasses.replace(settings, model=chosen.model or settings.model,
                                       threads=chosen.threads or settings.threads)
    requests = [request]  # what arrives while the model loads waits for the window
    server = None
    if listen:
        try:
            server = RequestServer(where, app)
            server.requested.connect(requests.append)
        except OSError as exc:
            logger.warning("cannot listen on %s (%s): a later `edge-translator gui` will start another window",
                           where.path, exc)
    try:
        return _window(app, chosen, settings, qsettings, requests, server)
    finally:
        if server is not None:
            server.close()


def _window(app, chosen, settings: Settings, qsettings, requests: list[Request], server) -> int:
    """Load the model, show the window, run it; the requests so far are then carried out."""
    self_test = chosen.self_test is not None
    history, memory_note = (None, None) if chosen.no_tm or self_test else open_memory(settings.keep_history)
    session = ModelSession(app, memory=None if history is None else ChainedCache(LRUCache(8192), history))
    if self_test:
        try:  # no dialogs: one line and an exit status
            session.load_now(settings.model, settings.threads)
        except EdgeTranslatorError as exc:
            print(f"self-test failed: {exc}", file=sys.stderr, flush=True)
            return 1
    else:
        settings = load_first_model(session, settings)
        if settings is None:
            return 1

    from .window import MainWindow

    window = MainWindow(session, settings, qsettings, history=history)
    window.show()
    if self_test:
        from . import selftest

        try:
            return selftest.run(app, window, chosen.self_test or selftest.DEFAULT_TEXT)
        finally:
            session.close()
    hint = check_fonts() or memory_note
    if hint:
        window.notify(hint, 30000)
    outside = OutsideRequests(window, copy=chosen.copy)
    Tray(window, outside)
    window.shortcut_setting = ShortcutSetting(window, outside)
    window.shortcut_setting.take(chosen.global_shortcut or settings.global_shortcut)
    if chosen.watch_clipboard or settings.watch_clipboard:
        window.watch_clipboard(True, remember=not chosen.watch_clipboard)
    if server is not None:
        server.requested.disconnect(requests.append)
        server.requested.connect(outside.handle)
    for waiting in requests:
        if waiting.source != "show":
            QTimer.singleShot(0, lambda r=waiting: outside.handle(r))
    try:
        return app.exec()
    finally:
        window.shortcut_setting.stop()
        session.close()


if __name__ == "__main__":
    sys.exit(main())
