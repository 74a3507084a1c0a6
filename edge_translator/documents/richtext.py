"""Rich text as runs: DrawingML paragraphs (``a:p``: slides, shapes, tables) and
SpreadsheetML strings (``si``/``is``: a cell's text), each a :class:`Dialect`.

A paragraph's runs (``a:r``) are merged into one text, a line break (``a:br``) being
``"\\n"`` (SpreadsheetML keeps line breaks inside its ``t``), so a sentence split over
runs is translated whole. Adjacent runs with the same
formatting (their ``a:rPr``, ignoring the language, spelling and "dirty" flags) form a
group; the groups whose formatting is not the paragraph's most common one are
:attr:`Segment.marks`. A hyperlink is part of its run's ``a:rPr`` in DrawingML, so a linked
word is such a group and its link goes back onto its translation. A field (``a:fld``: a
slide number, a date) and any other inline object (math) is a mark that is also a
:attr:`Segment.keep` span, its text the field's shown text or U+FFFC; the writer puts the
untouched element where that span landed. ``a:pPr`` and ``a:endParaRPr`` stay as they were.

A mark the translator could not place is looked for by its source text, then dropped (its
text takes the paragraph's formatting); an object is never dropped: it goes to the same
relative place. A paragraph whose translation equals its text is left untouched.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from .base import Segment, Span, Translated

A = "http://schemas.openxmlformats.org/drawingml/2006/main"
S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
OBJECT = "\ufffc"
"""The text of an inline object without text."""
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffc\ufffe\uffff]")
_IGNORED_ATTRS = {"lang", "altLang", "dirty", "err", "noProof", "smtClean", "smtId", "bmk", "normalizeH"}
_XML_SPACE = "{http://www.w3.org/XML/1998/namespace}space"


def a(name: str) -> str:
    """The Clark name of a DrawingML element."""
    return f"{{{A}}}{name}"


@dataclass(frozen=True)
class Dialect:
    """Where a kind of rich text keeps its runs."""

    ns: str
    kept: frozenset[str]
    """Children that stay as they were, in place (paragraph properties, phonetic runs)."""
    line_break: bool
    """``True``: a line break is an element (``a:br``); ``False``: it is in the text."""

    def q(self, name: str) -> str:
        return f"{{{self.ns}}}{name}"


DRAWINGML = Dialect(A, frozenset({a("pPr"), a("endParaRPr")}), True)
SPREADSHEETML = Dialect(S, frozenset({f"{{{S}}}rPh", f"{{{S}}}phoneticPr"}), False)
_P = a("p")


@dataclass(frozen=True)
class _Item:
    kind: str
    """``format`` (a run group) or ``object`` (a field or other inline element)."""
    span: Span
    order: int
    rpr: Any = None
    element: Any = None


@dataclass
class Paragraph:
    """An ``a:p`` read into its text and marks; :meth:`rewrite` puts a translation in."""

    element: Any
    dialect: Dialect = DRAWINGML
    text: str = ""
    dominant: Any = None
    marks: list[_Item] = field(default_factory=list)

    @property
    def segment(self) -> Segment | None:
        """The segment to translate, or ``None`` for a paragraph without letters."""
        keep = tuple(m.span for m in self.marks if m.kind == "object")
        bare = list(self.text)
        for x, y in keep:
            bare[x:y] = [" "] * (y - x)
        if not any(ch.isalpha() for ch in bare):
            return None
        return Segment(self.text, tuple(m.span for m in self.marks), keep)

    def rewrite(self, translated: Translated) -> bool:
        """Replace the paragraph's runs by runs holding ``translated``; ``False`` where the
        translation is the text itself (nothing is touched)."""
        segment = self.segment
        if segment is not None and translated.text == segment.text and tuple(translated.marks) == segment.marks:
            return False
        text = translated.text
        spans = list(translated.marks)[:len(self.marks)]
        spans += [None] * (len(self.marks) - len(spans))
        taken: list[Span] = []
        events: list[tuple[int, int, int, _Item]] = []
        lost: list[_Item] = []
        for item, span in zip(self.marks, spans):
            if span is None or not (0 <= span[0] <= span[1] <= len(text)) or not _free(span, taken) \
                    or (span[0] == span[1] and item.kind != "object"):
                x, y = item.span
                span = _find_free(text, self.text[x:y].strip(), taken)
            if span is not None:
                taken.append(span)
                events.append((span[0], span[1], item.order, item))
            elif item.kind == "object":
                lost.append(item)
        for item in lost:
            x = len(text) if item.span[0] >= len(self.text) else round(item.span[0] * len(text) / max(len(self.text), 1))
            for s, e in taken:
                if s < x < e:
                    x = e
            events.append((x, x, item.order, item))
        events.sort(key=lambda ev: (ev[0], ev[2]))
        children: list[Any] = []
        cursor = 0
        for start, end, _, item in events:
            if start > cursor:
                children += _runs(text[cursor:start], self.dominant, self.dialect)
            if item.kind == "object":
                children.append(item.element)
            else:
                children += _runs(text[start:end], item.rpr, self.dialect)
            cursor = max(cursor, end)
        children += _runs(text[cursor:], self.dominant, self.dialect)
        if not self.marks and not self.dialect.line_break and self.dominant is None:
            children = _plain(text, self.dialect)  # a plain string stays one t, not a run
        kept = [c for c in self.element if c.tag in self.dialect.kept]
        first = [c for c in kept if c.tag == a("pPr")]
        for child in list(self.element):
            self.element.remove(child)
        self.element.extend(first + children + [c for c in kept if c not in first])
        return True


def read(p: Any, dialect: Dialect = DRAWINGML) -> Paragraph:
    """Read a paragraph (an ``a:p``, or a ``si``/``is`` in SpreadsheetML); nothing in it changes."""
    para = Paragraph(p, dialect)
    R, T, RPR, BR = (dialect.q(n) for n in ("r", "t", "rPr", "br"))
    pieces: list[str] = []
    groups: list[list[Any]] = []  # [key, rpr, start, end, order]
    pos = 0
    last = None  # the key of the group a line break continues
    for order, child in enumerate(p):
        tag = child.tag
        if tag in dialect.kept or not isinstance(tag, str):
            continue
        if tag == T and not dialect.line_break:  # a plain SpreadsheetML string: its one t
            text = child.text or ""
            if text:
                groups.append(["", None, pos, pos + len(text), order])
                last = ""
        elif tag == R:
            t = child.find(T)
            text = (t.text or "") if t is not None else ""
            if not text:
                continue
            rpr = child.find(RPR)
            key = _rpr_key(rpr)
            if last is not None and groups and groups[-1][0] == key:
                groups[-1][3] = pos + len(text)
            else:
                groups.append([key, rpr, pos, pos + len(text), order])
            last = key
        elif tag == BR:
            text = "\n"
            if groups and last is not None:
                groups[-1][3] = pos + 1
        else:  # a field or another inline object: kept whole
            shown = "".join(t.text or "" for t in child.iter(T))
            text = shown if shown.strip() else OBJECT
            para.marks.append(_Item("object", (pos, pos + len(text)), order, element=child))
            last = None
        pieces.append(text)
        pos += len(text)
    para.text = "".join(pieces)
    weight: dict[str, int] = {}
    for key, _, x, y, _ in groups:
        weight[key] = weight.get(key, 0) + sum(not c.isspace() for c in para.text[x:y])
    if groups:
        top = max(weight.values())
        dominant = next(g for g in groups if weight[g[0]] == top)
        para.dominant = dominant[1]
        for key, rpr, x, y, order in groups:
            if key != dominant[0] and para.text[x:y].strip():
                para.marks.append(_Item("format", _trim(para.text[x:y], x), order, rpr))
    elif para.marks and para.marks[0].element is not None:
        para.dominant = para.marks[0].element.find(RPR)
    para.marks.sort(key=lambda m: m.span[0])
    return para


def paragraphs(body: Any) -> list[Any]:
    """The ``a:p`` elements of a text body, in order."""
    return list(body.iter(_P))


def width(text: str) -> int:
    """The text's width in half-ems, near enough: a wide (CJK) character is two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text if ch != "\n")


