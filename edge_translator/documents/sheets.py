"""Excel ``.xlsx`` workbooks: the text cells are translated; numbers, dates and formulas are not.

A workbook is a zip of XML parts, and this module edits the two kinds of part that hold cell
text, leaving every other part as it was, byte for byte (styles, merged cells, column
widths, formulas, charts, pictures, defined names, the calculation chain):

* **Shared strings** (``xl/sharedStrings.xml``): a cell of type ``s`` points into this
  table, and one entry serves every cell with that text, so each entry is one segment,
  translated once. Rich text keeps its runs' formatting on the right words (:mod:`.richtext`).
* **Inline strings** (a cell of type ``inlineStr``, which some producers write): each is a
  segment of its own.

Never translated: numbers and dates (they are numbers with a date style), booleans, errors,
formulas and their cached results (type ``str``), the names of the sheets (formulas refer to
them), the header row of an Excel table (its columns are named after it, and structured
references use those names), comments, text boxes and chart titles.

``--sheets`` (:attr:`FormatOptions.sheets`) chooses sheets by name or 1-based number;
``--columns`` chooses columns by header (the text of the sheet's first row with cells,
matched ignoring case and surrounding spaces), by letter (``C``) or by 1-based number, and
then that header row is not translated. A shared entry used both by chosen cells and by
others is not changed: its translation is added as a new entry, and the chosen cells point
to that one.

Parts are read as token streams (:mod:`.xmlstream`), so a sheet's size costs time, not
memory. The package is checked before anything reads it (:mod:`.package`). A macro-enabled
workbook (``.xlsm``, or a ``vbaProject.bin`` part) is refused, as a Strict Open XML one is.
"""

from __future__ import annotations

import io
import posixpath
import re
import shutil
import tempfile
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from . import richtext, xmlstream
from .base import DocumentError, FormatOptions, Segment, Translated, changed
from .package import read_package, repack

PACKAGE = ("Excel .xlsx file", "xl/workbook.xml")
_KIND = PACKAGE[0]
_S = richtext.S
_STRICT = "http://purl.oclc.org/ooxml/spreadsheetml/main"
_REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
_MACRO = b"application/vnd.ms-excel.sheet.macroEnabled.main+xml"
_CELL_REF = re.compile(r"([A-Za-z]{1,3})(\d+)$")
_LETTERS = re.compile(r"[A-Za-z]{1,3}$")


@dataclass(frozen=True)
class Sheet:
    """A worksheet: its tab name, its 1-based position, its part and its tables' parts."""

    name: str
    number: int
    part: str
    tables: tuple[str, ...] = ()


@dataclass
class _Plan:
    """Which cells are translated, found by reading every sheet once."""

    chosen: dict[int, frozenset[int] | None] = field(default_factory=dict)
    """Per sheet number: the chosen 1-based columns (``None``: all); a sheet not in it is not chosen."""
    header: dict[int, int] = field(default_factory=dict)
    """Per sheet number with chosen columns: the header row, which is not translated."""
    shared_in: set[int] = field(default_factory=set)
    """Shared entries a chosen cell uses."""
    shared_out: set[int] = field(default_factory=set)
    """Shared entries another cell uses."""
    tables: dict[int, set[tuple[int, int]]] = field(default_factory=dict)
    """Per sheet number: the (row, column) of its Excel tables' header cells, never translated."""


def column_number(letters: str) -> int:
    """``"A"`` → 1, ``"AA"`` → 27."""
    number = 0
    for ch in letters.upper():
        number = number * 26 + ord(ch) - 64
    return number


