"""EPUB books (2 and 3): the title, the table of contents and every chapter of the spine.

Read, in this order: the book's titles (``dc:title`` in the package document), the labels of
the EPUB 2 table of contents (``toc.ncx``: its title and every ``navLabel``), then each
XHTML document of the spine in reading order, and the EPUB 3 navigation document where the
spine does not hold it. An XHTML document goes through the HTML path (:mod:`.htmldoc`):
a sentence across inline elements is one segment, every tag comes back byte for byte, and
``code``, ``pre``, ``script`` and ``style`` are left alone. In the package document and
the NCX only the text of those elements changes; every other part (images, fonts, style
sheets, the manifest and the spine) is copied as it was.

The package stays valid: ``mimetype`` is written first and uncompressed, whatever the input
did, and no part is added or removed. The book's ``dc:language`` and the chapters'
``xml:lang`` are left as they were (listed in ``docs/documents.md``).

Refused, each in one line that names the part: what :mod:`.package` refuses (not a zip, a
zip bomb, a password-protected file), a package without its package document, a spine item
missing from the manifest or from the file, a chapter that is not UTF-8, and a book whose
chapters are encrypted (DRM). Font obfuscation, which also uses ``encryption.xml``, is fine.
"""

from __future__ import annotations

import html as _html
import io
import posixpath
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote

from . import htmldoc, xmlstream
from .base import DocumentError, FormatOptions, Segment, Translated, changed
from .package import read_package, repack

PACKAGE = ("EPUB file", "META-INF/container.xml")
_CONTAINER = "urn:oasis:names:tc:opendocument:xmlns:container"
_OPF = "http://www.idpf.org/2007/opf"
_ENC = "http://www.w3.org/2001/04/xmlenc#"
_XHTML = "application/xhtml+xml"
_NCX = "application/x-dtbncx+xml"
_FONT_OBFUSCATION = ("http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC")


@dataclass(frozen=True)
class Part:
    """A part whose text is translated: its name in the zip and what a user calls it."""

    name: str
    label: str
    kind: str
    """``xhtml`` (through the HTML path), ``opf`` (its titles) or ``ncx`` (its labels)."""


def _texts(tokens: list[str], names: frozenset[str], within: frozenset[str] | None = None) -> list[tuple[int, int]]:
    """The (first, end) token ranges of the text of each element named in ``names`` that holds
    only text (inside an element of ``within``, when given)."""
    found, stack = [], []
    for i, token in enumerate(tokens):
        local = xmlstream.name(token)
        if local is None:
            continue
        if xmlstream.is_end(token):
            if stack and stack[-1][0] == local:
                name, start, plain = stack.pop()
                if plain and name in names and (within is None or any(n in within for n, _, _ in stack)):
                    found.append((start + 1, i))
            if stack:
                stack[-1][2] = False
        elif xmlstream.is_start(token):
            if stack:
                stack[-1][2] = False
            stack.append([local, i, True])
    return found


