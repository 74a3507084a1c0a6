"""The one interface every document format implements: read segments, then write them back.

A format module turns a file into :class:`Segment` objects (the text to translate, in
document order) and, given one :class:`Translated` per segment in the same order, writes
the output with everything else kept. The job (``documents/job.py``) does the
translating, the journal, the memory and the glossary; a format knows only its syntax.

Rich text (a Word paragraph of runs, a Markdown paragraph with links and emphasis) is
one segment, so a sentence split across runs is translated whole. The spans that carry
formatting are :attr:`Segment.marks`; the job translates each marked span on its own
too and finds where it landed in the whole translation (:mod:`edge_translator.core.inline`), and the
writer puts the formatting back on :attr:`Translated.marks`. Spans that must come back
verbatim (inline code) are :attr:`Segment.keep`: the job masks them with placeholders
before translation and restores them after.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from ..core.errors import InputError

Span = tuple[int, int]


class DocumentError(InputError):
    """A file cannot be read or written as its format; the message names the file and line.

    The message is one line: a library's text quoted in it (lxml's "Char 0x0 out of allowed
    range\\n, line 2") has its line breaks made spaces.
    """

    def __init__(self, path: Path | str, message: str, line: int | None = None):
        message = re.sub(r"\s*[\r\n]+\s*", " ", message)
        self.path = Path(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {message}")


def changed(path: Path | str, what: str) -> DocumentError:
    """The error when a file no longer holds what it held when its segments were read:
    ``what`` says what it has now ("more than 12 texts")."""
    return DocumentError(path, f"the file changed while it was translated (it now has {what} to translate); "
                               "translate it again")


@dataclass(frozen=True)
class Segment:
    """One piece of a document to translate: a paragraph, a cell, a cue group, ..."""

    text: str
    """The plain text; it may hold several sentences and line breaks."""
    marks: tuple[Span, ...] = ()
    """Spans of ``text`` that carry formatting to put back on the translation."""
    keep: tuple[Span, ...] = ()
    """Spans of ``text`` that must come back verbatim (not translated), e.g. inline code.
    They never overlap each other or cross a mark's boundary."""
    line: int | None = None
    """The 1-based line of the input where the segment starts, where the format has lines."""


@dataclass(frozen=True)
class Translated:
    """A segment's translation, as the writer receives it."""

    text: str
    """The translated text; the segment's kept spans are in it verbatim."""
    marks: tuple[Span | None, ...] = ()
    """Where each of the segment's :attr:`Segment.marks` lies in :attr:`text`, in the same
    order; ``None`` for a mark that could not be placed (its formatting is dropped)."""


@dataclass(frozen=True)
class FormatOptions:
    """What a format may be told by the command line."""

    columns: tuple[str, ...] = ()
    """CSV/TSV and xlsx: the columns to translate, by header name or 1-based number (xlsx: or letter)."""
    sheets: tuple[str, ...] = ()
    """xlsx: the sheets to translate, by name or 1-based number; all when empty."""
    pdf_output: str = "pdf"
    """PDF: what the translation is written as: ``pdf`` (in place), ``docx`` or ``md``."""


class Document(Protocol):
    """An opened input file."""

    def segments(self) -> Iterator[Segment]:
        """The segments in document order. May be called more than once; each call reads
        the input again, so a streaming format keeps its memory flat.

        Raises:
            DocumentError: If the input is malformed or not in a supported encoding.
        """

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the translated document to ``out``.

        ``translated`` yields exactly one item per segment, in the order of
        :meth:`segments`; a streaming format consumes it while it reads the input again.

        Raises:
            DocumentError: If the input cannot be read again as it was.
        """


class Format(Protocol):
    """A document format: its name, the suffixes it reads, and how to open a file."""

    name: str
    suffixes: tuple[str, ...]

    def open(self, path: Path, options: FormatOptions) -> Document:
        """Open ``path``; cheap, the reading happens in :meth:`Document.segments`.

        Raises:
            DocumentError: If the file cannot be used at all (e.g. no columns chosen).
        """


@dataclass(frozen=True)
class FormatInfo:
    """Registry entry: a format and where it lives."""

    name: str
    suffixes: tuple[str, ...]
    module: str
    extra: str | None = field(default=None)
    package: tuple[str, str] | None = None
    """For a zip-packaged format: what it is called and a part every file of it has
    (checked by :func:`.package.check_package` before anything parses it)."""
    magic: bytes | None = None
    """For another binary format: bytes its first kilobyte holds (``%PDF-``)."""