class WorkbookDocument:
    """A ``.xlsx`` file opened for translation; see the module docstring."""

    def __init__(self, path: Path, options: FormatOptions):
        self.path = Path(path)
        self.options = options

    # -- the package -------------------------------------------------------------------------
    def _archive(self) -> zipfile.ZipFile:
        data = read_package(self.path, *PACKAGE)
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = set(archive.namelist())
        if self.path.suffix.lower() == ".xlsm" or "xl/vbaProject.bin" in names or (
                "[Content_Types].xml" in names and _MACRO in archive.read("[Content_Types].xml")):
            raise DocumentError(self.path, "is a macro-enabled workbook; its macros would not survive, so it is not "
                                           "translated: save a copy as .xlsx (without macros) and translate that")
        return archive

    def _xml(self, archive: zipfile.ZipFile, part: str) -> Any:
        from lxml import etree

        try:
            return etree.fromstring(archive.read(part), etree.XMLParser(resolve_entities=False, no_network=True))
        except (KeyError, etree.XMLSyntaxError) as exc:
            raise self._damaged(f"its part {part}", exc) from None

    def _relations(self, archive: zipfile.ZipFile, part: str) -> dict[str, tuple[str, str]]:
        """A part's relationships: id → (type's last word, target part)."""
        folder, base = posixpath.split(part)
        rels = posixpath.join(folder, "_rels", base + ".rels")
        if rels not in archive.namelist():
            return {}
        out = {}
        for rel in self._xml(archive, rels).iter(f"{{{_PKG_REL}}}Relationship"):
            if rel.get("TargetMode") == "External":
                continue
            target = rel.get("Target", "")
            target = target.lstrip("/") if target.startswith("/") else posixpath.normpath(posixpath.join(folder, target))
            out[rel.get("Id", "")] = (rel.get("Type", "").rsplit("/", 1)[-1], target)
        return out

    def _workbook(self, archive: zipfile.ZipFile) -> tuple[list[Sheet], str | None]:
        """The worksheets in tab order, and the shared strings part (``None``: there is none)."""
        book = self._xml(archive, PACKAGE[1])
        if book.tag == f"{{{_STRICT}}}workbook":
            raise DocumentError(self.path, "is a Strict Open XML workbook, which is not supported; save it in Excel "
                                           "as an ordinary Excel Workbook (.xlsx) and translate that")
        rels = self._relations(archive, PACKAGE[1])
        shared = next((t for kind, t in rels.values() if kind == "sharedStrings"), None)
        sheets = []
        for number, el in enumerate(book.iter(f"{{{_S}}}sheet"), 1):
            kind, part = rels.get(el.get(f"{{{_REL}}}id", ""), ("", ""))
            if kind != "worksheet":
                continue  # a chart sheet or a macro sheet: no cells to translate
            if part not in archive.namelist():
                raise DocumentError(self.path, f"sheet {el.get('name')!r} is missing from the file (its part {part}); "
                                               "open it in Excel or LibreOffice and save it again")
            tables = tuple(t for k, t in self._relations(archive, part).values() if k == "table")
            sheets.append(Sheet(el.get("name", f"Sheet{number}"), number, part, tables))
        if shared is not None and shared not in archive.namelist():
            shared = None
        return sheets, shared

    def _damaged(self, where: str, exc: Exception) -> DocumentError:
        return DocumentError(self.path, f"{where} is damaged ({type(exc).__name__}: {str(exc)[:80]}); open the file "
                                        "in Excel or LibreOffice and save it again")

    # -- reading ----------------------------------------------------------------------------
    def _cells(self, archive: zipfile.ZipFile, sheet: Sheet, rewrite=None) -> Iterator[tuple[int, int, list[str]]]:
        """(row, column, tokens) for each cell with content, in order; with ``rewrite``, every
        token (or a cell's replacement from ``rewrite(row, column, tokens)``) goes to it instead."""
        row = column = 0
        try:
            with archive.open(sheet.part) as part:
                stream = xmlstream.tokens(part)
                for token in stream:
                    local = xmlstream.name(token)
                    if local == "row" and not xmlstream.is_end(token):
                        row = int(xmlstream.attributes(token).get("r", row + 1))
                        column = 0
                    elif local == "c" and not xmlstream.is_end(token):
                        ref = _CELL_REF.match(xmlstream.attributes(token).get("r", ""))
                        column = column_number(ref.group(1)) if ref else column + 1
                        if xmlstream.is_start(token):
                            cell = xmlstream.element_tokens(token, stream)
                            if rewrite is None:
                                yield row, column, cell
                            else:
                                rewrite.write("".join(rewrite(row, column, cell)))
                            continue
                    if rewrite is not None:
                        rewrite.write(token)
        except (xmlstream.MarkupError, ValueError, zipfile.BadZipFile) as exc:
            raise self._damaged(f"sheet {sheet.name!r}", exc) from None

    def _header(self, archive: zipfile.ZipFile, sheet: Sheet) -> tuple[int, dict[int, tuple[str, int | None]]]:
        """The first row with cells: its number, and per column its text or shared entry."""
        first, cells = 0, {}
        for row, column, cell in self._cells(archive, sheet):
            if first and row != first:
                break
            first = row
            kind = xmlstream.attributes(cell[0]).get("t", "n")
            if kind == "s":
                cells[column] = ("", _shared_index(cell))
            elif kind == "inlineStr":
                cells[column] = ("".join(_texts(cell)), None)
            else:
                cells[column] = ("".join(_values(cell)), None)
        return first, cells

    def _plan(self, archive: zipfile.ZipFile, sheets: list[Sheet], shared: str | None) -> _Plan:
        plan = _Plan()
        for sheet in _choose(self.path, sheets, self.options.sheets):
            plan.chosen[sheet.number] = None
        if self.options.columns:
            self._choose_columns(archive, sheets, shared, plan)
        for sheet in sheets:
            plan.tables[sheet.number] = self._table_headers(archive, sheet)
            chosen = sheet.number in plan.chosen
            for row, column, cell in self._cells(archive, sheet):
                if xmlstream.attributes(cell[0]).get("t") != "s" or _has_formula(cell):
                    continue
                index = _shared_index(cell)
                if index is None:
                    continue
                inside = chosen and self._inside(plan, sheet, row, column)
                (plan.shared_in if inside else plan.shared_out).add(index)
        return plan

    def _choose_columns(self, archive, sheets: list[Sheet], shared: str | None, plan: _Plan) -> None:
        headers = {}
        wanted: set[int] = set()
        for sheet in sheets:
            if sheet.number in plan.chosen:
                headers[sheet.number] = self._header(archive, sheet)
                wanted |= {i for _, i in headers[sheet.number][1].values() if i is not None}
        texts = self._shared_texts(archive, shared, wanted)
        names = {number: {column: (texts.get(i, "") if i is not None else text).strip().casefold()
                          for column, (text, i) in cells.items()} for number, (_, cells) in headers.items()}
        known = {n for cells in names.values() for n in cells.values() if n}
        used: set[str] = set()
        for number in list(plan.chosen):
            columns = set()
            for spec in self.options.columns:
                key = spec.strip().casefold()
                if key in known:
                    found = {c for c, n in names[number].items() if n == key}
                elif _LETTERS.match(spec.strip()):
                    found = {column_number(spec.strip())}
                elif spec.strip().isdigit() and int(spec) > 0:
                    found = {int(spec)}
                else:
                    found = set()
                if found:
                    used.add(spec)
                columns |= found
            plan.chosen[number] = frozenset(columns)
            plan.header[number] = headers[number][0]
        missing = [s for s in self.options.columns if s not in used]
        if missing:
            heads = sorted({n for cells in names.values() for n in cells.values() if n})[:12]
            raise DocumentError(self.path, f"has no column {missing[0]!r} in the sheets chosen (their headers: "
                                           f"{', '.join(heads) or 'none'}); name a column by its header, its letter "
                                           "or its number")

    def _inside(self, plan: _Plan, sheet: Sheet, row: int, column: int) -> bool:
        if sheet.number not in plan.chosen:
            return False
        if (row, column) in plan.tables.get(sheet.number, ()):
            return False
        columns = plan.chosen[sheet.number]
        return columns is None or (column in columns and row != plan.header.get(sheet.number))

    def _table_headers(self, archive: zipfile.ZipFile, sheet: Sheet) -> set[tuple[int, int]]:
        """The cells of the header rows of the sheet's Excel tables."""
        cells = set()
        for part in sheet.tables:
            table = self._xml(archive, part)
            ref = table.get("ref", "").split(":")
            if int(table.get("headerRowCount", "1")) < 1 or len(ref) != 2:
                continue
            start, end = _CELL_REF.match(ref[0]), _CELL_REF.match(ref[1])
            if start and end:
                row = int(start.group(2))
                cells |= {(row, c) for c in range(column_number(start.group(1)), column_number(end.group(1)) + 1)}
        return cells

    def _shared(self, archive: zipfile.ZipFile, shared: str | None, rewrite=None) -> Iterator[tuple[int, Any]]:
        """(index, parsed ``si``) for each shared entry; with ``rewrite`` the part's other
        tokens, and what ``rewrite(index, tokens, decls)`` makes of each entry, go to it."""
        if shared is None:
            return
        index = -1
        decls: dict[str, str] = {}
        try:
            with archive.open(shared) as part:
                stream = xmlstream.tokens(part)
                for token in stream:
                    local = xmlstream.name(token)
                    if local == "sst" and not xmlstream.is_end(token):
                        decls = xmlstream.declarations(token)
                        if rewrite is not None:
                            rewrite.root(token)
                            continue
                    elif local == "sst" and rewrite is not None:
                        rewrite.write(rewrite.tail(index + 1))
                    elif local == "si" and xmlstream.is_start(token):
                        index += 1
                        entry = xmlstream.element_tokens(token, stream)
                        if rewrite is None:
                            yield index, xmlstream.parse(entry, decls)
                        else:
                            rewrite.write(rewrite(index, entry, decls))
                        continue
                    elif local == "si":  # an empty entry
                        index += 1
                    if rewrite is not None:
                        rewrite.write(token)
        except (xmlstream.MarkupError, ValueError, zipfile.BadZipFile) as exc:
            raise self._damaged("its shared strings", exc) from None

    def _shared_texts(self, archive, shared: str | None, wanted: set[int]) -> dict[int, str]:
        if not wanted:
            return {}
        return {i: richtext.read(si, richtext.SPREADSHEETML).text for i, si in self._shared(archive, shared)
                if i in wanted}

    def segments(self) -> Iterator[Segment]:
        """The chosen shared entries in table order, then the chosen inline strings sheet by sheet."""
        with self._archive() as archive:
            sheets, shared = self._workbook(archive)
            plan = self._plan(archive, sheets, shared)
            for index, si in self._shared(archive, shared):
                if index in plan.shared_in:
                    segment = richtext.read(si, richtext.SPREADSHEETML).segment
                    if segment is not None:
                        yield segment
            for sheet in sheets:
                if sheet.number not in plan.chosen:
                    continue
                decls = self._declarations(archive, sheet)
                for row, column, cell in self._cells(archive, sheet):
                    if self._inside(plan, sheet, row, column) and _inline(cell):
                        segment = self._inline_paragraph(cell, decls, sheet)[1].segment
                        if segment is not None:
                            yield segment

    def _declarations(self, archive: zipfile.ZipFile, sheet: Sheet) -> dict[str, str]:
        with archive.open(sheet.part) as part:
            for token in xmlstream.tokens(part, 1 << 14):
                if xmlstream.name(token) == "worksheet":
                    return xmlstream.declarations(token)
        return {}

    def _inline_paragraph(self, cell: list[str], decls: dict[str, str], sheet: Sheet):
        try:
            element = xmlstream.parse(cell, decls)
        except xmlstream.MarkupError as exc:
            raise self._damaged(f"sheet {sheet.name!r}", exc) from None
        body = element.find(f"{{{_S}}}is")
        return element, richtext.read(body if body is not None else element, richtext.SPREADSHEETML)

    # -- writing ----------------------------------------------------------------------------
    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the workbook with each chosen text replaced by its translation."""
        items = iter(translated)
        with self._archive() as archive, tempfile.TemporaryDirectory(prefix="edge-xlsx-") as scratch:
            sheets, shared = self._workbook(archive)
            plan = self._plan(archive, sheets, shared)
            parts: dict[str, Path] = {}
            moved: dict[int, int] = {}
            counter = _Counter()
            if shared is not None and plan.shared_in:
                parts[shared] = Path(scratch, "shared.xml")
                with open(Path(scratch, "shared.body"), "w", encoding="utf-8") as body:
                    writer = _SharedWriter(body, plan, items, moved, counter, self)
                    for _ in self._shared(archive, shared, writer):
                        pass
                with open(parts[shared], "w", encoding="utf-8") as whole, \
                        open(Path(scratch, "shared.body"), encoding="utf-8") as body:
                    whole.write(writer.head())
                    shutil.copyfileobj(body, whole, 1 << 20)
            for sheet in sheets:
                if sheet.number not in plan.chosen:
                    continue
                decls = self._declarations(archive, sheet)
                target = Path(scratch, f"sheet{sheet.number}.xml")
                with open(target, "w", encoding="utf-8") as stream:
                    writer = _SheetWriter(stream, self, plan, sheet, decls, items, moved, counter)
                    for _ in self._cells(archive, sheet, writer):
                        pass
                if writer.changed:
                    parts[sheet.part] = target
            if next(items, None) is not None:
                raise self._changed(f"only {counter.count} texts")
            repack(archive, parts, out)

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)


@dataclass
class _Counter:
    count: int = 0


class _SharedWriter:
    """Writes the shared strings part with the chosen entries translated (see the module docstring).

    What comes before the root's end tag goes to ``stream``; :meth:`head` is what comes
    before that (the declaration and the root tag, its count of entries now known)."""

    def __init__(self, stream, plan: _Plan, items: Iterator[Translated], moved: dict[int, int], counter: _Counter,
                 document: WorkbookDocument):
        self.stream, self.plan, self.items, self.moved, self.counter = stream, plan, items, moved, counter
        self.document = document
        self.added: list[str] = []
        self.prolog: list[str] = []
        self.root_tag = ""
        self.total = 0

    def write(self, text: str) -> None:
        if self.root_tag:
            self.stream.write(text)
        else:
            self.prolog.append(text)

    def root(self, token: str) -> None:
        self.root_tag = token

    def head(self) -> str:
        root = self.root_tag
        if "uniqueCount" in xmlstream.attributes(root):
            root = xmlstream.with_attribute(root, "uniqueCount", str(self.total + len(self.added)))
        return "".join(self.prolog) + root

    def __call__(self, index: int, entry: list[str], decls: dict[str, str]) -> str:
        original = "".join(entry)
        if index not in self.plan.shared_in:
            return original
        try:
            si = xmlstream.parse(entry, decls)
        except xmlstream.MarkupError as exc:
            raise self.document._damaged("its shared strings", exc) from None
        para = richtext.read(si, richtext.SPREADSHEETML)
        if para.segment is None:
            return original
        item = next(self.items, None)
        if item is None:
            raise self.document._changed(f"more than {self.counter.count} texts")
        self.counter.count += 1
        if not para.rewrite(item):
            return original
        if index in self.plan.shared_out:  # kept for the cells outside the choice; a new entry for the rest
            self.moved[index] = len(self.added)
            self.added.append(xmlstream.serialize(si, decls))
            return original
        return xmlstream.serialize(si, decls)

    def tail(self, total: int) -> str:
        """The new entries, written before the root's end tag; ``moved`` gets their indices."""
        self.total = total
        for key in self.moved:
            self.moved[key] += total
        return "".join(self.added)


