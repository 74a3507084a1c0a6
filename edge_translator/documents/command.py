"""The ``docs`` and ``tm`` subcommands: argument parsing, the progress bar and the summary.

Thin by design: the work is :class:`~edge_translator.documents.job.DocumentJob` and
:class:`~edge_translator.core.memory.TranslationMemory`; this module only wires them to
the command line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from ..core import diskspace, durable
from ..core.errors import InputError, require

#: Exit code when some documents failed and the others were translated.
EXIT_SOME_FAILED = 7


class BarProgress:
    """A tqdm progress bar on stderr: files, sentences, sentences per second and the ETA."""

    def __init__(self, stream=None):
        self._tqdm = require("tqdm", "docs").tqdm
        self._stream = stream or sys.stderr
        self._bar = None
        self._files = 0
        self._finished = 0

    def start(self, files: int, sentences: int) -> None:
        self._files = files
        self._bar = self._tqdm(total=sentences, unit=" sent", desc=self._description(), file=self._stream,
                               dynamic_ncols=True, smoothing=0.05, mininterval=0.5)

    def _description(self) -> str:
        return f"{self._finished}/{self._files} files"

    def advance(self, sentences: int, plan=None) -> None:
        if self._bar is not None:
            self._bar.update(sentences)

    def finished(self, plan) -> None:
        self._finished += 1
        if self._bar is not None:
            self._bar.set_description(self._description(), refresh=False)

    def message(self, text: str) -> None:
        self._tqdm.write(text, file=self._stream)

    def close(self) -> None:
        if self._bar is not None:
            if self._bar.total is not None and self._bar.n < self._bar.total:
                self._bar.total = self._bar.n  # estimates of sentences per file are approximate
            self._bar.set_description(self._description(), refresh=False)
            self._bar.close()


class MessagesOnly:
    """No bar: per-file messages go to stderr (``--quiet`` keeps only failures)."""

    def __init__(self, failures_only: bool):
        self.failures_only = failures_only

    def start(self, files: int, sentences: int) -> None:
        pass

    def advance(self, sentences: int, plan=None) -> None:
        pass

    def finished(self, plan) -> None:
        pass

    def message(self, text: str) -> None:
        if not self.failures_only or ": failed: " in text:
            print(text, file=sys.stderr)

    def close(self) -> None:
        pass


def _memory(args: argparse.Namespace):
    from ..core.memory import TranslationMemory

    return TranslationMemory(args.tm)


def job_options(args: argparse.Namespace):
    """The :class:`~.plan.JobOptions` that ``docs``'s arguments ask for."""
    from ..core.translator import TranslateOptions
    from .base import FormatOptions
    from .plan import JobOptions

    columns = tuple(c.strip() for spec in args.columns or () for c in spec.split(",") if c.strip())
    sheets = tuple(s.strip() for spec in args.sheets or () for s in spec.split(",") if s.strip())
    return JobOptions(
        output_dir=Path(args.output) if args.output else None, recursive=args.recursive, force=args.force,
        translate=TranslateOptions(target=args.target, beam_size=args.beam, shortlist=not args.no_shortlist),
        format=FormatOptions(columns=columns, sheets=sheets, pdf_output=args.pdf_output),
        jobs_dir=Path(args.jobs_dir) if args.jobs_dir else None)


def glossary_file(args: argparse.Namespace) -> Path | None:
    """``--glossary``'s file, checked to exist."""
    if not args.glossary:
        return None
    path = Path(args.glossary)
    if not path.is_file():
        raise InputError(f"--glossary {path} does not exist; give a TSV of terms (see docs/documents.md#glossary)")
    return path


