"""A persistent translation memory: finished sentences in SQLite, reused across runs.

:class:`TranslationMemory` is a :class:`~edge_translator.core.cache.TranslationCache`, so it
plugs into ``Translator.load(..., cache=memory)`` wherever a translator runs: the document
translator, the daemon or the GUI. Exact matches only. An entry is keyed by the
whitespace-normalized sentence, the model's identity, the target and every option that
changes the output; entries imported from another tool (TMX) belong to no model and are
preferred, since a person chose them.

Several threads and several processes (the desktop app, ``docs --tm``, ``serve --tm``) may
use one file at once: each thread gets its own connection, opened by :mod:`.sqlitedb`: WAL
mode, ``synchronous=NORMAL`` (a power cut may lose the last pairs stored, never corrupt the
file) and writers wait for one another (``busy_timeout``). Only the standard library is used.

On a full disk the memory is a cache that stops filling: :meth:`TranslationMemory.put`
logs one warning and drops the pair, so the translation itself is still delivered, and
:func:`open_for_translating` runs without a memory that cannot even be opened. Storing is
an error only where storing is what was asked (:meth:`~TranslationMemory.add_many`,
:meth:`~TranslationMemory.clear`): :class:`~.errors.NoSpace`.
"""

from __future__ import annotations

import array
import logging
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import diskspace, memoryfile, sqlitedb
from .cache import CachedTranslation, CacheKey
from .errors import InputError, NoSpace

logger = logging.getLogger(__name__)

#: ``model`` of entries that came from outside (TMX import): they match any model and options.
IMPORTED = ""

