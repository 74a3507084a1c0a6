"""DeepL glossaries kept by the daemon: entries in TSV or CSV, stored in SQLite, applied by our glossary engine.

A glossary (DeepL's v3 shape) has a name and dictionaries, each a language pair and its
entries; a v2 glossary is one with a single dictionary. The model translates English into
Chinese only, so only EN→ZH dictionaries are accepted. Entries come as DeepL defines them:
one ``source<TAB>target`` per line (``tsv``), or CSV lines ``source,target`` with optional
``,source_lang,target_lang`` (``csv``); a bad line is refused with its number.

The store is ``glossaries.sqlite3`` in the state folder, created with the first glossary,
so a daemon that never gets one writes nothing; it is opened as every SQLite file of ours
is (:mod:`~edge_translator.core.sqlitedb`: WAL, ``synchronous=NORMAL``, a busy timeout).
Each glossary belongs to the key that made it (kept as a digest, never the key itself);
without keys every client shares one set, as one DeepL account does. Ids are random UUIDs,
as DeepL's are.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import sqlite3
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from ..core import durable, sqlitedb
from ..documents.glossary import Entry, Glossary
from .http import HTTPError

logger = logging.getLogger(__name__)

FILE_NAME = "glossaries.sqlite3"
#: DeepL's limits: glossaries per account, UTF-8 bytes in a term or a name.
MAX_GLOSSARIES = 1000
MAX_TERM_BYTES = 1024
#: Entries in one dictionary (DeepL's 10 MiB is far beyond what requests here may carry).
MAX_ENTRIES = 20_000
#: The one language pair the model translates, as DeepL's glossaries name it.
PAIR = ("en", "zh")
_SOURCE_CODES = {"en", "en-us", "en-gb"}
_TARGET_CODES = {"zh", "zh-hans", "zh-hant"}
_FORMATS = ("tsv", "csv")


@dataclass(frozen=True)
class Dictionary:
    """One language pair's entries, in the order given."""

    source_lang: str
    target_lang: str
    entries: tuple[tuple[str, str], ...]

    def tsv(self) -> str:
        """The entries as DeepL gives them back: ``source<TAB>target`` lines."""
        return "\n".join(f"{source}\t{target}" for source, target in self.entries)

    def info(self) -> dict:
        """DeepL's dictionary description (without the entries)."""
        return DictionaryInfo(self.source_lang, self.target_lang, len(self.entries)).info()


@dataclass(frozen=True)
class DictionaryInfo:
    """A dictionary's language pair and size (what listings show, without reading the entries)."""

    source_lang: str
    target_lang: str
    entry_count: int

    def info(self) -> dict:
        """DeepL's dictionary description."""
        return {"source_lang": self.source_lang, "target_lang": self.target_lang, "entry_count": self.entry_count}


@dataclass(frozen=True)
class GlossaryInfo:
    """A stored glossary: its id, name, creation time (DeepL's format) and dictionaries."""

    glossary_id: str
    name: str
    creation_time: str
    dictionaries: tuple[DictionaryInfo, ...]

    def v3(self) -> dict:
        """The glossary as ``/v3/glossaries`` describes it."""
        return {"glossary_id": self.glossary_id, "name": self.name, "creation_time": self.creation_time,
                "dictionaries": [d.info() for d in self.dictionaries]}

    def v2(self) -> dict:
        """The glossary as ``/v2/glossaries`` describes it (one dictionary; none counts as EN→ZH, empty)."""
        source, target = (self.dictionaries[0].source_lang, self.dictionaries[0].target_lang) \
            if self.dictionaries else PAIR
        return {"glossary_id": self.glossary_id, "name": self.name, "ready": True, "source_lang": source,
                "target_lang": target, "creation_time": self.creation_time,
                "entry_count": sum(d.entry_count for d in self.dictionaries)}


