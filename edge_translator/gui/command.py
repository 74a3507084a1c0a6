"""The desktop app's subcommand, ``gui`` (the same app as ``edge-translator-gui``).

Qt is imported only when the command runs: declaring it needs no PySide6.
"""

from __future__ import annotations

import argparse


def add_parsers(sub) -> None:
    """Declare ``gui``.

    Args:
        sub: The ``edge-translator`` parser's subparsers action.
    """
    gu = sub.add_parser("gui", help="open the desktop app (extra 'gui'; also `edge-translator-gui`)")
    gu.add_argument("--model", help="bundle directory for this run (default: the one chosen in the app)")
    gu.add_argument("--threads", type=int, help="ONNX Runtime threads for this run")
    gu.add_argument("--no-tm", action="store_true", help="do not use the translation memory in the user's data "
                    "directory (the one `docs` fills)")
    gu.add_argument("--self-test", nargs="?", const="", metavar="TEXT",
                    help="translate TEXT (default: a short sentence) in the window, print it and quit: "
                    "exit 0 if it came out in Chinese; saves nothing")
    source = gu.add_mutually_exclusive_group()
    source.add_argument("--clipboard", action="store_true",
                    help="translate what the clipboard holds, in the running window (started if none runs); "
                    "bind it to a key in your desktop's keyboard settings")
    source.add_argument("--selection", action="store_true",
                    help="the same with the selected text (X11's PRIMARY selection; the clipboard where the "
                    "desktop has none)")
    gu.add_argument("--copy", action="store_true",
                    help="put the translation on the clipboard when it is done (for this run; the setting "
                    "'Copy translations of the clipboard and selection' keeps it on)")
    gu.add_argument("--global-shortcut", metavar="KEYS",
                    help="for this run, keys that translate the selection (or the clipboard) from any program into "
                    "a popup and onto the clipboard, such as ctrl+alt+e (X11 and Windows; Settings keeps one)")
    gu.add_argument("--watch-clipboard", action="store_true",
                    help="for this run, translate what other programs copy (Settings keeps it on)")
    gu.set_defaults(func=cmd_gui)


def cmd_gui(args: argparse.Namespace) -> int:
    """Open the desktop app, or hand the request to the window that runs."""
    from ..core.errors import require

    if args.self_test is None and not args.global_shortcut:  # a bad --global-shortcut is refused by the app
        from . import instance

        request = instance.Request.asked(args.clipboard, args.selection, args.copy)
        if instance.hand_over_now(instance.channel(), request):
            return 0
    require("PySide6", "gui")
    from .app import main as gui_main

    argv = ["edge-translator gui"]
    if args.model:
        argv += ["--model", args.model]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.no_tm:
        argv.append("--no-tm")
    for flag in ("clipboard", "selection", "copy", "watch_clipboard"):
        if getattr(args, flag):
            argv.append("--" + flag.replace("_", "-"))
    if args.global_shortcut:
        argv += ["--global-shortcut", args.global_shortcut]
    if args.self_test is not None:
        argv += ["--self-test", args.self_test]
    return gui_main(argv)
