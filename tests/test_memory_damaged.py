"""A translation memory file that is damaged, not ours, newer or locked.

Damaged (garbage, cut short, a page overwritten, damaged while in use): one warning, the file
set aside byte for byte under a ``.damaged-`` name with its WAL, a new memory started with
what could still be read, and every front end goes on. Not ours, newer or locked: one line,
and the file is left as it was.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading

import pytest

from edge_translator.core import memoryfile, sqlitedb
from edge_translator.core.cache import CachedTranslation, CacheKey
from edge_translator.core.errors import InputError
from edge_translator.core.memory import TranslationMemory

from .conftest import ROOT, run_cli

ENTRIES = 2000


def key(i: int) -> CacheKey:
    return CacheKey("m1", f"Sentence number {i} of the memory, with some words to fill its page.", "zh-Hans", 1,
                    None, True)


def value(i: int) -> CachedTranslation:
    return CachedTranslation(f"记忆库的第{i}句。", (5, 6, i), "eos", -0.25)


def filled(path, count: int = ENTRIES):
    """A memory at ``path`` with ``count`` decoded entries, closed (its WAL checkpointed into it)."""
    with TranslationMemory(path) as memory:
        for i in range(count):
            memory.put(key(i), value(i))
    assert not os.path.exists(f"{path}-wal")
    return path


def overwrite_a_page(path, page: int) -> None:
    size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
    with open(path, "r+b") as f:
        f.seek(page * size)
        f.write(bytes(range(256)) * (size // 256))


def damage(kind: str, path) -> None:
    """Damage the memory at ``path`` the way ``kind`` says."""
    if kind == "garbage":
        path.write_bytes(b"this is not a database at all\n" * 300)
    elif kind == "cut-short":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2 + 1000])
    elif kind == "page-overwritten":
        overwrite_a_page(path, 5)
    elif kind == "header-zeroed":
        with open(path, "r+b") as f:
            f.write(bytes(100))
    else:
        raise AssertionError(kind)


def asides(folder):
    return sorted(p for p in folder.iterdir() if ".damaged-" in p.name)


@pytest.mark.parametrize("kind", ["garbage", "cut-short", "page-overwritten", "header-zeroed"])
def test_a_damaged_file_is_set_aside_with_one_warning_and_a_new_memory_works(tmp_path, kind, caplog):
    path = filled(tmp_path / "memory.sqlite")
    damage(kind, path)
    damaged_bytes = path.read_bytes()
    with caplog.at_level(logging.WARNING), TranslationMemory(path) as memory:
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "\n" not in warnings[0], warnings
        assert f"{path} is damaged" in warnings[0] and "set aside as memory.sqlite.damaged-" in warnings[0]
        assert memory.notice == warnings[0]
        memory.put(key(-1), value(-1))
        assert memory.get(key(-1)) == value(-1)
        recovered = memory.stats().entries - 1
    [aside] = asides(tmp_path)
    assert aside.read_bytes() == damaged_bytes, "the damaged file is kept as it was"
    assert f"{recovered} entries" in warnings[0]
    # what was recovered is exactly what the memory held, never a changed entry
    with TranslationMemory(path) as memory:
        for i in range(ENTRIES):
            assert memory.get(key(i)) in (None, value(i))
    if kind == "page-overwritten":  # one page lost, the rest read
        assert ENTRIES // 2 < recovered < ENTRIES
    if kind in ("garbage", "header-zeroed"):
        assert recovered == 0
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert db.execute("PRAGMA application_id").fetchone()[0] == memoryfile.APPLICATION_ID


def test_its_wal_goes_with_it_and_its_shared_memory_file_is_removed(tmp_path, caplog):
    path = tmp_path / "memory.sqlite"
    filled(path, 50)
    writer = TranslationMemory(path)  # leaves a WAL behind: entries not yet checkpointed
    writer.put(key(50), value(50))
    wal = (tmp_path / "memory.sqlite-wal").read_bytes()
    assert wal and (tmp_path / "memory.sqlite-shm").exists()
    damage("garbage", path)
    with caplog.at_level(logging.WARNING), TranslationMemory(path) as memory:
        assert memory.stats().entries == 0
    writer.close()
    [aside, aside_wal] = asides(tmp_path)
    assert aside_wal.name == aside.name + "-wal" and aside_wal.read_bytes() == wal
    assert not any(p.name.endswith("-shm") and ".damaged-" in p.name for p in tmp_path.iterdir())


def test_a_second_damaged_file_in_the_same_second_gets_its_own_name(tmp_path, caplog):
    path = tmp_path / "memory.sqlite"
    for _ in range(3):
        damage("garbage", path)
        TranslationMemory(path).close()
    assert len(asides(tmp_path)) == 3


def test_an_empty_file_and_a_memory_from_before_the_stamp_are_used_and_stamped(tmp_path, caplog):
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    old = tmp_path / "old.sqlite"
    with sqlite3.connect(old) as db:  # the schema as versions before the stamp wrote it
        db.execute("CREATE TABLE entries (source TEXT NOT NULL, target TEXT NOT NULL, model TEXT NOT NULL, "
                   "options TEXT NOT NULL, text TEXT NOT NULL, ids BLOB, stop TEXT NOT NULL, score REAL, "
                   "origin TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (source, target, model, options)) "
                   "WITHOUT ROWID")
        db.execute("INSERT INTO entries VALUES ('Hi.', 'zh-Hans', '', '', '你好。', NULL, 'memory', NULL, "
                   "'imported', 0)")
    with caplog.at_level(logging.WARNING):
        for path in (empty, old):
            with TranslationMemory(path) as memory:
                assert memory.notice is None
            with sqlite3.connect(path) as db:
                assert db.execute("PRAGMA application_id").fetchone()[0] == memoryfile.APPLICATION_ID
                assert db.execute("PRAGMA user_version").fetchone()[0] == memoryfile.FORMAT
    assert not caplog.records and not asides(tmp_path)
    with TranslationMemory(old) as memory:
        assert [(e.source, e.text) for e in memory.entries()] == [("Hi.", "你好。")]


def _other_program(path):
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE contacts (name TEXT, phone TEXT)")
        db.execute("INSERT INTO contacts VALUES ('Ada', '555')")


def _other_id(path):
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA application_id = 1196638018")  # another program's id, no tables yet


def _newer(path):
    filled(path, 10)
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {memoryfile.FORMAT + 1}")


@pytest.mark.parametrize("make, message", [
    (_other_program, "is another program's database, not a translation memory"),
    (_other_id, "is another program's database, not a translation memory"),
    (_newer, f"is a translation memory of a newer edge-translator (format {memoryfile.FORMAT + 1}"),
])
def test_a_file_that_is_not_ours_to_change_is_one_line_and_left_as_it_was(tmp_path, make, message):
    path = tmp_path / "memory.sqlite"
    make(path)
    before = path.read_bytes()
    with pytest.raises(InputError, match="pass another path with --tm") as error:
        TranslationMemory(path)
    assert message in str(error.value) and "\n" not in str(error.value)
    assert path.read_bytes() == before and not asides(tmp_path)
    doc = tmp_path / "note.txt"
    doc.write_text("The river is quiet.\n", encoding="utf-8")
    result = run_cli("docs", str(doc), "--tm", str(path))
    assert result.returncode == 4 and message.encode() in result.stderr, result.stderr
    assert len(result.stderr.decode().strip().splitlines()) == 1 and b"Traceback" not in result.stderr


def test_a_memory_locked_by_another_program_is_one_line_and_left_as_it_was(tmp_path, monkeypatch):
    path = filled(tmp_path / "memory.sqlite", 10)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=DELETE")  # so that an exclusive lock keeps readers out
    before = path.read_bytes()
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(sqlitedb, "BUSY_TIMEOUT", 0.2)
    try:
        with pytest.raises(InputError, match=r"is locked by another program for more than 0.2 s; close it"):
            TranslationMemory(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert path.read_bytes() == before and not asides(tmp_path)


def test_damage_while_in_use_is_one_warning_then_it_is_set_aside_at_the_next_opening(tmp_path, caplog):
    path = filled(tmp_path / "memory.sqlite")
    with caplog.at_level(logging.WARNING), TranslationMemory(path) as memory:
        assert memory.get(key(1)) == value(1)
        overwrite_a_page(path, 1)  # the root page of the entries table

        found = []

        def use():  # a thread of its own: a new connection, which reads the file afresh
            for i in range(20):  # none raises: a miss, a dropped pair
                found.append(memory.get(key(i)))
                memory.put(key(ENTRIES + i), value(i))
            found.append("done")
        worker = threading.Thread(target=use)
        worker.start()
        worker.join()
        assert found == [None] * 20 + ["done"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "became damaged while in use" in warnings[0], warnings
    caplog.clear()
    with caplog.at_level(logging.WARNING), TranslationMemory(path) as memory:
        assert memory.notice and "is damaged" in memory.notice
    assert len(asides(tmp_path)) == 1


def test_two_processes_opening_one_damaged_file_set_it_aside_once(tmp_path):
    path = filled(tmp_path / "memory.sqlite", 200)
    damage("garbage", path)
    opener = ("import sys\nfrom edge_translator.core.memory import TranslationMemory\n"
              "from tests.test_memory_damaged import key, value\n"
              "with TranslationMemory(sys.argv[1]) as memory:\n    memory.put(key(int(sys.argv[2])), value(1))\n")
    procs = [subprocess.Popen([sys.executable, "-c", opener, str(path), str(n)], cwd=ROOT,
                              stderr=subprocess.PIPE) for n in range(4)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errors
    assert len(asides(tmp_path)) == 1, asides(tmp_path)
    assert sum(b"is damaged" in e for e in errors) == 1, errors
    with TranslationMemory(path) as memory:
        assert memory.stats().entries == 4


def test_docs_and_translate_go_on_past_a_damaged_memory_with_one_warning(tmp_path, tiny_int8):
    path = filled(tmp_path / "memory.sqlite", 100)
    damage("cut-short", path)
    doc = tmp_path / "note.txt"
    doc.write_text("The river is quiet.\n\nThe lamp is red.\n", encoding="utf-8")
    result = run_cli("docs", str(doc), "--model", str(tiny_int8), "--tm", str(path))
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.decode().splitlines() if "damaged" in line]
    assert len(lines) == 1 and "set aside as memory.sqlite.damaged-" in lines[0]
    assert b"Traceback" not in result.stderr and (tmp_path / "note.zh-Hans.txt").exists()
    with TranslationMemory(path) as memory:  # the new memory took the job's sentences
        assert {e.source for e in memory.entries()} >= {"The river is quiet.", "The lamp is red."}


def test_the_daemon_serves_past_a_damaged_memory(tmp_path):
    from .test_daemon_clients import Served

    path = filled(tmp_path / "memory.sqlite", 100)
    damage("page-overwritten", path)
    daemon = Served("--tm", str(path))
    try:
        import urllib.parse
        import urllib.request

        data = urllib.parse.urlencode({"q": "Where is the station?", "source": "en", "target": "zh"}).encode()
        with urllib.request.urlopen(f"{daemon.url}/translate", data, timeout=60) as response:
            assert response.status == 200
    finally:
        assert daemon.stop() == 0
    assert sum("is damaged" in line for line in daemon.log) == 1, daemon.log
    assert len(asides(tmp_path)) == 1


def test_the_desktop_app_says_so_in_its_status_bar(tmp_path, monkeypatch):
    from edge_translator.gui.app import open_memory

    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    path = tmp_path / "edge-translator" / "memory.sqlite"
    path.parent.mkdir()
    filled(path, 10)
    damage("garbage", path)
    cache, note = open_memory()
    assert cache is not None and "is damaged" in note and "set aside" in note
    os.remove(path)
    _other_program(path)
    cache, note = open_memory()
    assert cache is None and "another program's database" in note