def language_pair(source: object, target: object) -> tuple[str, str]:
    """The stored pair for a dictionary's ``source_lang`` and ``target_lang``.

    Raises:
        HTTPError: 400 for a missing code or a pair other than EN→ZH.
    """
    for name, value in (("source_lang", source), ("target_lang", target)):
        if not isinstance(value, str) or not value.strip():
            raise HTTPError(400, f"missing field {name!r} (a glossary dictionary here is EN to ZH)")
    if source.strip().lower() not in _SOURCE_CODES or target.strip().lower() not in _TARGET_CODES:
        raise HTTPError(400, f"glossaries from {source.upper()} to {target.upper()} are not supported: this server "
                             "translates English into Chinese, so a dictionary must be EN to ZH")
    return PAIR


def parse_entries(text: object, entries_format: object = "tsv", pair: tuple[str, str] = PAIR,
                  where: str = "entries") -> tuple[tuple[str, str], ...]:
    """A dictionary's entries from DeepL's TSV or CSV text.

    Blank lines are skipped and terms are trimmed. Each line needs a source and a target
    term without control characters, of at most 1024 UTF-8 bytes; a source may appear once.

    Raises:
        HTTPError: 400 naming the line of the first bad entry, or the bad format.
    """
    fmt = (entries_format or "tsv").strip().lower() if isinstance(entries_format, str) else entries_format
    if fmt not in _FORMATS:
        raise HTTPError(400, f"entries_format {entries_format!r} must be tsv or csv")
    if not isinstance(text, str):
        raise HTTPError(400, f"field {where!r} must be a string of {fmt.upper()} lines")
    text = text.lstrip("\ufeff")
    rows = _tsv_rows(text) if fmt == "tsv" else _csv_rows(text, where)
    entries: dict[str, str] = {}
    lines: dict[str, int] = {}
    for line, row in rows:
        if len(row) == 1 and not row[0].strip():
            continue
        bad = f"{where} line {line}"
        if fmt == "tsv" and len(row) != 2:
            raise HTTPError(400, f"{bad}: expected 'source<TAB>target' (two terms split by one tab), "
                                 f"found {len(row)} column{'s' if len(row) != 1 else ''}")
        if fmt == "csv" and len(row) not in (2, 4):
            raise HTTPError(400, f"{bad}: expected 'source,target' or 'source,target,source_lang,target_lang', "
                                 f"found {len(row)} column{'s' if len(row) != 1 else ''}")
        if len(row) == 4 and (row[2].strip().lower(), row[3].strip().lower()) != pair:
            raise HTTPError(400, f"{bad}: languages {row[2].strip()!r} to {row[3].strip()!r} differ from the "
                                 f"dictionary's {pair[0].upper()} to {pair[1].upper()}")
        source, target = row[0].strip(), row[1].strip()
        for side, term in (("source", source), ("target", target)):
            _check_term(term, side, bad)
        if source in entries:
            raise HTTPError(400, f"{bad}: source term {source!r} is already on line {lines[source]}; keep one")
        entries[source] = target
        lines[source] = line
        if len(entries) > MAX_ENTRIES:
            raise HTTPError(400, f"{bad}: a dictionary may hold at most {MAX_ENTRIES} entries")
    if not entries:
        raise HTTPError(400, f"{where} holds no entries; give one 'source{'<TAB>' if fmt == 'tsv' else ','}target' "
                             "a line")
    return tuple(entries.items())


def _tsv_rows(text: str):
    for number, line in enumerate(text.split("\n"), 1):
        yield number, line.rstrip("\r").split("\t")


def _csv_rows(text: str, where: str):
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    line = 1
    try:
        for row in reader:
            yield line, row or [""]
            line = reader.line_num + 1
    except csv.Error as exc:
        raise HTTPError(400, f"{where} line {line}: malformed CSV ({exc})") from None


def _check_term(term: str, side: str, where: str) -> None:
    if not term:
        raise HTTPError(400, f"{where}: the {side} term is empty")
    if any(ord(c) < 32 or 127 <= ord(c) <= 159 or c in "\u2028\u2029" for c in term):
        raise HTTPError(400, f"{where}: the {side} term {term[:40]!r} holds a control character")
    if len(term.encode("utf-8")) > MAX_TERM_BYTES:
        raise HTTPError(400, f"{where}: the {side} term is over {MAX_TERM_BYTES} UTF-8 bytes")


