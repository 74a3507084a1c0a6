"""The "Documents" section of ``docs/benchmarks.md``: `edge-translator docs` measured.

Two measurements, on the embedded demo model and the demo's own test sentences:

- **Many small files against one large file** holding the same sentences, run in one
  process on one loaded translator, alternating, each run with a fresh journal and no
  memory so that every sentence is decoded; medians of the rounds and their ratio.
- **A 10 MB folder of mixed documents** (txt, md, srt, html, csv, docx, pptx, xlsx) translated by
  the real command in a child process: its peak RSS, time and sentence counts. Its sentences
  repeat (they are drawn from the 2,824 test sentences), so most are reused from the
  journal: this run measures memory and the formats' cost, not decoding speed.
- **Large office files**, each alone in a child process, at two sizes a tenth apart (a
  30- and a 300-slide deck; a 5,000- and a 50,000-cell sheet, its strings shared as Excel
  writes them; a 50- and a 500-page PDF): time and peak RSS, so the growth with the file is seen.
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from ..core.engine import EngineOptions
from .machine import machine_info
from .report import ratio, render_documents_section, update_section

_TEST_SET = Path(__file__).resolve().parents[2] / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv"


def test_sentences(path: Path = _TEST_SET) -> list[str]:
    """The English side of the demo model's committed test split."""
    return [line.split("\t")[3] for line in path.read_text("utf-8").splitlines() if line.count("\t") >= 3]


def _paragraphs(sentences: list[str]) -> str:
    return "".join(" ".join(sentences[i:i + 3]) + "\n\n" for i in range(0, len(sentences), 3))


