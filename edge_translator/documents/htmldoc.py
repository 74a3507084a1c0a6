"""HTML documents: text nodes and the ``alt``/``title`` attributes, markup back exactly.

This is the daemon's ``format=html`` module (:mod:`edge_translator.core.markup`) behind
the document interface, so both translate HTML the same way: ``script``, ``style``,
``code`` and ``pre`` are left alone and every byte of markup comes from the source.
Limitation (the markup module's): inline elements split a sentence, so
``<p>Hello <b>world</b>!</p>`` is translated as three pieces. The whole file is read at
once; HTML pages are small next to the model.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from ..core import markup
from . import textio
from .base import DocumentError, FormatOptions, Segment, Translated


def _worth_translating(text: str) -> bool:
    return any(ch.isalnum() for ch in text)


class HtmlDocument:
    """An HTML file opened for translation."""

    def __init__(self, path: Path):
        self.path = path

    def _load(self) -> tuple[str, textio.TextEncoding, list[markup.Piece]]:
        encoding = textio.sniff(self.path)
        html = textio.read_all(self.path, encoding)
        pieces = [p for p in markup.extract(html) if _worth_translating(p.text)]
        return html, encoding, pieces

    def segments(self) -> Iterator[Segment]:
        html, _, pieces = self._load()
        starts = [0] + [i + 1 for i, ch in enumerate(html) if ch == "\n"]
        for piece in pieces:
            yield Segment(piece.text, line=bisect.bisect_right(starts, piece.start))

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        html, encoding, pieces = self._load()
        texts = [t.text for t in translated]
        if len(texts) != len(pieces):
            raise DocumentError(self.path, f"changed while it was translated ({len(pieces)} pieces of text now, "
                                f"{len(texts)} before); run the job again")
        stream = textio.writer(out, encoding)
        stream.write(markup.rebuild(html, pieces, texts))
        stream.flush()
        stream.detach()


@dataclass(frozen=True)
class _HtmlFormat:
    name: str = "html"
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")

    def open(self, path: Path, options: FormatOptions) -> HtmlDocument:
        return HtmlDocument(path)


FORMAT = _HtmlFormat()
