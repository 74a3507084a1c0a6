"""Word ``.docx`` documents: every paragraph is a segment, written back with its runs' formatting.

Read: the body (tables and nested tables included), the headers and footers of every
section (default, first-page and even-page; a part shared by several sections is read
once), then the footnotes, endnotes and comments. Paragraphs inside text boxes
(``w:txbxContent``) and block content controls are read where they stand; a text box in
``mc:AlternateContent`` has a DrawingML and a VML copy, and both are translated.

A paragraph's runs are merged into one text (``w:tab`` is a tab, a text-wrapping
``w:br`` or ``w:cr`` a line break), so a sentence split over runs is translated whole.
Adjacent runs with the same formatting (the ``w:rPr`` XML, ignoring ``rsid*``, ``w:lang``
and ``w:noProof``) form a group; the groups whose formatting is not the paragraph's most
common one become :attr:`Segment.marks`, and so does each hyperlink, tracked insertion,
smart tag or inline content control holding only plain text runs (the element is kept
and its span of the translation goes inside it, in its most common run formatting).

Everything else stays as it was, by reference to the original XML elements:

* Visible inline objects (complex and simple fields, drawings and pictures, footnote and
  endnote references, symbols, math, and containers holding more than plain runs) are
  marks that are also :attr:`Segment.keep` spans: their text is the field result
  (``"3"`` for a page number) or U+FFFC for an object without text. The writer puts the
  untouched elements where the kept span landed in the translation.
* Invisible markers (bookmarks, comment ranges, proofing marks, deletions, page and
  column breaks, a field begun or ended in another paragraph) have no text; the writer
  puts them at the same relative position in the translation (the start stays the
  start, the end the end).

Limitations: the result text of a field within one paragraph (a REF, an old-style
HYPERLINK field) is kept, not translated; a field running over several paragraphs has its
plain result text translated. Containers holding more than plain runs (a tracked insertion
with a picture, a table-of-contents entry's link holding its page field) are kept whole,
untranslated; Word rebuilds a table of contents from the translated headings. A hyperlink's inner
formatting differences are dropped (its text takes its most common formatting), as is
whitespace-only formatting (an underlined space). Charts, SmartArt, the glossary
(building blocks) and document properties are not read. A paragraph whose translation
equals its text, marks included, is left untouched, so an identity translation changes
no XML; a rewritten paragraph's new runs have no ``rsid`` attributes.
"""

from __future__ import annotations

import copy
import io
import re
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..core.errors import require
from .base import DocumentError, FormatOptions, Segment, Span, Translated, changed

_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"
OBJECT = "\ufffc"
"""The text of an inline object without text (a picture, a footnote reference)."""


def _w(name: str) -> str:
    return f"{{{_W}}}{name}"


_P, _R, _RPR, _PPR, _T, _BR = (_w(n) for n in ("p", "r", "rPr", "pPr", "t", "br"))
_FLD_CHAR, _SECT_PR = _w("fldChar"), _w("sectPr")
_TEXT_CHILDREN = {_w("tab"): "\t", _w("cr"): "\n", _w("noBreakHyphen"): "\u2011",
                  _w("softHyphen"): "", _w("lastRenderedPageBreak"): ""}
_INSTR = {_w("instrText"), _w("delInstrText")}
_RUN_MARKERS = {_w("commentReference"), _w("annotationRef")}
_MARKERS = {_w(n) for n in (
    "bookmarkStart", "bookmarkEnd", "proofErr", "commentRangeStart", "commentRangeEnd",
    "permStart", "permEnd", "del", "moveFrom", "moveFromRangeStart", "moveFromRangeEnd",
    "moveToRangeStart", "moveToRangeEnd", "customXmlInsRangeStart", "customXmlInsRangeEnd",
    "customXmlDelRangeStart", "customXmlDelRangeEnd")}
_CONTAINERS = {_w(n) for n in ("hyperlink", "ins", "moveTo", "smartTag", "customXml", "dir", "bdo")}
_CONTAINER_PROPS = {_w(n) for n in ("smartTagPr", "customXmlPr", "sdtPr", "sdtEndPr")}
_IGNORED_RPR = {_w("lang"), _w("noProof")}
_NOTES_RELS = tuple(f"{_RELS}/{n}" for n in ("footnotes", "endnotes", "comments"))
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffc\ufffe\uffff]")
_DOCX_EXTRA = "docs"


