"""A full disk, for real: a small tmpfs that fills up under a document job, a corpus job, the
translation memory, the server's uploads and results, and ``models add``. Each gives one
line naming the file and the disk (exit 9, or a 507), leaves no partial file, keeps its
journal, state or memory usable, and finishes the rest once space is freed."""

from __future__ import annotations

import csv
import json
import re
import shutil
import sqlite3
from pathlib import Path
from xml.sax.saxutils import escape

import pytest

from .conftest import FIXTURES, ROOT, run_cli
from .smalldisk import PAGE, SmallDisk, mounted

MODEL = str(FIXTURES / "tiny-int8")
EXIT_NO_SPACE = 9
SENTENCES = [line.split("\t")[3] for line in
             (ROOT / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv").read_text("utf-8").splitlines()]


@pytest.fixture
def disk(tmp_path) -> SmallDisk:
    """A 2 MB tmpfs of the test's own, unmounted after it."""
    with mounted(tmp_path / "disk") as small:
        yield small


def pages(size: int) -> int:
    return -(-size // PAGE)


def one_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1, f"not one line: {lines}"
    return lines[0]


def no_space_line(disk: SmallDisk, writing: str) -> str:
    """The pattern of the one line a command prints when ``writing`` did not fit."""
    return (rf"edge-translator: error: no space left on {re.escape(str(disk.path))} \(\d+(\.\d)? [KM]?B free\) "
            rf"writing {writing}; free some space and run the same command again")


def leftovers(folder: Path) -> list[str]:
    """Temporary files (``.NAME.PID.tmp``, ``.NAME.PID.edge-tmp``) anywhere under ``folder``."""
    return sorted(str(p) for p in folder.rglob(".*") if p.is_file() and p.name.endswith(("tmp",)))


def integrity(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return db.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        db.close()


def outputs(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*")) if p.is_file() and not p.name.startswith(".")}


def whole(data: bytes, paragraphs: int) -> bool:
    """Whether a translated text file is complete: every paragraph there and translated, its
    last line ended. (The tiny model's words may change with the company a sentence is
    batched in, so a file is compared by its shape, not its bytes, across runs.)"""
    text = data.decode("utf-8")
    parts = text.rstrip("\n").split("\n\n")
    return text.endswith("\n") and len(parts) == paragraphs and all(any("\u4e00" <= c <= "\u9fff" for c in p)
                                                                     for p in parts)


# -- docs --------------------------------------------------------------------------------------
def _documents(folder: Path, count: int, lines: int = 400) -> None:
    """``count`` text files of the same ``lines`` sentences: outputs of one size, several pages."""
    folder.mkdir(parents=True)
    text = "\n\n".join(SENTENCES[:lines]) + "\n"
    for i in range(count):
        (folder / f"d{i}.txt").write_text(text, "utf-8")


def test_docs_stops_when_an_output_does_not_fit_and_a_rerun_finishes_the_rest(tmp_path, disk):
    source = tmp_path / "in"
    _documents(source, 6, lines=800)
    reference = run_cli("docs", str(source / "d0.txt"), "-o", str(tmp_path / "ref"), "--model", MODEL, "--no-tm",
                        "--quiet")
    assert reference.returncode == 0, reference.stderr.decode()
    size = pages(len((tmp_path / "ref" / "d0.zh-Hans.txt").read_bytes()))  # within a page of every run's
    assert size >= 8
    disk.fill(leave=(2 * size + size // 2) * PAGE)  # room for two outputs and half a third
    out = disk.path / "out"
    args = ("docs", str(source), "-o", str(out), "--model", MODEL, "--no-tm", "--jobs-dir", str(tmp_path / "jobs"))

    full = run_cli(*args, "--quiet")
    assert full.returncode == EXIT_NO_SPACE, full.stderr.decode()
    assert re.fullmatch(no_space_line(disk, re.escape(str(out / "d2.zh-Hans.txt"))) + ": finished files are kept",
                        one_line(full.stderr))
    written = outputs(out)
    assert sorted(written) == ["d0.zh-Hans.txt", "d1.zh-Hans.txt"] and all(whole(d, 800) for d in written.values())
    assert leftovers(disk.path) == []

    disk.make_room()
    again = run_cli(*args, "--json")
    assert again.returncode == 0, again.stderr.decode()
    statuses = [f["status"] for f in json.loads(again.stdout)["files"]]
    assert statuses == ["up to date"] * 2 + ["done"] * 4
    finished = outputs(out)
    assert sorted(finished) == [f"d{i}.zh-Hans.txt" for i in range(6)] and all(whole(d, 800) for d in finished.values())
    assert {name: finished[name] for name in written} == written  # the two kept as they were


@pytest.mark.parametrize("leave", [12, 40], ids=["cannot-open", "fills-mid-job"])
def test_docs_with_its_journal_on_the_full_disk_stops_and_the_journal_stays_usable(tmp_path, disk, leave):
    source = tmp_path / "in"
    _documents(source, 3, lines=60)
    disk.fill(leave=leave * PAGE)  # 12 pages: its -shm (8) and little more; 40: it fills mid-job
    out = disk.path / "out"
    journal = out / ".edge-translator-job.sqlite"
    args = ("docs", str(source), "-o", str(out), "--model", MODEL, "--no-tm")

    full = run_cli(*args, "--quiet")
    assert full.returncode == EXIT_NO_SPACE, full.stderr.decode()
    assert re.fullmatch(no_space_line(disk, re.escape(str(journal))) + ": finished files are kept",
                        one_line(full.stderr))
    assert all(whole(data, 60) for data in outputs(out).values())  # whole outputs, or none
    assert leftovers(disk.path) == []

    disk.make_room()
    assert integrity(journal) == "ok"
    again = run_cli(*args, "--quiet")
    assert again.returncode == 0, again.stderr.decode()
    done = outputs(out)
    assert sorted(done) == [f"d{i}.zh-Hans.txt" for i in range(3)] and all(whole(d, 60) for d in done.values())


# -- corpus ------------------------------------------------------------------------------------
def test_corpus_stops_when_a_block_does_not_fit_and_a_rerun_resumes(tmp_path, disk):
    rows = 600
    source = tmp_path / "corpus.csv"
    with open(source, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows([("id", "text"), *((i, SENTENCES[i]) for i in range(rows))])
    common = ("--model", MODEL, "--no-tm", "--block-rows", "30")
    disk.fill(leave=8 * PAGE)  # the state and a few blocks of twenty
    out = disk.path / "out.csv"
    state = disk.path / ".out.csv.edge-corpus"

    full = run_cli("corpus", str(source), str(out), *common, "--quiet")
    assert full.returncode == EXIT_NO_SPACE, full.stderr.decode()
    assert re.fullmatch(no_space_line(disk, re.escape(str(state)) + r"/[0-9a-f]{16}/\d{6}\.json")
                        + ": finished files are kept", one_line(full.stderr))
    assert not out.exists() and leftovers(disk.path) == []
    kept = sorted(state.rglob("*.json"))
    assert 1 < len(kept) < rows // 30

    disk.make_room()
    again = run_cli("corpus", str(source), str(out), *common, "--json")
    assert again.returncode == 0, again.stderr.decode()
    summary = json.loads(again.stdout)
    assert summary["files"][0]["status"] == "done"
    assert summary["rows"] == rows - 30 * (len(kept) - 1)  # the committed blocks were kept (one is state.json)
    with open(out, encoding="utf-8", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert [(r["id"], r["text"]) for r in written] == [(str(i), SENTENCES[i]) for i in range(rows)]
    assert all(r["translation"] and r["translation_model"] for r in written)  # every block there, in order


# -- the translation memory --------------------------------------------------------------------
@pytest.mark.parametrize("leave", [0, 16], ids=["cannot-open", "fills-mid-job"])
def test_a_memory_on_the_full_disk_is_a_warning_and_the_translation_is_delivered(tmp_path, disk, leave):
    tm = disk.path / "tm.sqlite"
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "a.txt").write_text("\n\n".join(SENTENCES[:10]) + "\n", "utf-8")
    (second / "b.txt").write_text("\n\n".join(SENTENCES[100:160]) + "\n", "utf-8")
    stored = run_cli("docs", str(first), "-o", str(tmp_path / "out1"), "--model", MODEL, "--tm", str(tm), "--quiet")
    assert stored.returncode == 0, stored.stderr.decode()
    before = _entries(tm)
    assert before > 0
    disk.fill(leave=leave * PAGE)

    full = run_cli("docs", str(second), "-o", str(tmp_path / "out2"), "--model", MODEL, "--tm", str(tm), "--quiet")
    assert full.returncode == 0, full.stderr.decode()
    assert whole(outputs(tmp_path / "out2")["b.zh-Hans.txt"], 60)  # every sentence translated
    warning = one_line(full.stderr)
    assert re.fullmatch(rf"WARNING edge_translator\.core\.memory: .*no space left on {re.escape(str(disk.path))} "
                        rf"\(.* free\) writing {re.escape(str(tm))}; free some space; until then translations are "
                        "delivered without being stored in the memory", warning), warning

    disk.make_room()
    assert integrity(tm) == "ok"
    assert _entries(tm) < before + 60
    again = run_cli("docs", str(second), "-o", str(tmp_path / "out3"), "--model", MODEL, "--tm", str(tm), "--quiet")
    assert again.returncode == 0 and again.stderr == b"", again.stderr.decode()
    assert _entries(tm) >= before + 60  # it stores again
    assert integrity(tm) == "ok"


def _entries(tm: Path) -> int:
    db = sqlite3.connect(tm)
    try:
        return db.execute("SELECT count(*) FROM entries").fetchone()[0]
    finally:
        db.close()


def test_tm_import_onto_the_full_disk_is_one_line_and_stores_nothing(tmp_path, disk):
    tm = disk.path / "tm.sqlite"
    tmx = tmp_path / "pairs.tmx"
    units = "".join(f'<tu><tuv xml:lang="en"><seg>{escape(s)}</seg></tuv>'
                    f'<tuv xml:lang="zh-Hans"><seg>句子{i}</seg></tuv></tu>' for i, s in enumerate(SENTENCES[:2000]))
    tmx.write_text(f'<?xml version="1.0"?><tmx version="1.4"><header srclang="en"/><body>{units}</body></tmx>',
                   "utf-8")
    assert run_cli("tm", "stats", "--tm", str(tm)).returncode == 0  # the memory exists, empty
    disk.fill(leave=12 * PAGE)

    full = run_cli("tm", "import", str(tmx), "--tm", str(tm))
    assert full.returncode == EXIT_NO_SPACE, full.stderr.decode()
    assert re.fullmatch(no_space_line(disk, re.escape(str(tm))) + ": nothing of it was stored", one_line(full.stderr))
    disk.make_room()
    assert integrity(tm) == "ok" and _entries(tm) == 0
    assert run_cli("tm", "import", str(tmx), "--tm", str(tm)).returncode == 0
    assert _entries(tm) > 1000


# -- models add --------------------------------------------------------------------------------
@pytest.fixture
def big_disk(tmp_path) -> SmallDisk:
    """A tmpfs that holds one fixture model and a little more."""
    with mounted(tmp_path / "models-disk", size="1m") as small:
        yield small


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_models_add_onto_the_full_disk_leaves_no_half_model_and_the_old_one_intact(tmp_path, big_disk):
    from edge_translator.core.locations import ENV_MODELS_DIR

    models = big_disk.path / "models"
    env = {ENV_MODELS_DIR: str(models)}
    assert run_cli("models", "add", MODEL, "--name", "tiny", "--quiet", env=env).returncode == 0
    installed = _files(models / "tiny")
    big_disk.fill(leave=8 * PAGE)

    for extra, name in ((("--force",), "tiny"), ((), "other")):
        full = run_cli("models", "add", MODEL, "--name", name, "--quiet", *extra, env=env)
        assert full.returncode == EXIT_NO_SPACE, full.stderr.decode()
        assert re.fullmatch(no_space_line(big_disk, re.escape(str(models / name)))
                            + ": nothing was installed, and a model already installed under that name is kept",
                            one_line(full.stderr))
        assert sorted(p.name for p in models.iterdir()) == ["tiny"]  # no staging folder, no half model
        assert _files(models / "tiny") == installed
    assert run_cli("models", "verify", "tiny", env=env).returncode == 0

    big_disk.make_room()
    shutil.rmtree(models / "tiny")
    again = run_cli("models", "add", MODEL, "--name", "other", "--quiet", env=env)
    assert again.returncode == 0, again.stderr.decode()
    assert run_cli("models", "verify", "other", env=env).returncode == 0


# -- the server --------------------------------------------------------------------------------
def _upload(client, data: bytes, name: str = "notes.txt"):
    from .test_daemon_documents import multipart

    body, content_type = multipart({"target": "zh-Hans"}, {"file": (name, data)})
    status, _, answer = client.call("POST", "/v1/documents", body, content_type=content_type)
    return status, json.loads(answer)


def test_the_server_answers_507_for_an_upload_or_a_result_that_does_not_fit_and_stays_healthy(disk):
    pytest.importorskip("waitress")  # the serve extra; CI installs it
    from urllib.parse import urlsplit

    from .test_daemon import Client
    from .test_daemon_clients import Served
    from .waiting import wait_until

    files = disk.path / "files"
    daemon = Served("--model", MODEL, "--state-dir", str(disk.path / "state"), "--files-dir", str(files))
    try:
        url = urlsplit(daemon.url)
        client = Client(url.hostname, url.port)
        text = ("\n\n".join(SENTENCES[:300]) + "\n").encode()
        disk.fill(leave=2 * PAGE)

        status, answer = _upload(client, text)  # the upload itself does not fit
        assert status == 507 and list(answer) == ["error"] and "disk is full" in answer["error"], answer
        assert "\n" not in answer["error"]
        assert [p for p in files.iterdir()] == [] and leftovers(disk.path) == []
        assert client.call("GET", "/health")[0] == 200
        status, translated = client.json("POST", "/translate", {"q": "I like tea.", "source": "en", "target": "zh"})
        assert status == 200 and translated["translatedText"]

        disk.make_room()  # room for the upload and its state, not for its journal and translation
        disk.fill(leave=(pages(len(text)) + 4) * PAGE)
        status, doc = _upload(client, text)
        assert status == 202, doc

        def finished() -> bool:
            nonlocal doc
            doc = client.json("GET", f"/v1/documents/{doc['id']}")[1]
            return doc["status"] in ("done", "error")

        wait_until(finished, 60, "the document to fail")
        assert doc["status"] == "error" and "disk is full" in doc["error"]
        status, _, body = client.call("GET", f"/v1/documents/{doc['id']}/result")
        assert status == 507 and list(json.loads(body)) == ["error"], body
        logged = rf"no space left on {re.escape(str(disk.path))} \(.* free\) writing {re.escape(str(files))}/"
        assert any(re.search(logged, line) for line in daemon.log), "".join(daemon.log)
        assert client.call("GET", "/health")[0] == 200
        assert leftovers(disk.path) == []

        disk.make_room()
        status, doc = _upload(client, text)
        assert status == 202, doc
        wait_until(finished, 60, "the document to be translated")
        assert doc["status"] == "done", doc
        status, _, body = client.call("GET", f"/v1/documents/{doc['id']}/result")
        assert status == 200 and whole(body, 300)
    finally:
        assert daemon.stop() == 0
    assert not any("Traceback" in line for line in daemon.log), "".join(daemon.log)
