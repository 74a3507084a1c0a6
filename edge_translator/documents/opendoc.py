"""OpenDocument text, presentations and spreadsheets (``.odt``, ``.odp``, ``.ods``).

An OpenDocument file is a zip whose text lives in ``content.xml`` (and, for headers and
footers, in the master pages of ``styles.xml``). Both go through the markup path of the
HTML documents (:mod:`edge_translator.core.markup`) with OpenDocument's own elements: a
paragraph or heading (``text:p``, ``text:h``) is a run, and ``text:span`` and ``text:a`` are
its inline elements, so a sentence across formatting or a link is translated whole and each
span's tags go back onto its words, byte for byte. Every other part (pictures, styles,
settings, the manifest, macros) is copied as it was, and ``mimetype`` stays first and
uncompressed.

Never translated: fields (page numbers, dates, sequence numbers, cross-references), the
authors and dates of comments, tracked deletions, the styles' number formats, forms and
scripts; in a spreadsheet, cells that hold a number, date, time, percentage, currency or
boolean, and cells with a formula; in a presentation, the master pages' placeholder prompts
(as in ``.pptx``). An empty element inside a sentence (``text:s`` for extra spaces, a
bookmark, a soft page break) splits it in two, so that nothing in the file is lost.

A password-protected file (its parts encrypted, as the manifest says) is refused in one
line; so are what :mod:`.package` refuses and a damaged ``content.xml``. A document with
macros keeps them untouched (``Basic/`` and ``Scripts/`` are copied as they are).
"""

from __future__ import annotations

import bisect
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

from ..core import markup
from . import htmldoc
from .base import DocumentError, FormatOptions, Segment, Translated, changed
from .package import read_package, repack

#: The elements whose content is never translated (see the module docstring).
SKIPPED = frozenset("""
dc:creator dc:date meta:date-string text:tracked-changes text:note-citation text:page-number text:page-count
text:page-continuation text:date text:time text:sequence text:sequence-ref text:bookmark-ref text:reference-ref
text:note-ref text:chapter text:file-name text:sheet-name text:template-name text:author-name text:author-initials
text:sender-firstname text:sender-lastname text:variable-decls text:sequence-decls text:user-field-decls
text:user-field-get text:variable-get text:expression text:database-display office:forms office:scripts
office:event-listeners office:font-face-decls office:styles office:automatic-styles office:settings
table:named-expressions table:database-ranges office:binary-data math:math presentation:date-time
presentation:footer-decl presentation:header-decl
""".split())
ODF = markup.Markup(skipped=SKIPPED, attributes=frozenset(), void=frozenset(),
                    inline=frozenset({"text:span", "text:a", "text:ruby", "text:ruby-base", "text:meta"}))
_NOT_TEXT_CELL = re.compile(r"<table:(?:covered-)?table-cell\b(?=[^>]*(?:office:value-type=\"(?!string\")|"
                            r"table:formula=))[^>]*?(/?)>")
#: Empty elements that stand for whitespace (extra spaces, a page break the layout found):
#: read as spaces of the same length, so a sentence around them stays whole; a paragraph
#: that is translated drops them (the translation brings its own spacing).
_BLANKS = re.compile(r"<text:(?:s|soft-page-break)\b[^>]*/>")
_CELL_END = "</table:table-cell>"
_COVERED_END = "</table:covered-table-cell>"


@dataclass(frozen=True)
class _Kind:
    name: str
    """What a user calls the file."""
    mimetype: str
    masters: bool
    """Whether the master pages (headers, footers) hold the document's own text."""


KINDS = {".odt": _Kind("OpenDocument text (.odt)", "application/vnd.oasis.opendocument.text", True),
         ".odp": _Kind("OpenDocument presentation (.odp)", "application/vnd.oasis.opendocument.presentation", False),
         ".ods": _Kind("OpenDocument spreadsheet (.ods)", "application/vnd.oasis.opendocument.spreadsheet", True)}


def _blanked(xml: str) -> str:
    return _BLANKS.sub(lambda m: " " * len(m.group()), xml)


def _shifted(unit: markup.Unit, by: int) -> markup.Unit:
    if isinstance(unit, markup.Block):
        return replace(unit, start=unit.start - by, end=unit.end - by,
                       tags=tuple(((a - by, b - by), (c - by, d - by)) for (a, b), (c, d) in unit.tags))
    return replace(unit, start=unit.start - by, end=unit.end - by)