def cmd_docs(args: argparse.Namespace) -> int:
    """Translate documents and folders; print a summary (or JSON)."""
    from ..core.memory import open_for_translating
    from ..core.translator import Translator
    from .glossary import Glossary
    from .job import DocumentJob
    from .journal import JobCache

    options = job_options(args)
    glossary, digest = None, ""
    path = glossary_file(args)
    if path is not None:
        glossary = Glossary.load(path)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    memory = None if args.no_tm else open_for_translating(args.tm)  # a full disk: a warning, no memory
    cache = JobCache(memory)
    if not args.verbose:  # a sentence cut at the length limit is logged per sentence: noise over a bar
        import logging

        logging.getLogger("edge_translator.core.translator").setLevel(logging.ERROR)
        # pdfminer warns of a damaged page's operators without naming the file; the page is
        # read as well as it can be, and a page it cannot read fails the file in one line
        logging.getLogger("pdfminer").setLevel(logging.ERROR)
    if args.json or args.quiet:
        progress = MessagesOnly(failures_only=args.quiet or args.json)
    else:
        progress = BarProgress()
    with Translator.load(args.model, threads=args.threads, cache=cache, memory="steady",
                         workers=args.workers) as translator:
        if args.target and args.target not in translator.bundle.targets:
            raise ValueError(f"--target {args.target} is not offered by this model; choose one of "
                             f"{', '.join(sorted(translator.bundle.targets))}")
        job = DocumentJob(translator, cache, [Path(p) for p in args.inputs], options, glossary, digest)
        try:
            summary = job.run(progress)
        except KeyboardInterrupt:
            progress.close()
            print("edge-translator: the job journal keeps what was done; run the same command again to resume",
                  file=sys.stderr)
            raise
        finally:
            progress.close()
            if memory is not None:
                memory.close()
    return report(args, summary, summary_text)


def report(args: argparse.Namespace, summary, text) -> int:
    """Print a job's summary as ``--json`` or ``--quiet`` ask (``text(summary)`` otherwise);
    the exit code: :data:`EXIT_SOME_FAILED` when a file failed."""
    if args.json:
        print(json.dumps(summary.as_dict(), ensure_ascii=False, indent=2))
    elif not args.quiet:
        print(text(summary))
    return EXIT_SOME_FAILED if summary.count("failed") else 0


def summary_text(summary) -> str:
    rate = summary.sentences / summary.seconds if summary.seconds > 0 else 0.0
    lines = [f"{len(summary.files)} files: {summary.count('done')} done, {summary.count('up to date')} up to date, "
             f"{summary.count('skipped')} skipped, {summary.count('failed')} failed",
             f"{summary.sentences} sentences in {summary.seconds:.1f} s ({rate:.1f}/s); "
             f"{summary.decoded} decoded, {summary.reused} reused from the journal or the translation memory"]
    for plan in summary.files:
        if plan.status in ("failed", "skipped"):
            lines.append(f"  {plan.status}: {plan.input}: {plan.message}")
    warnings = summary.warnings
    if warnings:
        lines.append(f"{len(warnings)} warnings:")
        lines.extend(f"  {w}" for w in warnings)
    return "\n".join(lines)


