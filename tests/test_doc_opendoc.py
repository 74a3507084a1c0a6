"""OpenDocument .odt, .odp and .ods: text and spans translated, every other byte kept."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from edge_translator.documents import opendoc
from edge_translator.documents.base import DocumentError, FormatOptions, Segment

from .conftest import run_cli
from .docfiles import fails_alone, parts, write_with
from .test_doc_slides import RICH_TEXTS, _forged_size, _put, _rezip, _rich, _soffice
from .translations import fake, identity

TEXT_NS = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
MANIFEST = """<?xml version="1.0" encoding="UTF-8"?>
<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">
 <manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/>
 <manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>
 <manifest:file-entry manifest:full-path="styles.xml" manifest:media-type="text/xml"/>
</manifest:manifest>
"""
ROOT = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
        'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
        'xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0" '
        'xmlns:number="urn:oasis:names:tc:opendocument:xmlns:datastyle:1.0" '
        'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xlink="http://www.w3.org/1999/xlink" office:version="1.3"')
CONTENT = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ROOT}>
<office:automatic-styles><style:style style:name="T1" style:family="text"><style:text-properties \
fo:font-weight="bold" xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"/></style:style>
<number:date-style style:name="N1"><number:day/><number:text> of </number:text><number:month/></number:date-style>
</office:automatic-styles>
<office:body><office:text>
<text:h text:outline-level="1">A short guide</text:h>
<text:p>Read the <text:span text:style-name="T1">whole manual</text:span> before you start.</text:p>
<text:p>Visit<text:s/><text:a xlink:href="https://example.com/">our website</text:a> for help.<text:s text:c="2"/>It is free.</text:p>
<text:p>Page <text:page-number>3</text:page-number> of the guide, written on <text:date>May 5</text:date>.</text:p>
<text:p>Fish &amp; chips are good.<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>\
<text:note-body><text:p>Only on Fridays.</text:p></text:note-body></text:note></text:p>
<text:p><office:annotation><dc:creator>Jane Doe</dc:creator><dc:date>2026-01-01T10:00:00</dc:date>\
<text:p>Check this part.</text:p></office:annotation>The last part.</text:p>
<table:table table:name="Prices"><table:table-row><table:table-cell office:value-type="string">\
<text:p>Green apples</text:p></table:table-cell><table:table-cell office:value-type="float" office:value="3">\
<text:p>3 apples</text:p></table:table-cell><table:table-cell table:formula="of:=[.B1]*2" office:value-type="string" \
office:string-value="Six"><text:p>Six</text:p></table:table-cell></table:table-row></table:table>
</office:text></office:body></office:document-content>
"""
STYLES = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-styles {ROOT}>
<office:styles><number:currency-style style:name="C1"><number:currency-symbol>USD</number:currency-symbol>\
</number:currency-style></office:styles>
<office:master-styles><style:master-page style:name="Standard"><style:header><text:p>Company handbook</text:p>\
</style:header><style:footer><text:p>Page <text:page-number>1</text:page-number></text:p></style:footer>\
</style:master-page></office:master-styles></office:document-styles>
"""
PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(40)

#: What is read, in order: content.xml, then the master pages' header and footer.
TEXTS = ["A short guide", "Read the whole manual before you start.", "Visit our website for help. It is free.",
         "Page", "of the guide, written on", "Fish & chips are good.", "Only on Fridays.", "Check this part.",
         "The last part.", "Green apples", "Company handbook", "Page"]


def _odt(path: Path, content: str = CONTENT, mimetype: bytes = b"application/vnd.oasis.opendocument.text",
         extra: dict | None = None) -> Path:
    parts = {"mimetype": mimetype, "META-INF/manifest.xml": MANIFEST.encode(), "content.xml": content.encode(),
             "styles.xml": STYLES.encode(), "Pictures/logo.png": PNG, **(extra or {})}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return path


def _open(path: Path):
    return opendoc.FORMAT.open(path, FormatOptions())


def _write(path: Path, translate) -> bytes:
    return write_with(opendoc.FORMAT, path, translate, FormatOptions())



def _f(text: str) -> str:
    return fake(Segment(text)).text


def _visible(xml: bytes) -> str:
    return "".join(etree.fromstring(xml).itertext())


# --- reading and writing ---------------------------------------------------------------------

def test_the_text_is_read_in_order_and_fields_numbers_and_styles_are_not(tmp_path):
    doc = _open(_odt(tmp_path / "guide.odt"))
    segments = list(doc.segments())
    assert [s.text for s in segments] == TEXTS
    by_text = {s.text: s for s in segments}
    assert by_text["Read the whole manual before you start."].marks == ((9, 21),)  # the bold span
    assert by_text["Visit our website for help. It is free."].marks == ((6, 17),)  # the link, across text:s
    assert not any(t in s.text for s in segments for t in ("Jane", "2026", "USD", "3 apples", "Six", " of "))


def test_identity_changes_no_part(tmp_path):
    path = _odt(tmp_path / "guide.odt")
    before, after = parts(path.read_bytes()), parts(_write(path, identity))
    assert list(after) == list(before) and after == before


def test_a_translation_keeps_spans_links_fields_and_every_other_part(tmp_path):
    path = _odt(tmp_path / "guide.odt")
    data = _write(path, fake)
    before, after = parts(path.read_bytes()), parts(data)
    assert {n for n in before if before[n] != after[n]} == {"content.xml", "styles.xml"}
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        first = archive.infolist()[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    content = after["content.xml"].decode()
    assert f'<text:span text:style-name="T1">{_f("whole manual")}</text:span>' in content
    assert f'<text:a xlink:href="https://example.com/">{_f("our website")}</text:a>' in content
    assert "<text:page-number>3</text:page-number>" in content and "<text:date>May 5</text:date>" in content
    assert "<dc:creator>Jane Doe</dc:creator>" in content and "<text:p>3 apples</text:p>" in content
    assert "<number:text> of </number:text>" in content and _f("Fish & chips are good.").replace("&", "&amp;") \
        in content
    etree.fromstring(after["content.xml"])
    styles = after["styles.xml"].decode()
    assert _f("Company handbook") in styles and "USD" in styles


def test_libreoffice_files_of_each_kind_read_and_their_translations_open_there(tmp_path):
    """Writer, Impress and Calc write the files; each translation opens in LibreOffice again."""
    import docx
    import openpyxl

    document = docx.Document()
    document.add_heading("Chapter one", 1)
    p = document.add_paragraph("It was a ")
    p.add_run("bright cold").bold = True
    p.add_run(" day in April.")
    document.sections[0].header.paragraphs[0].text = "The morning paper"
    document.save(tmp_path / "novel.docx")
    wb = openpyxl.Workbook()
    wb.active.append(["Green apples", 3.5, "=B1*2"])
    wb.save(tmp_path / "prices.xlsx")
    expected = {
        "odt": (tmp_path / "novel.docx", ["Chapter one", "It was a bright cold day in April.", "The morning paper"]),
        "odp": (_rich(tmp_path / "deck.pptx"), [t for t in RICH_TEXTS if t not in ("First line\nsecond line",
                                                                                     "Slide 1")]),
        "ods": (tmp_path / "prices.xlsx", ["Green apples"]),
    }
    for kind, (source, texts) in expected.items():
        theirs = _soffice(tmp_path, source, kind, tmp_path / kind)
        segments = [s.text for s in _open(theirs).segments()]
        assert all(t in segments for t in texts), (kind, segments)
        if kind == "odt":
            assert next(s for s in _open(theirs).segments() if s.text.startswith("It was")).marks == ((9, 20),)
        if kind == "ods":
            assert segments == ["Green apples"]  # the number and the formula's result are not text
        out = tmp_path / "back" / f"{kind}.{kind}"
        out.parent.mkdir(exist_ok=True)
        out.write_bytes(_write(theirs, fake))
        again = _soffice(tmp_path, out, {"odt": "docx", "odp": "pptx", "ods": "xlsx"}[kind], tmp_path / f"re-{kind}")
        text = " ".join(_visible(d) for n, d in parts(again.read_bytes()).items() if n.endswith(".xml"))
        for t in texts:
            assert _f(t) in text or _f(t).replace(" ", "") in text.replace(" ", ""), (kind, t)
        if kind == "ods":
            assert "7" in text  # the formula still computes


# --- with the model, through the command line -------------------------------------------

def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_demo_model_translates_the_document_and_the_journal_knows(tmp_path):
    path = _odt(tmp_path / "guide.odt")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    out = tmp_path / "out" / "guide.zh-Hans.odt"
    segments = list(_open(out).segments())
    assert sum(_cjk(s.text) for s in segments) >= len(segments) - 2
    assert "<text:page-number>3</text:page-number>" in parts(out.read_bytes())["content.xml"].decode()
    again = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--json")
    assert json.loads(again.stdout)["up_to_date"] == 1


# --- bad files ---------------------------------------------------------------------------

def _needs_version(source: Path, target: Path, version: int) -> Path:
    """``source`` with its first part needing zip ``version`` (120: 12.0, which zipfile refuses) to unpack."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        at = archive.start_dir
    data[at + 6:at + 8] = version.to_bytes(2, "little")
    return _put(target, bytes(data))


