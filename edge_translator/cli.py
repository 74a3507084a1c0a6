"""The ``edge-translator`` command: each layer declares its subcommands; this module runs them.

Exit codes: 0 success; 1 unexpected error; 2 bad command-line usage; 3 missing or
corrupt model bundle; 4 unusable input (for example invalid UTF-8); 5 export failed;
6 an optional dependency is missing; 7 some documents failed (``docs``: the others were
translated); 8 the dictionary has no entry (``lookup``); 9 no space left on a disk
(``docs``, ``corpus``, ``models add``, ``tm``: what was finished is kept; free some space and
run the same command again); 130 interrupted.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import logging
import sys

from .core.errors import EdgeTranslatorError, InputError, MissingDependencyError

logger = logging.getLogger(__name__)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"standard input is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            "convert it first, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate TEXT arguments, or standard input with ``-``."""
    from .core.translator import TranslateOptions, Translator, render

    if args.text == ["-"] or (not args.text and not sys.stdin.isatty()):
        text = _read_stdin()
    elif not args.text:
        raise InputError("nothing to translate: give TEXT, or - to read standard input")
    else:
        text = " ".join(args.text)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("the TEXT argument is not valid UTF-8; fix the terminal encoding "
                             "or pipe the text through standard input") from None
    options = TranslateOptions(target=args.target, beam_size=args.beam, max_length=args.max_length,
                               shortlist=not args.no_shortlist, unwrap=not args.no_unwrap)
    translator = Translator.load(args.model, threads=args.threads, workers=args.workers)
    if args.target and args.target not in translator.bundle.targets:
        raise ValueError(f"--target {args.target} is not offered by this model; choose one of "
                         f"{', '.join(sorted(translator.bundle.targets))}")
    out = sys.stdout
    for piece in render(translator.translate_iter(text, options)):
        out.write(piece)
        out.flush()
    if text and not text.endswith("\n"):
        out.write("\n")
    return 0

#: Exit code of ``lookup`` when the dictionary has no entry for the term.
EXIT_NOT_FOUND = 8


def cmd_lookup(args: argparse.Namespace) -> int:
    """Print the dictionary's entries for an English word or term, best first."""
    from .core.dictionary import Dictionary

    term = " ".join(args.term).strip()
    if not term:
        raise InputError("nothing to look up: give an English word or a term of up to three words")
    entries = Dictionary.load().lookup(term)
    if args.json:
        print(json.dumps({"term": term, "entries": [
            {"headword": e.headword(args.target), "simplified": e.simplified, "traditional": e.traditional,
             "pinyin": e.pinyin, "glosses": list(e.glosses)} for e in entries]}, ensure_ascii=False, indent=2))
    for entry in [] if args.json else entries:
        print(f"{entry.headword(args.target)}\t{entry.pinyin}\t{'; '.join(entry.glosses)}")
    if not entries:
        print(f"edge-translator: the dictionary has no entry for {term!r}; `edge-translator translate` gives the "
              "model's translation", file=sys.stderr)
        return EXIT_NOT_FOUND
    return 0


