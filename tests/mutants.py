"""Seeded mutants of a small file of every format ``docs`` reads, for the fuzz test.

Each mutant comes from one seed, one format and one kind of damage, through
``random.Random(f"{seed}:{suffix}:{kind}")``, so the same seed gives the same bytes on every
machine and a failure names what reproduces it. The seed files are made by the makers the
format tests use; nothing binary is committed.
"""

from __future__ import annotations

import io
import random
import re
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .docfiles import parts
from .test_daemon_documents import make_docx, make_pptx, make_xlsx
from .test_doc_epub import _book
from .test_doc_opendoc import ROOT as ODF_ROOT
from .test_doc_opendoc import _odt
from .test_doc_pdf import _pdf

#: What the external-entity mutants point at; it must never reach any output or message.
SECRET = "Zq7-edge-translator-fuzz-secret-x9"

TEXT = {
    ".txt": "Hello there.\n\nThe cat sat on the mat. It was warm.\n",
    ".md": "# A short guide\n\nRead the *whole* manual [first](http://example.com).\n\n- Keep it `dry`.\n",
    ".srt": "1\n00:00:01,000 --> 00:00:02,500\nWhere is the station?\n\n2\n00:00:03,000 --> 00:00:04,000\n"
            "I like <i>green</i> tea.\n",
    ".vtt": "WEBVTT\n\n00:00:01.000 --> 00:00:02.500\nWhere is the station?\n\n00:00:03.000 --> 00:00:04.000\n"
            "I like green tea.\n",
    ".html": '<!DOCTYPE html>\n<html><head><title>The guide</title></head>\n<body><h1>Welcome</h1>\n'
             '<p>Read the <b>whole</b> manual <a href="/x" title="Go there">first</a>.</p>\n'
             '<img src="a.png" alt="A green park"></body></html>\n',
    ".csv": 'id,text\n1,Hello there.\n2,"The cat sat, then it slept."\n',
    ".tsv": "id\ttext\n1\tHello there.\n2\tThe cat sat on the mat.\n",
}
#: The columns (by number) the tables are translated by: the text of the CSV/TSV seeds, and
#: column B of the workbook.
COLUMNS = ("2",)