def _rpr_key(rpr: Any) -> str:
    if rpr is None:
        return ""
    from lxml import etree

    clone = copy.deepcopy(rpr)
    for name in [n for n in clone.attrib if n in _IGNORED_ATTRS]:
        del clone.attrib[name]
    if len(clone) == 0 and not clone.attrib:
        return ""
    return etree.tostring(clone, encoding="unicode")


def _trim(text: str, start: int) -> Span:
    lead = len(text) - len(text.lstrip())
    return (start + lead, start + len(text.rstrip()))


def _free(span: Span, taken: list[Span]) -> bool:
    x, y = span
    if x == y:
        return all(not (s < x < e) for s, e in taken)
    return all(y <= s or e <= x for s, e in taken)


def _find_free(text: str, needle: str, taken: list[Span]) -> Span | None:
    pos = text.find(needle) if needle else -1
    while pos >= 0:
        span = (pos, pos + len(needle))
        if _free(span, taken):
            return span
        pos = text.find(needle, pos + 1)
    return None


def _clean(text: str) -> str:
    return _NOT_XML.sub("", text.replace("\r\n", "\n").replace("\r", "\n").replace("\v", "\n"))


def _t(text: str, dialect: Dialect) -> Any:
    from lxml import etree

    t = etree.Element(dialect.q("t"))
    t.text = text
    if not dialect.line_break and (text != text.strip() or "\n" in text):
        t.set(_XML_SPACE, "preserve")
    return t


def _plain(text: str, dialect: Dialect) -> list[Any]:
    return [_t(_clean(text), dialect)]


def _runs(text: str, rpr: Any, dialect: Dialect) -> list[Any]:
    """Runs holding ``text`` with a copy of ``rpr``; in DrawingML a line break is ``a:br``."""
    from lxml import etree

    text = _clean(text)
    out: list[Any] = []
    for part in re.split(r"(\n)", text) if dialect.line_break else [text]:
        if not part:
            continue
        element = etree.Element(dialect.q("br" if part == "\n" and dialect.line_break else "r"))
        if rpr is not None:
            element.append(copy.deepcopy(rpr))
        if element.tag != dialect.q("br"):
            element.append(_t(part, dialect))
        out.append(element)
    return out
