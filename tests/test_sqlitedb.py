"""core.sqlitedb: the translation memory, a job's journal and the glossary store all run in WAL
mode with synchronous=NORMAL and a busy timeout; where WAL is refused, a rollback journal
with every commit fsynced, and one warning."""

from __future__ import annotations

import logging
import sqlite3

import pytest

from edge_translator.core import sqlitedb
from edge_translator.core.cache import CachedTranslation, CacheKey
from edge_translator.core.memory import TranslationMemory
from edge_translator.daemon.glossaries import GlossaryStore
from edge_translator.documents.journal import Journal

NORMAL, FULL = 1, 2


def _settings(db: sqlite3.Connection) -> tuple:
    return tuple(db.execute(f"PRAGMA {name}").fetchone()[0] for name in ("journal_mode", "synchronous", "busy_timeout"))


def _key(sentence: str) -> CacheKey:
    return CacheKey("m1", sentence, "zh-Hans", 1, 256, True)


def test_every_sqlite_file_is_opened_the_same_way(tmp_path):
    with TranslationMemory(tmp_path / "memory.sqlite") as memory:
        assert _settings(memory._db()) == ("wal", NORMAL, 30_000)
    journal = Journal(tmp_path / "job" / ".edge-translator-job.sqlite")
    assert _settings(journal._db) == ("wal", NORMAL, 30_000)
    journal.close()
    store = GlossaryStore(tmp_path / "state")
    with store._lock:
        assert _settings(store._connect(create=True)) == ("wal", NORMAL, 30_000)
    assert _settings(sqlitedb.connect(tmp_path / "other.sqlite", timeout=2.5)) == ("wal", NORMAL, 2_500)


def _without_wal(monkeypatch):
    """Open every file through SQLite's dot-file locking, which cannot hold WAL (as some
    network and FUSE file systems cannot)."""
    real = sqlite3.connect

    def connect(path, **kwargs):
        return real(f"file:{path}?vfs=unix-dotfile", uri=True, **kwargs)
    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(sqlitedb, "_warned", set())


def test_where_wal_is_refused_the_memory_works_with_a_full_sync_journal_and_says_so_once(tmp_path, monkeypatch,
                                                                                        caplog):
    _without_wal(monkeypatch)
    path = tmp_path / "memory.sqlite"
    with caplog.at_level(logging.WARNING, logger="edge_translator.core.sqlitedb"):
        with TranslationMemory(path) as memory:
            assert _settings(memory._db()) == ("delete", FULL, 30_000)
            memory.put(_key("I like tea."), CachedTranslation("我喜欢茶。", (5, 6), "eos", -0.5))
        with TranslationMemory(path) as memory:
            assert memory.get(_key("I like tea.")).text == "我喜欢茶。"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "cannot hold SQLite's WAL mode" in warnings[0] and str(path) in warnings[0]
    assert "\n" not in warnings[0]
    monkeypatch.undo()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()


def test_a_file_that_is_not_a_database_is_refused_at_once(tmp_path):
    bad = tmp_path / "memory.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        sqlitedb.connect(bad)
