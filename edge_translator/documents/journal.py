"""The job journal: what a document job has done, in SQLite, so a killed job resumes.

It lives beside the outputs (``.edge-translator-job.sqlite``) and records, per output file,
the input's checksum and the settings it was translated with, every finished segment,
the warnings, and whether the output was written. It also keeps every sentence decoded
for the job (:class:`JobCache`, the translator's cache during a job), so that after
``kill -9`` at any moment a rerun decodes only what is missing. Each record is committed
as it is made (:mod:`~edge_translator.core.sqlitedb`: WAL mode, ``synchronous=NORMAL``), so
``kill -9`` loses nothing committed; a power cut may lose the last records, never corrupt
the file, and a rerun translates those segments again. A write that finds the disk full
raises :class:`~edge_translator.core.errors.NoSpace` (its transaction rolled back): what
was committed stays, and a rerun once there is space goes on from there.
"""

from __future__ import annotations

import array
import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..core import diskspace, durable, sqlitedb
from ..core.cache import CachedTranslation, CacheKey
from ..core.errors import InputError
from .base import Translated

#: The journal's file name in the output folder.
JOURNAL_NAME = ".edge-translator-job.sqlite"
_VERSION = "1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    output TEXT PRIMARY KEY, input TEXT NOT NULL, sha256 TEXT NOT NULL, settings TEXT NOT NULL,
    segments INTEGER NOT NULL, state TEXT NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS segments (
    output TEXT NOT NULL, idx INTEGER NOT NULL, text TEXT NOT NULL, marks TEXT NOT NULL,
    PRIMARY KEY (output, idx)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS warnings (output TEXT NOT NULL, idx INTEGER NOT NULL, message TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS sentences (
    key TEXT PRIMARY KEY, text TEXT NOT NULL, ids BLOB NOT NULL, stop TEXT NOT NULL, score REAL,
    decoded INTEGER NOT NULL) WITHOUT ROWID;
"""


@dataclass(frozen=True)
class FileRecord:
    """What the journal knows of one output."""

    output: str
    input: str
    sha256: str
    settings: str
    segments: int
    state: str
    """``"started"`` or ``"written"``."""


class Journal:
    """One job's journal file."""

    def __init__(self, path: Path):
        """Open or create the journal at ``path``.

        Raises:
            InputError: If it cannot be created or is not a journal.
        """
        self.path = path
        self._lock = threading.Lock()
        try:
            durable.make_dirs(path.parent)  # the outputs' folder too: it must outlive a power cut
            self._db = sqlitedb.connect(path)
            self._db.executescript(_SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
            if row is None:
                self._db.execute("INSERT INTO meta VALUES ('version', ?)", (_VERSION,))
            elif row[0] != _VERSION:
                raise InputError(f"{path} is a job journal of another version ({row[0]}); delete it to start over")
        except (sqlite3.DatabaseError, OSError) as exc:
            if getattr(self, "_db", None) is not None:
                self._db.close()
            if diskspace.is_full(exc):
                raise diskspace.no_space(path) from None
            raise InputError(f"cannot use the job journal {path} ({exc}); delete it, or pass --jobs-dir "
                             "with a writable folder") from None

    def record(self, output: str) -> FileRecord | None:
        """The journal's record of ``output``, or ``None``."""
        with self._lock:
            row = self._db.execute("SELECT output, input, sha256, settings, segments, state FROM files "
                                   "WHERE output = ?", (output,)).fetchone()
        return FileRecord(*row) if row else None

    def begin(self, output: str, input: str, sha256: str, settings: str, segments: int) -> set[int]:
        """Start (or resume) an output; returns the indices of the segments already done.

        A record made from another input checksum or other settings is dropped with its
        segments, so a changed input is translated again.

        Raises:
            NoSpace: If the disk is full.
        """
        with self._lock, self._writing():
            row = self._db.execute("SELECT sha256, settings, segments FROM files WHERE output = ?",
                                   (output,)).fetchone()
            if row is not None and row != (sha256, settings, segments):
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("DELETE FROM segments WHERE output = ?", (output,))
                self._db.execute("DELETE FROM warnings WHERE output = ?", (output,))
                self._db.execute("DELETE FROM files WHERE output = ?", (output,))
                self._db.execute("COMMIT")
                row = None
            if row is None:
                self._db.execute("INSERT INTO files VALUES (?, ?, ?, ?, ?, 'started', ?)",
                                 (output, input, sha256, settings, segments, time.time()))
                return set()
            self._db.execute("UPDATE files SET state = 'started', updated = ? WHERE output = ?",
                             (time.time(), output))
            return {idx for (idx,) in self._db.execute("SELECT idx FROM segments WHERE output = ?", (output,))}

    def save(self, output: str, idx: int, translated: Translated, warning: str | None = None) -> None:
        """Record a finished segment (and its warning) in one commit.

        Raises:
            NoSpace: If the disk is full.
        """
        marks = json.dumps([list(m) if m is not None else None for m in translated.marks])
        with self._lock, self._writing():
            self._db.execute("BEGIN")
            self._db.execute("INSERT OR REPLACE INTO segments VALUES (?, ?, ?, ?)",
                             (output, idx, translated.text, marks))
            if warning:
                self._db.execute("INSERT INTO warnings VALUES (?, ?, ?)", (output, idx, warning))
            self._db.execute("COMMIT")

    def translations(self, output: str) -> Iterator[Translated]:
        """The output's segments in order, read lazily."""
        cursor = self._db.cursor()
        cursor.execute("SELECT text, marks FROM segments WHERE output = ? ORDER BY idx", (output,))
        for text, marks in cursor:
            yield Translated(text, tuple(tuple(m) if m is not None else None for m in json.loads(marks)))

    def warnings(self, output: str) -> list[str]:
        """The warnings recorded for ``output``, in segment order."""
        with self._lock:
            return [m for (m,) in self._db.execute("SELECT message FROM warnings WHERE output = ? ORDER BY idx",
                                                   (output,))]

    def written(self, output: str) -> None:
        """Record that the output file is complete on disk.

        Raises:
            NoSpace: If the disk is full.
        """
        with self._lock, self._writing():
            self._db.execute("UPDATE files SET state = 'written', updated = ? WHERE output = ?", (time.time(), output))

    def sentence(self, key: str) -> CachedTranslation | None:
        """A sentence decoded earlier in this job, by its :func:`sentence_key`."""
        with self._lock:
            row = self._db.execute("SELECT text, ids, stop, score FROM sentences WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return CachedTranslation(row[0], tuple(array.array("i", row[1])), row[2],
                                 float("nan") if row[3] is None else row[3])

    def store_sentence(self, key: str, value: CachedTranslation) -> None:
        """Record a decoded sentence; a second decode of one key counts up ``decoded``.

        Raises:
            NoSpace: If the disk is full.
        """
        with self._lock, self._writing():
            self._db.execute(
                "INSERT INTO sentences VALUES (?, ?, ?, ?, ?, 1) ON CONFLICT(key) DO UPDATE SET "
                "decoded = decoded + 1, text = excluded.text",
                (key, value.text, array.array("i", value.ids).tobytes(), value.stop, value.score))

    def decode_counts(self) -> dict[str, int]:
        """How many runs decoded each sentence (for tests: no sentence twice)."""
        with self._lock:
            return dict(self._db.execute("SELECT key, decoded FROM sentences"))

    @contextmanager
    def _writing(self) -> Iterator[None]:
        """A full disk becomes :class:`NoSpace`, with the open transaction rolled back."""
        try:
            with diskspace.writing(self.path):
                yield
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()


def sentence_key(key: CacheKey) -> str:
    """A cache key as the journal stores it."""
    fields = [key.model, key.target, key.beam_size, key.max_length, key.repetition_guard, key.sentence]
    return json.dumps(fields if key.shortlist else fields + ["no-shortlist"], ensure_ascii=False)


class JobCache:
    """The translator's cache during a job: the journal's sentences, then the memory.

    Every sentence the job decodes goes into the journal (and the memory, when there is
    one) as soon as it is decoded. Until :meth:`attach` is called it is only the memory.
    """

    def __init__(self, memory=None):
        """Args:
            memory: A :class:`~edge_translator.core.cache.TranslationCache` (e.g. a
                translation memory), or ``None``.
        """
        self.memory = memory
        self.journal: Journal | None = None
        self.hits = 0
        self.decoded = 0
        self._put: set[str] = set()
        self._lock = threading.Lock()

    def attach(self, journal: Journal | None) -> None:
        """Use ``journal`` (``None`` detaches it)."""
        self.journal = journal

    def get(self, key: CacheKey) -> CachedTranslation | None:
        if self.journal is not None:
            hit = self.journal.sentence(sentence_key(key))
            if hit is not None:
                self.hits += 1
                return hit
        hit = self.memory.get(key) if self.memory is not None else None
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, key: CacheKey, value: CachedTranslation) -> None:
        name = sentence_key(key)
        with self._lock:
            first = name not in self._put
            self._put.add(name)
        if not first:
            return  # the same decode, delivered to a second place in one text
        self.decoded += 1
        if self.journal is not None:
            self.journal.store_sentence(name, value)
        if self.memory is not None:
            self.memory.put(key, value)