#: The layers that declare subcommands, in the order ``--help`` lists them: each module's
#: ``add_parsers(sub)`` adds its own, and imports what does the work only when a command
#: runs. A single-file app leaves some layers out (build/common.py); their commands are
#: then still listed, and answer in one line with the extra to install. So for each layer:
#: its module, what it is called in that answer, the extra, and its commands.
_LAYERS = (
    ("edge_translator.toolchain.command", "the toolchain", "export",
     ("export", "test-model", "train-demo", "train-sweep", "harvest-software", "schemes", "eval", "shortlist",
      "shortlist-curve", "upgrade")),
    ("edge_translator.toolchain.dictcommand", "the dictionary's toolchain", "dictionary",
     ("build-dictionary", "eval-dictionary")),
    ("edge_translator.store.command", "the model store", "convert", ("models",)),
    ("edge_translator.daemon.command", "the server", "serve", ("serve",)),
    ("edge_translator.documents.command", "the document translator", "docs", ("docs", "tm")),
    ("edge_translator.scaleout.command", "the corpus translator", "ray", ("corpus", "bench-corpus")),
    ("edge_translator.gui.command", "the desktop app", "gui", ("gui",)),
    ("edge_translator.bench.command", "the benchmarks", "bench",
     ("bench", "bench-serve", "bench-docs", "bench-load", "bench-soak", "bench-request", "bench-models")),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``edge-translator`` command."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="edge-translator", description="Offline English→Chinese translation.",
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"edge-translator {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("translate", help="translate text (arguments, or stdin with -)")
    tr.add_argument("text", nargs="*", help="text to translate; '-' or nothing reads standard input")
    tr.add_argument("--model", help="bundle directory or installed model name (default: $EDGE_TRANSLATOR_MODEL, then `models default`, then the embedded model)")
    tr.add_argument("--target", help="zh-Hans (default) or zh-Hant")
    tr.add_argument("--threads", type=int, help="ONNX Runtime threads of each worker (default: physical cores "
                    "shared among the workers)")
    tr.add_argument("--workers", type=int, default=1, help="decoding workers, each with its own copy of the model and --threads threads (default 1; see docs/engine.md)")
    tr.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    tr.add_argument("--max-length", type=int, help="most new tokens per sentence (default: automatic)")
    tr.add_argument("--no-shortlist", action="store_true",
                    help="use the whole vocabulary even when the model has a shortlist")
    tr.add_argument("--no-unwrap", action="store_true",
                    help="end a sentence at every line break (by default, lines that only wrap a paragraph, "
                    "as in text copied from a PDF or an e-mail, are joined first)")
    tr.set_defaults(func=cmd_translate)

    lk = sub.add_parser("lookup", help="the dictionary's entries for an English word or term (headword, pinyin, "
                        "glosses)")
    lk.add_argument("term", nargs="+", help="a word or a term of up to three words")
    lk.add_argument("--target", default="zh-Hans", choices=("zh-Hans", "zh-Hant"),
                    help="the script of the headwords (default zh-Hans)")
    lk.add_argument("--json", action="store_true", help="print the entries as JSON")
    lk.set_defaults(func=cmd_lookup)

    for module, what, extra, commands in _LAYERS:
        try:
            layer = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if not exc.name or not (module == exc.name or module.startswith(exc.name + ".")):
                raise  # the layer is there but imports something missing at the top: a bug
            _add_left_out(sub, commands, what, extra, exc.name)
        else:
            layer.add_parsers(sub)
    return parser


def _add_left_out(sub, commands: tuple[str, ...], what: str, extra: str, missing: str) -> None:
    """Commands of a layer this build leaves out: any arguments, and one line saying what to install."""
    for name in commands:
        # no prefix character that an argument could start with: every argument is taken, --help too
        stub = sub.add_parser(name, add_help=False, prefix_chars="\0",
                              help=f"not in this build (pip install 'edge-translator[{extra}]')")
        stub.add_argument("arguments", nargs="*", help=argparse.SUPPRESS)
        stub.set_defaults(func=functools.partial(_left_out, what=what, extra=extra, missing=missing))


def _left_out(args: argparse.Namespace, what: str, extra: str, missing: str) -> int:
    raise MissingDependencyError(f"`{args.command}` needs {what}, which this build of edge-translator leaves out "
                                 f"(no module {missing}); run it from the Python package: "
                                 f"pip install 'edge-translator[{extra}]'")


#: Top-level modules a single-file build leaves out (build/edge-translator.spec).
_TOOLCHAIN_MODULES = ("torch", "transformers", "onnx")


def main(argv: list[str] | None = None) -> int:
    """Run the command; errors become one line on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except EdgeTranslatorError as exc:
        print(f"edge-translator: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        print(f"edge-translator: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edge-translator: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback
        from .core import diskspace

        if diskspace.is_full(exc):  # a write no layer expected to fail: still the one line and code 9
            error = diskspace.no_space(exc.filename) if getattr(exc, "filename", None) else None
            print(f"edge-translator: error: {error or f'no space left on a disk ({exc}); {diskspace.RERUN}'}",
                  file=sys.stderr)
            return 9
        missing = getattr(exc, "name", None) or ""
        if isinstance(exc, ModuleNotFoundError) and (missing.split(".")[0] in _TOOLCHAIN_MODULES
                                                     or missing.startswith("edge_translator.toolchain")):
            print(f"edge-translator: error: `{args.command}` needs the toolchain, which this build of "
                  f"edge-translator leaves out (no module {missing}); run it from the Python package: "
                  "pip install 'edge-translator[export]'", file=sys.stderr)
            return 6
        reason = str(exc).splitlines()[0] if str(exc) else ""
        print(f"edge-translator: unexpected error: {type(exc).__name__}: {reason} "
              "(run with -v for details, and please report it)", file=sys.stderr)
        if args.verbose:
            logger.exception("unexpected error")
        return 1


if __name__ == "__main__":
    sys.exit(main())