@dataclass(frozen=True)
class _Atom:
    """One element of a paragraph: a run's child (``run`` set) or a paragraph's child."""

    kind: str
    """``text``, ``begin``/``separate``/``end``/``instr`` (field parts), ``marker``,
    ``object`` or ``container``."""
    element: Any
    run: Any = None
    run_size: int = 0
    """How many atoms ``run`` gave; all of them together put the run back as it was."""
    text: str = ""


@dataclass(frozen=True)
class _Item:
    """Something of the paragraph the writer places: a mark or an invisible marker."""

    kind: str
    """``format`` (a run group), ``container``, ``object`` or ``marker``."""
    span: Span
    """Its span in the source text (zero-width for a marker)."""
    order: int
    rpr: Any = None
    atoms: tuple[_Atom, ...] = ()


@dataclass
class _Paragraph:
    """A paragraph read into its text, its marks and the elements to put back."""

    element: Any
    text: str = ""
    dominant: Any = None
    marks: list[_Item] = field(default_factory=list)
    markers: list[_Item] = field(default_factory=list)

    @property
    def segment(self) -> Segment | None:
        keep = tuple(m.span for m in self.marks if m.kind == "object")
        bare = list(self.text)
        for a, b in keep:
            bare[a:b] = [" "] * (b - a)
        if not any(ch.isalpha() for ch in bare):
            return None
        return Segment(self.text, tuple(m.span for m in self.marks), keep)

    def rewrite(self, translated: Translated) -> None:
        """Replace the paragraph's text runs by runs holding ``translated``."""
        text = translated.text
        spans = list(translated.marks)[:len(self.marks)]
        spans += [None] * (len(self.marks) - len(spans))
        taken: list[Span] = []
        events: list[tuple[int, int, int, _Item]] = []
        missing = []
        for item, span in zip(self.marks, spans):
            if _usable(span, len(text), item.kind == "object") and _free(span, taken):
                taken.append(span)
                events.append((span[0], span[1], item.order, item))
            else:
                missing.append(item)
        lost = []
        for item in missing:  # not placed by the translator: look for its source text
            a, b = item.span
            span = _find_free(text, self.text[a:b].strip(), taken)
            if span is not None:
                taken.append(span)
                events.append((span[0], span[1], item.order, item))
            elif item.kind == "object":
                lost.append(item)
        for item in lost + self.markers:
            x = self._relative(item.span[0], text, taken)
            events.append((x, x, item.order, item))
        events.sort(key=lambda e: (e[0], e[2]))
        children: list[Any] = []
        cursor = 0
        for start, end, _, item in events:
            if start > cursor:
                children += _runs(text[cursor:start], self.dominant)
            children += _emit(item, text[start:end])
            cursor = max(cursor, end)
        children += _runs(text[cursor:], self.dominant)
        for child in list(self.element):
            if child.tag != _PPR:
                self.element.remove(child)
        self.element.extend(children)

    def _relative(self, offset: int, text: str, taken: list[Span]) -> int:
        """The offset in ``text`` at the same relative place as ``offset`` in the source."""
        if offset >= len(self.text):
            x = len(text)
        else:
            x = round(offset * len(text) / len(self.text)) if self.text else 0
        for a, b in taken:
            if a < x < b:
                x = a if x - a < b - x else b
        return x


