"""Markdown (CommonMark with GFM tables and strikethrough): translate the text, keep the markup.

The file is parsed with markdown-it-py. Every paragraph, heading (ATX and setext) and table
cell, wherever it sits (list items, block quotes), is one segment; fenced and indented
code, HTML blocks, front matter, thematic breaks, link reference definitions and a table's
delimiter row are never touched. Inside a segment, emphasis, strong, strikethrough and
links are marks (a link keeps its URL and title), and inline code, autolinks, inline HTML
and images are kept verbatim. Each segment is aligned with its exact source span, so a
segment whose translation is its own text is written back byte for byte, and a changed
one replaces only that span: every byte of markup outside it comes from the source.

Writing a changed segment:

* It comes back on one line after the first line's prefix (``> ``, ``- ``, ``## ``...):
  a soft line break is a space in the segment text. A hard break (two spaces or ``\\``
  before the line end) is a ``\\n`` in the text and is written back with the source's
  own break syntax and the next line's prefix.
* Characters that would become markup are escaped (``\\ ` * _ [ ] < ~``, an entity-like
  ``&``, ``|`` in a table cell, block starters at a line start, an ATX heading's closing
  ``#``); in a setext heading ``|`` is written ``&#124;`` (else the underline would
  become a table's delimiter row).
* A mark the translation could not place (``None``) loses its syntax, its text stays.
  A mark is clamped into its parent, shrunk off punctuation where the CommonMark
  flanking rules need it (``_`` becomes ``*`` between CJK letters), and dropped when it
  crosses a sibling or a kept span. The written line is parsed again: where its
  delimiters would pair up differently, the segment's emphasis is dropped. A link is
  never lost: one that covered the whole segment wraps the whole translation, any other
  is appended after it as in the source; a reference link by its text (``[ref]``) gets
  its label (``[译文][ref]``).

Limitations: the alt text of images is not translated; a blank translation leaves the
source text; markup nested more than 64 deep leaves its paragraph untranslated; TOML
(``+++``) front matter is read as Markdown.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from . import textio
from .base import FormatOptions, Segment, Translated
from .markdown_parse import parser, read_source, units
from .markdown_write import mark_tags, render


@dataclass(frozen=True)
class MarkdownDocument:
    """A Markdown file opened for translation."""

    path: Path

    def segments(self) -> Iterator[Segment]:
        """The paragraphs, headings and table cells, in document order.

        Raises:
            DocumentError: If the file is not text in a supported encoding.
        """
        for unit in units(self.path, read_source(self.path), parser(), {}):
            yield unit.segment

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the file with each segment's source span replaced by its translation.

        Raises:
            DocumentError: If the file cannot be read again, or it changed so that the
                number of segments no longer matches.
        """
        source = read_source(self.path)
        md, env = parser(), {}

        def tags(body: str) -> list[str]:
            return mark_tags(md.parseInline(body, env))

        with textio.rewrite(self.path, translated, out, source.encoding) as (stream, take):
            done = 0
            for unit in units(self.path, source, md, env):
                item = take(unit.segment.line)
                stream.write(source.text[done:unit.start])
                stream.write(render(unit, item, source.text, tags))
                done = unit.end
            stream.write(source.text[done:])


@dataclass(frozen=True)
class MarkdownFormat:
    """Markdown files: ``.md`` and ``.markdown``."""

    name: str = "markdown"
    suffixes: tuple[str, ...] = (".md", ".markdown")

    def open(self, path: Path, options: FormatOptions) -> MarkdownDocument:
        """Open ``path``; nothing is read until :meth:`MarkdownDocument.segments`."""
        return MarkdownDocument(Path(path))


FORMAT = MarkdownFormat()
