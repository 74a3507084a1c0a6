"""Reading and writing text files in the encoding and line endings they came in.

Supported: UTF-8, UTF-8 with a BOM, and UTF-16 (little or big endian) with a BOM.
Anything else (Latin-1, UTF-16 without a BOM, binary data) is refused with the line
where it stops being text. Files are opened with ``newline=""``, so every line keeps
its own ending (``\\n``, ``\\r\\n`` or ``\\r``) and the output can give it back as it was.
"""

from __future__ import annotations

import codecs
import contextlib
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

from .base import DocumentError, Translated

_BOMS = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


@dataclass(frozen=True)
class TextEncoding:
    """How a text file is encoded."""

    codec: str
    """``"utf-8"``, ``"utf-16-le"`` or ``"utf-16-be"``."""
    bom: bytes
    """The byte order mark the file starts with (``b""`` for none); the output gets it too."""
    newline: str
    """The file's first line ending (``"\\n"`` where it has none), for lines a writer adds."""

    @property
    def name(self) -> str:
        """A readable name: ``"UTF-8"``, ``"UTF-8 with BOM"``, ``"UTF-16-LE with BOM"``."""
        base = self.codec.upper()
        return f"{base} with BOM" if self.bom else base


def sniff(path: Path) -> TextEncoding:
    """Find the encoding and first line ending of ``path`` from its first bytes.

    Raises:
        DocumentError: If the file cannot be opened.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(65536)
    except OSError as exc:
        raise DocumentError(path, f"cannot read the file ({exc.strerror})") from None
    codec, bom = "utf-8", b""
    for mark, name in _BOMS:
        if head.startswith(mark):
            codec, bom = name, mark
            break
    text = head[len(bom):].decode(codec, errors="ignore")
    newline = "\n"
    for i, ch in enumerate(text):
        if ch == "\n":
            break
        if ch == "\r":
            newline = "\r\n" if text[i + 1:i + 2] == "\n" else "\r"
            break
    return TextEncoding(codec, bom, newline)


def open_text(path: Path, encoding: TextEncoding) -> TextIO:
    """Open ``path`` for reading as text, past its BOM, with line endings kept raw."""
    raw = open(path, "rb")
    raw.seek(len(encoding.bom))
    return io.TextIOWrapper(raw, encoding=encoding.codec, errors="strict", newline="")


def lines(path: Path, encoding: TextEncoding | None = None) -> Iterator[str]:
    """The lines of ``path``, each with its own line ending, read lazily.

    Raises:
        DocumentError: If the file is not text in a supported encoding; the message names
            the line.
    """
    encoding = encoding or sniff(path)
    if encoding.codec == "utf-8":
        yield from _utf8_lines(path, encoding)
        return
    number = 0
    try:
        with open_text(path, encoding) as f:
            for number, line in enumerate(f, 1):
                _check(path, line, number)
                yield line
    except UnicodeDecodeError:
        raise DocumentError(path, f"is not {encoding.name} (bytes that cannot be decoded near line "
                            f"{number + 1}); save it as UTF-8") from None
    except OSError as exc:
        raise DocumentError(path, f"cannot read the file ({exc.strerror})") from None


def _utf8_lines(path: Path, encoding: TextEncoding) -> Iterator[str]:
    """UTF-8 lines decoded one at a time, so that an error names its exact line."""
    number = 0
    try:
        with open(path, "rb") as f:
            f.seek(len(encoding.bom))
            for raw in f:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise DocumentError(path, f"is not {encoding.name} (byte 0x{raw[exc.start]:02X} at "
                                        f"column {exc.start + 1} cannot be decoded); save it as UTF-8",
                                        number + 1) from None
                for line in _CR_SPLIT.split(text) if "\r" in text[:-1] else (text,):
                    if line:
                        number += 1
                        _check(path, line, number)
                        yield line
    except OSError as exc:
        raise DocumentError(path, f"cannot read the file ({exc.strerror})") from None


_CR_SPLIT = re.compile(r"(?<=\r)(?!\n)")


def _check(path: Path, line: str, number: int) -> None:
    if "\x00" in line:
        raise DocumentError(path, "holds NUL bytes: it is binary, or UTF-16 without a BOM; save it as UTF-8",
                            number)


def read_all(path: Path, encoding: TextEncoding | None = None) -> str:
    """The whole text of ``path`` (for formats that parse a whole document at once)."""
    return "".join(lines(path, encoding))


def writer(out: BinaryIO, encoding: TextEncoding) -> TextIO:
    """A text stream over ``out`` in ``encoding``: writes its BOM first, translates no line
    endings. Flush or detach it when done; closing it closes ``out``."""
    out.write(encoding.bom)
    return io.TextIOWrapper(out, encoding=encoding.codec, errors="strict", newline="", write_through=False)


@contextlib.contextmanager
def rewrite(path: Path, translated: Iterable[Translated], out: BinaryIO, encoding: TextEncoding,
            what: str = "segments") -> Iterator[tuple[TextIO, Callable[[int | None], Translated]]]:
    """Write a text file again, its translations taken in order as the file is read again.

    Yields ``(stream, take)``: the text stream over ``out`` (see :func:`writer`), and
    ``take(line)``, which returns the next translation. It is flushed and detached at the
    end; ``out`` stays open.

    Args:
        path: The file (for errors).
        translated: One translation per segment, in order.
        out: The binary stream to write to.
        encoding: The file's encoding, given back.
        what: What the translations stand for, in errors ("segments", "cells").

    Raises:
        DocumentError: When ``take`` finds no translation left, or translations are left at
            the end: the file changed since its segments were read.
    """
    items = iter(translated)

    def changed(line: int | None) -> DocumentError:
        return DocumentError(path, f"the translations do not match the file's {what} (did the file change "
                                   "while it was translated?); translate it again", line)

    def take(line: int | None) -> Translated:
        item = next(items, None)
        if item is None:
            raise changed(line)
        return item

    stream = writer(out, encoding)
    try:
        yield stream, take
        if next(items, None) is not None:
            raise changed(None)
    finally:
        stream.flush()
        stream.detach()