LOCKED_MANIFEST = MANIFEST.replace('manifest:media-type="text/xml"/>', 'manifest:media-type="text/xml">'
                                   '<manifest:encryption-data manifest:checksum-type="SHA1"/></manifest:file-entry>', 1)
BAD = {
    "not-a-zip.odt": (lambda t: _put(t, b"A short guide\n"), "not a zip archive"),
    "old-binary.odt": (lambda t: _put(t, bytes.fromhex("d0cf11e0a1b11ae1") + bytes(2000)), "password-protected"),
    "bomb.odt": (lambda t: _forged_size(_odt(t.with_suffix(".tmp")), t, 4_000_000_000), "over the limit"),
    "zip-version.odt": (lambda t: _needs_version(_odt(t.with_suffix(".tmp")), t, 120), "not a zip archive"),
    "locked.odt": (lambda t: _odt(t, extra={"META-INF/manifest.xml": LOCKED_MANIFEST.encode()}), "password-protected"),
    "no-content.odt": (lambda t: _rezip(_odt(t.with_suffix(".tmp")), t, lambda n, d: None if n == "content.xml" else d),
                       "no content.xml"),
    "bad-content.odt": (lambda t: _odt(t, content=CONTENT[:900]), "its part content.xml is damaged"),
    "spreadsheet.odt": (lambda t: _odt(t, mimetype=b"application/vnd.oasis.opendocument.spreadsheet"),
                        "it says it is 'application/vnd.oasis.opendocument.spreadsheet'"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_file_is_one_line_naming_it_and_the_others_go_on(tmp_path, name):
    good = _odt(tmp_path / "good.odt")
    make, words = BAD[name]
    bad = make(tmp_path / name)
    fails_alone(tmp_path, good, bad, words)


def test_macros_are_kept_untouched(tmp_path):
    basic = b'<?xml version="1.0"?><script:module xmlns:script="http://openoffice.org/2000/script" script:name="M"/>'
    path = _odt(tmp_path / "macros.odt", extra={"Basic/Standard/Module1.xml": basic})
    assert parts(_write(path, fake))["Basic/Standard/Module1.xml"] == basic
    with pytest.raises(DocumentError, match="password-protected"):
        list(_open(_odt(tmp_path / "l.odt", extra={"META-INF/manifest.xml": LOCKED_MANIFEST.encode()})).segments())