def cmd_tm(args: argparse.Namespace) -> int:
    """Show, export, import or clear the translation memory."""
    from .tmx import export_tmx, import_tmx

    with _memory(args) as memory:
        if args.action == "stats":
            stats = memory.stats()
            print(f"{stats.path}: {stats.entries} entries ({stats.imported} imported), "
                  f"{stats.models} models, {stats.bytes / 1e6:.1f} MB")
            for target, count in stats.targets.items():
                print(f"  {target}: {count}")
        elif args.action == "export":
            if not args.file:
                raise ValueError("tm export needs a FILE (or - for standard output)")
            if args.file == "-":
                count = export_tmx(memory, sys.stdout, args.target)
            else:
                path = Path(args.file)
                if path.exists() and not args.force:
                    raise InputError(f"{path} exists; pass --force to overwrite it")
                with diskspace.writing(path), durable.open_atomic(
                        path, "w", temp=path.with_name(f".{path.name}.edge-tmp"), encoding="utf-8",
                        newline="\n") as out:
                    count = export_tmx(memory, out, args.target)
            print(f"exported {count} entries", file=sys.stderr)
        elif args.action == "import":
            if not args.file:
                raise ValueError("tm import needs a TMX FILE")
            count = import_tmx(memory, Path(args.file))
            print(f"imported {count} English→Chinese entries into {memory.path}", file=sys.stderr)
        elif args.action == "clear":
            count = memory.clear()
            print(f"removed {count} entries from {memory.path}", file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    """Add ``docs`` and ``tm`` to the command's subparsers."""
    docs = sub.add_parser(
        "docs", help="translate documents and folders (txt, md, srt, vtt, html, docx, csv, tsv; "
        "resumable)", description="Translate documents; outputs go beside the inputs as NAME.zh-Hans.EXT, or "
        "under -o OUTDIR with the tree mirrored. Inputs are never modified. A killed job resumes when run again.")
    docs.add_argument("inputs", nargs="+", metavar="INPUT", help="files and folders")
    docs.add_argument("--model", help="bundle directory or installed model name (default: $EDGE_TRANSLATOR_MODEL, then `models default`, then the embedded model)")
    docs.add_argument("--threads", type=int, help="ONNX Runtime threads of each worker (default: physical cores "
                      "shared among the workers)")
    docs.add_argument("--workers", type=int, default=1, help="decoding workers, each with its own copy of the model and --threads threads (default 1; see docs/engine.md)")
    docs.add_argument("-o", "--output", metavar="OUTDIR", help="write outputs here, mirroring the input tree")
    docs.add_argument("-r", "--recursive", action="store_true", help="descend into sub-folders")
    docs.add_argument("--target", help="target variant, e.g. zh-Hans or zh-Hant (default: the model's)")
    docs.add_argument("--beam", type=int, default=1, help="beam width (default 1, greedy)")
    docs.add_argument("--no-shortlist", action="store_true",
                      help="use the whole vocabulary even when the model has a shortlist")
    docs.add_argument("--glossary", metavar="FILE", help="TSV of terms: 'english<TAB>中文', or a term alone "
                      "to keep it as is (see docs/documents.md#glossary)")
    memory = docs.add_mutually_exclusive_group()
    memory.add_argument("--tm", metavar="FILE", help="translation memory file (default: in the user's data "
                        "directory)")
    memory.add_argument("--no-tm", action="store_true", help="use no translation memory")
    docs.add_argument("--columns", action="append", metavar="NAME[,NAME...]",
                      help="CSV/TSV/xlsx columns to translate, by header name or 1-based number (xlsx: or letter); "
                      "in xlsx the header row is then kept")
    docs.add_argument("--sheets", action="append", metavar="NAME[,NAME...]",
                      help="xlsx sheets to translate, by name or 1-based number (default: all)")
    docs.add_argument("--pdf-output", choices=("pdf", "docx", "md"), default="pdf",
                      help="write a PDF's translation as a PDF (in place, the default), or as an editable "
                      ".docx or Markdown file")
    docs.add_argument("--jobs-dir", metavar="DIR", help="keep the job journal here instead of the output folder")
    docs.add_argument("--force", action="store_true", help="overwrite outputs that exist")
    docs.add_argument("--quiet", action="store_true", help="no progress bar and no summary; failures only")
    docs.add_argument("--json", action="store_true", help="print the summary as JSON on standard output")
    docs.set_defaults(func=cmd_docs)

    tm = sub.add_parser("tm", help="the translation memory: stats, export or import TMX, clear")
    tm.add_argument("action", choices=("stats", "export", "import", "clear"))
    tm.add_argument("file", nargs="?", help="the TMX file to export to (- for standard output) or import")
    tm.add_argument("--tm", metavar="FILE", help="translation memory file (default: in the user's data directory)")
    tm.add_argument("--target", help="export only this target variant")
    tm.add_argument("--force", action="store_true", help="overwrite the export file")
    tm.set_defaults(func=cmd_tm)
