"""Excel .xlsx workbooks: text cells translated once per shared string, everything else kept."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import openpyxl
import pytest
from lxml import etree
from openpyxl.cell.rich_text import CellRichText, TextBlock
from openpyxl.cell.text import InlineFont
from openpyxl.chart import BarChart, Reference
from openpyxl.styles import Font
from openpyxl.worksheet.table import Table

from edge_translator.documents import sheets
from edge_translator.documents.base import DocumentError, FormatOptions, Segment

from .conftest import run_cli
from .docfiles import fails_alone, parts, write_with
from .test_doc_slides import _add, _forged_size, _put, _rezip, _soffice
from .translations import fake, identity

DATE = datetime.datetime(2024, 3, 5)


def _book(path: Path) -> Path:
    """A workbook with what users' sheets hold: shared and repeated strings, rich text, numbers,
    dates, booleans, formulas, merged cells, widths, an Excel table and a chart."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Products"
    ws.append(["Name", "Description", "Price", "Added", "In stock"])
    ws.append(["Red apple", "A fresh red apple from the farm.", 1.5, DATE, True])
    ws.append(["Green pear", "Name", 2, DATE, False])
    ws.append(["Red apple", CellRichText("Sweet and ", TextBlock(InlineFont(b=True), "very crisp"), " today."), 3,
               DATE, True])
    ws.append(["Total", None, "=SUM(C2:C4)", None, None])
    ws.append(['="Made in " & "Spain"', "2024-03-05", "42", None, None])
    ws.merge_cells("A8:C8")
    ws["A8"] = "Prices include tax."
    ws["A8"].font = Font(italic=True, size=14)
    ws.column_dimensions["B"].width = 45
    chart = BarChart()
    chart.title = "Prices"
    chart.add_data(Reference(ws, min_col=3, min_row=1, max_row=4), titles_from_data=True)
    ws.add_chart(chart, "G2")
    stock = wb.create_sheet("Stock")
    stock.append(["Item", "Where"])
    stock.append(["Red apple", "In the cold room."])
    stock.append(["Green pear", "On the top shelf."])
    stock.add_table(Table(displayName="StockTable", ref="A1:B3"))
    wb.save(path)
    return path


#: Each text cell's text once, as a shared string table holds them; the table's header
#: (Item, Where) is never read.
TEXTS = ["Name", "Description", "Price", "Added", "In stock", "Red apple", "A fresh red apple from the farm.",
         "Green pear", "Sweet and very crisp today.", "Total", "Prices include tax.", "In the cold room.",
         "On the top shelf."]
#: openpyxl writes inline strings: each text cell is read, in the order of the cells.
CELLS = ["Name", "Description", "Price", "Added", "In stock", "Red apple", "A fresh red apple from the farm.",
         "Green pear", "Name", "Red apple", "Sweet and very crisp today.", "Total", "Prices include tax.",
         "Red apple", "In the cold room.", "Green pear", "On the top shelf."]


@pytest.fixture(scope="module")
def saved_by_libreoffice(tmp_path_factory) -> Path:
    """The workbook as LibreOffice Calc writes it (shared strings, as Excel writes them)."""
    work = tmp_path_factory.mktemp("lo")
    ods = _soffice(work, _book(work / "book.xlsx"), "ods", work / "ods")
    theirs = _soffice(work, ods, "xlsx:Calc MS Excel 2007 XML", work / "xlsx")
    assert b"LibreOffice" in parts(theirs.read_bytes())["docProps/app.xml"]  # truly another producer
    assert "xl/sharedStrings.xml" in parts(theirs.read_bytes())
    return theirs


@pytest.fixture(params=["openpyxl", "libreoffice"])
def book(request, tmp_path) -> tuple[str, Path]:
    """(producer, a copy of the workbook it wrote)."""
    if request.param == "openpyxl":
        return "openpyxl", _book(tmp_path / "book.xlsx")
    return "libreoffice", Path(shutil.copy(request.getfixturevalue("saved_by_libreoffice"), tmp_path / "book.xlsx"))


def _open(path: Path, **options):
    return sheets.FORMAT.open(path, FormatOptions(**options))


def _write(path: Path, translate, **options) -> bytes:
    return write_with(sheets.FORMAT, path, translate, FormatOptions(**options))



