"""EPUB books: titles, the table of contents and the chapters translated, the package still valid."""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import pytest
from lxml import etree

from edge_translator.documents import epub
from edge_translator.documents.base import DocumentError, FormatOptions, Segment

from .conftest import run_cli
from .docfiles import fails_alone, parts, write_with
from .test_doc_slides import _forged_size, _put, _soffice
from .translations import fake, identity

XHTML = "http://www.w3.org/1999/xhtml"
CONTAINER = (b'<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
             b'<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
             b'</rootfiles></container>')
OPF = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:7a1e</dc:identifier>
    <dc:title>A Walk in the Park</dc:title>
    <dc:language>en</dc:language>
    <dc:creator>Jane Doe</dc:creator>
    <meta property="dcterms:modified">2026-01-01T00:00:00Z</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="c1" href="Text/chapter%201.xhtml" media-type="application/xhtml+xml"/>
    <item id="c2" href="Text/chapter2.xhtml" media-type="application/xhtml+xml"/>
    <item id="css" href="style.css" media-type="text/css"/>
    <item id="cover" href="cover.png" media-type="image/png"/>
  </manifest>
  <spine toc="ncx"><itemref idref="c1"/><itemref idref="c2"/></spine>
</package>
"""
NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="urn:uuid:7a1e"/></head>
  <docTitle><text>A Walk in the Park</text></docTitle>
  <navMap>
    <navPoint id="p1" playOrder="1"><navLabel><text>The morning</text></navLabel><content src="Text/chapter%201.xhtml"/></navPoint>
    <navPoint id="p2" playOrder="2"><navLabel><text>Rain &amp; sun</text></navLabel><content src="Text/chapter2.xhtml"/></navPoint>
  </navMap>
</ncx>
"""
CHAPTER1 = """<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE html>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" xml:lang="en" lang="en">
<head><title>The morning</title><link rel="stylesheet" href="../style.css"/></head>
<body>
  <h1>The morning</h1>
  <p>We walked to the <em>old</em> park before breakfast.</p>
  <p>Tom said:&#160;<a href="chapter2.xhtml">read the next part</a> first.<br/>Then we ate.</p>
  <p><img src="../cover.png" alt="A green park"/></p>
  <pre><code>print("keep me")</code></pre>
</body>
</html>
"""
CHAPTER2 = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>Rain &amp; sun</title></head>
<body><h2>Rain &amp; sun</h2><p>It rained all day, and then the sun came out.</p></body></html>
"""
NAV = """<?xml version="1.0" encoding="utf-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head>
<body><nav epub:type="toc"><ol><li><a href="Text/chapter%201.xhtml">The morning</a></li>
<li><a href="Text/chapter2.xhtml">Rain &amp; sun</a></li></ol></nav></body></html>
"""
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + bytes(40)

#: What is read, in order: the title, the NCX's title and labels, the chapters, the nav.
TEXTS = ["A Walk in the Park", "A Walk in the Park", "The morning", "Rain & sun",
         "The morning", "The morning", "We walked to the old park before breakfast.",
         "Tom said:\xa0read the next part first.", "Then we ate.", "A green park",
         "Rain & sun", "Rain & sun", "It rained all day, and then the sun came out.",
         "Contents", "The morning", "Rain & sun"]


def _book(path: Path, change=None, compress_mimetype: bool = False, extra: dict | None = None) -> Path:
    parts = {"mimetype": b"application/epub+zip", "META-INF/container.xml": CONTAINER,
             "OEBPS/content.opf": OPF.encode(), "OEBPS/toc.ncx": NCX.encode(), "OEBPS/nav.xhtml": NAV.encode(),
             "OEBPS/Text/chapter 1.xhtml": CHAPTER1.encode(), "OEBPS/Text/chapter2.xhtml": CHAPTER2.encode(),
             "OEBPS/style.css": b"body { margin: 1em; }\n", "OEBPS/cover.png": PNG, **(extra or {})}
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in parts.items():
            data = change(name, data) if change else data
            if data is not None:
                stored = name == "mimetype" and not compress_mimetype
                archive.writestr(name, data, zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED)
    return path


def _open(path: Path):
    return epub.FORMAT.open(path, FormatOptions())


def _write(path: Path, translate) -> bytes:
    return write_with(epub.FORMAT, path, translate, FormatOptions())



def _f(text: str) -> str:
    return fake(Segment(text)).text


def _valid_package(data: bytes) -> None:
    """What a reading system checks first: mimetype first, stored, every XML part well-formed."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        first = archive.infolist()[0]
        assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
        assert archive.read("mimetype") == b"application/epub+zip"
        assert data[30:38] == b"mimetype" and data[38:58] == b"application/epub+zip"  # at its fixed offset
        for name in archive.namelist():
            if name.endswith((".xhtml", ".opf", ".ncx", ".xml")):
                etree.fromstring(archive.read(name))


