"""Word .docx documents: what becomes a segment, identity, formatting put back, objects kept, errors."""

from __future__ import annotations

import io
import struct
import time
import zipfile
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

docx = pytest.importorskip("docx")

from docx.opc.constants import CONTENT_TYPE as CT  # noqa: E402
from docx.opc.constants import RELATIONSHIP_TYPE as RT  # noqa: E402
from docx.opc.packuri import PackURI  # noqa: E402
from docx.opc.part import Part  # noqa: E402
from docx.oxml import parse_xml  # noqa: E402
from lxml import etree  # noqa: E402

from edge_translator.documents import word  # noqa: E402
from edge_translator.documents.base import DocumentError, FormatOptions, Segment, Translated  # noqa: E402

from .translations import fake as _fake  # noqa: E402
from .translations import identity as _identity  # noqa: E402
from .translations import zh as _zh  # noqa: E402

FORMAT = word.FORMAT
W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
NS = f'xmlns:w="{W}" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'
VML = 'xmlns:v="urn:schemas-microsoft-com:vml"'


def q(name: str) -> str:
    return f"{{{W}}}{name}"


# --- building documents --------------------------------------------------------------

def _png() -> bytes:
    """A 1x1 white PNG."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(b"\x00\xff\xff\xff")) + chunk(b"IEND", b""))


def _xml(paragraph, xml: str):
    element = parse_xml(xml)
    paragraph._p.append(element)
    return element


def _hyperlink(paragraph, url: str, text: str):
    rid = paragraph.part.relate_to(url, RT.HYPERLINK, is_external=True)
    return _xml(paragraph, f'<w:hyperlink {NS} r:id="{rid}"><w:r><w:rPr><w:u w:val="single"/></w:rPr>'
                           f'<w:t>{text}</w:t></w:r></w:hyperlink>')


def _field(paragraph, instr: str, result: str):
    for inner in ('<w:fldChar w:fldCharType="begin"/>', f'<w:instrText xml:space="preserve"> {instr} </w:instrText>',
                  '<w:fldChar w:fldCharType="separate"/>', f'<w:t>{result}</w:t>', '<w:fldChar w:fldCharType="end"/>'):
        _xml(paragraph, f"<w:r {NS}>{inner}</w:r>")


def _textbox(paragraph, text: str):
    _xml(paragraph, f'<w:r {NS} {VML}><w:pict><v:shape style="width:90pt;height:30pt"><v:textbox>'
                    f'<w:txbxContent><w:p><w:r><w:t>{text}</w:t></w:r></w:p></w:txbxContent>'
                    f'</v:textbox></v:shape></w:pict></w:r>')


def _footnotes(doc, text: str):
    xml = (f'<w:footnotes {NS}><w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p>'
           f'</w:footnote><w:footnote w:id="1"><w:p><w:r><w:rPr><w:vertAlign w:val="superscript"/></w:rPr>'
           f'<w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> {text}</w:t></w:r></w:p></w:footnote>'
           f'</w:footnotes>')
    part = Part(PackURI("/word/footnotes.xml"), CT.WML_FOOTNOTES, xml.encode(), doc.part.package)
    doc.part.relate_to(part, RT.FOOTNOTES)


def _rich(path: Path) -> Path:
    """A document with every structure the format reads."""
    doc = docx.Document()
    doc.add_heading("Annual report", level=1)
    p = doc.add_paragraph("The quick ")
    p.add_run("brown").bold = True
    p.add_run(" fox jumps over the ")
    p.add_run("lazy").italic = True
    p.add_run(" dog.")
    p.add_run().add_picture(io.BytesIO(_png()))
    p = doc.add_paragraph("See the ")
    _hyperlink(p, "https://example.com/", "project page")
    p.add_run(" for details.")
    _xml(p, f'<w:r {NS}><w:rPr><w:vertAlign w:val="superscript"/></w:rPr><w:footnoteReference w:id="1"/></w:r>')
    doc.add_paragraph("Name:\tValue\nSecond line")
    table = doc.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Apples"
    table.cell(0, 1).text = "Pears"
    table.cell(1, 0).text = "Outer cell"
    table.cell(1, 1).add_table(rows=1, cols=1).cell(0, 0).text = "Nested cell"
    p = doc.add_paragraph("A box follows.")
    _textbox(p, "Text in a box.")
    section = doc.sections[0]
    section.header.paragraphs[0].text = "Company confidential"
    section.different_first_page_header_footer = True
    section.first_page_header.paragraphs[0].text = "First page header"
    p = section.footer.paragraphs[0]
    p.add_run("Page ")
    _field(p, "PAGE", "1")
    _footnotes(doc, "A note about foxes.")
    doc.save(path)
    return path


def _open(path: Path):
    return FORMAT.open(path, FormatOptions())


def _write(path: Path, translate) -> bytes:
    doc = _open(path)
    out = io.BytesIO()
    doc.write((translate(seg) for seg in doc.segments()), out)
    return out.getvalue()


# --- reading output back ---------------------------------------------------------------

def _key(rpr) -> str:
    if rpr is None:
        return ""
    clone = etree.fromstring(etree.tostring(rpr))
    for el in clone.iter():
        for name in [n for n in el.attrib if "rsid" in n]:
            del el.attrib[name]
    return "" if len(clone) == 0 else etree.tostring(clone, encoding="unicode")


def _chars(p) -> list[tuple[str, str]]:
    """Each character of a paragraph's own runs (hyperlinks' too) with its run formatting."""
    out = []
    for run in p:
        runs = [run] if run.tag == q("r") else run.findall(q("r")) if run.tag == q("hyperlink") else []
        for r in runs:
            for child in r:
                text = {q("t"): child.text or "", q("tab"): "\t", q("br"): "\n"}.get(child.tag, "")
                out += [(c, _key(r.find(q("rPr")))) for c in text]
    return out


def _paragraphs(data: bytes, part: str = "word/document.xml") -> list:
    root = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read(part))
    return list(root.iter(q("p")))


def _text(p) -> str:
    return "".join(c for c, _ in _chars(p))


# --- segments --------------------------------------------------------------------------

def test_format_declares_name_and_suffixes():
    assert FORMAT.name == "docx"
    assert FORMAT.suffixes == (".docx",)


def test_segments_cover_body_tables_text_boxes_headers_footers_and_notes(tmp_path):
    segs = list(_open(_rich(tmp_path / "a.docx")).segments())
    assert [s.text for s in segs] == [
        "Annual report",
        "The quick brown fox jumps over the lazy dog.\ufffc",
        "See the project page for details.\ufffc",
        "Name:\tValue\nSecond line",
        "Apples", "Pears", "Outer cell", "Nested cell",
        "A box follows.\ufffc", "Text in a box.",
        "Company confidential", "First page header",
        "Page 1",
        "\ufffc A note about foxes.",
    ]
    second = segs[1]
    assert [second.text[a:b] for a, b in second.marks] == ["brown", "lazy", "\ufffc"]
    assert [second.text[a:b] for a, b in second.keep] == ["\ufffc"]
    assert [segs[2].text[a:b] for a, b in segs[2].marks] == ["project page", "\ufffc"]
    assert [segs[12].text[a:b] for a, b in segs[12].keep] == ["1"]


def test_segments_twice_give_the_same_list(tmp_path):
    doc = _open(_rich(tmp_path / "a.docx"))
    assert list(doc.segments()) == list(doc.segments())


def test_sentence_split_over_runs_is_one_segment_with_the_bold_word_marked(tmp_path):
    doc = docx.Document()
    p = doc.add_paragraph()
    p.add_run("The results were ")
    p.add_run("very").bold = True
    p.add_run(" good.")
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    assert seg == Segment("The results were very good.", ((17, 21),))


def test_the_most_common_formatting_is_not_a_mark(tmp_path):
    doc = docx.Document()
    p = doc.add_paragraph()
    p.add_run("Mostly bold text ").bold = True
    p.add_run("plain")
    p.add_run(" and more bold.").bold = True
    p.add_run(" ")  # whitespace-only formatting is not a mark
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    assert [seg.text[a:b] for a, b in seg.marks] == ["plain"]


def test_runs_differing_only_in_rsid_and_language_are_one_group(tmp_path):
    doc = docx.Document()
    p = doc.add_paragraph()
    _xml(p, f'<w:r {NS} w:rsidR="00A1"><w:rPr><w:b/><w:lang w:val="en-GB"/></w:rPr><w:t>one </w:t></w:r>')
    _xml(p, f'<w:r {NS} w:rsidR="00B2"><w:rPr><w:b/></w:rPr><w:t>two</w:t></w:r>')
    p.add_run(" three four five six")
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    assert [seg.text[a:b] for a, b in seg.marks] == ["one two"]


def test_blank_and_punctuation_only_paragraphs_are_not_segments(tmp_path):
    doc = docx.Document()
    doc.add_paragraph("")
    doc.add_paragraph("  --- 42 ")
    doc.add_paragraph().add_run().add_picture(io.BytesIO(_png()))
    doc.add_paragraph("Words")
    doc.save(tmp_path / "a.docx")
    assert [s.text for s in _open(tmp_path / "a.docx").segments()] == ["Words"]


def test_headers_linked_to_previous_are_read_once(tmp_path):
    doc = docx.Document()
    doc.add_paragraph("Body one")
    doc.sections[0].header.paragraphs[0].text = "Shared header"
    doc.add_section()
    doc.add_paragraph("Body two")
    third = doc.add_section()
    third.header.is_linked_to_previous = False
    third.header.paragraphs[0].text = "Own header"
    doc.save(tmp_path / "a.docx")
    assert [s.text for s in _open(tmp_path / "a.docx").segments()] == [
        "Body one", "Body two", "Shared header", "Own header"]


# --- a document as Word writes it -------------------------------------------------------

_WPS = ('xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"')
_BOX = '<w:txbxContent><w:p><w:r><w:t>Boxed words</w:t></w:r></w:p></w:txbxContent>'
_WORD_BODY = [
    '<w:p w:rsidR="00A1" w:rsidRDefault="00A1"><w:pPr><w:pStyle w:val="Heading1"/></w:pPr>'
    '<w:bookmarkStart w:id="0" w:name="_Toc1"/><w:r w:rsidR="00A1"><w:rPr><w:lang w:val="en-US"/></w:rPr>'
    '<w:t>Getting</w:t></w:r><w:r w:rsidR="00B2"><w:t xml:space="preserve"> started</w:t></w:r>'
    '<w:bookmarkEnd w:id="0"/></w:p>',
    '<w:p><w:r><w:t xml:space="preserve">Install the </w:t></w:r><w:proofErr w:type="spellStart"/>'
    '<w:r><w:rPr><w:rStyle w:val="Strong"/></w:rPr><w:t>edgetool</w:t></w:r><w:proofErr w:type="spellEnd"/>'
    '<w:r><w:lastRenderedPageBreak/><w:t xml:space="preserve"> package</w:t></w:r>'
    '<w:ins w:id="5" w:author="Ann" w:date="2024-01-01T00:00:00Z"><w:r><w:t xml:space="preserve"> first</w:t>'
    '</w:r></w:ins><w:del w:id="6" w:author="Ann" w:date="2024-01-01T00:00:00Z"><w:r>'
    '<w:delText xml:space="preserve"> later</w:delText></w:r></w:del><w:r><w:t>.</w:t></w:r></w:p>',
    '<w:p><w:sdt><w:sdtPr><w:alias w:val="Title"/></w:sdtPr><w:sdtContent><w:r><w:t>Click to enter a title'
    '</w:t></w:r></w:sdtContent></w:sdt><w:r><w:t xml:space="preserve"> and more words</w:t></w:r></w:p>',
    f'<w:p><w:r><w:t xml:space="preserve">Before the box </w:t></w:r><w:r><mc:AlternateContent>'
    f'<mc:Choice Requires="wps"><w:drawing><wp:anchor><wp:docPr id="1" name="Text Box 1"/><a:graphic>'
    f'<a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:wsp>'
    f'<wps:txbx>{_BOX}</wps:txbx></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing></mc:Choice>'
    f'<mc:Fallback><w:pict><v:shape><v:textbox>{_BOX}</v:textbox></v:shape></w:pict></mc:Fallback>'
    f'</mc:AlternateContent></w:r><w:r><w:t>after it.</w:t></w:r></w:p>',
    '<w:p><w:fldSimple w:instr=" NUMPAGES "><w:r><w:t>4</w:t></w:r></w:fldSimple>'
    '<w:r><w:t xml:space="preserve"> pages in total</w:t></w:r></w:p>',
]


def _word_like(path: Path) -> Path:
    doc = docx.Document()
    body = doc.element.body
    for xml in _WORD_BODY:
        body.insert(len(body) - 1, parse_xml(xml.replace("<w:p", f"<w:p {NS} {VML} {_WPS}", 1)))
    doc.save(path)
    return path


def test_word_like_document_segments(tmp_path):
    segs = list(_open(_word_like(tmp_path / "w.docx")).segments())
    assert [(s.text, [s.text[a:b] for a, b in s.marks], [s.text[a:b] for a, b in s.keep]) for s in segs] == [
        ("Getting started", [], []),
        ("Install the edgetool package first.", ["edgetool", "first"], []),
        ("Click to enter a title and more words", ["Click to enter a title"], []),
        ("Before the box \ufffcafter it.", ["\ufffc"], ["\ufffc"]),
        ("Boxed words", [], []),
        ("Boxed words", [], []),
        ("4 pages in total", ["4"], ["4"]),
    ]


def test_word_like_document_keeps_tracked_changes_controls_and_boxes(tmp_path):
    path = _word_like(tmp_path / "w.docx")
    assert _entries(_write(path, _identity)) == _entries(path.read_bytes())
    paras = _paragraphs(_write(path, _fake))
    heading = paras[0]
    assert [c.tag[len(W) + 2:] for c in heading] == ["pPr", "bookmarkStart", "r", "bookmarkEnd"]
    assert _text(heading) == f"{_zh('Getting')} {_zh('started')}"
    install = paras[1]
    [ins] = install.findall(q("ins"))
    assert ins.get(q("author")) == "Ann" and "".join(t.text for t in ins.iter(q("t"))) == _zh("first")
    assert "".join(t.text for t in install.iter(q("delText"))) == " later"
    strong = [r for r in install.findall(q("r")) if r.find(f"{q('rPr')}/{q('rStyle')}") is not None]
    assert ["".join(t.text for t in r.iter(q("t"))) for r in strong] == [_zh("edgetool")]
    sdt = paras[2].find(q("sdt"))
    assert sdt.find(f"{q('sdtPr')}/{q('alias')}") is not None
    assert "".join(t.text for t in sdt.iter(q("t"))) == f"{_zh('Click')} {_zh('to')} {_zh('enter')} {_zh('a')} " \
                                                        f"{_zh('title')}"
    boxes = [p for p in paras if p.getparent().tag == q("txbxContent")]
    assert [_text(p) for p in boxes] == [f"{_zh('Boxed')} {_zh('words')}"] * 2
    last = paras[-1]
    assert last.find(q("fldSimple")) is not None and _text(last) == f" {_zh('pages')} {_zh('in')} {_zh('total')}"


def test_identity_of_a_pretty_printed_part_reads_back_the_same(tmp_path):
    path = _word_like(tmp_path / "w.docx")
    entries = _entries(path.read_bytes())
    pretty = etree.tostring(etree.fromstring(entries["word/document.xml"]), pretty_print=True,
                            xml_declaration=True, encoding="UTF-8", standalone=True)
    entries["word/document.xml"] = pretty.replace(b"\n", b"\r\n")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    out = _entries(_write(path, _identity))
    parser = etree.XMLParser(remove_blank_text=True)
    assert etree.tostring(etree.fromstring(out["word/document.xml"], parser), method="c14n") == \
        etree.tostring(etree.fromstring(pretty, parser), method="c14n")
    assert {k: v for k, v in out.items() if k != "word/document.xml"} == \
        {k: v for k, v in entries.items() if k != "word/document.xml"}


# --- identity --------------------------------------------------------------------------

def _entries(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return {name: z.read(name) for name in z.namelist()}


def test_identity_keeps_every_part(tmp_path):
    path = _rich(tmp_path / "a.docx")
    assert _entries(_write(path, _identity)) == _entries(path.read_bytes())


_run = st.tuples(st.text(st.sampled_from("abcXYZ ,.\t\n"), min_size=1, max_size=12),
                 st.booleans(), st.booleans(), st.sampled_from([None, None, "FF0000"]))
_para = st.lists(_run, min_size=1, max_size=6)


def _generated(path: Path, paras, in_table: bool) -> Path:
    doc = docx.Document()
    container = doc.add_table(rows=1, cols=1).cell(0, 0) if in_table else doc
    for runs in paras:
        p = container.add_paragraph()
        for text, bold, italic, colour in runs:
            run = p.add_run(text)
            run.bold, run.italic = bold or None, italic or None
            if colour:
                run.font.color.rgb = docx.shared.RGBColor.from_string(colour)
    doc.save(path)
    return path


def _upper(seg: Segment) -> Translated:
    return Translated(seg.text.upper(), seg.marks)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_para, min_size=1, max_size=5), st.booleans())
def test_identity_and_rewritten_formatting_hold_for_generated_documents(tmp_path, paras, in_table):
    path = _generated(tmp_path / "g.docx", paras, in_table)
    assert _entries(_write(path, _identity)) == _entries(path.read_bytes())
    # a translation that keeps every position rewrites the runs: each visible character
    # keeps its formatting, and the text is the translation
    before, after = _paragraphs(path.read_bytes()), _paragraphs(_write(path, _upper))
    assert len(before) == len(after)
    for old, new in zip(before, after):
        old_chars, new_chars = _chars(old), _chars(new)
        expected = _text(old).upper() if any(c.isalpha() for c, _ in old_chars) else _text(old)
        assert _text(new) == expected
        assert [k for c, k in old_chars if not c.isspace()] == [k for c, k in new_chars if not c.isspace()]


# --- translation -----------------------------------------------------------------------

def test_fake_translation_puts_bold_and_italic_on_the_translated_words(tmp_path):
    path = _rich(tmp_path / "a.docx")
    out = _write(path, _fake)
    p = _paragraphs(out)[1]
    chars = _chars(p)
    bold = "".join(c for c, k in chars if "<w:b/>" in k)
    italic = "".join(c for c, k in chars if "<w:i/>" in k)
    assert bold == _zh("brown") and italic == _zh("lazy")
    assert {k for c, k in chars if c not in bold + italic} == {""}
    assert _text(p) == f"{_zh('The')} {_zh('quick')} {bold} {_zh('fox')} {_zh('jumps')} {_zh('over')} " \
                       f"{_zh('the')} {italic} {_zh('dog')}."
    # the picture is still there, after the text, and its image part is unchanged
    assert p[-1].tag == q("r") and p[-1].find(q("drawing")) is not None
    assert _entries(out)["word/media/image1.png"] == _png()


def test_hyperlink_keeps_its_target_and_holds_its_translation(tmp_path):
    path = _rich(tmp_path / "a.docx")
    p = _paragraphs(_write(path, _fake))[2]
    [link] = p.findall(q("hyperlink"))
    assert link.get("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id")
    assert "".join(t.text for t in link.iter(q("t"))) == f"{_zh('project')} {_zh('page')}"
    assert link.find(f"{q('r')}/{q('rPr')}/{q('u')}") is not None
    assert p[-1].find(q("footnoteReference")) is not None


def test_fields_tabs_breaks_text_boxes_headers_footers_and_notes_are_translated(tmp_path):
    out = _write(_rich(tmp_path / "a.docx"), _fake)
    texts = [_text(p) for p in _paragraphs(out)]
    assert f"{_zh('Name')}:\t{_zh('Value')}\n{_zh('Second')} {_zh('line')}" in texts
    assert f"{_zh('Nested')} {_zh('cell')}" in texts
    assert f"{_zh('Text')} {_zh('in')} {_zh('a')} {_zh('box')}." in texts
    assert [_text(p) for p in _paragraphs(out, "word/header1.xml")] == [f"{_zh('Company')} {_zh('confidential')}"]
    footer = _paragraphs(out, "word/footer1.xml")[0]
    kinds = [c.get(q("fldCharType")) for c in footer.iter(q("fldChar"))]
    assert kinds == ["begin", "separate", "end"]
    assert "".join(t.text for t in footer.iter(q("instrText"))).strip() == "PAGE"
    assert _text(footer) == f"{_zh('Page')} 1"
    note = _paragraphs(out, "word/footnotes.xml")[-1]
    assert note.find(f"{q('r')}/{q('footnoteRef')}") is not None
    assert _text(note) == f" {_zh('A')} {_zh('note')} {_zh('about')} {_zh('foxes')}."


def test_marks_go_where_the_translation_puts_them(tmp_path):
    doc = docx.Document()
    p = doc.add_paragraph("The ")
    p.add_run("brown").bold = True
    p.add_run(" fox.")
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    out = _write(tmp_path / "a.docx", lambda s: Translated("狐狸是棕色的。", ((3, 5),)))
    chars = _chars(_paragraphs(out)[0])
    assert "".join(c for c, _ in chars) == "狐狸是棕色的。"
    assert ["<w:b/>" in k for _, k in chars] == [False, False, False, True, True, False, False]
    assert {k for _, k in chars if "<w:b/>" not in k} == {""}
    # a mark that could not be placed loses its formatting, not its text
    out = _write(tmp_path / "a.docx", lambda s: Translated("狐狸是棕色的。", (None,)))
    assert _chars(_paragraphs(out)[0]) == [(c, "") for c in "狐狸是棕色的。"]
    assert seg.marks == ((4, 9),)


def test_objects_go_to_their_kept_span_or_stay_at_their_relative_place(tmp_path):
    doc = docx.Document()
    p = doc.add_paragraph()
    _xml(p, f'<w:bookmarkStart {NS} w:id="0" w:name="intro"/>')
    p.add_run("See page ")
    _field(p, "PAGEREF intro", "3")
    p.add_run(" for more.")
    _xml(p, f'<w:bookmarkEnd {NS} w:id="0"/>')
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    assert seg.text == "See page 3 for more." and seg.keep == ((9, 10),) == seg.marks

    def order(p):  # each child of the paragraph: a run's text, or its first element's name
        return ["".join(t.text for t in c.iter(q("t"))) or next(x for x in c if x.tag != q("rPr")).tag[len(W) + 2:]
                if c.tag == q("r") else c.tag[len(W) + 2:] for c in p]

    out = _write(tmp_path / "a.docx", lambda s: Translated("更多内容见第3页。", ((6, 7),)))
    assert order(_paragraphs(out)[0]) == ["bookmarkStart", "更多内容见第", "fldChar", "instrText", "fldChar",
                                          "3", "fldChar", "页。", "bookmarkEnd"]
    out = _write(tmp_path / "a.docx", lambda s: Translated("更多内容见第页。", (None,)))
    assert order(_paragraphs(out)[0]) == ["bookmarkStart", "更多内容", "fldChar", "instrText", "fldChar",
                                          "3", "fldChar", "见第页。", "bookmarkEnd"]


def test_a_field_spanning_paragraphs_keeps_its_parts_in_place(tmp_path):
    doc = docx.Document()
    first = doc.add_paragraph()
    _xml(first, f'<w:r {NS}><w:fldChar w:fldCharType="begin"/></w:r>')
    _xml(first, f'<w:r {NS}><w:instrText> TOC \\o "1-3" </w:instrText></w:r>')
    _xml(first, f'<w:r {NS}><w:fldChar w:fldCharType="separate"/></w:r>')
    first.add_run("Introduction")
    last = doc.add_paragraph("Conclusion")
    _xml(last, f'<w:r {NS}><w:fldChar w:fldCharType="end"/></w:r>')
    doc.save(tmp_path / "a.docx")
    assert [s.text for s in _open(tmp_path / "a.docx").segments()] == ["Introduction", "Conclusion"]
    one, two = _paragraphs(_write(tmp_path / "a.docx", _fake))
    assert [c.tag.rpartition("}")[2] for r in one for c in r if c.tag != q("rPr")] == [
        "fldChar", "instrText", "fldChar", "t"]
    assert _text(one) == _zh("Introduction") and _text(two) == _zh("Conclusion")
    assert two[-1][0].get(q("fldCharType")) == "end"


def test_text_and_a_picture_in_one_run_are_split_keeping_the_picture(tmp_path):
    doc = docx.Document()
    run = doc.add_paragraph().add_run("Logo here")
    run.bold = True
    run.add_picture(io.BytesIO(_png()))
    run._r.append(parse_xml(f'<w:t {NS}>and more text</w:t>'))
    doc.save(tmp_path / "a.docx")
    [seg] = list(_open(tmp_path / "a.docx").segments())
    assert seg.text == "Logo here\ufffcand more text" and seg.keep == ((9, 10),)
    p = _paragraphs(_write(tmp_path / "a.docx", _fake))[0]
    drawings = [r for r in p if r.find(q("drawing")) is not None]
    assert len(drawings) == 1 and drawings[0].find(f"{q('rPr')}/{q('b')}") is not None
    assert _text(p) == f"{_zh('Logo')} {_zh('here')}{_zh('and')} {_zh('more')} {_zh('text')}"


def test_written_text_is_valid_xml_with_spaces_preserved(tmp_path):
    doc = docx.Document()
    doc.add_paragraph("Hello world")
    doc.save(tmp_path / "a.docx")
    out = _write(tmp_path / "a.docx", lambda s: Translated(" 你好\x0b世界\ufffc \r\n再见\x00"))
    [p] = _paragraphs(out)
    assert _text(p) == " 你好世界 \n再见"
    assert p.find(f"{q('r')}/{q('t')}").get("{http://www.w3.org/XML/1998/namespace}space") == "preserve"
    assert docx.Document(io.BytesIO(out)).paragraphs[0].text == " 你好世界 \n再见"


@pytest.mark.perf
def test_a_large_document_is_read_and_written_in_linear_time(tmp_path):
    doc = docx.Document()
    for i in range(2000):
        p = doc.add_paragraph(f"Paragraph number {i} has ")
        p.add_run("bold").bold = True
        p.add_run(" words in it.")
    doc.save(tmp_path / "big.docx")
    start = time.perf_counter()
    out = _write(tmp_path / "big.docx", _fake)
    elapsed = time.perf_counter() - start
    assert len(_paragraphs(out)) == 2000
    assert elapsed < 5, elapsed  # about 0.3 s here (1 s for 8,000); a quadratic walk takes far longer


# --- errors ----------------------------------------------------------------------------

def _error(path: Path) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        list(_open(path).segments())
    assert str(path) in str(info.value)
    return info.value


def test_random_bytes_are_not_a_docx(tmp_path):
    path = tmp_path / "random.docx"
    path.write_bytes(bytes(range(256)) * 4)
    assert "is not a Word .docx file (it is not a zip archive" in _error(path).reason


def test_a_truncated_docx_is_refused(tmp_path):
    data = _rich(tmp_path / "a.docx").read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(data[: len(data) // 2])
    assert "is not a Word .docx file" in _error(path).reason


def test_a_zip_without_the_document_part_is_refused(tmp_path):
    path = tmp_path / "empty.docx"
    entries = _entries(_rich(tmp_path / "a.docx").read_bytes())
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            if name != "word/document.xml":
                z.writestr(name, data)
    reason = _error(path).reason
    assert "is not a Word .docx file (a part is missing" in reason and "word/document.xml" in reason


@pytest.mark.parametrize("part", ["word/document.xml", "word/footnotes.xml"])
def test_malformed_xml_is_refused(tmp_path, part):
    path = tmp_path / "bad.docx"
    entries = _entries(_rich(tmp_path / "a.docx").read_bytes())
    entries[part] = entries[part][:-40]
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    assert "is not a Word .docx file (XMLSyntaxError" in _error(path).reason


def test_another_office_file_is_refused_with_its_kind(tmp_path):
    path = tmp_path / "sheet.docx"
    entries = _entries(_rich(tmp_path / "a.docx").read_bytes())
    entries["[Content_Types].xml"] = entries["[Content_Types].xml"].replace(
        b"wordprocessingml.document.main+xml", b"spreadsheetml.sheet.main+xml")
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries.items():
            z.writestr(name, data)
    assert "is not a Word .docx file (its main part is 'application/vnd.openxmlformats-officedocument." \
           "spreadsheetml.sheet.main+xml')" in _error(path).reason


def test_a_missing_file_is_named(tmp_path):
    assert "cannot read the file" in _error(tmp_path / "nope.docx").reason


def test_a_translation_count_that_does_not_match_is_refused(tmp_path):
    path = _rich(tmp_path / "a.docx")
    segs = list(_open(path).segments())
    with pytest.raises(DocumentError, match="changed while it was translated"):
        _open(path).write([_identity(s) for s in segs[:-1]], io.BytesIO())
    with pytest.raises(DocumentError, match="changed while it was translated"):
        _open(path).write([_identity(s) for s in segs + segs[:1]], io.BytesIO())