def _read_paragraph(p: Any) -> _Paragraph:
    """Read a ``w:p`` element into its text, marks and markers (no change to the XML)."""
    para = _Paragraph(p)
    pieces = _pieces(_atoms(p))
    keys: dict[Any, str] = {}
    groups: list[list[Any]] = []  # [key, rpr, start, end, order]
    text: list[str] = []
    pos = 0
    last_was_text = False
    for order, (kind, atoms, piece_text) in enumerate(pieces):
        if kind == "marker":
            para.markers.append(_Item("marker", (pos, pos), order, atoms=atoms))
            continue
        text.append(piece_text)
        end = pos + len(piece_text)
        if kind == "text" and not piece_text:
            continue  # an empty w:t, a soft hyphen: dropped when the paragraph is rewritten
        if kind == "text":
            run = atoms[0].run
            if run not in keys:
                keys[run] = _rpr_key(run.find(_RPR))
            if last_was_text and groups[-1][0] == keys[run]:
                groups[-1][3] = end
            else:
                groups.append([keys[run], run.find(_RPR), pos, end, order])
            last_was_text = True
        else:
            rpr = _container_rpr(atoms[0].element) if kind == "container" else None
            span = _trim(piece_text, pos) if kind == "container" else (pos, end)
            para.marks.append(_Item(kind, span, order, rpr, atoms))
            last_was_text = False
        pos = end
    para.text = "".join(text)
    weight: dict[str, int] = {}
    for key, _, a, b, _ in groups:
        weight[key] = weight.get(key, 0) + sum(not c.isspace() for c in para.text[a:b])
    if groups:
        top = max(weight.values())
        dominant = next(g for g in groups if weight[g[0]] == top)
        para.dominant = dominant[1]
        for key, rpr, a, b, order in groups:
            if key != dominant[0] and para.text[a:b].strip():
                para.marks.append(_Item("format", _trim(para.text[a:b], a), order, rpr))
    para.marks.sort(key=lambda m: m.span[0])
    return para


def _atoms(p: Any) -> list[_Atom]:
    """Flatten a paragraph into atoms: run children one by one, other children whole."""
    atoms: list[_Atom] = []
    for child in p:
        tag = child.tag
        if tag == _PPR:
            continue
        if tag == _R:
            atoms += _run_atoms(child)
        elif not isinstance(tag, str) or tag in _MARKERS:
            atoms.append(_Atom("marker", child))
        elif (host := _host(child)) is not None:
            text = "".join(a.text for r in host if r.tag == _R for a in _run_atoms(r))
            atoms.append(_Atom("container" if text.strip() else "marker", child, text=text))
        else:
            text = "".join(t.text or "" for t in child.iter(_T))
            atoms.append(_Atom("object", child, text=text if text.strip() else OBJECT))
    return atoms


def _run_atoms(run: Any) -> list[_Atom]:
    found: list[tuple[str, Any, str]] = []
    for child in run:
        tag = child.tag
        if tag == _RPR:
            continue
        if not isinstance(tag, str) or tag in _RUN_MARKERS:
            found.append(("marker", child, ""))
        elif tag == _T:
            found.append(("text", child, child.text or ""))
        elif tag in _TEXT_CHILDREN:
            found.append(("text", child, _TEXT_CHILDREN[tag]))
        elif tag == _BR:
            wrap = child.get(_w("type")) in (None, "textWrapping")
            found.append(("text", child, "\n") if wrap else ("marker", child, ""))
        elif tag == _FLD_CHAR:
            kind = child.get(_w("fldCharType"))
            found.append((kind if kind in ("begin", "separate", "end") else "marker", child, ""))
        elif tag in _INSTR:
            found.append(("instr", child, ""))
        else:
            found.append(("object", child, OBJECT))
    return [_Atom(k, el, run, len(found), t) for k, el, t in found]


def _host(element: Any) -> Any:
    """The element holding a container's runs, if it holds only plain text runs."""
    if element.tag == _w("sdt"):
        host = element.find(_w("sdtContent"))
    else:
        host = element if element.tag in _CONTAINERS else None
    if host is None:
        return None
    runs = 0
    for child in host:
        if child.tag in _CONTAINER_PROPS:
            continue
        if child.tag != _R or any(a.kind != "text" for a in _run_atoms(child)):
            return None
        runs += 1
    return host if runs else None


def _pieces(atoms: list[_Atom]) -> list[tuple[str, tuple[_Atom, ...], str]]:
    """Group atoms into pieces (kind, atoms, text); a whole field is one object."""
    pieces: list[tuple[str, tuple[_Atom, ...], str]] = []
    i = 0
    while i < len(atoms):
        atom = atoms[i]
        if atom.kind == "begin":
            end, sep = _field_end(atoms, i)
            if end is None:  # the field goes on in the next paragraphs (e.g. a TOC)
                stop = sep if sep is not None else len(atoms) - 1
                pieces.append(("marker", tuple(atoms[i:stop + 1]), ""))
                i = stop + 1
                continue
            shown = atoms[sep + 1:end] if sep is not None else ()
            text = "".join(a.text for a in shown if a.kind in ("text", "object", "container"))
            pieces.append(("object", tuple(atoms[i:end + 1]), text if text.strip() else OBJECT))
            i = end + 1
            continue
        kind = "marker" if atom.kind in ("separate", "end", "instr") else atom.kind
        pieces.append((kind, (atom,), atom.text))
        i += 1
    return pieces