_ODP = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ODF_ROOT} xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" \
xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0">
<office:body><office:presentation><draw:page draw:name="page1"><draw:frame svg:x="1cm" svg:y="1cm">\
<draw:text-box><text:p>Where is the <text:span>station</text:span>?</text:p></draw:text-box></draw:frame>\
</draw:page></office:presentation></office:body></office:document-content>
"""
_ODS = f"""<?xml version="1.0" encoding="UTF-8"?>
<office:document-content {ODF_ROOT}>
<office:body><office:spreadsheet><table:table table:name="Sheet1"><table:table-row>\
<table:table-cell office:value-type="string"><text:p>Green tea</text:p></table:table-cell>\
<table:table-cell office:value-type="float" office:value="3"><text:p>3</text:p></table:table-cell>\
</table:table-row></table:table></office:spreadsheet></office:body></office:document-content>
"""
_ODF = "application/vnd.oasis.opendocument."
#: For each zip format, the part that holds its text, where damage does the most.
TEXT_PART = {".docx": "word/document.xml", ".pptx": "ppt/slides/slide1.xml", ".xlsx": "xl/worksheets/sheet1.xml",
             ".odt": "content.xml", ".odp": "content.xml", ".ods": "content.xml",
             ".epub": "OEBPS/Text/chapter2.xhtml"}
ZIPS = tuple(TEXT_PART)
SUFFIXES = (*TEXT, *ZIPS, ".pdf")


def seed_files(folder: Path) -> dict[str, bytes]:
    """One small, good file of every format, by suffix (made in ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    seeds = {suffix: text.encode() for suffix, text in TEXT.items()}
    sentences = ["Where is the train station?", "I like green tea."]
    seeds[".docx"], seeds[".pptx"], seeds[".xlsx"] = make_docx(sentences), make_pptx(sentences), \
        make_xlsx(["Text", *sentences])
    seeds[".odt"] = _odt(folder / "seed.odt").read_bytes()
    seeds[".odp"] = _odt(folder / "seed.odp", _ODP, (_ODF + "presentation").encode()).read_bytes()
    seeds[".ods"] = _odt(folder / "seed.ods", _ODS, (_ODF + "spreadsheet").encode()).read_bytes()
    seeds[".epub"] = _book(folder / "seed.epub").read_bytes()
    seeds[".pdf"] = _pdf(folder / "seed.pdf", pages=1).read_bytes()
    return seeds


@dataclass(frozen=True)
class Mutant:
    """One damaged file: its name in a folder of mutants, its bytes, and how it was made."""

    name: str
    data: bytes
    what: str
    """The seed, the format and the damage, enough to make it again."""


# -- the damage -----------------------------------------------------------------------------------
def _at(rng: random.Random, data: bytes) -> int:
    return rng.randrange(1, max(2, len(data)))


def truncate(rng, data, secret):
    at = _at(rng, data)
    return data[:at], f"cut at byte {at} of {len(data)}"


def flip(rng, data, secret):
    raw = bytearray(data)
    spots = sorted(rng.randrange(len(raw)) for _ in range(rng.randint(1, 8)))
    for spot in spots:
        raw[spot] ^= rng.randrange(1, 256)
    return bytes(raw), f"bytes flipped at {spots}"


def invalid_utf8(rng, data, secret):
    at, bad = _at(rng, data), rng.choice([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\x80\x80", b"\xf8\x88\x80\x80\x80"])
    return data[:at] + bad + data[at:], f"{bad!r} (not UTF-8) at byte {at}"


def utf16_without_bom(rng, data, secret):
    codec = rng.choice(["utf-16-le", "utf-16-be"])
    return data.decode("utf-8").encode(codec), f"{codec} without a BOM"


def lone_surrogate(rng, data, secret):
    at = _at(rng, data)
    bad = rng.choice([b"\xed\xa0\x80", b"\xed\xbf\xbf", b"&#xD800;", b"&#55296;"])
    return data[:at] + bad + data[at:], f"a lone surrogate {bad!r} at byte {at}"


def nul_bytes(rng, data, secret):
    at, count = _at(rng, data), rng.choice([1, 2, 64])
    return data[:at] + b"\0" * count + data[at:], f"{count} NUL bytes at byte {at}"


_LAUGHS = "".join(f'<!ENTITY lol{i} "{f"&lol{i - 1};" * 10}">' for i in range(1, 10))
BILLION_LAUGHS = f'<!ENTITY lol0 "lol">{_LAUGHS}'
QUADRATIC = f'<!ENTITY big "{"x" * 50_000}">'


def _doctype(data: bytes, subset: str, reference: str, rng: random.Random, external: str = "") -> tuple[bytes, str]:
    """``data`` (XML or HTML) with a DOCTYPE holding ``subset`` and ``reference`` in a text node."""
    text = data.decode("utf-8")
    text = re.sub(r"<!DOCTYPE[^>\[]*(\[.*?\])?\s*>", "", text, count=1, flags=re.S | re.I)
    root = re.search(r"<([A-Za-z_][\w:.-]*)", re.sub(r"<\?.*?\?>", "", text, flags=re.S))
    decl = re.match(r"\s*<\?xml.*?\?>", text, re.S)
    at = decl.end() if decl else 0
    doctype = f"<!DOCTYPE {root.group(1) if root else 'html'}{external}{f' [{subset}]' if subset else ''}>"
    text = text[:at] + doctype + text[at:]
    nodes = [m for m in re.finditer(r">([^<>]*[A-Za-z][^<>]*)<", text) if m.start() > at + len(doctype)]
    if nodes:
        node = rng.choice(nodes)
        text = text[:node.start(1)] + reference + text[node.start(1):]
    return text.encode("utf-8"), f"{doctype[:60]}... with {reference[:40]} in {'a text node' if nodes else 'no node'}"


def entity_bomb(rng, data, secret):
    if rng.random() < 0.5:
        return _doctype(data, BILLION_LAUGHS, "&lol9;", rng)
    return _doctype(data, QUADRATIC, "&big;" * 2_000, rng)


def external_entity(rng, data, secret: Path):
    url = secret.with_suffix(".txt").as_uri()
    dtd = secret.with_suffix(".dtd").as_uri()
    way = rng.randrange(5)
    if way == 0:
        return _doctype(data, f'<!ENTITY xxe SYSTEM "{url}">', "&xxe;", rng)
    if way == 1:
        return _doctype(data, f'<!ENTITY xxe SYSTEM "{secret.with_suffix(".txt")}">', "&xxe;", rng)
    if way == 2:
        return _doctype(data, f'<!ENTITY % dtd SYSTEM "{dtd}"> %dtd;', "&leak;", rng)
    if way == 3:
        return _doctype(data, "", "&leak;", rng, external=f' SYSTEM "{dtd}"')
    return _doctype(data, "", f'<xi:include xmlns:xi="http://www.w3.org/2001/XInclude" href="{url}" parse="text"/>',
                    rng)


def write_secret(folder: Path) -> Path:
    """The files the external entities point at: ``secret.txt`` holds :data:`SECRET`, and
    ``secret.dtd`` declares ``&leak;`` as it. Returns their common stem's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "secret.txt").write_text(SECRET + "\n", encoding="utf-8")
    (folder / "secret.dtd").write_text(f'<!ENTITY leak "{SECRET}">\n', encoding="utf-8")
    return folder / "secret"


def _rezip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED)
    return out.getvalue()


def _xml_parts(members: dict[str, bytes]) -> list[str]:
    return [n for n in members if n.endswith((".xml", ".rels", ".opf", ".ncx", ".xhtml"))]


def _in_part(damage: Callable, main: str) -> Callable:
    """``damage`` done to one XML part of a zip package (its text part half of the time)."""
    def in_part(rng, data, secret):
        members = parts(data)
        name = main if rng.random() < 0.5 else rng.choice(_xml_parts(members))
        members[name], what = damage(rng, members[name], secret)
        return _rezip(members), f"{name}: {what}"
    return in_part


def mismatched_tag(rng, data, secret):
    text = data.decode("utf-8")
    ends = list(re.finditer(r"</([\w:.-]+)>", text))
    if not ends:
        return data + b"</nope>", "</nope> at the end"
    end = rng.choice(ends)
    return (text[:end.start()] + f"</{end.group(1)}-x>" + text[end.end():]).encode("utf-8"), \
        f"</{end.group(1)}> at {end.start()} made </{end.group(1)}-x>"


def part_encoding(rng, data, secret):
    return rng.choice([invalid_utf8, utf16_without_bom, lone_surrogate, nul_bytes])(rng, data, secret)


def missing_part(main: str) -> Callable:
    """A part of a zip package removed (the one its format requires, 40% of the time)."""
    def missing(rng, data, secret):
        members = parts(data)
        name = main if rng.random() < 0.4 else rng.choice(list(members))
        del members[name]
        return _rezip(members), f"{name} removed"
    return missing


#: The damage done to a text file (and an HTML file's markup), by name.
TEXT_KINDS = {"truncate": truncate, "flip": flip, "invalid-utf8": invalid_utf8, "utf16-no-bom": utf16_without_bom,
              "surrogate": lone_surrogate, "nul": nul_bytes}
MARKUP_KINDS = {"entity-bomb": entity_bomb, "external-entity": external_entity}


def kinds(suffix: str) -> dict[str, Callable]:
    """The damage done to a file of ``suffix``, by name."""
    if suffix in ZIPS:
        main = TEXT_PART[suffix]
        return {"truncate": truncate, "flip": flip, "cut-part": _in_part(truncate, main),
                "mismatched-tag": _in_part(mismatched_tag, main), "missing-part": missing_part(_required(suffix)),
                "flip-part": _in_part(flip, main), "part-encoding": _in_part(part_encoding, main),
                **{name: _in_part(damage, main) for name, damage in MARKUP_KINDS.items()}}
    if suffix == ".pdf":
        return {"truncate": truncate, "flip": flip, "nul": nul_bytes}
    return {**TEXT_KINDS, **(MARKUP_KINDS if suffix == ".html" else {})}


def _required(suffix: str) -> str:
    from edge_translator.documents import format_for

    return format_for("x" + suffix).package[1]


def mutants(seeds: dict[str, bytes], numbers: list[int], secret: Path) -> Iterator[Mutant]:
    """Every mutant of ``seeds`` for each seed number in ``numbers``."""
    for number in numbers:
        for suffix, data in seeds.items():
            for kind, damage in kinds(suffix).items():
                rng = random.Random(f"{number}:{suffix}:{kind}")
                damaged, how = damage(rng, data, secret)
                name = f"{suffix[1:]}-{number}-{kind}{suffix}"
                yield Mutant(name, damaged, f"seed {number}, {suffix[1:]}, {kind}: {how}")


def parse_seeds(spec: str) -> list[int]:
    """``"0-2"``, ``"7"`` or ``"0-99,250"``: the seed numbers of ``EDGE_TRANSLATOR_FUZZ_SEEDS``."""
    numbers: list[int] = []
    for piece in spec.split(","):
        first, _, last = piece.strip().partition("-")
        numbers.extend(range(int(first), int(last or first) + 1))
    return numbers