def test_titles_contents_and_chapters_are_read_in_order(tmp_path):
    doc = _open(_book(tmp_path / "book.epub"))
    assert [s.text for s in doc.segments()] == TEXTS
    em = next(s for s in doc.segments() if s.text.startswith("We walked"))
    assert em.marks == ((17, 20),)  # the <em>: one sentence across the inline element
    assert not any("keep me" in s.text for s in doc.segments())


def test_identity_changes_no_part(tmp_path):
    path = _book(tmp_path / "book.epub")
    before, after = parts(path.read_bytes()), parts(_write(path, identity))
    assert list(after) == list(before) and after == before


def test_a_translation_changes_the_texts_alone_and_the_package_stays_valid(tmp_path):
    path = _book(tmp_path / "book.epub", compress_mimetype=True)  # a producer that compressed it
    data = _write(path, fake)
    _valid_package(data)
    before, after = parts(path.read_bytes()), parts(data)
    assert sorted(after) == sorted(before)
    assert {n for n in before if before[n] != after[n]} == {
        "OEBPS/content.opf", "OEBPS/toc.ncx", "OEBPS/nav.xhtml", "OEBPS/Text/chapter 1.xhtml",
        "OEBPS/Text/chapter2.xhtml"}  # the style sheet, the image, the container: as they were
    assert [s.text for s in _open(_put(tmp_path / "out.epub", data)).segments()] == [_f(t) for t in TEXTS]
    opf = etree.fromstring(after["OEBPS/content.opf"])
    dc = "{http://purl.org/dc/elements/1.1/}"
    assert opf.find(f".//{dc}title").text == _f("A Walk in the Park")
    assert opf.find(f".//{dc}creator").text == "Jane Doe" and opf.find(f".//{dc}language").text == "en"
    chapter = after["OEBPS/Text/chapter 1.xhtml"].decode()
    assert '<pre><code>print("keep me")</code></pre>' in chapter and '<a href="chapter2.xhtml">' in chapter
    assert f'alt="{_f("A green park")}"' in chapter and "<em>" + _f("old") + "</em>" in chapter
    assert chapter.startswith('<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>')


def test_a_book_written_by_libreoffice_reads_and_translates(tmp_path):
    import docx

    document = docx.Document()
    for title, text in (("Chapter one", "It was a bright cold day in April."),
                        ("Chapter two", "The clocks were striking thirteen.")):
        document.add_heading(title, 1)
        document.add_paragraph(text)
    document.save(tmp_path / "novel.docx")
    theirs = _soffice(tmp_path, tmp_path / "novel.docx", "epub", tmp_path / "lo")
    assert b"LibreOffice" in parts(theirs.read_bytes())["OEBPS/content.opf"]  # truly another producer
    texts = [s.text for s in _open(theirs).segments()]
    for text in ("Chapter one", "It was a bright cold day in April.", "The clocks were striking thirteen."):
        assert text in texts
    data = _write(theirs, fake)
    _valid_package(data)
    body = "".join("".join(etree.fromstring(d).itertext()) for n, d in parts(data).items() if n.endswith(".xhtml"))
    assert _f("The clocks were striking thirteen.") in body and "striking" not in body


