"""HTML documents: text nodes and the ``alt``/``title`` attributes, markup back exactly.

This is the daemon's ``format=html`` module (:mod:`edge_translator.core.markup`) behind
the document interface, so both translate HTML the same way: ``script``, ``style``,
``code`` and ``pre`` are left alone and every byte of markup comes from the source. A
sentence across inline elements (``<p>Read the <a href="/d">docs</a> first.</p>``) is one
segment whose elements are its marks: the job translates it whole and each element's text
on its own, and finds where each landed (:mod:`edge_translator.core.inline`); the writer
puts the tags there. The whole file is read at once; HTML pages are small next to the model.
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


def units(html: str, flavour: markup.Markup = markup.HTML) -> list[markup.Unit]:
    """The units of ``html`` (or XML read as ``flavour`` says) worth translating, in order."""
    return [u for u in markup.plan(html, flavour) if _worth_translating(u.text)]


def segment(unit: markup.Unit, line: int | None = None) -> Segment:
    """A unit as a segment: a block's inline elements are its marks."""
    return Segment(unit.text, unit.marks if isinstance(unit, markup.Block) else (), line=line)


def rewrite(html: str, found: list[markup.Unit], done: list[Translated]) -> str:
    """``html`` with each unit's translation written in (one translation per unit)."""
    placed = [t.marks if isinstance(u, markup.Block) else None for u, t in zip(found, done)]
    return markup.rebuild_units(html, found, [t.text for t in done], placed)


class HtmlDocument:
    """An HTML file opened for translation."""

    def __init__(self, path: Path):
        self.path = path

    def _load(self) -> tuple[str, textio.TextEncoding, list[markup.Unit]]:
        encoding = textio.sniff(self.path)
        html = textio.read_all(self.path, encoding)
        return html, encoding, units(html)

    def segments(self) -> Iterator[Segment]:
        html, _, found = self._load()
        starts = [0] + [i + 1 for i, ch in enumerate(html) if ch == "\n"]
        for unit in found:
            yield segment(unit, bisect.bisect_right(starts, unit.start))

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        html, encoding, found = self._load()
        done = list(translated)
        if len(done) != len(found):
            raise DocumentError(self.path, f"changed while it was translated ({len(found)} pieces of text now, "
                                f"{len(done)} before); run the job again")
        stream = textio.writer(out, encoding)
        stream.write(rewrite(html, found, done))
        stream.flush()
        stream.detach()


@dataclass(frozen=True)
class _HtmlFormat:
    name: str = "html"
    suffixes: tuple[str, ...] = (".html", ".htm", ".xhtml")

    def open(self, path: Path, options: FormatOptions) -> HtmlDocument:
        return HtmlDocument(path)


FORMAT = _HtmlFormat()
