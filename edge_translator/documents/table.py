"""CSV and TSV tables (product catalogues): the chosen columns are translated, the rest kept.

The columns come from :attr:`FormatOptions.columns`, by header name (matched ignoring case
and surrounding spaces) or 1-based number; the first record is the header and is never
translated. Each non-empty cell of a chosen column that holds a letter is a segment.

The file is read as a stream of lines (:func:`textio.lines`) by a small RFC 4180 scanner
that keeps each field's source text, so every untouched field, delimiter, quote and line
ending is written back byte for byte. It reads what :func:`csv.reader` reads with the
``excel`` (CSV) and ``excel-tab`` (TSV) dialects:

* A field is quoted only when it *starts* with ``"``; inside, ``""`` is a quote, and
  delimiters and line breaks are text. Characters after the closing quote, up to the
  next delimiter, belong to the field too (``"ab"c`` is ``abc``). A ``"`` anywhere else
  is an ordinary character. TSV follows the same rule: a tab-separated file without
  quoting reads as plain fields unless a field starts with ``"``.
* Records end at ``\\n``, ``\\r\\n`` or ``\\r``; the last one may lack a line ending. An
  empty line is a record without fields, and a row with fewer fields than the header
  simply lacks the missing columns.

A translated cell that was quoted is written quoted (its quotes doubled); an unquoted one
is quoted only if the translation holds the delimiter, a quote or a line break. Leading
and trailing spaces of a cell are kept out of the segment and put back around it.

Limitations: one header row is assumed; other delimiters (``;``), escape characters and
``skipinitialspace`` are not supported; a quoted field never closed is refused.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from . import textio
from .base import DocumentError, FormatOptions, Segment, Translated

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+")


@dataclass(frozen=True)
class Field:
    """One field of a record as the file holds it."""

    raw: str
    """The source text, quotes included; the record is its fields' raw texts joined by the
    delimiter, then its line ending."""
    value: str
    """The field's value, as :func:`csv.reader` gives it."""
    quoted: bool
    line: int
    """The 1-based line where the field starts."""


@dataclass(frozen=True)
class Record:
    """One record (row): its fields and the line ending that closes it."""

    fields: tuple[Field, ...]
    ending: str
    line: int
    """The 1-based line where the record starts."""

    def raw(self, delimiter: str) -> str:
        """The record's source text, exactly."""
        return delimiter.join(field.raw for field in self.fields) + self.ending


def _split_lines(chunks: Iterable[str]) -> Iterator[str]:
    """Lines with exactly one line ending each, even where a chunk holds a bare ``\\r``."""
    for chunk in chunks:
        if "\r" in chunk[:-1]:
            yield from _LINE.findall(chunk)
        else:
            yield chunk


def scan(lines: Iterable[str], delimiter: str, path: Path | str = "<text>") -> Iterator[Record]:
    """The records of a CSV/TSV text given as lines that keep their line endings.

    Args:
        lines: The text, a line at a time (as :func:`textio.lines` gives it).
        delimiter: ``","`` or ``"\\t"``.
        path: The file named in errors.

    Raises:
        DocumentError: If a quoted field is never closed; the message names its line.
    """
    unquoted = re.compile(f"[^{re.escape(delimiter)}\r\n]*")
    source = enumerate(_split_lines(lines), 1)
    for number, line in source:
        start, pos, fields = number, 0, []
        while True:
            if line.startswith('"', pos):
                field, line, number, pos = _quoted(source, line, number, pos, unquoted, path)
            else:
                end = unquoted.match(line, pos).end()
                field = Field(line[pos:end], line[pos:end], False, number)
                pos = end
            fields.append(field)
            if not line.startswith(delimiter, pos):
                break
            pos += len(delimiter)
        if len(fields) == 1 and not fields[0].raw:
            fields = []
        yield Record(tuple(fields), line[pos:], start)


def _quoted(source: Iterator[tuple[int, str]], line: str, number: int, pos: int, tail: re.Pattern[str],
            path: Path | str) -> tuple[Field, str, int, int]:
    """Read the quoted field at ``line[pos]``, on as many lines as it spans.

    Returns the field and the line, line number and position just past it.
    """
    start, begin, pos = number, pos, pos + 1
    raw: list[str] = []
    value: list[str] = []
    while True:
        quote = line.find('"', pos)
        if quote < 0:
            raw.append(line[begin:])
            value.append(line[pos:])
            number, line = next(source, (number, None))
            if line is None:
                raise DocumentError(path, "a quoted field starting on this line is never closed; add the "
                                    'closing " (a quote inside a field is written "")', start)
            begin = pos = 0
        elif line.startswith('"', quote + 1):
            value.append(line[pos:quote + 1])
            pos = quote + 2
        else:
            value.append(line[pos:quote])
            end = tail.match(line, quote + 1).end()
            value.append(line[quote + 1:end])
            raw.append(line[begin:end])
            return Field("".join(raw), "".join(value), True, start), line, number, end


