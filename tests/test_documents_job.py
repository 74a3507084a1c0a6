"""The document job through the real command: formats, resume after kill -9, memory, errors.

Everything runs `edge-translator docs` in a subprocess with the embedded demo model, as a
user would; the translation memory lives in a temporary data directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT, run_cli
from .waiting import wait_until

CJK = range(0x4E00, 0xA000)
SENTENCES = [line.rstrip("\n").split("\t")[3]
             for line in (ROOT / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv").read_text("utf-8").splitlines()]


def cjk(text: str) -> int:
    return sum(1 for ch in text if ord(ch) in CJK)


@pytest.fixture
def env(tmp_path) -> dict:
    """A private data directory, so the translation memory is the test's own."""
    return {"XDG_DATA_HOME": str(tmp_path / "data")}


def docs(*args: str, env: dict, cwd: Path | None = None):
    return run_cli("docs", *args, env=env, cwd=cwd)


def write_mixed(folder: Path) -> None:
    """One file of every format, each holding some demo-model prose."""
    from docx import Document

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "notes.txt").write_text("I like tea.\n\n    Where is the station?\nThe cat is sleeping.\n", "utf-8")
    (folder / "guide.md").write_text("# My family\n\nI have two brothers and a [sister](https://example.com/s).\n\n"
                                     "- Run `make test` now.\n- The weather is nice today.\n\n"
                                     "```\nprint('do not translate')\n```\n", "utf-8")
    (folder / "film.srt").write_text("1\n00:00:01,000 --> 00:00:02,500\nI don't know\n\n"
                                     "2\n00:00:02,600 --> 00:00:04,000\nwhere he lives.\n\n"
                                     "3\n00:00:05,000 --> 00:00:06,000\n<i>Good morning.</i>\n", "utf-8")
    (folder / "page.html").write_text('<html><body><p>It is raining.</p><img src="a.png" alt="A red car">'
                                      "<code>do_not_touch()</code><p>My <b>cat</b> is\n  sleeping.</p>"
                                      "</body></html>\n", "utf-8")
    (folder / "catalog.csv").write_text('sku,description,price\nAB-1,"A small, red bag.",12.50\n'
                                        'AB-2,My father is busy.,3\n', "utf-8")
    doc = Document()
    paragraph = doc.add_paragraph("I want to ")
    paragraph.add_run("drink").bold = True
    paragraph.add_run(" some water.")
    table = doc.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "The door is open."
    table.cell(0, 1).text = "I am tired."
    doc.sections[0].header.paragraphs[0].text = "Thank you very much."
    doc.save(folder / "letter.docx")


def test_every_format_is_translated_with_its_structure(tmp_path, env):
    src = tmp_path / "in"
    write_mixed(src)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    result = docs(str(src), "--columns", "description", "--json", env=env)
    assert result.returncode == 0, result.stderr.decode()
    summary = json.loads(result.stdout)
    assert summary["done"] == 6 and summary["failed"] == 0, summary
    assert {p.name: p.read_bytes() for p in src.iterdir() if ".zh-Hans." not in p.name
            and not p.name.startswith(".")} == before, "an input was modified"

    txt = (src / "notes.zh-Hans.txt").read_text("utf-8")
    assert txt.count("\n") == 4 and "\n\n    " in txt and cjk(txt) > 5 and "station" not in txt

    md = (src / "guide.zh-Hans.md").read_text("utf-8")
    assert md.startswith("# ") and "](https://example.com/s)" in md and "`make test`" in md
    assert "```\nprint('do not translate')\n```\n" in md and "- " in md and cjk(md) > 5

    srt = (src / "film.zh-Hans.srt").read_text("utf-8")
    assert "00:00:01,000 --> 00:00:02,500" in srt and "00:00:05,000 --> 00:00:06,000" in srt
    cues = srt.strip().split("\n\n")
    assert len(cues) == 3 and all(cjk(c.split("\n", 2)[2]) for c in cues), srt
    assert cues[2].split("\n")[2].startswith("<i>") and cues[2].endswith("</i>")

    html = (src / "page.zh-Hans.html").read_text("utf-8")
    assert "<code>do_not_touch()</code>" in html and 'src="a.png"' in html and "raining" not in html
    assert cjk(html) > 3
    # a sentence across an inline element is translated whole, the element's tags around part of it
    inline = html[html.index("</code><p>") + 10:html.rindex("</p>")]
    whole = run_cli("translate", stdin="My cat is sleeping.".encode()).stdout.decode().strip()
    assert inline.count("<b>") == inline.count("</b>") == 1 and inline.index("<b>") < inline.index("</b>")
    assert inline.replace("<b>", "").replace("</b>", "") == whole and cjk(whole) > 1

    rows = (src / "catalog.zh-Hans.csv").read_text("utf-8").split("\n")
    assert rows[0] == "sku,description,price" and rows[1].startswith('AB-1,"') and rows[1].endswith('",12.50')
    assert rows[2].startswith("AB-2,") and rows[2].endswith(",3") and cjk(rows[2]) > 2

    from docx import Document

    doc = Document(src / "letter.zh-Hans.docx")
    runs = doc.paragraphs[0].runs
    assert cjk(doc.paragraphs[0].text) > 2 and any(r.bold for r in runs) and not all(r.bold for r in runs)
    assert cjk(doc.tables[0].cell(0, 0).text) and cjk(doc.tables[0].cell(0, 1).text)
    assert cjk(doc.sections[0].header.paragraphs[0].text)


