"""Plain text (``.txt``): paragraphs, blank lines and indentation kept; read as a stream.

The file is read line by line (:func:`textio.lines`), so memory does not grow with its
size. Blank lines, each line's leading indentation, list markers and line endings are
copied as they are; only the words between them are translated.

How lines become segments: by the core's unwrapping rule (:mod:`edge_translator.core.unwrap`),
the one every face uses, applied to each block of lines as the lines stream past.

* A line with no letter (blank, ``-----``, ``* * *``, ``2024``) is copied, not translated,
  and ends the block.
* A list item (``- ``, ``* ``, ``+ ``, ``•``, ``1.``, ``2)``, ``(3)``, ``a)`` and a space)
  starts a new segment; its marker is kept out of the text and copied.
* A line continues the segment before it when the rule says it only wraps that paragraph
  (:func:`~edge_translator.core.unwrap.continuations`); verse, addresses, headings, code
  and one sentence per line stay a segment a line. Joined lines meet with a space, or
  with nothing where a word was hyphenated across the break ("transla-" "tion").

A segment of several lines is written back as ONE line: the first line's indentation and
marker, the translation, then the last line's trailing spaces and line ending. A
translation equal to the joined text gives the original lines back byte for byte, so an
untranslated file is unchanged.

Limits: those of the rule; and the page furniture of text from a PDF (a page number, a
running header) is a line of its own here, so a paragraph across a page break is two
segments. A block is judged :data:`MAX_BLOCK` lines at a time, a segment stops growing at
:data:`MAX_LINES` lines or :data:`MAX_CHARS` characters and the next one starts at a line
boundary, so a paragraph of megabytes is never held whole; one enormous line, though, is
read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from ..core.unwrap import continuations, glue
from . import textio
from .base import FormatOptions, Segment, Translated

MAX_BLOCK = 200
"""Lines of one block judged together (a longer block is judged in parts)."""
MAX_LINES = 50
"""A segment holds at most this many lines."""
MAX_CHARS = 4000
"""A segment holds at most this many characters of text (a longer single line excepted)."""

_MARKER = re.compile(r"(?:[-*+•‣◦▪–]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z]\))[ \t]+")
_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class _Line:
    """One non-blank line taken apart: ``prefix + body + trail + ending`` is the line."""

    prefix: str
    """Leading whitespace, then the list marker and its spaces if the line is an item."""
    indent: str
    """The leading whitespace alone."""
    body: str
    """The text, without leading or trailing whitespace."""
    trail: str
    ending: str

    @property
    def raw(self) -> str:
        return self.prefix + self.body + self.trail + self.ending

    @property
    def is_item(self) -> bool:
        return len(self.prefix) > len(self.indent)


@dataclass(frozen=True)
class _Group:
    """Consecutive lines translated as one segment."""

    lines: tuple[_Line, ...]
    number: int
    """The 1-based line number of the first line."""

    @property
    def text(self) -> str:
        text = self.lines[0].body
        for line in self.lines[1:]:
            drop, between = glue(text, line.body)
            text = text[:len(text) - drop] + between + line.body
        return text


def _parse(line: str) -> _Line:
    ending = "\r\n" if line.endswith("\r\n") else line[-1] if line.endswith(("\n", "\r")) else ""
    content = line[:len(line) - len(ending)]
    stripped = content.lstrip()
    indent = content[:len(content) - len(stripped)]
    prefix = indent
    marker = _MARKER.match(stripped)
    if marker and stripped[marker.end():].strip():
        prefix = indent + marker.group()
    body = content[len(prefix):].rstrip()
    return _Line(prefix, indent, body, content[len(prefix) + len(body):], ending)


def _has_letter(text: str) -> bool:
    return any(ch.isalpha() for ch in text)


def _hanging(first: _Line) -> str:
    """The indentation of a segment's continuation lines, for lines a translation adds."""
    return " " * len(first.prefix) if first.is_item else first.indent


def _groups(block: list[tuple[int, _Line]]) -> Iterator[_Group]:
    """The segments of one block of lines with letters: lines joined where the rule says."""
    joins = continuations([line.raw.rstrip("\r\n") for _, line in block])
    group, start, chars = [block[0][1]], block[0][0], len(block[0][1].body)
    for (number, line), joined in zip(block[1:], joins):
        if joined and len(group) < MAX_LINES and chars + 1 + len(line.body) <= MAX_CHARS:
            group.append(line)
            chars += 1 + len(line.body)
            continue
        yield _Group(tuple(group), start)
        group, start, chars = [line], number, len(line.body)
    yield _Group(tuple(group), start)


def _pieces(path: Path, encoding: textio.TextEncoding) -> Iterator[str | _Group]:
    """The file as a stream of literal lines (``str``) and segments (:class:`_Group`)."""
    block: list[tuple[int, _Line]] = []
    for number, raw in enumerate(textio.lines(path, encoding), 1):
        line = _parse(raw)
        if _has_letter(line.body):
            block.append((number, line))
            if len(block) < MAX_BLOCK:
                continue
            yield from _groups(block)
            block = []
            continue
        if block:
            yield from _groups(block)
            block = []
        yield raw
    if block:
        yield from _groups(block)


@dataclass(frozen=True)
class TextDocument:
    """An opened ``.txt`` file; see the module docstring for how it is segmented."""

    path: Path
    encoding: textio.TextEncoding

    def segments(self) -> Iterator[Segment]:
        """The paragraphs and lines to translate, in order, read lazily.

        Raises:
            DocumentError: If the file is not text in a supported encoding.
        """
        for piece in _pieces(self.path, self.encoding):
            if isinstance(piece, _Group):
                yield Segment(piece.text, line=piece.number)

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the file again with each segment replaced by its translation.

        Args:
            translated: One translation per segment of :meth:`segments`, in order.
            out: The binary stream to write to; it is flushed, not closed.

        Raises:
            DocumentError: If the file cannot be read again, or it changed so that the
                number of segments no longer matches.
        """
        with textio.rewrite(self.path, translated, out, self.encoding) as (stream, take):
            for piece in _pieces(self.path, self.encoding):
                if isinstance(piece, str):
                    stream.write(piece)
                else:
                    _write_group(stream, piece, take(piece.number).text, self.encoding.newline)


def _write_group(stream: TextIO, group: _Group, text: str, newline: str) -> None:
    """Write one segment: its own lines if untranslated, else one line of translation."""
    if text == group.text:
        stream.writelines(line.raw for line in group.lines)
        return
    first, last = group.lines[0], group.lines[-1]
    text = _BREAK.sub(lambda _: (last.ending or newline) + _hanging(first), text)
    stream.write(first.prefix + text + last.trail + last.ending)


@dataclass(frozen=True)
class _TextFormat:
    """The plain-text format: ``.txt`` files."""

    name: str = "text"
    suffixes: tuple[str, ...] = (".txt",)

    def open(self, path: Path, options: FormatOptions) -> TextDocument:
        """Open ``path``; only its first bytes are read (to find its encoding).

        Args:
            path: The ``.txt`` file.
            options: Unused; plain text has no options.

        Raises:
            DocumentError: If the file cannot be read.
        """
        path = Path(path)
        return TextDocument(path, textio.sniff(path))


FORMAT = _TextFormat()