def _rewrite(xml: str, blanked: str, found: list[markup.Unit], done: list[Translated]) -> str:
    """``xml`` with each changed unit rewritten (from its blanked text); the rest byte for byte."""
    out, cursor = [], 0
    for unit, item in zip(found, done):
        if item.text == unit.text:
            continue
        window = blanked[unit.start:unit.end]
        placed = item.marks if isinstance(unit, markup.Block) else None
        out += [xml[cursor:unit.start], markup.rebuild_units(window, [_shifted(unit, unit.start)], [item.text],
                                                             [placed])]
        cursor = unit.end
    out.append(xml[cursor:])
    return "".join(out)


def _units(xml: str, part: str) -> list[markup.Unit]:
    """The units of a part worth translating (with a letter), outside the cells that hold no text."""
    found = [u for u in htmldoc.units(xml, ODF) if any(ch.isalpha() for ch in u.text)]
    if part == "styles.xml":
        start, end = xml.find("<office:master-styles"), xml.find("</office:master-styles>")
        if start < 0 or end < 0:
            return []
        found = [u for u in found if start <= u.start and u.end <= end]
    closed = []
    for match in _NOT_TEXT_CELL.finditer(xml):
        if match.group(1):
            continue  # an empty cell
        close = _COVERED_END if match.group(0).startswith("<table:covered") else _CELL_END
        stop = xml.find(close, match.end())
        closed.append((match.start(), stop if stop >= 0 else len(xml)))
    if not closed:
        return found
    starts = [a for a, _ in closed]
    out = []
    for unit in found:
        k = bisect.bisect_right(starts, unit.start) - 1
        if k < 0 or unit.start >= closed[k][1]:
            out.append(unit)
    return out


class OpenDocument:
    """An OpenDocument file opened for translation; see the module docstring."""

    def __init__(self, path: Path, kind: _Kind):
        self.path = Path(path)
        self.kind = kind

    def _load(self) -> tuple[zipfile.ZipFile, list[tuple[str, str]]]:
        archive = zipfile.ZipFile(io.BytesIO(read_package(self.path, self.kind.name, "content.xml")))
        names = set(archive.namelist())
        if "META-INF/manifest.xml" in names and b"encryption-data" in archive.read("META-INF/manifest.xml"):
            raise DocumentError(self.path, f"is not a usable {self.kind.name}: it is password-protected; open it, "
                                           "remove the password (File > Properties > Security) and translate that copy")
        if "mimetype" in names and archive.read("mimetype").strip() != self.kind.mimetype.encode():
            found = archive.read("mimetype")[:80].decode("ascii", "replace")
            raise DocumentError(self.path, f"is not a usable {self.kind.name}: it says it is {found!r}; give it the "
                                           "suffix of its kind")
        parts = ["content.xml"] + (["styles.xml"] if self.kind.masters and "styles.xml" in names else [])
        return archive, [(part, self._text(archive, part)) for part in parts]

    def _text(self, archive: zipfile.ZipFile, part: str) -> str:
        from lxml import etree

        data = archive.read(part)
        try:
            etree.fromstring(data, etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True))
            return data.decode("utf-8-sig")
        except (etree.XMLSyntaxError, UnicodeDecodeError) as exc:
            raise DocumentError(self.path, f"its part {part} is damaged ({type(exc).__name__}: {str(exc)[:80]}); "
                                           "open the file in LibreOffice and save it again") from None

    def segments(self) -> Iterator[Segment]:
        """The document's text, ``content.xml`` then the master pages (see the module docstring)."""
        archive, parts = self._load()
        with archive:
            for part, xml in parts:
                yield from (htmldoc.segment(unit) for unit in _units(_blanked(xml), part))

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the document with each text replaced by its translation."""
        items = iter(translated)
        count = 0
        archive, parts = self._load()
        with archive:
            new: dict[str, bytes] = {}
            for part, xml in parts:
                blanked = _blanked(xml)
                found = _units(blanked, part)
                done = [t for _, t in zip(found, items)]
                count += len(done)
                if len(done) < len(found):
                    raise self._changed(f"more than {count} texts")
                if any(t.text != u.text for t, u in zip(done, found)):
                    new[part] = _rewrite(xml, blanked, found, done).encode("utf-8")
            if next(items, None) is not None:
                raise self._changed(f"only {count} texts")
            repack(archive, new, out, stored="mimetype")

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)


@dataclass(frozen=True)
class OpenDocumentFormat:
    """``.odt``, ``.odp`` and ``.ods``: one module, the kind told by the suffix."""

    name: str = "odf"
    suffixes: tuple[str, ...] = tuple(KINDS)

    def open(self, path: Path, options: FormatOptions) -> OpenDocument:
        """Open ``path``; reading happens in :meth:`OpenDocument.segments`."""
        return OpenDocument(path, KINDS[Path(path).suffix.lower()])


FORMAT = OpenDocumentFormat()