def _field_end(atoms: list[_Atom], begin: int) -> tuple[int | None, int | None]:
    """The index of the field's ``end`` and of its own ``separate`` (None where absent)."""
    depth, sep = 0, None
    for k in range(begin, len(atoms)):
        kind = atoms[k].kind
        if kind == "begin":
            depth += 1
        elif kind == "separate" and depth == 1 and sep is None:
            sep = k
        elif kind == "end":
            depth -= 1
            if depth == 0:
                return k, sep
    return None, sep


def _rpr_key(rpr: Any) -> str:
    """The formatting of a run as comparable text: its rPr without rsids, lang, noProof."""
    if rpr is None:
        return ""
    from lxml import etree

    clone = copy.deepcopy(rpr)
    for child in list(clone):
        if child.tag in _IGNORED_RPR:
            clone.remove(child)
    for el in clone.iter(tag=etree.Element):
        for name in [n for n in el.attrib if n.rpartition("}")[2].startswith("rsid")]:
            del el.attrib[name]
    if len(clone) == 0 and not clone.attrib:
        return ""
    return etree.tostring(clone, encoding="unicode")


def _container_rpr(element: Any) -> Any:
    """The most common run formatting (by characters) inside a container."""
    weight: dict[str, list[Any]] = {}
    for run in _host(element).iter(_R):
        entry = weight.setdefault(_rpr_key(run.find(_RPR)), [0, run.find(_RPR)])
        entry[0] += sum(len(a.text) for a in _run_atoms(run))
    return max(weight.values(), key=lambda e: e[0])[1] if weight else None


def _trim(text: str, start: int) -> Span:
    lead = len(text) - len(text.lstrip())
    return (start + lead, start + len(text.rstrip()))


def _usable(span: Span | None, size: int, empty_ok: bool) -> bool:
    return (span is not None and 0 <= span[0] <= span[1] <= size
            and (empty_ok or span[0] < span[1]))


def _free(span: Span, taken: list[Span]) -> bool:
    a, b = span
    if a == b:
        return all(not (x < a < y) for x, y in taken)
    return all(b <= x or y <= a for x, y in taken)


def _find_free(text: str, needle: str, taken: list[Span]) -> Span | None:
    """The first occurrence of ``needle`` in ``text`` that overlaps no taken span."""
    pos = text.find(needle) if needle else -1
    while pos >= 0:
        span = (pos, pos + len(needle))
        if _free(span, taken):
            return span
        pos = text.find(needle, pos + 1)
    return None


def _emit(item: _Item, text: str) -> list[Any]:
    """The elements that put ``item`` back, with ``text`` where it carries text."""
    if item.kind == "format":
        return _runs(text, item.rpr)
    if item.kind == "container":
        element = item.atoms[0].element
        host = _host(element)
        for run in host.findall(_R):
            host.remove(run)
        host.extend(_runs(text, item.rpr))
        return [element]
    out: list[Any] = []
    i = 0
    atoms = item.atoms
    while i < len(atoms):
        atom = atoms[i]
        if atom.run is None:
            out.append(atom.element)
            i += 1
            continue
        j = i
        while j < len(atoms) and atoms[j].run is atom.run:
            j += 1
        if j - i == atom.run_size:
            out.append(atom.run)
        else:
            run = _new("w:r")
            rpr = atom.run.find(_RPR)
            if rpr is not None:
                run.append(copy.deepcopy(rpr))
            run.extend(a.element for a in atoms[i:j])
            out.append(run)
        i = j
    return out


def _runs(text: str, rpr: Any) -> list[Any]:
    """A run holding ``text`` (tabs and line breaks as elements) with a copy of ``rpr``."""
    text = _NOT_XML.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))
    if not text:
        return []
    run = _new("w:r")
    if rpr is not None:
        run.append(copy.deepcopy(rpr))
    for part in re.split(r"(\t|\n)", text):
        if part == "\t":
            run.append(_new("w:tab"))
        elif part == "\n":
            run.append(_new("w:br"))
        elif part:
            t = _new("w:t")
            t.text = part
            if part[0].isspace() or part[-1].isspace():
                t.set(_XML_SPACE, "preserve")
            run.append(t)
    return [run]