def write_corpus(folder: Path, files: int, per_file: int, offset: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        part = SENTENCES[offset + i * per_file: offset + (i + 1) * per_file]
        kind = i % 3
        if kind == 0:
            text = "".join(" ".join(part[j:j + 3]) + "\n\n" for j in range(0, len(part), 3))
            (folder / f"doc{i:02d}.txt").write_text(text, "utf-8")
        elif kind == 1:
            cues = "".join(f"{n + 1}\n00:{n // 60:02d}:{n % 60:02d},000 --> 00:{n // 60:02d}:{n % 60:02d},900\n{s}\n\n"
                           for n, s in enumerate(part))
            (folder / f"doc{i:02d}.srt").write_text(cues, "utf-8")
        else:
            body = "".join(f"<p>{s.replace('&', '&amp;').replace('<', '&lt;')}</p>\n" for s in part)
            (folder / f"doc{i:02d}.html").write_text(f"<html><body>\n{body}</body></html>\n", "utf-8")


def outputs(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith(".")}


def journal_segments(path: Path) -> int:
    """How many segments the job journal at ``path`` has committed (0 while it is not there
    yet); read while a job writes it, as SQLite allows."""
    if not path.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
            return db.execute("SELECT COUNT(*) FROM segments").fetchone()[0]
    except sqlite3.OperationalError:  # created, its tables not yet
        return 0


def test_killed_five_times_the_job_finishes_complete_and_decodes_nothing_twice(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=24, per_file=100)
    (tmp_path / "empty").mkdir()
    assert docs(str(tmp_path / "empty"), "--no-tm", "--quiet", env=env).returncode == 0
    clean = docs(str(src), "-o", str(tmp_path / "clean"), "--no-tm", "--quiet", env=env)
    assert clean.returncode == 0, clean.stderr.decode()
    expected = outputs(tmp_path / "clean")
    assert len(expected) == 24
    total = journal_segments(tmp_path / "clean" / ".edge-translator-job.sqlite")

    out = tmp_path / "out"
    journal = out / ".edge-translator-job.sqlite"
    rng = random.Random(1234)
    full_env = dict(os.environ, **env)
    full_env.pop("EDGE_TRANSLATOR_MODEL", None)
    kills = 0
    for _ in range(5):
        process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "docs", str(src), "-o", str(out),
                                    "--no-tm", "--quiet"], cwd=ROOT, env=full_env,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # Somewhere in the next 2-15% of the job's segments, so five kills land before the end;
        # counted in committed segments, a slow machine is killed at the same points as a fast one.
        target = journal_segments(journal) + max(1, round(rng.uniform(0.02, 0.15) * total))
        wait_until(lambda: process.poll() is not None or journal_segments(journal) >= target, timeout=300,
                   what=f"{target} segments in the journal")
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            kills += 1
        process.wait(timeout=60)
        process.stderr.close()
        # At every moment an output is either absent or complete.
        for name, data in outputs(out).items():
            assert data == expected[name], f"{name} exists but is not complete after kill -9"
    assert kills >= 4, f"only {kills} of 5 runs were killed before they finished"
    final = docs(str(src), "-o", str(out), "--no-tm", "--json", env=env)
    assert final.returncode == 0, final.stderr.decode()
    assert outputs(out) == expected
    assert not [p for p in out.rglob("*.edge-tmp")], "a temporary output was left behind"
    with sqlite3.connect(out / ".edge-translator-job.sqlite") as db:
        counts = [n for (n,) in db.execute("SELECT decoded FROM sentences")]
    assert counts and max(counts) == 1, "a sentence was decoded by two runs"
    summary = json.loads(final.stdout)
    assert summary["done"] + summary["up_to_date"] == 24 and summary["decoded"] > 0


