"""PDF: each text block redrawn as its translation in place; pages, images and drawings kept."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pikepdf
import pytest
from pdfminer.high_level import extract_text
from reportlab.lib.pagesizes import A4
from reportlab.pdfgen import canvas

from edge_translator.core.errors import InputError
from edge_translator.documents import pdf
from edge_translator.documents.base import FormatOptions, Segment

from .conftest import run_cli
from .docfiles import fails_alone, write_with
from .test_doc_slides import _put, _soffice
from .test_doc_word import _png
from .translations import fake, identity

BODY = ["We planted many trees in the park this year.", "The children helped us every weekend, and the",
        "weather was good."]


def _pdf(path: Path, pages: int = 5, scanned: tuple[int, ...] = ()) -> Path:
    """A report: a running header and page numbers, a title and a paragraph on each page, a
    blue box and a picture; the pages in ``scanned`` hold only a picture."""
    image = path.with_suffix(".png")
    image.write_bytes(_png())
    sheet = canvas.Canvas(str(path), pagesize=A4)
    for number in range(1, pages + 1):
        if number in scanned:
            sheet.drawImage(str(image), 50, 50, 495, 740)
            sheet.showPage()
            continue
        sheet.setFont("Helvetica", 9)
        sheet.drawString(72, 800, "Annual report of the garden club")
        sheet.drawString(290, 30, str(number))
        sheet.setFont("Helvetica-Bold", 16)
        sheet.drawString(72, 740, f"Part {number}: what we did in spring")
        sheet.setFont("Helvetica", 11)
        text = sheet.beginText(72, 700)
        for line in BODY if number % 2 else [f"On day {number} we painted the old fence", "of the garden."]:
            text.textLine(line)
        sheet.drawText(text)
        sheet.setFillColorRGB(0.1, 0.3, 0.9)
        sheet.rect(72, 480, 200, 100, fill=1)
        sheet.setFillColorRGB(0, 0, 0)
        sheet.drawImage(str(image), 300, 480, 100, 100)
        sheet.showPage()
    sheet.save()
    return path


def _open(path: Path):
    return pdf.FORMAT.open(path, FormatOptions())


def _write(path: Path, translate) -> bytes:
    return write_with(pdf.FORMAT, path, translate, FormatOptions())


def _page_texts(data: bytes) -> list[str]:
    with pikepdf.open(io.BytesIO(data)) as document:
        count = len(document.pages)
    # whitespace aside: the translation is wrapped anew in its box
    return ["".join(extract_text(io.BytesIO(data), page_numbers=[n]).split()) for n in range(count)]


def _structure(data: bytes) -> list[tuple]:
    """Per page: its size, its images and whether it draws a filled rectangle."""
    with pikepdf.open(io.BytesIO(data)) as document:
        out = []
        for page in document.pages:
            ops = {str(op.operator) for op in pikepdf.parse_content_stream(page)}
            images = sorted(str(k) for k, v in (page.Resources.get("/XObject") or {}).items()
                            if v.get("/Subtype") == "/Image")
            out.append(([float(v) for v in page.mediabox], len(images), "re" in ops and "f" in ops))
        return out


def test_blocks_are_read_in_order_and_running_headers_once(tmp_path):
    doc = _open(_pdf(tmp_path / "report.pdf"))
    texts = [s.text for s in doc.segments()]
    # the header and the paragraph of the odd pages recur at one height: each is read once
    assert texts == ["Annual report of the garden club", "Part 1: what we did in spring", " ".join(BODY),
                     "Part 2: what we did in spring", "On day 2 we painted the old fence of the garden.",
                     "Part 3: what we did in spring", "Part 4: what we did in spring",
                     "On day 4 we painted the old fence of the garden.", "Part 5: what we did in spring"]
    assert not any(t.strip().isdigit() for t in texts)  # page numbers: no letters, redrawn as they are


def test_identity_keeps_every_page_its_text_size_images_and_drawings(tmp_path):
    path = _pdf(tmp_path / "report.pdf")
    data = _write(path, identity)
    assert _page_texts(data) == _page_texts(path.read_bytes())
    assert _structure(data) == _structure(path.read_bytes())


def test_a_translation_replaces_the_text_in_place(tmp_path):
    path = _pdf(tmp_path / "report.pdf")
    data = _write(path, fake)
    pages = _page_texts(data)
    assert len(pages) == 5 and _structure(data) == _structure(path.read_bytes())
    for number, text in enumerate(pages, 1):
        assert "garden" not in text and "spring" not in text  # no English left under the translation
        assert fake(Segment("Annual report of the garden club")).text.replace(" ", "") in text.replace(" ", "")
        assert str(number) in text
    with pikepdf.open(io.BytesIO(data)) as document:  # the CJK font is embedded (a subset); the source's were not
        embedded = [o for o in document.objects if isinstance(o, pikepdf.Dictionary) and "/FontFile2" in o]
        assert len(embedded) == 1 and "+" in str(embedded[0].FontName)


def test_a_scanned_page_is_kept_and_reported_by_number(tmp_path):
    path = _pdf(tmp_path / "mixed.pdf", pages=3, scanned=(2,))
    doc = _open(path)
    segments = list(doc.segments())
    assert doc.notes == ["page 2 has no text layer (scanned?): kept as it is"]
    data = _write(path, fake)
    assert _structure(data) == _structure(path.read_bytes()) and _page_texts(data)[1] == ""
    assert segments
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--json")
    assert result.returncode == 0, result.stderr.decode()
    [report] = json.loads(result.stdout)["files"]
    assert "page 2 has no text layer (scanned?): kept as it is" in report["warnings"]


def test_a_pdf_written_by_libreoffice_translates(tmp_path):
    import docx

    document = docx.Document()
    document.add_heading("The spring meeting", 1)
    document.add_paragraph("We planted many trees in the park this year, and the children helped us.")
    document.save(tmp_path / "minutes.docx")
    theirs = _soffice(tmp_path, tmp_path / "minutes.docx", "pdf", tmp_path / "lo")
    with pikepdf.open(theirs) as document:
        assert "LibreOffice" in str(document.docinfo.get("/Producer"))  # truly another producer
    texts = [s.text for s in _open(theirs).segments()]
    assert "The spring meeting" in texts and any(t.startswith("We planted many trees") for t in texts)
    data = _write(theirs, fake)
    [page] = _page_texts(data)
    assert "planted" not in page and fake(Segment("meeting")).text in page


# --- with the model, through the command line -------------------------------------------

def test_the_demo_model_translates_the_pdf(tmp_path):
    path = _pdf(tmp_path / "report.pdf", pages=2)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    pages = _page_texts((tmp_path / "out" / "report.zh-Hans.pdf").read_bytes())
    assert len(pages) == 2 and all(any("\u4e00" <= ch <= "\u9fff" for ch in p) for p in pages)
    assert all("garden" not in p for p in pages)


# --- bad files ---------------------------------------------------------------------------

def _encrypted(t: Path) -> Path:
    with pikepdf.open(_pdf(t.with_suffix(".tmp.pdf"), pages=1)) as document:
        document.save(t, encryption=pikepdf.Encryption(owner="owner", user="secret"))
    return t


def _restricted(t: Path) -> Path:
    with pikepdf.open(_pdf(t.with_suffix(".tmp.pdf"), pages=1)) as document:
        document.save(t, encryption=pikepdf.Encryption(owner="owner", user=""))
    return t


def _only_images(t: Path) -> Path:
    return _pdf(t, pages=2, scanned=(1, 2))


BAD = {
    "not-a-pdf.pdf": (lambda t: _put(t, b"Annual report\n"), "is not a usable PDF"),
    "truncated.pdf": (lambda t: _put(t, _pdf(t.with_suffix(".tmp.pdf")).read_bytes()[:600]), "is not a usable PDF"),
    "password.pdf": (_encrypted, "is encrypted with a password"),
    "restricted.pdf": (_restricted, "is encrypted"),
    "scanned.pdf": (_only_images, "has no text layer"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_pdf_is_one_line_naming_it_and_the_others_go_on(tmp_path, name):
    good = _pdf(tmp_path / "good.pdf", pages=1)
    make, words = BAD[name]
    bad = make(tmp_path / name)
    fails_alone(tmp_path, good, bad, words)


def test_broken_cross_references_are_repaired_and_the_file_translates(tmp_path):
    path = _pdf(tmp_path / "report.pdf", pages=2)
    data = path.read_bytes()
    at = data.rindex(b"startxref")
    broken = tmp_path / "broken-xref.pdf"
    broken.write_bytes(data[:at] + b"startxref\n999999\n%%EOF\n")  # the table's offset points nowhere
    assert _page_texts(_write(broken, identity)) == _page_texts(data)


def test_a_damaged_resource_entry_draws_nothing_and_the_file_translates(tmp_path):
    path = _pdf(tmp_path / "report.pdf", pages=1)
    with pikepdf.open(path, allow_overwriting_input=True) as document:
        resources = document.pages[0].obj.Resources
        resources.XObject["/Damaged"] = 45272603  # a number where a stream belongs
        resources.Font["/Damaged"] = 7
        document.save(path)
    pages = _page_texts(_write(path, fake))
    assert "garden" not in pages[0]
    assert fake(Segment("Annual report of the garden club")).text.replace(" ", "") in pages[0].replace(" ", "")


def test_what_pdfminer_warns_of_a_damaged_page_stays_out_of_the_docs_output(tmp_path):
    path = _pdf(tmp_path / "report.pdf", pages=1)
    with pikepdf.open(path, allow_overwriting_input=True) as document:
        document.pages[0].contents_add(document.make_stream(b"/NotANumber w"), prepend=True)
        document.save(path)
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--quiet")
    assert result.returncode == 0 and result.stderr == b"", result.stderr
    assert (tmp_path / "out" / "report.zh-Hans.pdf").is_file()
    result = run_cli("-v", "docs", str(path), "-o", str(tmp_path / "again"), "--no-tm", "--quiet")
    assert result.returncode == 0 and b"WARNING pdfminer" in result.stderr  # -v shows them


def test_without_a_cjk_font_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setattr(pdf, "FONT_PATHS", ())
    monkeypatch.setenv("EDGE_TRANSLATOR_CJK_FONT", str(tmp_path / "none.ttf"))
    monkeypatch.setattr(pdf, "_FONT", "EdgeTranslatorCJKMissing")
    with pytest.raises(InputError, match="fonts-wqy-microhei"):
        _write(_pdf(tmp_path / "r.pdf", pages=1), identity)


def test_pdf_output_writes_an_editable_markdown_or_word_file(tmp_path):
    import docx

    path = _pdf(tmp_path / "report.pdf", pages=4)
    result = run_cli("docs", str(path), "-o", str(tmp_path / "md"), "--no-tm", "--json", "--pdf-output", "md")
    assert result.returncode == 0, result.stderr.decode()
    [report] = json.loads(result.stdout)["files"]
    assert report["output"].endswith("report.zh-Hans.md")
    text = (tmp_path / "md" / "report.zh-Hans.md").read_text("utf-8")
    blocks = text.split("\n\n")
    assert blocks[0].startswith("*") and blocks[0].endswith("*")  # the running header, once, at the top
    assert text.count("\n---\n") == 3 and sum(b.startswith("#") for b in blocks) == 4  # a title a page
    assert not any(b.strip().isdigit() for b in blocks) and "garden" not in text  # no page numbers, no English
    result = run_cli("docs", str(path), "-o", str(tmp_path / "docx"), "--no-tm", "--quiet", "--pdf-output", "docx")
    assert result.returncode == 0, result.stderr.decode()
    document = docx.Document(tmp_path / "docx" / "report.zh-Hans.docx")
    headings = [p for p in document.paragraphs if p.style.name.startswith("Heading")]
    assert len(headings) == 4 and document.sections[0].header.paragraphs[0].text
    breaks = sum(1 for p in document.paragraphs for r in p.runs if 'w:br w:type="page"' in r._r.xml)
    assert breaks == 3
