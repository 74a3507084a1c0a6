"""Translating many documents as one resumable job.

:class:`DocumentJob` finds the files (:mod:`.plan`), reads each through its format, and sends the
segments of all of them to the translator as bulk work, in shared windows, so many small
files go as fast as one large one. Every finished segment is committed to the job
journal (:mod:`.journal`), so a job killed at any moment resumes where it stopped; an
output is written to a temporary file, fsynced and renamed only when it is complete
(:mod:`~edge_translator.core.durable`), so not even a power cut leaves half of it. Glossary
terms and the spans a format must keep are masked before translation and checked after.
A full disk (an output, or the journal) stops the whole job with
:class:`~edge_translator.core.errors.NoSpace`: the outputs written stay, no partial one is
left, and a rerun once there is space finishes the rest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..core import diskspace, durable
from ..core.engine import Priority
from ..core.errors import EngineClosed, NoSpace
from ..core.inline import place_marks
from ..core.text import split_sentences
from ..core.translator import Translator, join_results
from . import load_format
from .base import DocumentError, Segment, Translated
from .journal import Journal, JobCache
from .plan import FilePlan, JobOptions, Summary, discover, journal_path

logger = logging.getLogger(__name__)

_JOINER = "\n\n"
_TEMP_SUFFIX = ".edge-tmp"


class Progress(Protocol):
    """What the job reports while it runs (a progress bar, or nothing)."""

    def start(self, files: int, sentences: int) -> None:
        """The scan is done: ``files`` to translate holding about ``sentences`` sentences
        (each file's estimate is :attr:`FilePlan.sentences`)."""

    def advance(self, sentences: int, plan: FilePlan) -> None:
        """``sentences`` more of ``plan``'s sentences are translated."""

    def finished(self, plan: FilePlan) -> None:
        """``plan`` is done or failed (see its ``status`` and ``message``)."""

    def message(self, text: str) -> None:
        """A line for the user: a file skipped, failed or warned about."""


class NoProgress:
    """Reports nothing."""

    def start(self, files: int, sentences: int) -> None:
        pass

    def advance(self, sentences: int, plan: FilePlan) -> None:
        pass

    def finished(self, plan: FilePlan) -> None:
        pass

    def message(self, text: str) -> None:
        pass


@dataclass
class _Item:
    plan: FilePlan
    idx: int
    segment: Segment
    style: int
    masked: object
    mark_masked: list
    sentences: frozenset[str]

def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read a megabyte at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_stamp(path: Path) -> tuple[int, int]:
    """Size and modification time: what tells that a file changed while it was translated."""
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _needs_translation(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


def _normalized(text: str) -> str:
    return " ".join(text.split())


def job_settings(model_id: str, target: str, options: JobOptions, glossary_digest: str = "") -> str:
    """The digest of everything that changes a job's outputs: a file done with other
    settings is done again."""
    return hashlib.sha256(json.dumps({
        "model": model_id, "target": target, "beam": options.translate.beam_size,
        "max_length": options.translate.max_length, "guard": options.translate.repetition_guard,
        "glossary": glossary_digest, "columns": list(options.format.columns),
        **({"sheets": list(options.format.sheets)} if options.format.sheets else {}),
        **({"pdf_output": options.format.pdf_output} if options.format.pdf_output != "pdf" else {}),
        **({} if options.translate.shortlist else {"shortlist": False}),
    }, sort_keys=True).encode()).hexdigest()[:16]


class DocumentJob:
    """One run of ``edge-translator docs``: plan, scan, translate, write."""

    def __init__(self, translator: Translator, cache: JobCache, inputs: Sequence[Path],
                 options: JobOptions | None = None, glossary=None,
                 glossary_digest: str = ""):
        """Args:
            translator: A loaded translator whose cache is ``cache``.
            cache: The job's cache; the job attaches its journal to it.
            inputs: Files and folders.
            options: How the job runs.
            glossary: Terms to keep or translate as given; ``None`` keeps only URLs and
                e-mail addresses verbatim.
            glossary_digest: A digest of the glossary file, so a changed glossary redoes
                the files.
        """
        self.translator = translator
        self.cache = cache
        self.inputs = [Path(p) for p in inputs]
        self.options = options or JobOptions()
        if glossary is None:
            from .glossary import Glossary

            glossary = Glossary.empty()
        self.glossary = glossary
        self.target = self.options.translate.target or translator.bundle.default_target
        self.settings = job_settings(translator.model_id, self.target, self.options, glossary_digest)
        self.journal: Journal | None = None
        self._progress: Progress = NoProgress()
        self._cancelled = threading.Event()
        self._reason = "cancelled; run again to resume"
        self._inflight: deque = deque()

    def _stop(self, reason: str) -> None:
        self._reason = reason
        self._cancelled.set()

    def cancel(self) -> None:
        """Stop the job from any thread: the work in the engine is withdrawn, what is in the
        journal stays, and the files not finished are reported ``cancelled`` (a rerun
        resumes them)."""
        self._cancelled.set()
        for _, (submission, _pieces), _ in list(self._inflight):
            submission.cancel()

    # -- the run ---------------------------------------------------------------------------

    def run(self, progress: Progress | None = None) -> Summary:
        """Translate every input; returns what happened to each file.

        Per-file problems (a malformed file, an output that exists) are recorded in the
        summary and the job goes on. A failure of the model itself stops the job; its
        journal keeps what was done.

        Raises:
            NoSpace: If an output or the journal cannot be written for lack of space; the
                work in flight is withdrawn, and a rerun resumes.
        """
        self._progress = progress or NoProgress()
        started = time.perf_counter()
        plans = discover(self.inputs, self.options, self.target)
        todo = [p for p in plans if p.status == "todo"]
        path = journal_path(todo, self.options) if todo else None
        if path is not None:
            self.journal = Journal(path)
            self.cache.attach(self.journal)
        hits_before, decoded_before = self.cache.hits, self.cache.decoded
        try:
            for plan in plans:
                if plan.status == "todo":
                    self._scan(plan, path.parent)
                elif plan.status in ("skipped", "failed"):
                    self._progress.message(f"{plan.input}: {plan.status}: {plan.message}")
            todo = [p for p in plans if p.status == "todo"]
            self._progress.start(len(todo), sum(p.sentences for p in todo))
            if todo:
                self._translate(todo)
        except NoSpace as exc:
            self._abandon(plans, str(exc))
            raise
        finally:
            self.cache.attach(None)
            if self.journal is not None:
                self.journal.close()
        return Summary(tuple(plans), sum(p.sentences for p in plans if p.status == "done"),
                       self.cache.decoded - decoded_before, self.cache.hits - hits_before,
                       time.perf_counter() - started, path)

    def _abandon(self, plans: list[FilePlan], reason: str) -> None:
        """Withdraw the work in flight; the files not finished are ``cancelled`` for ``reason``."""
        self._stop(reason)
        for _, (submission, _pieces), _ in self._inflight:
            submission.cancel()
        self._inflight.clear()
        for plan in plans:
            if plan.status == "todo":
                plan.status, plan.message, plan.document = "cancelled", reason, None

    def _fail(self, plan: FilePlan, message: str) -> None:
        counted = plan.document is not None  # scanned: the progress bar counts it
        plan.status, plan.message = "failed", message
        plan.document = None
        self._progress.message(f"{plan.input}: failed: {message}")
        if counted:
            self._progress.finished(plan)

    def _scan(self, plan: FilePlan, journal_dir: Path) -> None:
        """Checksum, validate and count one file; decide whether it is to do."""
        assert self.journal is not None
        plan.key = os.path.relpath(plan.output.resolve(), journal_dir.resolve())
        for stale in plan.output.parent.glob(f".{plan.output.name}.*{_TEMP_SUFFIX}"):
            stale.unlink(missing_ok=True)  # a write that a killed run left half done
        try:
            plan.sha256, plan.stamp = file_sha256(plan.input), file_stamp(plan.input)
        except OSError as exc:
            return self._fail(plan, f"cannot read it ({exc.strerror})")
        record = self.journal.record(plan.key)
        ours = record is not None
        if plan.output.exists():
            if ours and record.state == "written" and record.sha256 == plan.sha256 \
                    and record.settings == self.settings:
                plan.status, plan.message = "up to date", f"{plan.output} is up to date"
                plan.warnings = self.journal.warnings(plan.key)
                self._progress.message(f"{plan.input}: up to date")
                return
            if not ours and not self.options.force:
                plan.status, plan.message = "skipped", f"{plan.output} exists; pass --force to overwrite it"
                self._progress.message(f"{plan.input}: skipped: {plan.message}")
                return
        try:
            fmt = load_format(plan.info)
            document = fmt.open(plan.input, self.options.format)
            segments = sentences = 0
            for seg in document.segments():
                segments += 1
                if _needs_translation(seg.text):
                    sentences += max(1, len(split_sentences(seg.text)))
        except DocumentError as exc:
            return self._fail(plan, exc.reason if exc.line is None else f"line {exc.line}: {exc.reason}")
        plan.document, plan.segments, plan.sentences = document, segments, sentences
        done = self.journal.begin(plan.key, str(plan.input), plan.sha256, self.settings, segments)
        plan.remaining = segments - len(done)
        plan.done = done

    def _segments(self, todo: list[FilePlan]) -> Iterator[tuple[FilePlan, int, Segment]]:
        """The segments still to translate, file after file; those that need no model are
        saved at once."""
        assert self.journal is not None
        for plan in todo:
            if plan.status != "todo":
                continue
            done = plan.done
            try:
                for idx, seg in enumerate(plan.document.segments()):
                    if plan.status != "todo":
                        break
                    if idx in done:
                        continue
                    if not _needs_translation(seg.text):
                        self.journal.save(plan.key, idx, Translated(seg.text, seg.marks))
                        plan.remaining -= 1
                        continue
                    yield plan, idx, seg
            except DocumentError as exc:
                self._fail(plan, f"changed while it was read ({exc.reason}); run the job again")
                continue
            plan.done = set()
            plan.exhausted = True
            self._write_if_complete(plan)

    def _translate(self, todo: list[FilePlan]) -> None:
        source = self._segments(todo)
        pending: deque[_Item] = deque()
        inflight = self._inflight
        exhausted = False
        while not self._cancelled.is_set():
            busy = set().union(*(w[2] for w in inflight)) if inflight else set()
            items, exhausted = self._fill(source, pending, busy, exhausted)
            if items:
                try:
                    inflight.append(self._submit(items))
                except EngineClosed:
                    self._stop("the model was closed while the job ran; run it again to resume")
                    break
            if not inflight:
                if exhausted and not pending:
                    break
                continue
            if len(inflight) >= self.options.windows_in_flight or not items:
                self._consume(*inflight[0][:2], pending)
                inflight.popleft()
        if self._cancelled.is_set():
            for _, (submission, _pieces), _ in inflight:
                submission.cancel()
            inflight.clear()
            source.close()
            for plan in todo:
                if plan.status == "todo":
                    plan.status, plan.message, plan.document = "cancelled", self._reason, None
            return
        for plan in todo:
            self._write_if_complete(plan)

    def _fill(self, source: Iterator, pending: deque[_Item], busy: set[str],
              exhausted: bool) -> tuple[list[_Item], bool]:
        """Items for the next window: retries and deferred items first, then new
        segments. An item holding a sentence that an earlier window is decoding waits for
        it (it will then come from the journal), so no sentence is decoded twice."""
        items: list[_Item] = []
        chars = 0
        sentences: set[str] = set()
        waiting: deque[_Item] = deque()
        limit = self.options.window_chars

        def take(item: _Item) -> None:
            nonlocal chars
            items.append(item)
            sentences.update(item.sentences)
            chars += len(item.masked.text) + sum(len(m.text) for m in item.mark_masked if m is not None)

        while pending and chars < limit:
            item = pending.popleft()
            if item.sentences & busy:
                waiting.append(item)
            else:
                take(item)
        while not exhausted and chars < limit and len(waiting) < 4 * limit // 100:
            try:
                plan, idx, seg = next(source)
            except StopIteration:
                exhausted = True
                break
            item = self._item(plan, idx, seg, 0)
            if item.sentences & busy:
                waiting.append(item)
            else:
                take(item)
        pending.extendleft(reversed(waiting))
        return items, exhausted

    def _item(self, plan: FilePlan, idx: int, seg: Segment, style: int) -> _Item:
        masked = self.glossary.mask(seg.text, keep=seg.keep, style=style)
        marks = []
        kept = set(seg.keep)
        for start, end in seg.marks:
            text = seg.text[start:end]
            if (start, end) in kept or not _needs_translation(text):  # found verbatim instead
                marks.append(None)
                continue
            keep = [(a - start, b - start) for a, b in seg.keep if start <= a and b <= end]
            marks.append(self.glossary.mask(text, keep=keep, style=style))
        sentences = frozenset(_normalized(s) for m in [masked, *marks] if m is not None
                              for s in split_sentences(m.text))
        return _Item(plan, idx, seg, style, masked, marks, sentences)

    def _submit(self, items: list[_Item]):
        """One submission for a window: every piece joined by blank lines (a line break
        always ends a sentence, so pieces never share one)."""
        pieces: list[str] = []
        for item in items:
            pieces.append(item.masked.text.strip())
            pieces.extend(m.text.strip() for m in item.mark_masked if m is not None)
        submission = self.translator.submit(_JOINER.join(pieces), self.options.translate,
                                            priority=Priority.BULK, order="input")
        return items, (submission, pieces), set().union(*(i.sentences for i in items))

    def _consume(self, items: list[_Item], submitted, pending: deque[_Item]) -> None:
        """Collect a window's results, restore each segment and commit it to the journal."""
        submission, pieces = submitted
        starts, offset = [], 0
        for piece in pieces:
            starts.append(offset)
            offset += len(piece) + len(_JOINER)
        grouped: list[list] = [[] for _ in pieces]
        which = 0
        for result in submission:
            if self._cancelled.is_set():
                return
            while which + 1 < len(starts) and result.span[0] >= starts[which + 1]:
                which += 1
            grouped[which].append(result)
        if self._cancelled.is_set():
            return  # a cancelled window's results are partial: keep none of them
        if any(not results for results in grouped):
            # the submission ended early without our cancel: the translator was closed
            self._stop("the model was closed while the job ran; run it again to resume")
            return
        texts = []
        for piece, results in zip(pieces, grouped):
            text = join_results(results)
            texts.append(text[:-len(_JOINER)] if text.endswith(_JOINER) else text)
        at = 0
        for item in items:
            main_at = at
            alone: list[str | None] = []
            for m in item.mark_masked:
                if m is not None:
                    at += 1
                alone.append(texts[at] if m is not None else None)
            at += 1
            if item.plan.status != "todo":
                continue
            if self._finish(item, texts[main_at], alone, pending):
                self._progress.advance(sum(1 for r in grouped[main_at] if r.stop != "empty"), item.plan)

    def _finish(self, item: _Item, main: str, alone: list[str | None], pending: deque[_Item]) -> bool:
        """Restore, check and commit one segment; ``False`` when it was queued for a retry."""
        assert self.journal is not None
        seg = item.segment
        lead = seg.text[:len(seg.text) - len(seg.text.lstrip())]
        trail = seg.text[len(seg.text.rstrip()):]
        restored = self.glossary.unmask(main, item.masked)
        if restored.missing and item.style == 0:
            pending.append(self._item(item.plan, item.idx, seg, 1))  # retry with the other placeholders
            return False
        warning = None
        text = restored.text
        if restored.missing:
            names = ", ".join(repr(slot.source) for slot in restored.missing)
            if any(slot.kind == "keep" for slot in restored.missing):
                text = seg.text.strip()
                warning = f"line {seg.line}: kept untranslated, the model damaged {names}" if seg.line \
                    else f"kept untranslated, the model damaged {names}"
            else:
                warning = (f"line {seg.line}: " if seg.line else "") + f"term {names} is missing from the translation"
            self._progress.message(f"{item.plan.input}: warning: {warning}")
        mark_texts = [self.glossary.unmask(a, m).text if (a is not None and m is not None) else None
                      for a, m in zip(alone, item.mark_masked)]
        text = lead + text + trail
        marks = place_marks(seg.text, seg.marks, text, mark_texts) if seg.marks else ()
        self.journal.save(item.plan.key, item.idx, Translated(text, marks), warning)
        if warning:
            item.plan.warnings.append(warning)
        item.plan.remaining -= 1
        self._write_if_complete(item.plan)
        return True

    def _write_if_complete(self, plan: FilePlan) -> None:
        """Write the output of a file whose segments are all in the journal."""
        if plan.status != "todo" or not plan.exhausted or plan.remaining > 0:
            return
        assert self.journal is not None
        try:
            if file_stamp(plan.input) != plan.stamp:
                return self._fail(plan, "it changed while it was translated; run the job again")
        except OSError as exc:
            return self._fail(plan, f"cannot read it ({exc.strerror})")
        temp = durable.temp_name(plan.output, _TEMP_SUFFIX)
        try:
            durable.make_dirs(plan.output.parent)
            with durable.open_atomic(plan.output, "wb", temp=temp) as out:  # fsynced, renamed, folder fsynced
                plan.document.write(self.journal.translations(plan.key), out)
        except DocumentError as exc:
            temp.unlink(missing_ok=True)
            return self._fail(plan, exc.reason)
        except OSError as exc:
            full = diskspace.no_space(plan.output) if diskspace.is_full(exc) else None  # the free space it met
            temp.unlink(missing_ok=True)
            if full is not None:  # every file after this one would fail too: stop the job
                raise full from None
            return self._fail(plan, f"cannot write {plan.output} ({exc.strerror})")
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        self.journal.written(plan.key)
        plan.warnings = self.journal.warnings(plan.key) + list(getattr(plan.document, "notes", ()))
        plan.status, plan.message, plan.document = "done", str(plan.output), None
        self._progress.finished(plan)
