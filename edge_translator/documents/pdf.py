"""PDF files with a text layer: each text block replaced in place by its translation.

Read: pdfminer.six finds each page's text blocks (lines grouped into boxes) in reading
order, with their boxes and font sizes. A block that holds the same text at the same
height on at least three pages, and on a third of them, is a running header or footer:
it is one segment for the whole document. A page without any text (a scanned page) is
kept as it is and reported by number, not OCR'd.

Written: pikepdf removes the text-showing operators from each page and its form XObjects
(everything else: images, drawings, the graphics state set inside text objects, links,
stays), and reportlab draws each block's translation (a block without letters: its text)
into the block's box in a CJK font embedded in the file (a subset), starting at the
block's size and shrunk until the wrapped text fits. Page sizes, page count and every
non-text object come back as they were.

The file is first opened by pikepdf (qpdf), which repairs broken cross-reference tables;
what it cannot open, an encrypted file and a file without any text end in one line.
Limitations (``docs/documents.md``): text drawn with Type 3 fonts or clipping text modes,
rotated pages and vertical text are not handled; colours and fonts of the source text
are not kept (the translation is black, in the CJK font).
"""

from __future__ import annotations

import io
import logging
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pikepdf  # the format's library: importing this module says whether the extra "pdf" is installed

from ..core.errors import require
from .base import DocumentError, FormatOptions, Segment, Translated, changed

logger = logging.getLogger(__name__)

#: TrueType CJK fonts looked for, in order (reportlab embeds TrueType outlines only).
FONT_PATHS = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/truetype/arphic/uming.ttc",
    "/usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf",
    "C:/Windows/Fonts/simhei.ttf",
    "/Library/Fonts/Arial Unicode.ttf",
)
_SHOW = frozenset({"Tj", "TJ", "'", '"'})
_DIGITS = re.compile(r"\d+")
_FONT = "EdgeTranslatorCJK"


@dataclass(frozen=True)
class Block:
    """A text block of a page, in PDF points with the page's lower-left corner at (0, 0)."""

    page: int
    x0: float
    y0: float
    x1: float
    y1: float
    text: str
    size: float
    running: bool = False
    """A header or footer repeated across the document: translated once."""


def cjk_font() -> str:
    """The path of a TrueType CJK font: ``$EDGE_TRANSLATOR_CJK_FONT`` or a system one.

    Raises:
        InputError: If none is found, saying what to install.
    """
    import os

    from ..core.errors import InputError

    chosen = os.environ.get("EDGE_TRANSLATOR_CJK_FONT")
    for path in ([chosen] if chosen else []) + list(FONT_PATHS):
        if Path(path).is_file():
            return path
    raise InputError("no TrueType CJK font to write the PDF with: install one (Debian: fonts-wqy-microhei) or "
                     "set EDGE_TRANSLATOR_CJK_FONT to a .ttf or .ttc file")