class BookDocument:
    """An ``.epub`` file opened for translation; see the module docstring."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def _load(self) -> tuple[zipfile.ZipFile, list[Part]]:
        archive = zipfile.ZipFile(io.BytesIO(read_package(self.path, *PACKAGE)))
        names = set(archive.namelist())
        container = self._xml(archive, PACKAGE[1], "its container (META-INF/container.xml)")
        root = container.find(f".//{{{_CONTAINER}}}rootfile")
        opf = root.get("full-path", "") if root is not None else ""
        if opf not in names:
            raise DocumentError(self.path, f"is not a usable {PACKAGE[0]}: it has no package document"
                                           f"{' ' + opf if opf else ''}; open it in an EPUB editor (Sigil, Calibre) "
                                           "and save it again")
        package = self._xml(archive, opf, f"its package document {opf}")
        folder = posixpath.dirname(opf)
        manifest = {}
        for item in package.iter(f"{{{_OPF}}}item"):
            href = posixpath.normpath(posixpath.join(folder, unquote(item.get("href", ""))))
            manifest[item.get("id", "")] = (href, item.get("media-type", ""), item.get("properties", "").split())
        parts = [Part(opf, "its title", "opf")]
        parts += [Part(h, "its table of contents", "ncx") for h, kind, _ in manifest.values()
                  if kind == _NCX and h in names]
        spine = list(package.iter(f"{{{_OPF}}}itemref"))
        for number, ref in enumerate(spine, 1):
            idref = ref.get("idref", "")
            if idref not in manifest:
                raise DocumentError(self.path, f"chapter {number} of its spine ({idref!r}) is not in its manifest; "
                                               "open it in an EPUB editor (Sigil, Calibre) and save it again")
            href, kind, _ = manifest[idref]
            if href not in names:
                raise DocumentError(self.path, f"chapter {number} of its spine ({href}) is missing from the file; "
                                               "open it in an EPUB editor (Sigil, Calibre) and save it again")
            if kind == _XHTML:
                parts.append(Part(href, f"chapter {number} ({href})", "xhtml"))
        in_spine = {p.name for p in parts}
        parts += [Part(h, f"its table of contents ({h})", "xhtml") for h, kind, props in manifest.values()
                  if "nav" in props and kind == _XHTML and h in names and h not in in_spine]
        self._refuse_drm(archive, {p.name for p in parts if p.kind == "xhtml"})
        return archive, parts

    def _xml(self, archive: zipfile.ZipFile, part: str, what: str) -> Any:
        from lxml import etree

        try:
            return etree.fromstring(archive.read(part), etree.XMLParser(resolve_entities=False, no_network=True))
        except (KeyError, etree.XMLSyntaxError) as exc:
            raise DocumentError(self.path, f"{what} is damaged ({type(exc).__name__}: {str(exc)[:80]}); open it "
                                           "in an EPUB editor (Sigil, Calibre) and save it again") from None

    def _refuse_drm(self, archive: zipfile.ZipFile, chapters: set[str]) -> None:
        if "META-INF/encryption.xml" not in archive.namelist():
            return
        encryption = self._xml(archive, "META-INF/encryption.xml", "its encryption.xml")
        for data in encryption.iter(f"{{{_ENC}}}EncryptedData"):
            method = data.find(f"{{{_ENC}}}EncryptionMethod")
            if method is not None and method.get("Algorithm") in _FONT_OBFUSCATION:
                continue  # an obfuscated font, not a locked book
            ref = data.find(f".//{{{_ENC}}}CipherReference")
            uri = unquote(ref.get("URI", "")) if ref is not None else ""
            if uri in chapters or uri.lstrip("/") in chapters:
                raise DocumentError(self.path, "is DRM-protected (its chapters are encrypted) and cannot be "
                                               "translated; translate a copy without DRM")

    def _text(self, archive: zipfile.ZipFile, part: Part) -> str:
        try:
            return archive.read(part.name).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError(self.path, f"{part.label} is not UTF-8 (byte {exc.start}); open the book in an "
                                           "EPUB editor (Sigil, Calibre) and save it again") from None

    def _pieces(self, text: str, part: Part) -> tuple[list[str], list[tuple[int, int]]]:
        """An OPF's or NCX's tokens and the ranges of the texts to translate in them."""
        try:
            tokens = list(xmlstream.tokens(io.BytesIO(text.encode("utf-8"))))
        except xmlstream.MarkupError as exc:
            raise DocumentError(self.path, f"{part.label} is damaged ({exc}); open the book in an EPUB editor "
                                           "(Sigil, Calibre) and save it again") from None
        if part.kind == "opf":
            ranges = _texts(tokens, frozenset({"title"}), frozenset({"metadata"}))
        else:
            ranges = _texts(tokens, frozenset({"text"}), frozenset({"docTitle", "navLabel"}))
        return tokens, [(a, b) for a, b in ranges if _plain(tokens, a, b).strip()]

    def segments(self) -> Iterator[Segment]:
        """The titles, the table of contents' labels, then the chapters (see the module docstring)."""
        archive, parts = self._load()
        with archive:
            for part in parts:
                text = self._text(archive, part)
                if part.kind == "xhtml":
                    yield from (htmldoc.segment(unit) for unit in htmldoc.units(text))
                else:
                    tokens, ranges = self._pieces(text, part)
                    yield from (Segment(_plain(tokens, a, b).strip()) for a, b in ranges)

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the book with each text replaced by its translation."""
        items = iter(translated)
        count = 0

        def take(n: int) -> list[Translated]:
            nonlocal count
            got = [t for _, t in zip(range(n), items)]
            count += len(got)
            if len(got) < n:
                raise self._changed(f"more than {count} texts")
            return got

        archive, parts = self._load()
        with archive:
            new: dict[str, bytes] = {}
            for part in parts:
                text = self._text(archive, part)
                if part.kind == "xhtml":
                    found = htmldoc.units(text)
                    done = take(len(found))
                    if any(t.text != u.text for t, u in zip(done, found)):
                        new[part.name] = htmldoc.rewrite(text, found, done).encode("utf-8")
                    continue
                tokens, ranges = self._pieces(text, part)
                done = take(len(ranges))
                changed = False
                for (a, b), item in zip(reversed(ranges), reversed(done)):
                    plain = _plain(tokens, a, b)
                    if item.text != plain.strip():
                        lead, trail = plain[:len(plain) - len(plain.lstrip())], plain[len(plain.rstrip()):]
                        tokens[a:b] = [_html.escape(lead + item.text + trail, quote=False)]
                        changed = True
                if changed:
                    new[part.name] = "".join(tokens).encode("utf-8")
            if next(items, None) is not None:
                raise self._changed(f"only {count} texts")
            repack(archive, new, out, stored="mimetype")

    def _changed(self, what: str) -> DocumentError:
        return changed(self.path, what)


def _plain(tokens: list[str], a: int, b: int) -> str:
    """The text of the tokens ``a:b``, references resolved (CDATA as it is)."""
    out = []
    for token in tokens[a:b]:
        if token.startswith("<![CDATA["):
            out.append(token[9:-3])
        elif not token.startswith("<"):
            out.append(_html.unescape(token))
    return "".join(out)


@dataclass(frozen=True)
class BookFormat:
    """The ``epub`` format."""

    name: str = "epub"
    suffixes: tuple[str, ...] = (".epub",)

    def open(self, path: Path, options: FormatOptions) -> BookDocument:
        """Open ``path``; reading happens in :meth:`BookDocument.segments`."""
        return BookDocument(path)


FORMAT = BookFormat()