class _SheetWriter:
    """Writes one sheet with its chosen inline strings translated and moved entries repointed."""

    def __init__(self, stream, document: WorkbookDocument, plan: _Plan, sheet: Sheet, decls: dict[str, str],
                 items: Iterator[Translated], moved: dict[int, int], counter: _Counter):
        self.stream, self.document, self.plan, self.sheet, self.decls = stream, document, plan, sheet, decls
        self.items, self.moved, self.counter = items, moved, counter
        self.changed = False

    def write(self, text: str) -> None:
        self.stream.write(text)

    def __call__(self, row: int, column: int, cell: list[str]) -> list[str]:
        if not self.document._inside(self.plan, self.sheet, row, column):
            return cell
        if _inline(cell):
            element, para = self.document._inline_paragraph(cell, self.decls, self.sheet)
            if para.segment is None:
                return cell
            item = next(self.items, None)
            if item is None:
                raise self.document._changed(f"more than {self.counter.count} texts")
            self.counter.count += 1
            if para.rewrite(item):
                self.changed = True
                return [xmlstream.serialize(element, self.decls)]
            return cell
        if xmlstream.attributes(cell[0]).get("t") == "s" and not _has_formula(cell):
            index = _shared_index(cell)
            if index in self.moved:
                self.changed = True
                at = next(i for i, t in enumerate(cell) if xmlstream.name(t) == "v" and xmlstream.is_start(t))
                return cell[:at + 1] + [str(self.moved[index])] + cell[at + 2:]
        return cell