def _is_text(value: str) -> bool:
    return any(ch.isalpha() for ch in value)


def _resolve(path: Path, header: Record | None, wanted: tuple[str, ...]) -> frozenset[int]:
    """The 0-based indexes of the chosen columns."""
    if not wanted:
        raise DocumentError(path, "no columns chosen: pass --columns NAME[,NAME...] to say which to translate")
    if header is None or not header.fields:
        raise DocumentError(path, "has no header row: the first line must name the columns", 1)
    names = [field.value.strip() for field in header.fields]
    folded = [name.casefold() for name in names]
    chosen: set[int] = set()
    for spec in wanted:
        key = spec.strip().casefold()
        matches = [i for i, name in enumerate(folded) if name == key]
        if not matches and key.isdecimal() and 1 <= int(key) <= len(names):
            matches = [int(key) - 1]
        if not matches:
            listed = ", ".join(repr(name) for name in names)
            raise DocumentError(path, f"has no column {spec.strip()!r}; its header has {listed} (columns 1-"
                                f"{len(names)}); pass --columns with these names or numbers", header.line)
        chosen.update(matches)
    return frozenset(chosen)


@dataclass(frozen=True)
class _Cell:
    """A chosen cell that is a segment: ``lead + text + trail`` is its value."""

    lead: str
    text: str
    trail: str


def _cell(value: str) -> _Cell | None:
    if not _is_text(value):
        return None
    text = value.strip()
    lead = value[:len(value) - len(value.lstrip())]
    return _Cell(lead, text, value[len(lead) + len(text):])


@dataclass(frozen=True)
class TableDocument:
    """An opened CSV/TSV file with its chosen columns."""

    path: Path
    encoding: textio.TextEncoding
    delimiter: str
    columns: frozenset[int]
    """0-based indexes of the columns to translate."""

    def _rows(self) -> Iterator[tuple[Record, list[_Cell | None]]]:
        """The records, each with its fields' cells (``None`` for a field not translated)."""
        records = scan(textio.lines(self.path, self.encoding), self.delimiter, self.path)
        for index, record in enumerate(records):
            cells = [_cell(field.value) if index and i in self.columns else None
                     for i, field in enumerate(record.fields)]
            yield record, cells

    def segments(self) -> Iterator[Segment]:
        """The chosen cells to translate, row by row, read lazily.

        Raises:
            DocumentError: If the file is not text in a supported encoding or a quoted
                field is never closed.
        """
        for record, cells in self._rows():
            for field, cell in zip(record.fields, cells):
                if cell is not None:
                    yield Segment(cell.text, line=field.line)

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the table again with each chosen cell replaced by its translation.

        Args:
            translated: One translation per segment of :meth:`segments`, in order.
            out: The binary stream to write to; it is flushed, not closed.

        Raises:
            DocumentError: If the file cannot be read again, or it changed so that the
                number of segments no longer matches.
        """
        with textio.rewrite(self.path, translated, out, self.encoding, "cells") as (stream, take):
            for record, cells in self._rows():
                if not any(cells):
                    stream.write(record.raw(self.delimiter))
                    continue
                parts = []
                for field, cell in zip(record.fields, cells):
                    if cell is None:
                        parts.append(field.raw)
                        continue
                    text = take(field.line).text
                    parts.append(field.raw if text == cell.text else self._quote(field, cell, text))
                stream.write(self.delimiter.join(parts) + record.ending)

    def _quote(self, field: Field, cell: _Cell, text: str) -> str:
        """A translated cell's source text: quoted if it was, or if the value needs it."""
        value = cell.lead + text + cell.trail
        if field.quoted or any(ch in value for ch in (self.delimiter, '"', "\r", "\n")):
            return '"' + value.replace('"', '""') + '"'
        return value


@dataclass(frozen=True)
class TableFormat:
    """A delimited table format: CSV or TSV."""

    name: str
    suffixes: tuple[str, ...]
    delimiter: str

    def open(self, path: Path, options: FormatOptions) -> TableDocument:
        """Open ``path`` and find the chosen columns in its header (only the header is read).

        Args:
            path: The table file.
            options: :attr:`FormatOptions.columns` names the columns to translate.

        Raises:
            DocumentError: If no columns are chosen, a chosen column is not in the header,
                or the file cannot be read.
        """
        path = Path(path)
        if not options.columns:
            raise DocumentError(path, "no columns chosen: pass --columns NAME[,NAME...] to say which to translate")
        encoding = textio.sniff(path)
        records = scan(textio.lines(path, encoding), self.delimiter, path)
        try:
            header = next(records, None)
        finally:
            records.close()
        if header is None:  # an empty file: nothing to translate, an empty output
            return TableDocument(path, encoding, self.delimiter, frozenset())
        return TableDocument(path, encoding, self.delimiter, _resolve(path, header, options.columns))


CSV = TableFormat("csv", (".csv",), ",")
TSV = TableFormat("tsv", (".tsv", ".tab"), "\t")
FORMATS = (CSV, TSV)