def _new(tag: str) -> Any:
    from docx.oxml.parser import OxmlElement

    return OxmlElement(tag)


@dataclass
class _Story:
    """A part whose paragraphs are read: the body, a header, the footnotes, ..."""

    root: Any
    part: Any
    own_xml: bool
    """True where the part is not parsed by python-docx; write stores its XML back."""


class WordDocument:
    """A ``.docx`` file opened for translation; see the module docstring."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def segments(self) -> Iterator[Segment]:
        """The paragraphs with text, in order: body, headers and footers, notes."""
        for story in self._stories(self._load()):
            for p in list(story.root.iter(_P)):
                segment = _read_paragraph(p).segment
                if segment is not None:
                    yield segment

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the document with each paragraph's text replaced by its translation."""
        doc = self._load()
        items = iter(translated)
        count = 0
        for story in self._stories(doc):
            changed = False
            for p in list(story.root.iter(_P)):
                para = _read_paragraph(p)
                segment = para.segment
                if segment is None:
                    continue
                item = next(items, None)
                if item is None:
                    raise self._changed(f"more than {count} paragraphs")
                count += 1
                if item.text != segment.text or tuple(item.marks) != segment.marks:
                    para.rewrite(item)
                    changed = True
            if changed and story.own_xml:
                from docx.opc.oxml import serialize_part_xml

                story.part._blob = serialize_part_xml(story.root)
        if next(items, None) is not None:
            raise self._changed(f"only {count} paragraphs")
        doc.save(out)

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)

    def _load(self) -> Any:
        docx = require("docx", _DOCX_EXTRA)
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise DocumentError(self.path, f"cannot read the file ({exc.strerror})") from None
        try:
            return docx.Document(io.BytesIO(data))
        except Exception as exc:  # python-docx raises many kinds; none may escape
            raise self._broken(exc) from None

    def _broken(self, exc: Exception) -> DocumentError:
        if isinstance(exc, zipfile.BadZipFile):
            why = "it is not a zip archive; a password-protected file is not one either"
        elif isinstance(exc, KeyError):
            why = f"a part is missing: {exc.args[0] if exc.args else exc}"
        elif "content type is" in str(exc):
            why = f"its main part is {str(exc).rpartition('content type is ')[2]}"
        else:
            why = f"{type(exc).__name__}: {exc}"
        return DocumentError(self.path, f"is not a Word .docx file ({why}); open it in Word "
                                        "or LibreOffice and save it as a .docx document")

    def _stories(self, doc: Any) -> list[_Story]:
        """The parts to read, in a fixed order, each once."""
        main = doc.part
        stories = [_Story(main.element, main, False)]
        seen = {main.partname}
        related = main.related_parts
        for sect in main.element.iter(_SECT_PR):
            for ref in sect:
                if ref.tag not in (_w("headerReference"), _w("footerReference")):
                    continue
                part = related.get(ref.get(f"{{{_RELS}}}id"))
                if part is not None and part.partname not in seen:
                    seen.add(part.partname)
                    stories.append(self._story(part))
        for reltype in _NOTES_RELS:
            for rel in main.rels.values():
                if rel.reltype == reltype and not rel.is_external:
                    part = rel.target_part
                    if part.partname not in seen:
                        seen.add(part.partname)
                        stories.append(self._story(part))
        return stories

    def _story(self, part: Any) -> _Story:
        if hasattr(part, "element"):
            return _Story(part.element, part, False)
        from docx.oxml.parser import parse_xml

        try:
            return _Story(parse_xml(part.blob), part, True)
        except Exception as exc:  # lxml's XMLSyntaxError, or not XML at all
            raise self._broken(exc) from None


@dataclass(frozen=True)
class WordFormat:
    """The ``docx`` format: Word 2007+ documents (python-docx reads and writes them)."""

    name: str = "docx"
    suffixes: tuple[str, ...] = (".docx",)

    def open(self, path: Path, options: FormatOptions) -> WordDocument:
        """Open ``path``; reading happens in :meth:`WordDocument.segments`."""
        return WordDocument(path)


FORMAT = WordFormat()