def _values(data: bytes) -> dict[str, list[list]]:
    wb = openpyxl.load_workbook(io.BytesIO(data), rich_text=True)
    return {ws.title: [[c.value for c in row] for row in ws.iter_rows()] for ws in wb}


def _f(text) -> str:
    return fake(Segment(str(text))).text


# --- reading -----------------------------------------------------------------------------

def test_each_text_cell_is_read_once_and_nothing_else(book):
    producer, path = book
    doc = _open(path)
    texts = [s.text for s in doc.segments()]
    assert texts == (CELLS if producer == "openpyxl" else TEXTS)
    assert [s.text for s in doc.segments()] == texts  # read again, the same
    rich = next(s for s in doc.segments() if s.text.startswith("Sweet"))
    assert rich.marks == ((10, 20),)  # the bold words


def test_identity_changes_no_part(book):
    _, path = book
    before = parts(path.read_bytes())
    after = parts(_write(path, identity))
    assert list(after) == list(before)  # the same parts, in the same order
    for name, data in before.items():
        assert after[name] == data, name


def test_a_translation_changes_the_text_cells_alone(book):
    producer, path = book
    data = _write(path, fake)
    before, after = _values(path.read_bytes()), _values(data)
    for title, rows in before.items():
        for number, (row_before, row_after) in enumerate(zip(rows, after[title], strict=True)):
            for old, new in zip(row_before, row_after, strict=True):
                if title == "Stock" and number == 0:
                    assert new == old  # the table's header names its columns: kept
                elif isinstance(old, CellRichText):
                    assert str(new) == _f(old)
                elif isinstance(old, str) and not old.startswith("=") and any(c.isalpha() for c in old):
                    assert new == _f(old), old
                else:
                    assert new == old  # numbers, dates, booleans, formulas, text without letters
    old_parts, new_parts = parts(path.read_bytes()), parts(data)
    changed = {n for n in old_parts if old_parts[n] != new_parts[n]}
    # the text lives in the sheets (inline) or in the shared table; styles, merges, widths,
    # the chart and the table are as they were
    assert changed == ({"xl/worksheets/sheet1.xml", "xl/worksheets/sheet2.xml"} if producer == "openpyxl"
                       else {"xl/sharedStrings.xml"})
    wb_before = openpyxl.load_workbook(path)
    wb = openpyxl.load_workbook(io.BytesIO(data), rich_text=True)
    rich = wb["Products"]["B4"].value
    bold = [str(block.text) for block in rich if isinstance(block, TextBlock) and block.font.b]
    assert bold == [_f("very crisp")]  # the formatting stays on its words
    assert [r.coord for r in wb["Products"].merged_cells.ranges] == ["A8:C8"]
    assert wb["Products"].column_dimensions["B"].width == wb_before["Products"].column_dimensions["B"].width


def test_sheets_and_columns_choose_what_is_translated(book):
    producer, path = book
    only_b = _values(_write(path, fake, columns=("B",), sheets=("Products",)))
    products = only_b["Products"]
    assert products[0] == ["Name", "Description", "Price", "Added", "In stock"]  # the header row is kept
    assert products[1][1] == _f("A fresh red apple from the farm.") and products[1][0] == "Red apple"
    # "Name" is a header (kept) and a description (translated): in a shared table, the
    # description gets an entry of its own
    assert products[2][1] == _f("Name")
    if producer == "libreoffice":
        assert parts(_write(path, fake, columns=("B",))).get("xl/sharedStrings.xml", b"").count(b"<si>") == \
            parts(path.read_bytes())["xl/sharedStrings.xml"].count(b"<si>") + 1
    assert only_b["Stock"][1] == ["Red apple", "In the cold room."]
    by_header = _values(_write(path, fake, columns=("where",)))  # a header name, any case, any sheet
    assert by_header["Stock"][1:] == [["Red apple", _f("In the cold room.")], ["Green pear", _f("On the top shelf.")]]
    assert by_header["Products"][1][0] == "Red apple"
    by_number = _values(_write(path, fake, sheets=("2",), columns=("1",)))
    assert by_number["Stock"][1] == [_f("Red apple"), "In the cold room."]
    assert by_number["Products"][1][0] == "Red apple"  # the same shared string, outside the choice
    for options, words in (({"sheets": ("Prices",)}, "has no sheet 'Prices' (its sheets: 'Products', 'Stock')"),
                           ({"columns": ("Colour",)}, "has no column 'Colour'")):
        with pytest.raises(DocumentError, match=words.replace("(", r"\(").replace(")", r"\)")) as caught:
            list(_open(path, **options).segments())
        assert "\n" not in str(caught.value)