def check_name(name: object) -> str:
    """A glossary's name, checked.

    Raises:
        HTTPError: 400 for a missing, empty or too long name.
    """
    if not isinstance(name, str) or not name.strip():
        raise HTTPError(400, "missing field 'name': a glossary needs a name")
    if len(name.encode("utf-8")) > MAX_TERM_BYTES or any(ord(c) < 32 for c in name):
        raise HTTPError(400, f"the glossary name must be one line of at most {MAX_TERM_BYTES} UTF-8 bytes")
    return name


def digest(entries: tuple[tuple[str, str], ...]) -> str:
    """A short digest of a dictionary's entries (a document job redoes its files when it changes)."""
    return hashlib.sha256(json.dumps(entries, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


class GlossaryStore:
    """Glossaries in SQLite, by owner; safe to use from every request thread."""

    def __init__(self, state_dir: Path | None, shared: bool = False):
        """Args:
            state_dir: The daemon's state folder (the file is created there with the first
                glossary); ``None``: glossaries cannot be created (503) and none exist.
            shared: Every owner sees every glossary (a server without keys: one account).
        """
        self.path = Path(state_dir) / FILE_NAME if state_dir is not None else None
        self.shared = shared
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._compiled: OrderedDict[str, Glossary] = OrderedDict()

    # -- the connection ----------------------------------------------------------------------
    def _connect(self, create: bool) -> sqlite3.Connection | None:
        """The open database (called with the lock held); ``None`` if it does not exist and
        ``create`` is false."""
        if self._db is not None:
            return self._db
        if self.path is None:
            if create:
                raise HTTPError(503, "this server keeps no glossaries: start it with --state-dir DIR")
            return None
        if not create and not self.path.exists():
            return None
        db = None
        try:
            durable.make_dirs(self.path.parent)
            db = sqlitedb.connect(self.path)  # WAL, synchronous=NORMAL, writers wait
            db.executescript("""
                CREATE TABLE IF NOT EXISTS glossaries (
                    id TEXT PRIMARY KEY, owner TEXT NOT NULL, name TEXT NOT NULL, created TEXT NOT NULL);
                CREATE INDEX IF NOT EXISTS glossaries_by_owner ON glossaries (owner, created);
                CREATE TABLE IF NOT EXISTS dictionaries (
                    glossary TEXT NOT NULL, source_lang TEXT NOT NULL, target_lang TEXT NOT NULL,
                    entries TEXT NOT NULL, entry_count INTEGER NOT NULL,
                    PRIMARY KEY (glossary, source_lang, target_lang));
            """)
        except (OSError, sqlite3.Error) as exc:
            if db is not None:
                db.close()
            logger.error("cannot open the glossary store %s: %s", self.path, exc)
            raise HTTPError(503, f"the glossary store cannot be opened ({exc}); see the server log") from None
        self._db = db
        return db

    def _run(self, create: bool, work):
        """Run ``work(db)`` in one transaction under the lock; ``work(None)`` when there is no store yet."""
        with self._lock:
            db = self._connect(create)
            if db is None:
                return work(None)
            try:
                db.execute("BEGIN IMMEDIATE")
                try:
                    result = work(db)
                except BaseException:
                    db.execute("ROLLBACK")
                    raise
                db.execute("COMMIT")
                return result
            except sqlite3.Error as exc:
                logger.error("the glossary store %s failed: %s", self.path, exc)
                raise HTTPError(503, f"the glossary store failed ({exc}); see the server log") from None

    def _owner(self, owner: str) -> str:
        if self.shared:
            return ""
        return hashlib.sha256(owner.encode("utf-8")).hexdigest()

    # -- reading -----------------------------------------------------------------------------
    def _load(self, db: sqlite3.Connection | None, owner: str, glossary_id: str) -> GlossaryInfo:
        row = None
        if db is not None and isinstance(glossary_id, str):
            row = db.execute("SELECT id, name, created FROM glossaries WHERE id = ? AND owner = ?",
                             (glossary_id, self._owner(owner))).fetchone()
        if row is None:
            raise HTTPError(404, f"glossary {str(glossary_id)[:64]!r} not found")
        return self._info(db, row)

    @staticmethod
    def _info(db: sqlite3.Connection, row) -> GlossaryInfo:
        dictionaries = tuple(DictionaryInfo(*found) for found in db.execute(
            "SELECT source_lang, target_lang, entry_count FROM dictionaries WHERE glossary = ? "
            "ORDER BY source_lang, target_lang", (row[0],)))
        return GlossaryInfo(row[0], row[1], row[2], dictionaries)

    @staticmethod
    def _entries(db: sqlite3.Connection, glossary_id: str, pair: tuple[str, str]) -> Dictionary | None:
        found = db.execute("SELECT entries FROM dictionaries WHERE glossary = ? AND source_lang = ? AND "
                           "target_lang = ?", (glossary_id, *pair)).fetchone()
        if found is None:
            return None
        return Dictionary(*pair, tuple(tuple(entry) for entry in json.loads(found[0])))

    def list(self, owner: str) -> list[GlossaryInfo]:
        """The owner's glossaries, oldest first."""
        def work(db):
            if db is None:
                return []
            rows = db.execute("SELECT id, name, created FROM glossaries WHERE owner = ? ORDER BY created, id",
                              (self._owner(owner),)).fetchall()
            return [self._info(db, row) for row in rows]
        return self._run(False, work)

    def get(self, owner: str, glossary_id: str) -> GlossaryInfo:
        """One of the owner's glossaries.

        Raises:
            HTTPError: 404 for an unknown id or another owner's glossary.
        """
        return self._run(False, lambda db: self._load(db, owner, glossary_id))

    def dictionary(self, owner: str, glossary_id: str, pair: tuple[str, str]) -> Dictionary:
        """One dictionary of the owner's glossary.

        Raises:
            HTTPError: 404 for an unknown glossary, or one without that pair.
        """
        def work(db):
            self._load(db, owner, glossary_id)
            found = self._entries(db, glossary_id, pair)
            if found is None:
                raise HTTPError(404, f"glossary {glossary_id!r} has no {pair[0].upper()} to {pair[1].upper()} "
                                     "dictionary")
            return found
        return self._run(False, work)

    def lookup(self, owner: str, glossary_id: str) -> tuple[Glossary, str]:
        """The owner's glossary as our glossary engine applies it, and a digest of its entries.

        Raises:
            HTTPError: 404 for an unknown id or another owner's glossary; 400 for one
                without an EN→ZH dictionary.
        """
        dictionary = self._run(False, lambda db: (self._load(db, owner, glossary_id),
                                                  self._entries(db, glossary_id, PAIR))[1])
        if dictionary is None:
            raise HTTPError(400, f"glossary {glossary_id!r} has no EN to ZH dictionary; add one "
                                 "(PUT /v3/glossaries/ID/dictionaries) or use another glossary")
        key = digest(dictionary.entries)
        with self._lock:
            glossary = self._compiled.get(key)
            if glossary is not None:
                self._compiled.move_to_end(key)
                return glossary, key
        glossary = Glossary(tuple(Entry(source, target, False, line)
                                  for line, (source, target) in enumerate(dictionary.entries, 1)))
        with self._lock:
            self._compiled[key] = glossary
            while len(self._compiled) > 32:
                self._compiled.popitem(last=False)
        return glossary, key

    def merged(self, owner: str, glossary_ids: list[str]) -> Glossary:
        """The glossaries a translation names (DeepL's ``glossary_ids``: up to five), as one;
        where two give a term, the first named wins.

        Raises:
            HTTPError: 400 for more than five; as :meth:`lookup` for each.
        """
        if len(glossary_ids) > 5:
            raise HTTPError(400, f"{len(glossary_ids)} glossaries named; the limit is 5")
        found = [self.lookup(owner, glossary_id)[0] for glossary_id in dict.fromkeys(glossary_ids)]
        if len(found) == 1:
            return found[0]
        entries: dict[str, Entry] = {}
        for glossary in found:
            for entry in glossary.entries:
                entries.setdefault(entry.source, entry)
        return Glossary(tuple(entries.values()))

    # -- writing -----------------------------------------------------------------------------
    def create(self, owner: str, name: str, dictionaries: list[Dictionary]) -> GlossaryInfo:
        """Store a new glossary for the owner.

        Raises:
            HTTPError: 400 past :data:`MAX_GLOSSARIES`; 503 without a state folder.
        """
        now = time.time()
        created = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        glossary_id = str(uuid.uuid4())
        who = self._owner(owner)

        def work(db):
            (count,) = db.execute("SELECT COUNT(*) FROM glossaries WHERE owner = ?", (who,)).fetchone()
            if count >= MAX_GLOSSARIES:
                raise HTTPError(400, f"too many glossaries: the limit is {MAX_GLOSSARIES}; delete some first")
            db.execute("INSERT INTO glossaries (id, owner, name, created) VALUES (?, ?, ?, ?)",
                       (glossary_id, who, name, created))
            for d in dictionaries:
                self._put(db, glossary_id, d)
            return self._load(db, owner, glossary_id)
        return self._run(True, work)

    @staticmethod
    def _put(db: sqlite3.Connection, glossary_id: str, d: Dictionary) -> None:
        db.execute("INSERT OR REPLACE INTO dictionaries (glossary, source_lang, target_lang, entries, entry_count) "
                   "VALUES (?, ?, ?, ?, ?)", (glossary_id, d.source_lang, d.target_lang,
                                              json.dumps(d.entries, ensure_ascii=False), len(d.entries)))

    def update(self, owner: str, glossary_id: str, name: str | None, dictionaries: list[Dictionary]) -> GlossaryInfo:
        """DeepL's PATCH: rename, and merge each dictionary's entries into the stored one
        (a given source term's target replaces the old one; a new pair is added)."""
        def work(db):
            self._load(db, owner, glossary_id)
            if name is not None:
                db.execute("UPDATE glossaries SET name = ? WHERE id = ?", (name, glossary_id))
            for d in dictionaries:
                old = self._entries(db, glossary_id, (d.source_lang, d.target_lang))
                merged = dict(old.entries) if old else {}
                merged.update(d.entries)
                if len(merged) > MAX_ENTRIES:
                    raise HTTPError(400, f"a dictionary may hold at most {MAX_ENTRIES} entries")
                self._put(db, glossary_id, Dictionary(d.source_lang, d.target_lang, tuple(merged.items())))
            return self._load(db, owner, glossary_id)
        return self._run(False, work)

    def replace(self, owner: str, glossary_id: str, dictionary: Dictionary) -> Dictionary:
        """DeepL's PUT of a dictionary: its entries replace the stored ones (or it is added)."""
        def work(db):
            self._load(db, owner, glossary_id)
            self._put(db, glossary_id, dictionary)
            return dictionary
        return self._run(False, work)

    def delete_dictionary(self, owner: str, glossary_id: str, pair: tuple[str, str]) -> None:
        """Remove one dictionary (404 if the glossary has none for ``pair``)."""
        def work(db):
            self._load(db, owner, glossary_id)
            gone = db.execute("DELETE FROM dictionaries WHERE glossary = ? AND source_lang = ? AND target_lang = ?",
                              (glossary_id, *pair)).rowcount
            if not gone:
                raise HTTPError(404, f"glossary {glossary_id!r} has no {pair[0].upper()} to {pair[1].upper()} "
                                     "dictionary")
        self._run(False, work)

    def delete(self, owner: str, glossary_id: str) -> None:
        """Remove a glossary and its dictionaries (404 if it is not the owner's)."""
        def work(db):
            self._load(db, owner, glossary_id)
            db.execute("DELETE FROM dictionaries WHERE glossary = ?", (glossary_id,))
            db.execute("DELETE FROM glossaries WHERE id = ?", (glossary_id,))
        self._run(False, work)

    def close(self) -> None:
        """Close the database (the next use opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