def test_rerun_is_up_to_date_and_a_changed_input_is_redone(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=3, per_file=4)
    assert docs(str(src), "--no-tm", "--quiet", env=env).returncode == 0
    again = json.loads(docs(str(src), "--no-tm", "--json", env=env).stdout)
    assert again["up_to_date"] == 3 and again["decoded"] == 0
    changed = src / "doc00.txt"
    changed.write_text(changed.read_text("utf-8") + "I want to go home.\n", "utf-8")
    third = json.loads(docs(str(src), "--no-tm", "--json", env=env).stdout)
    assert third["done"] == 1 and third["up_to_date"] == 2 and third["decoded"] == 1
    assert cjk((src / "doc00.zh-Hans.txt").read_text("utf-8").split("\n\n")[-1])


def test_existing_output_is_not_overwritten_without_force(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=1, per_file=3)
    mine = src / "doc00.zh-Hans.txt"
    mine.write_text("my own translation\n", "utf-8")
    result = docs(str(src / "doc00.txt"), "--no-tm", env=env)
    assert result.returncode == 0 and mine.read_text("utf-8") == "my own translation\n"
    assert b"exists; pass --force" in result.stdout + result.stderr
    forced = docs(str(src / "doc00.txt"), "--no-tm", "--force", "--quiet", env=env)
    assert forced.returncode == 0 and cjk(mine.read_text("utf-8"))


def test_bad_files_fail_alone_with_their_name_and_line(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=1, per_file=3)
    (src / "latin1.txt").write_bytes("Hello.\nCaf\xe9 au lait.\n".encode("latin-1"))
    (src / "broken.docx").write_bytes(b"PK\x03\x04 not really a zip")
    (src / "bad.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nHello.\n\n2\nnot a timing\nBye.\n", "utf-8")
    (src / "picture.png").write_bytes(b"\x89PNG")
    result = docs(str(src), "--no-tm", "--json", env=env)
    assert result.returncode == 7, result.stderr.decode()
    summary = json.loads(result.stdout)
    by_name = {Path(f["input"]).name: f for f in summary["files"]}
    assert by_name["doc00.txt"]["status"] == "done"
    assert by_name["latin1.txt"]["status"] == "failed" and "line 2" in by_name["latin1.txt"]["message"]
    assert by_name["broken.docx"]["status"] == "failed" and "docx" in by_name["broken.docx"]["message"].lower()
    assert by_name["bad.srt"]["status"] == "failed" and "line 6" in by_name["bad.srt"]["message"]
    assert "picture.png" not in by_name  # in a folder, unsupported files are passed over
    assert not (src / "latin1.zh-Hans.txt").exists() and not (src / "bad.zh-Hans.srt").exists()
    assert b"Traceback" not in result.stderr
    named = docs(str(src / "picture.png"), "--no-tm", env=env)
    assert named.returncode == 0 and b"unsupported file type '.png'" in named.stdout + named.stderr


def test_encodings_and_line_endings_come_back_as_they_were(tmp_path, env):
    src = tmp_path / "in"
    src.mkdir()
    text = "I like tea.\r\n\r\nWhere is the station?\r\n"
    (src / "bom.txt").write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    (src / "wide.txt").write_bytes(b"\xff\xfe" + text.encode("utf-16-le"))
    assert docs(str(src), "--no-tm", "--quiet", env=env).returncode == 0
    bom = (src / "bom.zh-Hans.txt").read_bytes()
    wide = (src / "wide.zh-Hans.txt").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbf") and bom.count(b"\r\n") == 3
    assert wide.startswith(b"\xff\xfe") and wide[2:].decode("utf-16-le") == bom[3:].decode("utf-8")