def write_layouts(work: Path, sentences: list[str], files: int) -> tuple[Path, Path]:
    """``one/`` with every sentence in one text file, ``many/`` with the same paragraphs
    spread over ``files`` files."""
    one, many = work / "one", work / "many"
    for folder in (one, many):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    paragraphs = [sentences[i:i + 3] for i in range(0, len(sentences), 3)]
    (one / "all.txt").write_text("".join(" ".join(p) + "\n\n" for p in paragraphs), "utf-8")
    share = -(-len(paragraphs) // files)
    for n in range(files):
        part = paragraphs[n * share:(n + 1) * share]
        if part:
            (many / f"file{n:04d}.txt").write_text("".join(" ".join(p) + "\n\n" for p in part), "utf-8")
    return one, many


def small_vs_large(model: str | None, work: Path, sentences: list[str], files: int, rounds: int,
                   threads: int | None) -> dict:
    """Throughput of ``many/`` and ``one/`` through one translator, alternating."""
    from ..core.translator import Translator
    from ..documents.job import DocumentJob, JobOptions
    from ..documents.journal import JobCache

    one, many = write_layouts(work, sentences, files)
    cache = JobCache(None)
    runs: dict[str, list[float]] = {"one": [], "many": []}
    with Translator.load(model, threads=threads, cache=cache, engine=EngineOptions()) as translator:
        for r in range(rounds):
            for name, folder in (("one", one), ("many", many)) if r % 2 == 0 else (("many", many), ("one", one)):
                out = work / f"out-{name}"
                shutil.rmtree(out, ignore_errors=True)
                job = DocumentJob(translator, cache, [folder], JobOptions(output_dir=out))
                started = time.perf_counter()
                summary = job.run()
                seconds = time.perf_counter() - started
                if summary.count("done") != len(list(folder.iterdir())):
                    raise RuntimeError(f"the {name} run did not translate every file: {summary.as_dict()}")
                runs[name].append(summary.sentences / seconds)
    one_rate, many_rate = statistics.median(runs["one"]), statistics.median(runs["many"])
    return {"sentences": len(sentences), "files": files, "rounds": rounds,
            "one_rate": round(one_rate, 1), "many_rate": round(many_rate, 1),
            "one_runs": [round(x, 1) for x in runs["one"]], "many_runs": [round(x, 1) for x in runs["many"]],
            "ratio": ratio(many_rate, one_rate)}


def write_mixed_folder(folder: Path, sentences: list[str], megabytes: float, seed: int = 7) -> dict:
    """A folder of about ``megabytes`` MB of mixed documents built from ``sentences``."""
    from docx import Document

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = random.Random(seed)
    kinds = ["txt", "md", "srt", "html", "csv", "docx", "pptx", "xlsx"]
    total, n = 0, 0
    while total < megabytes * 1e6:
        kind = kinds[n % len(kinds)]
        picked = [rng.choice(sentences) for _ in range(400)]
        path = folder / f"doc{n:04d}.{kind}"
        if kind == "txt":
            path.write_text(_paragraphs(picked), "utf-8")
        elif kind == "md":
            body = "".join(f"## {p[0]}\n\n- {p[1]}\n- {p[2]} [link](https://example.com/{i})\n\n"
                           for i, p in enumerate(zip(picked[::3], picked[1::3], picked[2::3])))
            path.write_text("# Manual\n\n" + body, "utf-8")
        elif kind == "srt":
            path.write_text("".join(f"{i + 1}\n00:{i // 60 % 60:02d}:{i % 60:02d},000 --> "
                                    f"00:{i // 60 % 60:02d}:{i % 60:02d},900\n{s}\n\n"
                                    for i, s in enumerate(picked)), "utf-8")
        elif kind == "html":
            body = "".join(f"<p>{s.replace('&', '&amp;').replace('<', '&lt;')}</p>\n" for s in picked)
            path.write_text(f"<html><body>\n{body}</body></html>\n", "utf-8")
        elif kind == "csv":
            rows = "".join(f'SKU-{i},"{s.replace(chr(34), chr(34) * 2)}",{i % 97}.99\n' for i, s in enumerate(picked))
            path.write_text("sku,text,price\n" + rows, "utf-8")
        elif kind == "pptx":
            write_deck(path, picked, len(picked) // 5)
        elif kind == "xlsx":
            write_sheet(path, picked, 4 * (len(picked) // 2 + 1))
        else:
            doc = Document()
            for s in picked:
                doc.add_paragraph(s)
            doc.save(path)
        total += path.stat().st_size
        n += 1
    return {"files": n, "bytes": total}


def write_deck(path: Path, sentences: list[str], slides: int) -> None:
    """A deck of ``slides`` slides: a title, three body paragraphs and a note each."""
    from pptx import Presentation

    deck = Presentation()
    layout = deck.slide_layouts[1]
    for i in range(slides):
        picked = [sentences[(5 * i + k) % len(sentences)] for k in range(5)]
        slide = deck.slides.add_slide(layout)
        slide.shapes.title.text = picked[0]
        body = slide.placeholders[1].text_frame
        body.text = picked[1]
        for text in picked[2:4]:
            body.add_paragraph().text = text
        slide.notes_slide.notes_text_frame.text = picked[4]
    deck.save(path)


def write_sheet(path: Path, sentences: list[str], cells: int) -> None:
    """A workbook of one sheet, ``cells`` cells in rows of four (an id, two texts, a price)
    under a header row (id, text, note, price), its texts in a shared string table as Excel
    and LibreOffice write it."""
    import zipfile
    from xml.sax.saxutils import escape

    ns = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    pkg = "http://schemas.openxmlformats.org/package/2006/relationships"
    ct = "application/vnd.openxmlformats-officedocument.spreadsheetml"
    index = {name: i for i, name in enumerate(("id", "text", "note", "price"))}
    rows = ['<row r="1">' + "".join(f'<c r="{c}1" t="s"><v>{i}</v></c>' for i, c in enumerate("ABCD")) + "</row>"]
    for r in range(2, cells // 4 + 1):
        texts = [sentences[(2 * r + k) % len(sentences)] for k in range(2)]
        refs = [index.setdefault(t, len(index)) for t in texts]
        rows.append(f'<row r="{r}"><c r="A{r}"><v>{r}</v></c><c r="B{r}" t="s"><v>{refs[0]}</v></c>'
                    f'<c r="C{r}" t="s"><v>{refs[1]}</v></c><c r="D{r}"><v>{r % 97}.99</v></c></row>')
    strings = "".join(f"<si><t>{escape(t)}</t></si>" for t in index)
    parts = {
        "[Content_Types].xml": f'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
                               f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
                               f'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
                               f'<Override PartName="/xl/workbook.xml" ContentType="{ct}.sheet.main+xml"/>'
                               f'<Override PartName="/xl/worksheets/sheet1.xml" ContentType="{ct}.worksheet+xml"/>'
                               f'<Override PartName="/xl/sharedStrings.xml" ContentType="{ct}.sharedStrings+xml"/>'
                               f'</Types>',
        "_rels/.rels": f'<Relationships xmlns="{pkg}"><Relationship Id="rId1" Type="{rel}/officeDocument" '
                       f'Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": f'<workbook xmlns="{ns}" xmlns:r="{rel}"><sheets><sheet name="Catalogue" sheetId="1" '
                           f'r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": f'<Relationships xmlns="{pkg}"><Relationship Id="rId1" Type="{rel}/worksheet" '
                                      f'Target="worksheets/sheet1.xml"/><Relationship Id="rId2" '
                                      f'Type="{rel}/sharedStrings" Target="sharedStrings.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": f'<worksheet xmlns="{ns}"><sheetData>{"".join(rows)}</sheetData></worksheet>',
        "xl/sharedStrings.xml": f'<sst xmlns="{ns}" count="{2 * len(rows) + 2}" uniqueCount="{len(index)}">{strings}</sst>',
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in parts.items():
            archive.writestr(name, '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n' + text)


def write_pdf(path: Path, sentences: list[str], pages: int) -> None:
    """A PDF of ``pages`` A4 pages: a running header, a title, two paragraphs and a page number each."""
    import textwrap

    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    sheet = canvas.Canvas(str(path), pagesize=A4)
    for number in range(1, pages + 1):
        picked = [sentences[(7 * number + k) % len(sentences)] for k in range(7)]
        sheet.setFont("Helvetica", 9)
        sheet.drawString(72, 800, "Edge translator benchmark report")
        sheet.drawString(290, 30, str(number))
        sheet.setFont("Helvetica-Bold", 15)
        sheet.drawString(72, 750, picked[0])
        sheet.setFont("Helvetica", 11)
        for top, part in ((700, picked[1:4]), (560, picked[4:7])):
            text = sheet.beginText(72, top)
            for line in textwrap.wrap(" ".join(part), 85):
                text.textLine(line)
            sheet.drawText(text)
        sheet.showPage()
    sheet.save()


def _docs_child(model: str | None, inputs: Path, out: Path, *extra: str) -> tuple[dict, float, float]:
    """Run `edge-translator docs` in a child: its JSON summary, seconds and peak RSS in MB
    (the child's own, from ``wait4``, whatever ran before it)."""
    import os
    import tempfile

    shutil.rmtree(out, ignore_errors=True)
    command = [sys.executable, "-m", "edge_translator.cli", "docs", str(inputs), "-o", str(out), "--no-tm",
               "--json", *extra]
    if model:
        command += ["--model", model]
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        started = time.perf_counter()
        child = subprocess.Popen(command, stdout=stdout, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        stdout.seek(0)
        stderr.seek(0)
        if child.returncode != 0:
            raise RuntimeError(f"the run on {inputs} failed ({child.returncode}): "
                               f"{stderr.read().decode(errors='replace').strip()[-500:]}")
        return json.loads(stdout.read()), seconds, usage.ru_maxrss / 1024


def large_files(model: str | None, work: Path, sentences: list[str], slides_max: int = 300,
                cells_max: int = 50_000, pages_max: int = 500) -> list[dict]:
    """Each large office file alone, at two sizes a tenth apart."""
    rows = []
    files = [(f"{n}-slide deck", f"deck-{n}.pptx", write_deck, n) for n in (slides_max // 10, slides_max)]
    files += [(f"{n:,}-cell sheet", f"sheet-{n}.xlsx", write_sheet, n) for n in (cells_max // 10, cells_max)]
    files += [(f"{n}-page PDF", f"report-{n}.pdf", write_pdf, n) for n in (pages_max // 10, pages_max)]
    for label, name, make, size in files:
        path = work / "large" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        make(path, sentences, size)
        summary, seconds, peak = _docs_child(model, path, work / "large-out")
        rows.append({"file": label, "megabytes": round(path.stat().st_size / 1e6, 2),
                     "sentences": summary["sentences"], "decoded": summary["decoded"],
                     "seconds": round(seconds, 1), "peak_rss_mb": round(peak, 1)})
    return rows


def big_folder(model: str | None, work: Path, sentences: list[str], megabytes: float) -> dict:
    """Translate a mixed folder with the real command; its peak RSS from the kernel."""
    folder = work / "mixed"
    made = write_mixed_folder(folder, sentences, megabytes)
    summary, seconds, peak = _docs_child(model, folder, work / "mixed-out", "--columns", "text")
    return {"files": made["files"], "megabytes": round(made["bytes"] / 1e6, 2), "seconds": round(seconds, 1),
            "peak_rss_mb": round(peak, 1), "sentences": summary["sentences"],
            "decoded": summary["decoded"], "reused": summary["reused"], "done": summary["done"],
            "failed": summary["failed"]}


def placeholders(model: str | None, threads: int | None) -> str:
    """How often the glossary's placeholders survive the model (see :mod:`.placeholders`)."""
    from ..core.translator import Translator
    from ..documents.glossary import STYLES
    from .placeholders import load_sentences, measure, report

    with Translator.load(model, threads=threads, cache=None) as translator:
        result = measure(translator, load_sentences(), STYLES)
    return "\n".join([
        "**Glossary placeholders** (each of 400 test sentences with one term of each kind inserted, masked by "
        "the glossary's two placeholder styles; a sentence counts when every placeholder came back; the job "
        "retries a damaged sentence with the other style, then keeps it with a warning):", "", "```",
        report(result), "```"])


def run(model: str | None, work: Path, out_dir: Path, megabytes: float, files: int, sentences_n: int,
        rounds: int, threads: int | None, command: str, with_placeholders: bool = True, slides: int = 300,
        cells: int = 50_000, pages: int = 500) -> dict:
    """Both measurements; the section is written into ``out_dir``'s benchmarks.md/.json."""
    work.mkdir(parents=True, exist_ok=True)
    sentences = test_sentences()
    data = {"command": command, "machine": machine_info(),
            "small_vs_large": small_vs_large(model, work, sentences[:sentences_n], files, rounds, threads),
            "large": large_files(model, work, sentences, slides, cells, pages),
            "folder": big_folder(model, work, sentences, megabytes),
            "placeholders": placeholders(model, threads) if with_placeholders else None}
    update_section(out_dir, "documents", data, "## Documents", render_documents_section(data))
    return data