#: What to do about a memory on a full disk: while translating, and where storing was asked.
_ADVICE = "free some space; until then translations are delivered without being stored in the memory"
_STORE_ADVICE = "free some space and run the same command again: nothing of it was stored"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    source  TEXT NOT NULL,
    target  TEXT NOT NULL,
    model   TEXT NOT NULL,
    options TEXT NOT NULL,
    text    TEXT NOT NULL,
    ids     BLOB,
    stop    TEXT NOT NULL,
    score   REAL,
    origin  TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (source, target, model, options)
) WITHOUT ROWID
"""


def default_path() -> Path:
    """Where the memory lives by default: the user's data directory.

    ``$XDG_DATA_HOME/edge-translator/memory.sqlite`` (``~/.local/share/...`` when unset) on
    Linux and other Unix systems, ``%LOCALAPPDATA%\\edge-translator\\memory.sqlite`` on Windows
    and ``~/Library/Application Support/edge-translator/memory.sqlite`` on macOS.
    """
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "edge-translator" / "memory.sqlite"


def options_key(key: CacheKey) -> str:
    """The options part of a key, as stored."""
    text = f"beam={key.beam_size};max={key.max_length};guard={int(key.repetition_guard)}"
    return text if key.shortlist else text + ";shortlist=0"


@dataclass(frozen=True)
class MemoryEntry:
    """One stored sentence pair."""

    source: str
    text: str
    target: str
    model: str
    origin: str
    """``"decoded"`` (this program translated it) or ``"imported"`` (from a TMX file)."""
    created: float


@dataclass(frozen=True)
class MemoryStats:
    """What a memory holds."""

    path: Path
    entries: int
    imported: int
    models: int
    targets: dict[str, int]
    bytes: int


class TranslationMemory:
    """Sentences translated before, in a SQLite file shared by threads and processes."""

    def __init__(self, path: str | Path | None = None):
        """Open (and create, with its directory) the memory at ``path``.

        Args:
            path: The SQLite file; ``None`` means :func:`default_path`.

        Raises:
            InputError: If the file cannot be opened or is not a translation memory.
        """
        self.path = Path(path) if path is not None else default_path()
        self.hits = 0
        self.misses = 0
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._full = False
        self._damaged = False
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if diskspace.is_full(exc):
                raise diskspace.no_space(self.path, _ADVICE) from None
            raise InputError(f"cannot create the directory of the translation memory {self.path} "
                             f"({exc.strerror}); pass --tm with a writable path") from None
        self.notice = memoryfile.prepare(self.path, _SCHEMA, _ADVICE)
        """The warning when the file was damaged and set aside on opening (else ``None``)."""
        if self.notice:
            logger.warning("%s", self.notice)

    def _db(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            try:
                db = sqlitedb.connect(self.path)
                db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError as exc:
                if diskspace.is_full(exc):  # a WAL file's -shm cannot be made on a full disk
                    raise diskspace.no_space(self.path, _ADVICE) from None
                if memoryfile.is_damage(exc):  # damaged since it was opened: get and put go on
                    raise
                raise InputError(f"{self.path} is not a usable translation memory ({exc}); "
                                 "pass another path with --tm, or move this file away") from None
            self._local.db = db
            with self._lock:
                self._connections.append(db)
        return db

    def get(self, key: CacheKey) -> CachedTranslation | None:
        """The stored translation of ``key``'s sentence: an imported one first, then one this
        model decoded with the same options (``None`` too while a full disk keeps the memory
        from being opened)."""
        try:
            row = self._db().execute(
                "SELECT text, ids, stop, score FROM entries WHERE source = ? AND target = ? AND "
                "((model = ? AND options = ?) OR (model = ? AND options = '')) ORDER BY model = ? DESC LIMIT 1",
                (key.sentence, key.target, key.model, options_key(key), IMPORTED, IMPORTED)).fetchone()
        except NoSpace as exc:
            self._warn_full(exc)
            row = None
        except sqlite3.DatabaseError as exc:
            if not memoryfile.is_damage(exc):
                raise
            self._warn_damaged(exc)
            row = None
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        text, ids, stop, score = row
        return CachedTranslation(text, tuple(array.array("i", ids or b"")), stop,
                                 float("nan") if score is None else score)

    def put(self, key: CacheKey, value: CachedTranslation) -> None:
        """Store a sentence this model decoded (an existing entry is replaced).

        On a full disk the pair is dropped and one warning logged (until a pair is stored
        again): the translation that called this is delivered all the same.
        """
        try:
            with diskspace.writing(self.path, _ADVICE):
                self._db().execute(
                    "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'decoded', ?)",
                    (key.sentence, key.target, key.model, options_key(key), value.text,
                     array.array("i", value.ids).tobytes(), value.stop, value.score, time.time()))
        except NoSpace as exc:
            self._warn_full(exc)
            return
        except sqlite3.DatabaseError as exc:
            if not memoryfile.is_damage(exc):
                raise
            self._warn_damaged(exc)
            return
        if self._full:
            self._full = False
            logger.info("%s: the translation memory stores pairs again", self.path)

    def _warn_full(self, exc: NoSpace) -> None:
        if not self._full:
            self._full = True
            logger.warning("the translation memory cannot store what is translated: %s", exc)

    def _warn_damaged(self, exc: sqlite3.DatabaseError) -> None:
        if not self._damaged:
            self._damaged = True
            logger.warning("the translation memory %s became damaged while in use (%s): translations go on "
                           "without it, and it is set aside the next time it is opened", self.path, exc)

    def add(self, source: str, text: str, target: str) -> None:
        """Store a pair that came from outside (it matches every model).

        Raises:
            NoSpace: If the disk is full.
        """
        with diskspace.writing(self.path, _STORE_ADVICE):
            self._db().execute(
                "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, '', ?, NULL, 'memory', NULL, 'imported', ?)",
                (" ".join(source.split()), target, IMPORTED, text, time.time()))

    def add_many(self, pairs: Iterator[tuple[str, str, str]]) -> int:
        """Store many outside pairs ``(source, text, target)`` in one transaction; returns the count.

        Raises:
            NoSpace: If the disk is full; nothing of them is stored then.
        """
        with diskspace.writing(self.path, _STORE_ADVICE):
            db = self._db()
            count = 0
            db.execute("BEGIN IMMEDIATE")
            try:
                for source, text, target in pairs:
                    db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, '', ?, NULL, 'memory', NULL, "
                               "'imported', ?)", (" ".join(source.split()), target, IMPORTED, text, time.time()))
                    count += 1
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        return count

    def entries(self, target: str | None = None) -> Iterator[MemoryEntry]:
        """Every stored pair (optionally of one target), oldest first, read lazily."""
        query = "SELECT source, text, target, model, origin, created FROM entries"
        args: tuple = ()
        if target is not None:
            query += " WHERE target = ?"
            args = (target,)
        for row in self._db().execute(query + " ORDER BY created", args):
            yield MemoryEntry(*row)

    def recent(self, limit: int = 200, search: str = "") -> list[MemoryEntry]:
        """The ``limit`` newest pairs, newest first; with ``search``, only those whose English
        or translation contains it (case-insensitive for ASCII letters)."""
        query = "SELECT source, text, target, model, origin, created FROM entries"
        args: list = []
        if search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            query += " WHERE source LIKE ? ESCAPE '\\' OR text LIKE ? ESCAPE '\\'"
            args += [pattern, pattern]
        return [MemoryEntry(*row) for row in self._db().execute(query + " ORDER BY created DESC LIMIT ?",
                                                                (*args, limit))]

    def delete(self, entry: MemoryEntry) -> int:
        """Forget ``entry``'s pair (every option set that stored this translation); returns how
        many rows went."""
        with diskspace.writing(self.path, _STORE_ADVICE):
            return self._db().execute("DELETE FROM entries WHERE source = ? AND target = ? AND model = ? AND text = ?",
                                      (entry.source, entry.target, entry.model, entry.text)).rowcount

    def copy_to(self, path: str | Path, model: str, target: str) -> int:
        """Write the entries a job of ``model`` into ``target`` can use (its own and the
        imported ones) to a new memory file at ``path``: the snapshot each worker of a
        cluster job reads. Returns how many were copied."""
        TranslationMemory(path).close()  # creates the file with the schema
        db = self._db()
        db.execute("ATTACH DATABASE ? AS snapshot", (str(path),))
        try:
            count = db.execute("INSERT OR REPLACE INTO snapshot.entries SELECT * FROM entries "
                               "WHERE target = ? AND model IN (?, ?)", (target, model, IMPORTED)).rowcount
        finally:
            db.execute("DETACH DATABASE snapshot")
        single = sqlite3.connect(path, isolation_level=None)
        try:  # one self-contained file, so its bytes alone can be sent to a worker
            single.execute("PRAGMA journal_mode=DELETE")
        finally:
            single.close()
        return count

    def stats(self) -> MemoryStats:
        """Counts of what is stored."""
        db = self._db()
        entries, imported, models = db.execute(
            "SELECT count(*), sum(model = ''), count(DISTINCT nullif(model, '')) FROM entries").fetchone()
        targets = dict(db.execute("SELECT target, count(*) FROM entries GROUP BY target ORDER BY target"))
        size = sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())
        return MemoryStats(self.path, entries, imported or 0, models, targets, size)

    def clear(self) -> int:
        """Forget everything; returns how many entries were removed.

        Raises:
            NoSpace: If the disk is full (the entries may be gone, the file not yet smaller).
        """
        with diskspace.writing(self.path, _STORE_ADVICE):
            db = self._db()
            count = db.execute("DELETE FROM entries").rowcount
            db.execute("VACUUM")
        return count

    def close(self) -> None:
        """Close every thread's connection. Safe to call twice."""
        with self._lock:
            for db in self._connections:
                db.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> TranslationMemory:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_for_translating(path: str | Path | None = None) -> TranslationMemory | None:
    """The memory a translating front end (``docs``, ``corpus``, ``serve --tm``) uses, or
    ``None`` with one warning when a full disk keeps it from being opened: the translations
    go on without it.

    Raises:
        InputError: If the file cannot be opened for another reason.
    """
    try:
        return TranslationMemory(path)
    except NoSpace as exc:
        logger.warning("running without the translation memory: %s", exc)
        return None