def test_output_name_collisions_are_never_silent(tmp_path, env):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.txt").write_text("I like tea.\n", "utf-8")
    result = docs(str(tmp_path / "a" / "same.txt"), str(tmp_path / "b" / "same.txt"), "-o", str(tmp_path / "out"),
                  "--no-tm", "--json", env=env)
    assert result.returncode == 7
    files = json.loads(result.stdout)["files"]
    assert [f["status"] for f in files] == ["done", "failed"] and "would overwrite" in files[1]["message"]


def test_identical_sentences_across_files_are_decoded_once_and_the_memory_is_reused(tmp_path, env):
    first, second = tmp_path / "one", tmp_path / "two"
    write_corpus(first, files=4, per_file=10)
    for i in range(4):  # the same sentences again, in other files and other formats
        (tmp_path / "dup").mkdir(exist_ok=True)
    write_corpus(tmp_path / "dup", files=4, per_file=10)
    for path in (tmp_path / "dup").iterdir():
        path.rename(first / f"copy-{path.name}")
    run = json.loads(docs(str(first), "--json", env=env).stdout)
    distinct = {" ".join(s.split()) for s in SENTENCES[:40]}
    assert run["done"] == 8 and run["decoded"] <= len(distinct) + 2, run["decoded"]
    write_corpus(second, files=2, per_file=10)
    reused = json.loads(docs(str(second), "--json", env=env).stdout)
    assert reused["done"] == 2 and reused["decoded"] == 0 and reused["reused"] > 0
    fresh = json.loads(docs(str(second), "--no-tm", "--force", "--json", "--jobs-dir", str(tmp_path / "j"),
                            env=env).stdout)
    assert fresh["decoded"] > 0


def test_memory_commands_and_tmx_round_trip(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=1, per_file=6)
    tm = tmp_path / "memory.sqlite"
    assert docs(str(src), "--tm", str(tm), "--quiet", env=env).returncode == 0
    stats = run_cli("tm", "stats", "--tm", str(tm), env=env)
    assert stats.returncode == 0 and b"entries" in stats.stdout
    exported = tmp_path / "memory.tmx"
    assert run_cli("tm", "export", str(exported), "--tm", str(tm), env=env).returncode == 0
    import xml.etree.ElementTree as ET

    units = ET.parse(exported).getroot().findall("./body/tu")
    assert len(units) >= 6
    assert run_cli("tm", "clear", "--tm", str(tm), env=env).returncode == 0
    assert run_cli("tm", "import", str(exported), "--tm", str(tm), env=env).returncode == 0
    again = json.loads(docs(str(src), "--tm", str(tm), "--force", "--json", "--jobs-dir", str(tmp_path / "j"),
                            env=env).stdout)
    assert again["decoded"] == 0, "imported entries were not used"
    bad = tmp_path / "bad.tmx"
    bad.write_text("<tmx><body><tu>", "utf-8")
    result = run_cli("tm", "import", str(bad), "--tm", str(tm), env=env)
    assert result.returncode == 4 and b"not well-formed TMX" in result.stderr and b"Traceback" not in result.stderr


def test_quiet_prints_nothing_and_a_missing_input_is_one_line(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=1, per_file=2)
    quiet = docs(str(src), "--no-tm", "--quiet", env=env)
    assert quiet.returncode == 0 and quiet.stdout == b"" and quiet.stderr == b""
    missing = docs(str(tmp_path / "nope"), env=env)
    assert missing.returncode == 4 and missing.stderr.count(b"\n") == 1 and b"does not exist" in missing.stderr