def _choose(path: Path, sheets: list[Sheet], specs: tuple[str, ...]) -> list[Sheet]:
    """The sheets ``specs`` name (by name, ignoring case, or 1-based number); all when none."""
    if not specs:
        return sheets
    chosen = []
    for spec in specs:
        key = spec.strip().casefold()
        found = [s for s in sheets if s.name.strip().casefold() == key] or \
            ([s for s in sheets if str(s.number) == key] if key.isdigit() else [])
        if not found:
            names = ", ".join(repr(s.name) for s in sheets)
            raise DocumentError(path, f"has no sheet {spec!r} (its sheets: {names}); name a sheet by its name or "
                                      "its 1-based number")
        chosen += [s for s in found if s not in chosen]
    return chosen


def _shared_index(cell: list[str]) -> int | None:
    values = _values(cell)
    try:
        return int("".join(values).strip()) if values else None
    except ValueError:
        raise xmlstream.MarkupError(f"a shared string cell holds {''.join(values)[:20]!r}") from None


def _values(cell: list[str]) -> list[str]:
    """The text inside the cell's ``v``."""
    out, inside = [], False
    for token in cell:
        local = xmlstream.name(token)
        if local == "v":
            inside = xmlstream.is_start(token)
        elif inside and local is None:
            out.append(token)
    return out


def _texts(cell: list[str]) -> list[str]:
    """The text inside the ``t`` elements of an inline string (entities as written)."""
    import html

    out, inside = [], False
    for token in cell:
        local = xmlstream.name(token)
        if local == "t":
            inside = xmlstream.is_start(token)
        elif inside and local is None:
            out.append(html.unescape(token))
    return out


def _has_formula(cell: list[str]) -> bool:
    return any(xmlstream.name(t) == "f" for t in cell[1:])


def _inline(cell: list[str]) -> bool:
    return xmlstream.attributes(cell[0]).get("t") == "inlineStr" and not _has_formula(cell)


@dataclass(frozen=True)
class WorkbookFormat:
    """The ``xlsx`` format; ``.xlsm`` is named so that it is refused with a reason."""

    name: str = "xlsx"
    suffixes: tuple[str, ...] = (".xlsx", ".xlsm")

    def open(self, path: Path, options: FormatOptions) -> WorkbookDocument:
        """Open ``path``; the sheets and columns are found when it is read."""
        return WorkbookDocument(path, options)


FORMAT = WorkbookFormat()
