"""Documents over HTTP: the store of uploaded files and the one worker that translates them.

An upload is checked at once (its type, size, encoding, an office file's zip structure and
what it unpacks to), then kept in ``files/<id>/`` under a name the server makes
(``input.docx``); the client's file name only names the download. Each document has a
small state file (``state.json``, written atomically and fsynced) and, while it is translated, the
document job's journal, so a restarted daemon resumes it where it stopped. One worker
thread runs the jobs one at a time as bulk work: the engine serves text requests first.
The job writes its output to a temporary file and renames it when it is complete, so
nothing half-written is ever served, not even after a power cut. Finished documents expire after ``ttl`` seconds.
A full disk is a 507: an upload that cannot be kept is refused whole, and a document whose
translation cannot be written gets status ``error`` and answers 507 for its result; the
server log names the file and the disk, the worker goes on with the next document.

Ids (and DeepL's document keys) are random and unguessable; each document is bound to
its owner (the identity :meth:`~.limits.Access.admit` returns, kept only as a digest),
and any other owner is told it does not exist.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import os
import secrets
import shutil
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import diskspace, durable
from ..core.errors import NoSpace
from ..documents import FORMATS, format_for, load_format
from .http import HTTPError

logger = logging.getLogger(__name__)

STATE_NAME = "state.json"
GLOSSARY_NAME = "glossary.json"
OUTPUT_DIR = "out"
#: The states a document passes through; ``queued`` and ``translating`` are unfinished.
STATUSES = ("queued", "translating", "done", "error")
_UNFINISHED = ("queued", "translating")
_ZIP_MEMBERS = 10_000
#: What a client is told when the disk is full (the server log says which file and disk).
FULL_UPLOAD = ("the server's disk is full: the document cannot be stored; retry later, once space is "
               "freed on the server")
FULL_RESULT = ("the server's disk is full: the translation could not be written; upload the document again "
               "once space is freed on the server")


@dataclass(frozen=True)
class FileLimits:
    """What documents may take (``serve``'s ``--max-file-size``, ``--files-*`` flags)."""

    max_file_size: int = 20_000_000
    """Largest upload in bytes (413 above)."""
    quota: int = 1_000_000_000
    """Most bytes all documents may take on disk together (507 above)."""
    max_queued: int = 8
    """Most unfinished documents per key (429 above)."""
    ttl: float = 3600.0
    """Seconds a finished document (or its error) is kept before it is deleted."""
    max_unpacked: int = 200_000_000
    """Most bytes a ``.docx`` may unpack to (a zip bomb is refused at upload)."""
    folder: Path | None = None
    """Where documents live; ``None``: ``files/`` in the state folder."""

    def __post_init__(self) -> None:
        for name in ("max_file_size", "quota", "max_queued", "max_unpacked"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.ttl <= 0:
            raise ValueError("ttl must be positive")


@dataclass
class Document:
    """One uploaded document and how its translation goes."""

    id: str
    key: str
    """DeepL's ``document_key``: a second secret the status and result requests carry."""
    owner: str
    """A digest of the owner's identity."""
    name: str
    """The download's file name (the upload's base name, made safe, with the target)."""
    suffix: str
    target: str
    status: str = "queued"
    sentences_done: int = 0
    sentences_total: int = 0
    error: str = ""
    characters: int = 0
    """Characters of text in the document (DeepL's ``billed_characters``), once done."""
    created: float = field(default_factory=time.time)
    finished: float = 0.0
    output: str = ""
    """The translated file, relative to the document's folder, once done."""
    started: float = 0.0
    no_space: bool = False
    """Whether the translation failed because the disk was full (its result is then a 507)."""

    @property
    def input(self) -> str:
        return "input" + self.suffix

    def seconds_remaining(self) -> int | None:
        """An estimate from the rate so far; ``None`` before there is one."""
        if self.status != "translating" or not self.sentences_done or not self.started:
            return None
        rate = self.sentences_done / max(1e-3, time.time() - self.started)
        return int((self.sentences_total - self.sentences_done) / rate + 0.999)


def owner_digest(owner: str) -> str:
    """What a document records of its owner: a digest, so no API key is written to disk."""
    return hashlib.sha256(("edge-translator owner\0" + owner).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def safe_name(filename: str | None) -> str:
    """The base name of a client's file name, safe for a ``Content-Disposition`` header:
    no folders, no control characters or quotes, no leading dots, at most 120 characters."""
    base = (filename or "").replace("\\", "/").rsplit("/", 1)[-1]
    base = "".join(ch for ch in base if ch.isprintable() and ch not in '"<>:|?*;')
    base = base.strip().lstrip(".").strip()
    if len(base) > 120:
        stem, dot, suffix = base.rpartition(".")
        base = (stem[:110] + dot + suffix[:9]) if dot and len(suffix) < 10 else base[:120]
    return base or "document"


class DocumentStore:
    """Uploaded documents: checked, kept, translated one at a time, served, expired."""

    def __init__(self, translator, folder: Path | None, limits: FileLimits | None = None):
        """Args:
            translator: The daemon's translator (its cache and memory serve documents too).
            folder: Where documents live (created on the first upload); ``None``: the server
                keeps no documents and their endpoints answer 503.
            limits: Sizes, quota, caps and the time to keep results.

        Nothing is read from ``folder`` until :meth:`start`.
        """
        self.translator = translator
        self.folder = folder
        self.limits = limits or FileLimits()
        self._docs: dict[str, Document] = {}
        self._queue: deque[str] = deque()
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._job: tuple[str, object] | None = None
        self._closed = False
        self._suffixes: tuple[str, ...] | None = None

    def start(self) -> None:
        """Take up what a previous run left in the folder: unfinished documents are queued
        again (their jobs resume from their journals), expired ones deleted. The server calls
        it once it listens, so a start-up that fails says only why."""
        self._recover()

    # -- what the APIs ask -------------------------------------------------------------------
    @property
    def enabled(self) -> bool:
        """Whether documents can be uploaded (the server has a folder for them)."""
        return self.folder is not None

    @property
    def max_body(self) -> int:
        """The largest request body an upload may have (the file and the form around it)."""
        return self.limits.max_file_size + (1 << 20)

    def suffixes(self) -> tuple[str, ...]:
        """The file suffixes this server translates (formats whose library is installed)."""
        if self._suffixes is None:
            found = []
            for info in FORMATS:
                try:
                    load_format(info)
                except Exception:  # noqa: BLE001 - a missing extra: that format is simply not offered
                    continue
                found.extend(info.suffixes)
            self._suffixes = tuple(found)
        return self._suffixes

    def submit(self, owner: str, filename: str | None, data: bytes, target: str, glossary=None,
               glossary_digest: str = "") -> Document:
        """Check and keep an upload, and queue it.

        Raises:
            HTTPError: 400 for a file that cannot be a document of its type, 413 over the
                size limit, 415 for an unsupported type, 429 over the per-key cap, 507 over
                the quota, 503 without a folder for documents.
        """
        if self.folder is None:
            raise HTTPError(503, "this server keeps no documents: start it with --state-dir DIR or --files-dir DIR")
        name = safe_name(filename)
        info = format_for(name)
        suffix = "." + name.rsplit(".", 1)[-1].lower() if "." in name else ""
        if info is None or suffix not in self.suffixes():
            raise HTTPError(415, f"file type {suffix or '(none)'!r} is not supported; send one of "
                                 f"{', '.join(self.suffixes())}")
        if not data:
            raise HTTPError(400, f"the file {name} is empty")
        if len(data) > self.limits.max_file_size:
            raise HTTPError(413, f"the file is {len(data)} bytes; the limit is {self.limits.max_file_size} bytes")
        if info.package is not None:
            check_zip(data, name, info, self.limits.max_unpacked)
        elif info.magic is not None:
            if info.magic not in data[:1024]:
                raise HTTPError(400, f"the file {name} is not a {info.name.upper()} file (it does not start as one)")
        else:
            check_text(data, name)
        stem = name[:-len(suffix)] if suffix else name
        owner = owner_digest(owner)
        with self._lock:
            self._check_open()
            self._sweep()
            waiting = sum(1 for d in self._docs.values() if d.owner == owner and d.status in _UNFINISHED)
            if waiting >= self.limits.max_queued:
                raise HTTPError(429, f"{waiting} documents are already waiting for this key (the limit is "
                                     f"{self.limits.max_queued}); retry when one is done", (("Retry-After", "10"),))
            used = _usage(self.folder)
            if used + 2 * len(data) > self.limits.quota:
                raise HTTPError(507, "the server's space for documents is full; download or delete finished "
                                     "documents, or retry later")
            doc = Document(secrets.token_urlsafe(18), secrets.token_urlsafe(24), owner,
                           f"{stem}.{target}{suffix}", suffix, target)
            folder = self.folder / doc.id
            try:
                durable.make_dirs(folder)  # each file below is fsynced and renamed, state.json last
                durable.write_atomic(folder / doc.input, data)
                if glossary is not None:
                    _write_json(folder / GLOSSARY_NAME, {"digest": glossary_digest, "entries": [
                        [e.source, e.target, e.regex] for e in glossary.entries]})
                self._save(doc)
            except OSError as exc:
                shutil.rmtree(folder, ignore_errors=True)
                if diskspace.is_full(exc):
                    logger.error("an upload was refused (507): %s", diskspace.no_space(
                        exc.filename or folder / doc.input, "free some space for the server's documents"))
                    raise HTTPError(507, FULL_UPLOAD) from None
                logger.error("cannot keep an uploaded document in %s: %s", folder, exc)
                raise HTTPError(507, f"the server cannot store the document ({exc.strerror})") from None
            self._docs[doc.id] = doc
            self._queue.append(doc.id)
            self._start()
            self._lock.notify_all()
        return doc

    def get(self, owner: str | None, doc_id: str, key: str | None = None) -> Document:
        """The document ``doc_id`` of ``owner`` (``None``: anyone who knows the id).

        Raises:
            HTTPError: 404 for an unknown id, another owner's, or a wrong ``key``.
        """
        with self._lock:
            self._sweep()
            doc = self._docs.get(doc_id)
        if doc is None or (owner is not None and not secrets.compare_digest(doc.owner, owner_digest(owner))) \
                or (key is not None and not secrets.compare_digest(doc.key.encode(), key.encode("utf-8", "replace"))):
            raise HTTPError(404, "no such document (it may have expired)")
        return doc

    def result(self, doc: Document) -> bytes:
        """The translated file's content.

        Raises:
            HTTPError: 409 while it is not done (or it failed), 507 if it failed for a full
                disk, 404 if it is gone.
        """
        if doc.status == "error" and doc.no_space:
            raise HTTPError(507, FULL_RESULT)
        if doc.status == "error":
            raise HTTPError(409, f"the document could not be translated: {doc.error}")
        if doc.status != "done":
            raise HTTPError(409, f"the document is not translated yet ({doc.status}: {doc.sentences_done} of "
                                 f"{doc.sentences_total} sentences)", (("Retry-After", "2"),))
        try:
            return (self.folder / doc.id / doc.output).read_bytes()
        except OSError:
            raise HTTPError(404, "no such document (it may have expired)") from None

    def delete(self, doc: Document) -> None:
        """Forget a document and delete its files (a job on it is cancelled first)."""
        with self._lock:
            self._docs.pop(doc.id, None)
            running = self._job if self._job and self._job[0] == doc.id else None
        if running is not None:
            running[1].cancel()  # the worker deletes the folder when the job has stopped
        else:
            self._remove(doc.id)

    def wait(self, doc: Document, timeout: float, gone=None) -> bool:
        """Wait until ``doc`` is done or failed; ``False`` if ``timeout`` passed or ``gone()``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while doc.status in _UNFINISHED and doc.id in self._docs:
                left = deadline - time.monotonic()
                if left <= 0 or (gone is not None and gone()):
                    return False
                self._lock.wait(min(left, 0.5))
        return doc.status not in _UNFINISHED

    def close(self, timeout: float = 30.0) -> None:
        """Stop the worker; a document being translated stays queued (a restart resumes it)."""
        with self._lock:
            self._closed = True
            running = self._job
            self._lock.notify_all()
        if running is not None:
            running[1].cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the worker --------------------------------------------------------------------------
    def _start(self) -> None:
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._run, name="edge-translator-documents", daemon=True)
            self._thread.start()

    def _check_open(self) -> None:
        if self._closed:
            raise HTTPError(503, "the server is shutting down", (("Retry-After", "5"),))

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._closed and not self._queue:
                    self._sweep()
                    self._lock.wait(self._next_expiry())
                if self._closed:
                    return
                doc = self._docs.get(self._queue.popleft())
                if doc is None or doc.status != "queued":
                    continue
                doc.status, doc.started = "translating", time.time()
                self._save_or_log(doc)
            try:
                self._translate(doc)
            except NoSpace as exc:  # an output or the journal: the next document may fit
                logger.error("document %s: %s", doc.id, exc)
                doc.no_space = True
                self._finish(doc, "error", FULL_RESULT)
            except Exception as exc:  # noqa: BLE001 - one document's failure must not stop the worker
                logger.exception("translating document %s failed", doc.id)
                self._finish(doc, "error", f"translation failed: {type(exc).__name__}: {exc}")

    def _translate(self, doc: Document) -> None:
        from ..core.translator import TranslateOptions
        from ..documents.job import DocumentJob
        from ..documents.journal import JobCache
        from ..documents.plan import JobOptions

        folder = self.folder / doc.id
        glossary, digest = _read_glossary(folder / GLOSSARY_NAME)
        options = JobOptions(output_dir=folder / OUTPUT_DIR, jobs_dir=folder, force=True,
                             translate=TranslateOptions(target=doc.target))
        # The translator keeps the daemon's own cache (and translation memory); the job's
        # journal keeps each finished segment, which is what a resumed job needs.
        job = DocumentJob(self.translator, JobCache(None), [folder / doc.input], options, glossary, digest)
        with self._lock:
            self._job = (doc.id, job)
            stop = self._closed or doc.id not in self._docs
        if stop:
            job.cancel()
        try:
            summary = job.run(_Progress(self, doc))
        finally:
            with self._lock:
                self._job = None
        plan = summary.files[0]
        with self._lock:
            deleted = doc.id not in self._docs
            closing = self._closed
        if deleted:
            self._remove(doc.id)
        elif plan.status in ("done", "up to date"):
            doc.output = str(Path(plan.output).relative_to(folder))
            doc.characters = _characters(plan)
            doc.sentences_done = doc.sentences_total = max(doc.sentences_total, doc.sentences_done)
            self._finish(doc, "done")
        elif plan.status == "cancelled" and closing:
            with self._lock:
                doc.status = "queued"  # the next start resumes it from its journal
                self._save_or_log(doc)
        else:
            self._finish(doc, "error", plan.message or plan.status)

    def _finish(self, doc: Document, status: str, error: str = "") -> None:
        with self._lock:
            doc.status, doc.error, doc.finished = status, error, time.time()
            if doc.id in self._docs:
                self._save_or_log(doc)
            self._lock.notify_all()

    def advance(self, doc: Document, total: int | None = None, sentences: int = 0) -> None:
        """Progress from the job (its worker thread)."""
        with self._lock:
            if total is not None:
                doc.sentences_total = total
            doc.sentences_done = min(doc.sentences_total, doc.sentences_done + sentences)

    # -- state on disk -----------------------------------------------------------------------
    def _save(self, doc: Document) -> None:
        _write_json(self.folder / doc.id / STATE_NAME, asdict(doc))

    def _save_or_log(self, doc: Document) -> None:
        """Save the worker's news of ``doc``; a disk that cannot take it is logged, never fatal
        to the worker (what is in memory is served, and the old state file is whole)."""
        try:
            self._save(doc)
        except OSError as exc:
            logger.error("document %s: cannot save its state: %s", doc.id, diskspace.no_space(
                self.folder / doc.id / STATE_NAME, "free some space for the server's documents")
                if diskspace.is_full(exc) else exc)

    def _remove(self, doc_id: str) -> None:
        shutil.rmtree(self.folder / doc_id, ignore_errors=True)

    def _recover(self) -> None:
        """Load the documents a previous run left: queue the unfinished, drop the broken."""
        if self.folder is None or not self.folder.is_dir():
            return
        for entry in sorted(self.folder.iterdir()):
            if not entry.is_dir():
                continue
            try:
                doc = Document(**json.loads((entry / STATE_NAME).read_text(encoding="utf-8")))
                if doc.id != entry.name or doc.status not in STATUSES:
                    raise ValueError("it does not describe this folder")
            except (OSError, ValueError, TypeError) as exc:
                logger.warning("removing %s: its state is unreadable (%s)", entry, exc)
                shutil.rmtree(entry, ignore_errors=True)
                continue
            self._docs[doc.id] = doc
            if doc.status in _UNFINISHED:
                if (entry / doc.input).is_file():
                    doc.status, doc.started = "queued", 0.0
                    self._queue.append(doc.id)
                else:
                    doc.status, doc.error, doc.finished = "error", "its uploaded file was lost", time.time()
                self._save(doc)
            elif doc.status == "done" and not (entry / doc.output).is_file():
                doc.status, doc.error = "error", "its translated file was lost"
                self._save(doc)
        self._sweep()
        if self._docs:
            logger.info("documents: %d kept, %d to translate", len(self._docs), len(self._queue))
            self._start()

    def _sweep(self) -> None:
        """Delete finished documents older than the time to keep them (the lock is held)."""
        cutoff = time.time() - self.limits.ttl
        for doc in [d for d in self._docs.values() if d.status not in _UNFINISHED and d.finished < cutoff]:
            del self._docs[doc.id]
            self._remove(doc.id)

    def _next_expiry(self) -> float | None:
        ends = [d.finished + self.limits.ttl for d in self._docs.values() if d.status not in _UNFINISHED]
        return max(0.05, min(ends) - time.time() + 0.05) if ends else None


class _Progress:
    """The job's progress, as the document's sentences done of total."""

    def __init__(self, store: DocumentStore, doc: Document):
        self.store, self.doc = store, doc

    def start(self, files: int, sentences: int) -> None:
        self.store.advance(self.doc, total=sentences)

    def advance(self, sentences: int, plan) -> None:
        self.store.advance(self.doc, sentences=sentences)

    def finished(self, plan) -> None:
        pass

    def message(self, text: str) -> None:
        logger.debug("document %s: %s", self.doc.id, text)


# -- checks at upload --------------------------------------------------------------------------
def check_zip(data: bytes, name: str, info, max_unpacked: int) -> None:
    """Refuse what cannot be a file of the zip-packaged format ``info`` (a ``.docx``, a
    ``.pptx``): not a zip, a broken one, an encrypted one, or one that unpacks to more than
    ``max_unpacked`` bytes (by its declared sizes, and by what it really unpacks to).

    Raises:
        HTTPError: 400 saying what is wrong.
    """
    from ..documents.base import DocumentError
    from ..documents.package import PackageLimits, check_package

    try:
        check_package(data, name, *info.package, PackageLimits(max_unpacked=max_unpacked, max_parts=_ZIP_MEMBERS))
    except DocumentError as exc:
        raise HTTPError(400, f"the file {name} {exc.reason}") from None


def check_text(data: bytes, name: str) -> None:
    """Refuse a text file that is not UTF-8 (or UTF-16 with a byte order mark), or is binary.

    Raises:
        HTTPError: 400 naming the line where it stops being text.
    """
    codec, start = "utf-8", 0
    for mark, which in ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"),
                        (codecs.BOM_UTF16_BE, "utf-16-be")):
        if data.startswith(mark):
            codec, start = which, len(mark)
            break
    try:
        text = data[start:].decode(codec)
    except UnicodeDecodeError as exc:
        line = data[:start + exc.start].count(b"\n") + 1
        raise HTTPError(400, f"{name} is not UTF-8 text (line {line}); save it as UTF-8") from None
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n") + 1
        raise HTTPError(400, f"{name} holds binary data (line {line}), not text")


# -- small helpers -----------------------------------------------------------------------------
def _write_json(path: Path, value) -> None:
    """Write JSON atomically: a temporary file, fsynced, renamed over ``path``, its folder fsynced."""
    durable.write_atomic(path, json.dumps(value, ensure_ascii=False))


def _read_glossary(path: Path):
    if not path.is_file():
        return None, ""
    from ..documents.glossary import Entry, Glossary

    saved = json.loads(path.read_text(encoding="utf-8"))
    return Glossary(tuple(Entry(s, t, bool(r)) for s, t, r in saved["entries"])), saved["digest"]


def _characters(plan) -> int:
    """Characters of text in a translated input (what DeepL bills)."""
    try:
        document = load_format(plan.info).open(Path(plan.input), _format_options())
        return sum(len(segment.text) for segment in document.segments())
    except Exception:  # noqa: BLE001 - a count for the status, never worth failing the document
        return 0


def _format_options():
    from ..documents.base import FormatOptions

    return FormatOptions()


def _usage(folder: Path) -> int:
    """Bytes of every file under ``folder``."""
    total = 0
    stack = [folder]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(Path(entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
        except OSError:
            continue
    return total