INLINE_SHEET = b"""<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<x:worksheet xmlns:x="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><x:sheetData>
<x:row r="1"><x:c r="A1" t="inlineStr"><x:is><x:t>Good morning.</x:t></x:is></x:c><x:c r="B1"><x:v>7</x:v></x:c></x:row>
<x:row><x:c t="inlineStr"><x:is><x:r><x:t xml:space="preserve">Read </x:t></x:r><x:r><x:rPr><x:b/></x:rPr><x:t>this</x:t></x:r>\
<x:r><x:t xml:space="preserve"> first &amp; fast.</x:t></x:r></x:is></x:c><x:c t="str"><x:f>A1</x:f><x:v>Good morning.</x:v></x:c>\
<x:c/></x:row>
</x:sheetData></x:worksheet>"""


def _inline_book(path: Path) -> Path:
    """A workbook of inline strings with a namespace prefix, as some generators write them."""
    parts = {
        "[Content_Types].xml": b'<?xml version="1.0"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                               b'content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-'
                               b'package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
                               b'<Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-'
                               b'officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/'
                               b'sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.'
                               b'worksheet+xml"/></Types>',
        "_rels/.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/'
                       b'relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/'
                       b'officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>',
        "xl/workbook.xml": b'<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                           b'2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
                           b'<sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>',
        "xl/_rels/workbook.xml.rels": b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/'
                                      b'package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.'
                                      b'openxmlformats.org/officeDocument/2006/relationships/worksheet" '
                                      b'Target="/xl/worksheets/sheet1.xml"/></Relationships>',
        "xl/worksheets/sheet1.xml": INLINE_SHEET,
    }
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


def test_inline_strings_are_translated_in_place_with_their_runs(tmp_path):
    path = _inline_book(tmp_path / "inline.xlsx")
    segments = list(_open(path).segments())
    assert [(s.text, s.marks) for s in segments] == [("Good morning.", ()), ("Read this first & fast.", ((5, 9),))]
    assert _write(path, identity) == _write(path, identity) and \
        parts(_write(path, identity))["xl/worksheets/sheet1.xml"] == INLINE_SHEET
    data = _write(path, fake)
    ws = openpyxl.load_workbook(io.BytesIO(data), rich_text=True)["Data"]
    assert ws["A1"].value == _f("Good morning.") and ws["B1"].value == 7
    assert str(ws["A2"].value) == _f("Read this first & fast.")
    assert ws["B2"].value == "=A1"  # the formula, not its cached text
    raw = parts(data)["xl/worksheets/sheet1.xml"]
    assert raw.count(b"xmlns:x=") == 1 and b"<x:c r=\"A1\" t=\"inlineStr\"><x:is>" in raw  # in the file's own form


# --- another producer ----------------------------------------------------------------------

def test_a_translated_workbook_opens_in_libreoffice(saved_by_libreoffice, tmp_path):
    translated = tmp_path / "back" / "book.xlsx"
    translated.parent.mkdir()
    translated.write_bytes(_write(saved_by_libreoffice, fake))
    reopened = _soffice(tmp_path, translated, "ods", tmp_path / "reopened")
    with zipfile.ZipFile(reopened) as archive:
        content = "".join(etree.fromstring(archive.read("content.xml")).itertext())
    for text in ("A fresh red apple from the farm.", "On the top shelf.", "Prices include tax."):
        assert _f(text) in content and text not in content
    assert "Item" in content and "6.5" in content  # the table header, and the formula's result


# --- with the model, through the command line -------------------------------------------

