"""Several processes write one translation memory at once: three ``edge-translator docs --tm``,
a process storing pairs through the Python API the desktop app uses, and ``serve --tm``
answering requests. Every pair each wrote is in the file afterwards, the file passes
``PRAGMA integrity_check`` and no process met "database is locked".

The writers start together: each one loads what it needs, says it is ready (a file) and
waits for a go file; the desktop process and the server's clients write before the go and
go on until every ``docs`` has exited, so every write of a ``docs`` happens while they
write too. The test waits for exits, never for a fixed time.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from .conftest import ROOT
from .test_daemon_clients import Served
from .waiting import wait_until

DOCS = 3
#: Sentences of each ``docs`` writer; EDGE_TRANSLATOR_WRITERS_SENTENCES=10000 is the issue's goal
#: (docs/durability.md has its figures).
SENTENCES = 120
#: A CLI run that waits at the barrier once its modules are imported.
CLI_AT_BARRIER = """
import os, sys, time
ready, go, *argv = sys.argv[1:]
from edge_translator.cli import main
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
sys.exit(main(argv))
"""
#: The desktop app's way: a TranslationMemory under a JobCache, a translator, and pairs added.
#: It writes before the barrier and until told to stop, so its writes span every other's.
DESKTOP_AT_BARRIER = """
import os, sys, time
ready, go, stop, memory_path, model = sys.argv[1:]
from edge_translator.core.memory import TranslationMemory
from edge_translator.core.translator import Translator
from edge_translator.documents.journal import JobCache
memory = TranslationMemory(memory_path)
translator = Translator.load(model, threads=1, cache=JobCache(memory))
def write(i):
    translator.translate(f"The desktop window translated sentence number {i} about a quiet river.")
    memory.add(f"The desktop user stored pair number {i}.", f"桌面用户保存了第{i}对。", "zh-Hans")
write(0)
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.001)
count = 1
while not os.path.exists(stop):
    write(count)
    count += 1
write(count)
translator.close()
memory.close()
print(count + 1)
"""


def _sentences(who: str, count: int) -> list[str]:
    return [f"The {who} wrote sentence number {i} about a small green garden." for i in range(count)]


def _sources(path: Path) -> set[str]:
    db = sqlite3.connect(path)
    try:
        return {source for (source,) in db.execute("SELECT source FROM entries")}
    finally:
        db.close()


def _translate(url: str, text: str) -> dict:
    request = urllib.request.Request(f"{url}/v1/translate", json.dumps({"text": text}).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


def _env() -> dict:
    env = dict(os.environ)
    env.pop("EDGE_TRANSLATOR_MODEL", None)
    return env


def _span(db: sqlite3.Connection, prefix: str) -> tuple[float, float]:
    return db.execute("SELECT min(created), max(created) FROM entries WHERE source LIKE ?", (prefix + "%",)).fetchone()


def test_docs_the_desktop_and_serve_write_one_memory_at_once(tmp_path, tiny_int8):
    pytest.importorskip("waitress")  # the serve extra; CI installs it
    memory = tmp_path / "shared" / "memory.sqlite"
    go, stop = tmp_path / "go", tmp_path / "stop"
    sentences = int(os.environ.get("EDGE_TRANSLATOR_WRITERS_SENTENCES", SENTENCES))
    limit = 300 + sentences // 10  # seconds for a writer
    texts = {d: _sentences(f"document {d}", sentences) for d in range(DOCS)}
    serve = Served("--model", str(tiny_int8), "--tm", str(memory))
    served = [_translate(serve.url, "The server answered a request before the others began.")["translations"]]
    desktop = subprocess.Popen(
        [sys.executable, "-c", DESKTOP_AT_BARRIER, str(tmp_path / "ready-desktop"), str(go), str(stop), str(memory),
         str(tiny_int8)], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    docs: dict[int, subprocess.Popen] = {}
    for d in range(DOCS):
        folder = tmp_path / f"in{d}"
        folder.mkdir()
        half = sentences // 2
        (folder / "a.txt").write_text("\n\n".join(texts[d][:half]) + "\n", "utf-8")
        (folder / "b.md").write_text("\n\n".join(texts[d][half:]) + "\n", "utf-8")
        docs[d] = subprocess.Popen(
            [sys.executable, "-c", CLI_AT_BARRIER, str(tmp_path / f"ready-docs-{d}"), str(go), "docs", str(folder),
             "-o", str(tmp_path / f"out{d}"), "--model", str(tiny_int8), "--threads", "1", "--tm", str(memory),
             "--quiet"], cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sent: list[str] = []
    lock = threading.Lock()

    def client():  # requests from the go until the stop, and one after it
        while True:
            last = stop.exists()
            with lock:
                text = f"The server translated request number {len(sent)} about a small boat."
                sent.append(text)
            served.append(_translate(serve.url, text)["translations"])
            if last:
                return
    clients = [threading.Thread(target=client) for _ in range(2)]
    results = {}
    try:
        wait_until(lambda: all((tmp_path / f"ready-docs-{d}").exists() for d in range(DOCS))
                   and (tmp_path / "ready-desktop").exists(), timeout=120, what="every writer at the barrier")
        go.touch()
        for thread in clients:
            thread.start()
        for d, process in docs.items():
            results[f"docs {d}"] = process.communicate(timeout=limit) + (process.returncode,)
        stop.touch()
        results["desktop"] = desktop.communicate(timeout=limit) + (desktop.returncode,)
        for thread in clients:
            thread.join(limit)
    finally:
        stop.touch()
        for process in [desktop, *docs.values()]:
            if process.poll() is None:
                process.kill()
        code = serve.stop(120)
    for name, (out, err, returncode) in results.items():
        assert returncode == 0, f"{name} failed ({returncode}): {err[-2000:]}"
        assert "locked" not in err, f"{name}: {err[-2000:]}"
    assert code == 0 and "locked" not in "".join(serve.log), "".join(serve.log)[-2000:]
    assert len(served) == len(sent) + 1 and not any(t.is_alive() for t in clients)

    stored = _sources(memory)
    for d in range(DOCS):
        assert set(texts[d]) <= stored, f"document {d}'s pairs are missing"
    count = int(results["desktop"][0].split()[-1])
    assert {f"The desktop window translated sentence number {i} about a quiet river." for i in range(count)} <= stored
    assert {f"The desktop user stored pair number {i}." for i in range(count)} <= stored
    assert set(sent) <= stored and "The server answered a request before the others began." in stored
    db = sqlite3.connect(memory)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        # They wrote at the same time: the desktop and the server wrote before the barrier and
        # after every docs process ended, so each docs process's writes fall inside theirs.
        around = [_span(db, "The desktop"), _span(db, "The server")]
        for d in range(DOCS):
            first, last = _span(db, f"The document {d} ")
            assert all(a < first and last < b for a, b in around), f"document {d} wrote outside the others"
    finally:
        db.close()
    print(f"\none memory, written at once: {DOCS} docs of {sentences} sentences each, the desktop {count} "
          f"translations and {count} added pairs, the server {len(sent) + 1} requests; {len(stored)} entries, "
          "every one present, integrity ok, no 'locked'")