def test_glossary_terms_are_kept_or_reported_never_lost_in_silence(tmp_path, env):
    """On the demo model: every glossary term is in the output exactly, or its line is warned about."""
    src = tmp_path / "in"
    src.mkdir()
    rng = random.Random(5)
    terms = ["Acme", "router", "https://example.com/help", "XR-2040"]
    wanted = {"Acme": "Acme", "router": "路由器", "https://example.com/help": "https://example.com/help",
              "XR-2040": "XR-2040"}
    lines = []
    for sentence in [s for s in SENTENCES if len(s.split()) >= 5][:40]:
        words = sentence.split(" ")
        term = rng.choice(terms)
        words.insert(rng.randrange(1, len(words)), term)
        lines.append((term, " ".join(words)))
    (src / "terms.txt").write_text("".join(f"{text}\n\n" for _, text in lines), "utf-8")
    glossary = tmp_path / "glossary.tsv"
    glossary.write_text("# brands stay, terms are fixed\nAcme\nrouter\t路由器\nre:\\b[A-Z]{2}-\\d{4}\\b\n", "utf-8")
    result = docs(str(src), "--glossary", str(glossary), "--no-tm", "--json", env=env)
    assert result.returncode == 0, result.stderr.decode()
    summary = json.loads(result.stdout)
    warned = {int(w.split("line ", 1)[1].split(":")[0]) for w in summary["files"][0]["warnings"]}
    out = (src / "terms.zh-Hans.txt").read_text("utf-8").split("\n\n")
    kept = 0
    for number, ((term, _), translated) in enumerate(zip(lines, out)):
        line = 2 * number + 1
        if wanted[term] in translated:
            kept += 1
        else:
            assert line in warned, f"line {line}: {term!r} lost in silence: {translated!r}"
    assert kept >= len(lines) // 3, f"only {kept} of {len(lines)} terms survived"
    assert all(cjk(t) for t in out[:len(lines)])


def test_ctrl_c_stops_with_130_and_says_how_to_resume(tmp_path, env):
    src = tmp_path / "in"
    write_corpus(src, files=24, per_file=100)
    full_env = dict(os.environ, **env)
    full_env.pop("EDGE_TRANSLATOR_MODEL", None)
    # A shell's background job ignores SIGINT, and so would the job it starts (Python then sets
    # no KeyboardInterrupt handler): the job gets Ctrl+C's default, as in a terminal.
    process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "docs", str(src), "--no-tm", "--quiet"],
                               cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Interrupt the job once it translates: its first segments are in its journal.
    journal = src / ".edge-translator-job.sqlite"
    wait_until(lambda: process.poll() is not None or journal_segments(journal) > 0, timeout=300,
               what="the job's first segments")
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr.decode()
    assert b"run the same command again to resume" in stderr and b"Traceback" not in stderr
    resumed = json.loads(docs(str(src), "--no-tm", "--json", env=env).stdout)
    assert resumed["failed"] == 0 and resumed["done"] + resumed["up_to_date"] == 24


class FirstAdvance:
    """A progress report that sets ``advanced`` when the first sentences are done."""

    def __init__(self):
        import threading

        self.advanced = threading.Event()

    def start(self, files, sentences): pass
    def advance(self, sentences, plan): self.advanced.set()
    def finished(self, plan): pass
    def message(self, text): pass


def run_until_first_advance(job):
    """Start ``job.run`` on a thread; return once its first sentences are done.

    Returns:
        ``(worker, result)``: the thread, and the dict its summary lands in (key ``"summary"``).
    """
    import threading

    watch, result = FirstAdvance(), {}
    worker = threading.Thread(target=lambda: result.setdefault("summary", job.run(watch)))
    worker.start()
    assert watch.advanced.wait(60)
    return worker, result


def test_cancel_from_another_thread_keeps_only_whole_segments(tmp_path):
    """What a GUI does: cancel a running job; a rerun finishes it exactly as a clean run would."""
    from edge_translator import Translator
    from edge_translator.documents.job import DocumentJob, JobOptions
    from edge_translator.documents.journal import JobCache, Journal

    src = tmp_path / "in"
    write_corpus(src, files=24, per_file=60)
    cache = JobCache(None)
    with Translator.load(cache=cache) as translator:
        clean = DocumentJob(translator, cache, [src], JobOptions(output_dir=tmp_path / "clean")).run()
        assert clean.count("done") == 24
        job = DocumentJob(translator, cache, [src], JobOptions(output_dir=tmp_path / "out", window_chars=1500))
        worker, result = run_until_first_advance(job)
        job.cancel()
        worker.join(60)
        assert not worker.is_alive()
        summary = result["summary"]
        assert summary.count("cancelled") > 0 and summary.count("failed") == 0
        journal = Journal(tmp_path / "out" / ".edge-translator-job.sqlite")
        for plan in summary.files:
            if plan.status == "cancelled":
                assert all(t.text.strip() for t in journal.translations(plan.key)), "a partial segment was kept"
        journal.close()
        rerun = DocumentJob(translator, cache, [src],
                            JobOptions(output_dir=tmp_path / "out")).run()
        assert rerun.count("done") + rerun.count("up to date") == 24
    assert outputs(tmp_path / "out") == outputs(tmp_path / "clean")


