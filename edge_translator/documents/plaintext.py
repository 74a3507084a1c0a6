"""Plain text (``.txt``): paragraphs, blank lines and indentation kept; read as a stream.

The file is read line by line (:func:`textio.lines`), so memory does not grow with its
size. Blank lines, each line's leading indentation, list markers and line endings are
copied as they are; only the words between them are translated.

How lines become segments (one simple rule, applied as the lines stream past):

* A line with no letter (blank, ``-----``, ``* * *``, ``2024``) is copied, not translated.
* A list item (``- ``, ``* ``, ``+ ``, ``•``, ``1.``, ``2)``, ``(3)``, ``a)`` and a space)
  starts a new segment; its marker is kept out of the text and copied.
* Otherwise a line *continues* the previous one (hard-wrapped prose) when the previous
  line is at least :data:`WRAP_MIN` characters long, does not end a sentence
  (``. ! ? : ; …`` or their CJK forms, maybe followed by a closing quote or bracket), and
  this line has the paragraph's indentation (for a list item: its indentation, or the
  hanging indentation under the item's text).
* Short lines and lines that end a sentence (verse, addresses, headings, one sentence per
  line) are therefore each a segment of their own.

A segment of several lines has their texts joined by single spaces, and its translation
is written back as ONE line: the first line's indentation and marker, the translation,
then the last line's trailing spaces and line ending. A translation equal to the joined
text gives the original lines back byte for byte, so an untranslated file is unchanged.

Limitations: the rule is a heuristic. Verse with long lines that end in commas is joined
like prose; prose hard-wrapped narrower than :data:`WRAP_MIN` stays one segment per line;
a word hyphenated across a line break is joined as ``well- known``; indented code is
translated like prose. A segment stops growing at :data:`MAX_LINES` lines or
:data:`MAX_CHARS` characters and the next one starts at a line boundary, so a paragraph
of megabytes is never held whole; one enormous line, though, is read whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from . import textio
from .base import FormatOptions, Segment, Translated

WRAP_MIN = 40
"""The shortest line (indentation included) that hard-wrapped prose may continue past."""
MAX_LINES = 50
"""A segment holds at most this many lines."""
MAX_CHARS = 4000
"""A segment holds at most this many characters of text (a longer single line excepted)."""

_MARKER = re.compile(r"(?:[-*+•‣◦▪–]|\d{1,3}[.)]|\(\d{1,3}\)|[a-z]\))[ \t]+")
_ENDS_SENTENCE = re.compile(r"[.!?:;…。！？；：][\"'”’)\]}»」』]*\Z")
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
        return " ".join(line.body for line in self.lines)


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


def _continues(lines: list[_Line], chars: int, line: _Line) -> bool:
    """Whether ``line`` is hard-wrapped prose that continues the segment ``lines``."""
    first, prev = lines[0], lines[-1]
    if len(lines) >= MAX_LINES or chars + 1 + len(line.body) > MAX_CHARS or line.is_item:
        return False
    if line.prefix not in (first.indent, _hanging(first)):
        return False
    return len(prev.prefix) + len(prev.body) >= WRAP_MIN and not _ENDS_SENTENCE.search(prev.body)


def _pieces(path: Path, encoding: textio.TextEncoding) -> Iterator[str | _Group]:
    """The file as a stream of literal lines (``str``) and segments (:class:`_Group`)."""
    group: list[_Line] = []
    start = chars = 0
    number = 0
    for number, raw in enumerate(textio.lines(path, encoding), 1):
        line = _parse(raw)
        if not _has_letter(line.body):
            if group:
                yield _Group(tuple(group), start)
                group = []
            yield raw
        elif group and _continues(group, chars, line):
            group.append(line)
            chars += 1 + len(line.body)
        else:
            if group:
                yield _Group(tuple(group), start)
            group, start, chars = [line], number, len(line.body)
    if group:
        yield _Group(tuple(group), start)


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
