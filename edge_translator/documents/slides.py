"""PowerPoint ``.pptx`` presentations: every text paragraph of every slide, and the notes.

Read, slide by slide: each text body of the slide's own shapes in their order on the slide
(placeholders, text boxes and autoshapes; the shapes inside groups, however deep; every
table cell, row by row), then the slide's speaker notes. Each paragraph is a segment with
its runs' formatting as marks (:mod:`.richtext`), so formatting, links and fields come
back on the right words. Text in the layouts and masters (the prompts of empty
placeholders) is not the deck's content and is not read; nor are charts, SmartArt and
comments (listed in ``docs/documents.md``).

Text that grows: a translation wider than its source (CJK characters count double) in a
shape that would not fit it gets shrink-on-overflow (``a:normAutofit``) with a font scale
estimated from the growth, so PowerPoint and LibreOffice shrink it into its box and no text
is cut; a shape that already resizes to fit its text (``a:spAutoFit``) is left to do so, and
table rows grow with their text. Nothing else in the deck changes: pictures, media,
animations, transitions and the layouts are written back as they were.

The package is checked before python-pptx reads it (:mod:`.package`): not a zip, a zip bomb,
a password-protected file or a damaged part each end in one line. A macro-enabled deck
(``.pptm``) is refused: python-pptx cannot write its macros back, and dropping them silently
would break the deck.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from ..core.errors import require
from . import richtext
from .base import DocumentError, FormatOptions, Segment, Translated, changed
from .package import read_package

_P_NS = "http://schemas.openxmlformats.org/presentationml/2006/main"
_BODIES = (f"{{{_P_NS}}}txBody", richtext.a("txBody"))
_MACRO = "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml"
PACKAGE = ("PowerPoint .pptx file", "ppt/presentation.xml")
_KIND = PACKAGE[0]


def _bodies(spTree: Any) -> list[Any]:
    """The text bodies under a shape tree, in document order (groups and tables within)."""
    return [el for el in spTree.iter(*_BODIES)]


class PresentationDocument:
    """A ``.pptx`` file opened for translation; see the module docstring."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def _load(self) -> Any:
        pptx = require("pptx", "docs")
        data = read_package(self.path, *PACKAGE)
        if self.path.suffix.lower() == ".pptm" or _macro_enabled(data):
            raise DocumentError(self.path, "is a macro-enabled presentation; its macros cannot be written back, "
                                           "so it is not translated: save a copy as .pptx (without macros) and "
                                           "translate that")
        try:
            return pptx.Presentation(io.BytesIO(data))
        except Exception as exc:  # python-pptx and lxml raise many kinds; none may escape
            where = _broken_part(data)
            if where is not None:
                raise self._damaged(where, exc) from None
            raise DocumentError(self.path, f"is not a usable {_KIND} ({type(exc).__name__}: {str(exc)[:100]}); "
                                           "open it in PowerPoint or LibreOffice and save it again") from None

    def _stories(self, deck: Any) -> Iterator[tuple[str, list[Any]]]:
        """(where, text bodies) for each slide, then its notes."""
        try:
            slides = list(deck.slides)
        except Exception as exc:
            raise self._damaged("its slide list", exc) from None
        for number, slide in enumerate(slides, 1):
            try:
                bodies = _bodies(slide.shapes._spTree)
                notes = slide.notes_slide.notes_text_frame if slide.has_notes_slide else None
            except Exception as exc:  # a slide part that is not XML, or not a slide
                raise self._damaged(f"slide {number}", exc) from None
            yield f"slide {number}", bodies
            if notes is not None:
                yield f"slide {number} notes", [notes._txBody]

    def _damaged(self, where: str, exc: Exception) -> DocumentError:
        return DocumentError(self.path, f"{where} is damaged ({type(exc).__name__}: {str(exc)[:80]}); open the "
                                        "file in PowerPoint or LibreOffice and save it again")

    def segments(self) -> Iterator[Segment]:
        """The paragraphs with text, in order (see the module docstring)."""
        for _, bodies in self._stories(self._load()):
            for body in bodies:
                for p in richtext.paragraphs(body):
                    segment = richtext.read(p).segment
                    if segment is not None:
                        yield segment

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the deck with each paragraph replaced by its translation."""
        deck = self._load()
        items = iter(translated)
        count = 0
        for _, bodies in self._stories(deck):
            for body in bodies:
                before = after = 0
                changed = False
                for p in richtext.paragraphs(body):
                    para = richtext.read(p)
                    segment = para.segment
                    if segment is None:
                        continue
                    item = next(items, None)
                    if item is None:
                        raise self._changed(f"more than {count} paragraphs")
                    count += 1
                    before += richtext.width(segment.text)
                    after += richtext.width(item.text)
                    changed |= para.rewrite(item)
                if changed and after > before:
                    _shrink_on_overflow(body, before / after)
        if next(items, None) is not None:
            raise self._changed(f"only {count} paragraphs")
        deck.save(out)

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)


def _broken_part(data: bytes) -> str | None:
    """The first XML part that does not parse, named as a user knows it ("slide 3")."""
    import re
    import zipfile

    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        for name in archive.namelist():
            if not name.endswith((".xml", ".rels")):
                continue
            try:
                etree.fromstring(archive.read(name), etree.XMLParser(resolve_entities=False, no_network=True))
            except etree.XMLSyntaxError:
                found = re.fullmatch(r"ppt/(slides|notesSlides)/(?:slide|notesSlide)(\d+)\.xml", name)
                if found:
                    return f"slide {found.group(2)}" + (" notes" if found.group(1) == "notesSlides" else "")
                return f"its part {name}"
    return None


def _macro_enabled(data: bytes) -> bool:
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = set(archive.namelist())
        if "ppt/vbaProject.bin" in names:
            return True
        return _MACRO.encode() in archive.read("[Content_Types].xml") if "[Content_Types].xml" in names else False


def _shrink_on_overflow(body: Any, ratio: float) -> None:
    """Let the body's text shrink into its box, by the area the translation grew by."""
    from lxml import etree

    body_pr = body.find(richtext.a("bodyPr"))
    if body_pr is None:
        return
    fits = [c for c in body_pr if c.tag in (richtext.a("noAutofit"), richtext.a("normAutofit"),
                                            richtext.a("spAutoFit"))]
    if any(c.tag == richtext.a("spAutoFit") for c in fits):
        return  # the shape grows to fit its text
    scale = max(0.25, math.sqrt(ratio))
    for c in fits:
        old = c.get("fontScale")
        if old is not None:
            scale *= int(old) / 100000
        body_pr.remove(c)
    fit = etree.Element(richtext.a("normAutofit"))
    fit.set("fontScale", str(max(1000, round(scale * 100000 / 1000) * 1000)))
    # bodyPr's children come in schema order: prstTxWarp, then the autofit, then scene3d...
    warp = body_pr.find(richtext.a("prstTxWarp"))
    body_pr.insert(body_pr.index(warp) + 1 if warp is not None else 0, fit)


@dataclass(frozen=True)
class PresentationFormat:
    """The ``pptx`` format (python-pptx reads and writes it); ``.pptm`` is named to be refused."""

    name: str = "pptx"
    suffixes: tuple[str, ...] = (".pptx", ".pptm")

    def open(self, path: Path, options: FormatOptions) -> PresentationDocument:
        """Open ``path``; reading happens in :meth:`PresentationDocument.segments`."""
        return PresentationDocument(path)


FORMAT = PresentationFormat()