def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_demo_model_translates_every_text_and_changes_nothing_else(tmp_path):
    path = _book(tmp_path / "book.xlsx")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # the input is untouched
    out = tmp_path / "out" / "book.zh-Hans.xlsx"
    segments = list(_open(out).segments())
    assert len(segments) == len(CELLS) and all(_cjk(s.text) for s in segments)
    before, after = _values(path.read_bytes()), _values(out.read_bytes())
    for title in before:
        for a, b in zip(sum(before[title], []), sum(after[title], []), strict=True):
            if not isinstance(a, (str, CellRichText)) or str(a).startswith("="):
                assert a == b
    again = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--json")
    assert json.loads(again.stdout)["up_to_date"] == 1  # the journal knows it is done
    chosen = run_cli("docs", str(path), "-o", str(tmp_path / "cols"), "--no-tm", "--json", "--columns", "Where")
    assert chosen.returncode == 0, chosen.stderr.decode()
    stock = _values((tmp_path / "cols" / "book.zh-Hans.xlsx").read_bytes())["Stock"]
    assert stock[0] == ["Item", "Where"] and not _cjk(stock[1][0]) and _cjk(stock[1][1])
    wrong = run_cli("docs", str(path), "-o", str(tmp_path / "bad"), "--no-tm", "--sheets", "Nope")
    assert wrong.returncode != 0 and "has no sheet 'Nope'" in wrong.stderr.decode()
    assert "Traceback" not in wrong.stderr.decode()


def test_the_glossary_applies_to_cells(tmp_path):
    wb = openpyxl.Workbook()
    for text in ("Restart the router every night.", "The router is in the office.", "We need a new router."):
        wb.active.append([text])
    path = tmp_path / "g.xlsx"
    wb.save(path)
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("router\t路由器\n", encoding="utf-8")
    result = run_cli("docs", str(path), "-o", str(tmp_path / "a"), "--glossary", str(glossary), "--no-tm", "--json")
    assert result.returncode == 0, result.stderr.decode()
    [report] = json.loads(result.stdout)["files"]
    out = [row[0] for row in _values((tmp_path / "a" / "g.zh-Hans.xlsx").read_bytes())["Sheet"]]
    kept = [t for t in out if "路由器" in t and "router" not in t]
    assert kept and len(kept) + len(report["warnings"]) == 3, (out, report["warnings"])


# --- bad files ---------------------------------------------------------------------------

def _break(part: str, data: bytes | None):
    return lambda good, t: _rezip(good, t, lambda n, d: data if n == part else d)


BAD = {
    "not-a-zip.xlsx": (lambda good, t: _put(t, b"Name,Price\n"), "not a zip archive"),
    "truncated.xlsx": (lambda good, t: _put(t, good.read_bytes()[:3000]), "not a zip archive"),
    "locked.xlsx": (lambda good, t: _put(t, bytes.fromhex("d0cf11e0a1b11ae1") + bytes(2000)), "password-protected"),
    "bomb.xlsx": (lambda good, t: _forged_size(good, t, 4_000_000_000), "over the limit"),
    "macros.xlsm": (lambda good, t: shutil.copy(good, t) and t, "macro-enabled"),
    "vba-inside.xlsx": (lambda good, t: _rezip(good, t, lambda n, d: d) and _add(t, "xl/vbaProject.bin", b"x"),
                        "macro-enabled"),
    "bad-sheet.xlsx": (_break("xl/worksheets/sheet1.xml", b"<worksheet><sheetData><row><c t='s'><v>1"),
                       "sheet 'Products' is damaged"),
    "bad-strings.xlsx": (_break("xl/sharedStrings.xml", b"<sst><si><t>Name</t></si><si><t>Desc"),
                         "its shared strings is damaged"),
    "missing-sheet.xlsx": (_break("xl/worksheets/sheet2.xml", None), "sheet 'Stock' is missing"),
    "no-workbook.xlsx": (_break("xl/workbook.xml", None), "no xl/workbook.xml"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_file_is_one_line_naming_it_and_the_others_go_on(saved_by_libreoffice, tmp_path, name):
    good = Path(shutil.copy(saved_by_libreoffice, tmp_path / "good.xlsx"))
    make, words = BAD[name]
    bad = make(good, tmp_path / name)
    fails_alone(tmp_path, good, bad, words)


def test_a_workbook_without_text_comes_back_unchanged(tmp_path):
    wb = openpyxl.Workbook()
    wb.active.append([1, 2.5, DATE, "=A1+B1", "12:30"])
    path = tmp_path / "numbers.xlsx"
    wb.save(path)
    assert list(_open(path).segments()) == []
    assert parts(_write(path, fake)) == parts(path.read_bytes())