def test_bench_docs_smoke_writes_its_section(tmp_path):
    result = run_cli("bench-docs", "--mb", "0.1", "--files", "8", "--sentences", "40", "--rounds", "1",
                     "--slides", "20", "--cells", "400", "--pages", "10", "--no-placeholders", "--out", str(tmp_path / "docs"), "--work", str(tmp_path / "work"))
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    report = (tmp_path / "docs" / "benchmarks.md").read_text("utf-8")
    assert "## Documents" in report and "peak RSS" in report and "8 files" in report
    data = json.loads((tmp_path / "docs" / "benchmarks.json").read_text("utf-8"))["documents"]
    assert data["folder"]["failed"] == 0 and data["folder"]["peak_rss_mb"] > 50 and data["small_vs_large"]["ratio"]
    assert [r["file"] for r in data["large"]] == ["2-slide deck", "20-slide deck", "40-cell sheet", "400-cell sheet",
                                                 "1-page PDF", "10-page PDF"]
    assert all(r["peak_rss_mb"] > 50 and r["sentences"] > 0 for r in data["large"])
    assert "| 20-slide deck |" in report and "| 400-cell sheet |" in report


def test_closing_the_model_under_a_running_job_writes_nothing_partial(tmp_path):
    """A GUI switching models closes the translator while a job runs: the files not finished
    are reported, never written with blank translations, and a rerun completes them."""
    from edge_translator import Translator
    from edge_translator.documents.job import DocumentJob, JobOptions
    from edge_translator.documents.journal import JobCache

    src = tmp_path / "in"
    write_corpus(src, files=24, per_file=60)
    cache = JobCache(None)
    with Translator.load(cache=cache) as translator:
        DocumentJob(translator, cache, [src], JobOptions(output_dir=tmp_path / "clean")).run()
    expected = outputs(tmp_path / "clean")
    translator = Translator.load(cache=cache)
    job = DocumentJob(translator, cache, [src], JobOptions(output_dir=tmp_path / "out", window_chars=1500))
    worker, result = run_until_first_advance(job)
    translator.close(cancel=True)
    worker.join(60)
    summary = result["summary"]
    assert summary.count("cancelled") > 0, [(f.status, f.message) for f in summary.files]
    assert "model was closed" in next(
        f.message for f in summary.files if f.status == "cancelled")
    for name, data in outputs(tmp_path / "out").items():
        assert data == expected[name], f"{name} was written from partial results"
    with Translator.load(cache=cache) as again:
        DocumentJob(again, cache, [src], JobOptions(output_dir=tmp_path / "out")).run()
    assert outputs(tmp_path / "out") == expected


def test_a_submission_that_ends_early_is_never_taken_for_a_translation(tmp_path):
    """The engine closed under a window already submitted: its results stop short."""
    from types import SimpleNamespace

    from edge_translator.documents.job import DocumentJob, JobOptions
    from edge_translator.documents.journal import JobCache

    class Closed:
        def __iter__(self):
            return iter(())

        def cancel(self):
            pass

    translator = SimpleNamespace(model_id="fake", bundle=SimpleNamespace(default_target="zh-Hans"),
                                 submit=lambda *args, **kwargs: Closed())
    src = tmp_path / "in"
    write_corpus(src, files=2, per_file=5)
    summary = DocumentJob(translator, JobCache(None), [src], JobOptions(output_dir=tmp_path / "out")).run()
    assert [f.status for f in summary.files] == ["cancelled", "cancelled"]
    assert "model was closed" in summary.files[0].message
    assert outputs(tmp_path / "out") == {}