class PdfDocument:
    """A PDF opened for translation; see the module docstring."""

    def __init__(self, path: Path, output: str = "pdf"):
        self.path = Path(path)
        self.output = output
        self.notes: list[str] = []

    def _clean(self) -> bytes:
        """The file as pikepdf reads it (cross-references repaired), or one line why not."""
        try:
            with pikepdf.open(self.path) as pdf:
                if pdf.is_encrypted:
                    raise DocumentError(self.path, "is encrypted; open it, remove the password or the "
                                                   "restrictions, save a copy and translate that")
                out = io.BytesIO()
                pdf.save(out)
                return out.getvalue()
        except pikepdf.PasswordError:
            raise DocumentError(self.path, "is encrypted with a password; open it, remove the password, save a "
                                           "copy and translate that") from None
        except DocumentError:
            raise
        except (pikepdf.PdfError, OSError, ValueError) as exc:
            raise DocumentError(self.path, f"is not a usable PDF ({type(exc).__name__}: {str(exc)[:100]}); open "
                                           "it in a PDF viewer and print or save it to a new PDF") from None

    def _pages(self, data: bytes) -> list[list[Block]]:
        """Every page's blocks, running headers and footers marked."""
        require("pdfminer", "pdf")
        from pdfminer.high_level import extract_pages
        from pdfminer.layout import LAParams, LTChar, LTTextBox, LTTextLine

        pages: list[list[Block]] = []
        try:
            for number, layout in enumerate(extract_pages(io.BytesIO(data), laparams=LAParams()), 1):
                x, y = layout.x0, layout.y0
                blocks = []
                for box in layout:
                    if isinstance(box, LTTextBox):
                        blocks += [Block(number - 1, x0 - x, y0 - y, x1 - x, y1 - y, text, size)
                                   for x0, y0, x1, y1, text, size in _groups(box, LTTextLine, LTChar)]
                pages.append(blocks)
        except Exception as exc:  # pdfminer raises many kinds on damaged streams; none may escape
            raise DocumentError(self.path, f"page {len(pages) + 1} is damaged ({type(exc).__name__}: "
                                           f"{str(exc)[:80]}); open it in a PDF viewer and save it to a new PDF") \
                from None
        return _mark_running(pages)

    def _load(self) -> tuple[bytes, list[list[Block]]]:
        data = self._clean()
        pages = self._pages(data)
        if not any(pages):
            raise DocumentError(self.path, "has no text layer (a scanned document?); it would need OCR, which is "
                                           "not done here")
        self.notes = [f"page {n} has no text layer (scanned?): kept as it is" for n, b in enumerate(pages, 1)
                      if not b]
        return data, pages

    def segments(self) -> Iterator[Segment]:
        """Each block with a letter, page by page; each running header or footer once."""
        _, pages = self._load()
        seen: set[str] = set()
        for block in (b for blocks in pages for b in blocks):
            if not any(ch.isalpha() for ch in block.text):
                continue
            if block.running:
                if block.text in seen:
                    continue
                seen.add(block.text)
            yield Segment(block.text)

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the PDF with every text block redrawn as its translation."""
        data, pages = self._load()
        items = iter(translated)
        running: dict[str, str] = {}
        drawn: list[list[tuple[Block, str]]] = []
        count = 0
        for blocks in pages:
            row = []
            for block in blocks:
                text = block.text
                if any(ch.isalpha() for ch in block.text):
                    if block.running and block.text in running:
                        text = running[block.text]
                    else:
                        item = next(items, None)
                        if item is None:
                            raise self._changed(f"more than {count} blocks")
                        count += 1
                        text = item.text
                        if block.running:
                            running[block.text] = text
                row.append((block, text))
            drawn.append(row)
        if next(items, None) is not None:
            raise self._changed(f"only {count} blocks")
        if self.output != "pdf":
            return _editable(drawn, self.output, out)
        with pikepdf.open(io.BytesIO(data)) as pdf:
            sizes = [_size(page) for page in pdf.pages]
            overlay_pdf = pikepdf.open(io.BytesIO(_overlay(drawn, sizes)))
            for index, (page, row) in enumerate(zip(pdf.pages, drawn)):
                if not row:
                    continue
                _strip_text(pdf, page)
                box = page.mediabox
                page.add_overlay(overlay_pdf.pages[index], pikepdf.Rectangle(*[float(v) for v in box]))
            pdf.save(out)

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)


def _groups(box: Any, line_type: type, char_type: type) -> list[tuple]:
    """A box's lines in runs of one font size (a heading pdfminer put above its paragraph is
    a block of its own): (x0, y0, x1, y1, text, size) for each run with text."""
    runs: list[list[tuple[Any, float]]] = []
    for line in box:
        if not isinstance(line, line_type) or not line.get_text().strip():
            continue
        sizes = [c.size for c in line if isinstance(c, char_type)]
        size = statistics.median(sizes) if sizes else 10.0
        if runs and abs(runs[-1][-1][1] - size) <= 0.15 * max(size, 1.0):
            runs[-1].append((line, size))
        else:
            runs.append([(line, size)])
    out = []
    for run in runs:
        text = _join([line.get_text().strip() for line, _ in run])
        if text:
            out.append((min(ln.x0 for ln, _ in run), min(ln.y0 for ln, _ in run), max(ln.x1 for ln, _ in run),
                        max(ln.y1 for ln, _ in run), text, statistics.median(s for _, s in run)))
    return out


def _editable(drawn: list[list[tuple[Block, str]]], kind: str, out: BinaryIO) -> None:
    """The translation as an editable document: each block a paragraph, in reading order; a
    block set larger than the body text a heading; the running header once, at the top;
    the running footer and page numbers left out; a page break (Markdown: a rule) between pages."""
    body = [b.size for row in drawn for b, _ in row if not b.running]
    usual = statistics.median(body) if body else 10.0

    def level(block: Block) -> int:
        return 1 if block.size >= 1.5 * usual else 2 if block.size >= 1.2 * usual else 0

    header = next((t for row in drawn for b, t in row if b.running
                   and all(b.y0 >= other.y1 for other, _ in row if not other.running)), None)
    pages = [[(b, t) for b, t in row if not b.running and any(ch.isalpha() for ch in b.text)] for row in drawn]
    pages = [p for p in pages if p]
    if kind == "md":
        parts = [f"*{_md(header)}*\n\n"] if header else []
        for number, row in enumerate(pages):
            if number:
                parts.append("---\n\n")
            parts += [("#" * level(b) + " " if level(b) else "") + _md(t) + "\n\n" for b, t in row]
        out.write("".join(parts).rstrip("\n").encode("utf-8") + b"\n")
        return
    docx = require("docx", "docs")
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    if header:
        document.sections[0].header.paragraphs[0].text = header
    for number, row in enumerate(pages):
        for k, (block, text) in enumerate(row):
            paragraph = document.add_heading(text, level(block)) if level(block) else document.add_paragraph(text)
            if number and k == 0:
                paragraph.insert_paragraph_before().add_run().add_break(WD_BREAK.PAGE)
    document.save(out)


def _md(text: str) -> str:
    """Text as a Markdown paragraph that reads as itself (markup characters escaped)."""
    return re.sub(r"([\\`*_{}\[\]<>#|])", r"\\\1", " ".join(text.split()))


def _join(lines: list[str]) -> str:
    """A block's lines as one text: a word broken by a hyphen at a line's end joined again."""
    text = ""
    for line in (ln for ln in lines if ln):
        if text.endswith("-") and len(text) > 1 and text[-2].isalpha() and line[:1].islower():
            text = text[:-1] + line
        else:
            text = f"{text} {line}" if text else line
    return text


def _mark_running(pages: list[list[Block]]) -> list[list[Block]]:
    """Mark the blocks whose text (digits aside) recurs at one height on ≥ 3 pages and ≥ a third."""
    from dataclasses import replace

    def key(b: Block) -> tuple[str, int]:
        return b.text, round(b.y0 / 4)

    counts = Counter(k for blocks in pages for k in {key(b) for b in blocks})
    enough = max(3, len(pages) / 3)
    return [[replace(b, running=True) if counts[key(b)] >= enough else b for b in blocks] for blocks in pages]


def _size(page: Any) -> tuple[float, float]:
    x0, y0, x1, y1 = (float(v) for v in page.mediabox)
    return x1 - x0, y1 - y0


def _strip_text(pdf: Any, page: Any) -> None:
    """Remove the text-showing operators of the page and of the form XObjects it draws."""
    def strip(ops: list) -> bytes:
        return pikepdf.unparse_content_stream([op for op in ops if str(op.operator) not in _SHOW])

    page.obj.Contents = pdf.make_stream(strip(pikepdf.parse_content_stream(page)))
    seen: set[tuple[int, int]] = set()

    def forms(resources: Any) -> None:
        xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) else None
        for _, xobject in (xobjects.items() if isinstance(xobjects, pikepdf.Dictionary) else ()):
            if not isinstance(xobject, pikepdf.Stream) or xobject.get("/Subtype") != "/Form" \
                    or xobject.objgen in seen:
                continue  # a damaged entry (a number where a stream belongs) draws nothing
            seen.add(xobject.objgen)
            xobject.write(strip(pikepdf.parse_content_stream(xobject)))
            forms(xobject.get("/Resources"))

    forms(page.obj.get("/Resources"))


def _overlay(drawn: list[list[tuple[Block, str]]], sizes: list[tuple[float, float]]) -> bytes:
    """A PDF of the pages' texts alone, each in its block's box."""
    require("reportlab", "pdf")
    from reportlab.pdfbase import pdfmetrics
    from reportlab.pdfbase.ttfonts import TTFont
    from reportlab.pdfgen import canvas

    if _FONT not in pdfmetrics.getRegisteredFontNames():
        path = cjk_font()
        pdfmetrics.registerFont(TTFont(_FONT, path, subfontIndex=0) if path.endswith(".ttc")
                                else TTFont(_FONT, path))
    out = io.BytesIO()
    sheet = canvas.Canvas(out, pageCompression=1)
    for row, (width, height) in zip(drawn, sizes):
        sheet.setPageSize((width, height))
        for block, text in row:
            _draw(sheet, block, text, pdfmetrics)
        sheet.showPage()
    sheet.save()
    return out.getvalue()


_TOKENS = re.compile(r"[A-Za-z0-9'’.,:;!?%&@/()\-]+|\s+|.")


def _wrap(text: str, width: float, size: float, metrics) -> list[str]:
    """Lines of at most ``width`` points: Latin words whole where they fit, CJK anywhere."""
    lines, line = [], ""
    for token in _TOKENS.findall(text.replace("\n", " ")):
        if metrics.stringWidth(line + token, _FONT, size) <= width or not line.strip():
            line += token
            continue
        lines.append(line.rstrip())
        line = token.lstrip()
    if line.strip():
        lines.append(line.rstrip())
    return lines


def _draw(sheet: Any, block: Block, text: str, metrics) -> None:
    """The text in the block's box, its size shrunk until the wrapped lines fit the height."""
    width, height = max(block.x1 - block.x0, 1.0), max(block.y1 - block.y0, 1.0)
    size = max(min(block.size, height), 3.0)
    while True:
        lines = _wrap(text, width, size, metrics)
        if len(lines) * size * 1.15 <= height * 1.05 + 0.5 or size <= 3.0:
            break
        size = max(size * 0.92, 3.0)
    sheet.setFont(_FONT, size)
    y = block.y1 - size
    for line in lines:
        sheet.drawString(block.x0, y, line)
        y -= size * 1.15


@dataclass(frozen=True)
class PdfFormat:
    """The ``pdf`` format (pikepdf, pdfminer.six and reportlab, in the extra ``pdf``)."""

    name: str = "pdf"
    suffixes: tuple[str, ...] = (".pdf",)

    def open(self, path: Path, options: FormatOptions) -> PdfDocument:
        """Open ``path``; reading happens in :meth:`PdfDocument.segments`."""
        return PdfDocument(path, options.pdf_output)


FORMAT = PdfFormat()