# --- with the model, through the command line -------------------------------------------

def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_demo_model_translates_every_text_and_the_journal_knows(tmp_path):
    path = _book(tmp_path / "book.epub")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    result = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--quiet")
    assert result.returncode == 0, result.stderr.decode()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest  # the input is untouched
    out = (tmp_path / "out" / "book.zh-Hans.epub").read_bytes()
    _valid_package(out)
    segments = list(_open(tmp_path / "out" / "book.zh-Hans.epub").segments())
    assert len(segments) == len(TEXTS) and sum(_cjk(s.text) for s in segments) >= len(TEXTS) - 2
    again = run_cli("docs", str(path), "-o", str(tmp_path / "out"), "--no-tm", "--json")
    assert json.loads(again.stdout)["up_to_date"] == 1


# --- bad files ---------------------------------------------------------------------------

ENCRYPTED = (b'<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
             b'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData><enc:EncryptionMethod '
             b'Algorithm="%s"/><enc:CipherData><enc:CipherReference URI="%s"/></enc:CipherData>'
             b'</enc:EncryptedData></encryption>')

BAD = {
    "not-a-zip.epub": (lambda t: _put(t, b"A Walk in the Park\n"), "not a zip archive"),
    "locked.epub": (lambda t: _put(t, bytes.fromhex("d0cf11e0a1b11ae1") + bytes(2000)), "password-protected"),
    "bomb.epub": (lambda t: _forged_size(_book(t.with_suffix(".tmp")), t, 4_000_000_000), "over the limit"),
    "no-container.epub": (lambda t: _book(t, lambda n, d: None if n == "META-INF/container.xml" else d),
                          "no META-INF/container.xml"),
    "no-opf.epub": (lambda t: _book(t, lambda n, d: None if n.endswith(".opf") else d), "no package document"),
    "bad-opf.epub": (lambda t: _book(t, lambda n, d: d[:200] if n.endswith(".opf") else d),
                     "package document OEBPS/content.opf is damaged"),
    "spine-not-in-manifest.epub": (lambda t: _book(t, lambda n, d: d.replace(b'idref="c2"', b'idref="c9"')
                                                   if n.endswith(".opf") else d),
                                   "chapter 2 of its spine ('c9') is not in its manifest"),
    "missing-chapter.epub": (lambda t: _book(t, lambda n, d: None if n.endswith("chapter2.xhtml") else d),
                             "chapter 2 of its spine (OEBPS/Text/chapter2.xhtml) is missing"),
    "latin1-chapter.epub": (lambda t: _book(t, lambda n, d: "<p>café</p>".encode("latin-1")
                                            if n.endswith("chapter2.xhtml") else d),
                            "chapter 2 (OEBPS/Text/chapter2.xhtml) is not UTF-8"),
    "drm.epub": (lambda t: _book(t, extra={"META-INF/encryption.xml": ENCRYPTED % (
        b"http://www.w3.org/2001/04/xmlenc#aes128-cbc", b"OEBPS/Text/chapter2.xhtml")}), "DRM-protected"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_book_is_one_line_naming_it_and_the_others_go_on(tmp_path, name):
    good = _book(tmp_path / "good.epub")
    make, words = BAD[name]
    bad = make(tmp_path / name)
    fails_alone(tmp_path, good, bad, words)


def test_an_obfuscated_font_is_not_drm(tmp_path):
    path = _book(tmp_path / "fonts.epub", extra={"META-INF/encryption.xml": ENCRYPTED % (
        b"http://www.idpf.org/2008/embedding", b"OEBPS/fonts/serif.otf"), "OEBPS/fonts/serif.otf": bytes(64)})
    assert [s.text for s in _open(path).segments()] == TEXTS
    with pytest.raises(DocumentError, match="DRM"):
        list(_open(_book(tmp_path / "locked.epub", extra={"META-INF/encryption.xml": ENCRYPTED % (
            b"http://www.w3.org/2001/04/xmlenc#aes128-cbc", b"OEBPS/Text/chapter%201.xhtml")})).segments())
