"""Office files are zip packages: read one into memory only after it proves to be safe.

A ``.pptx``, ``.xlsx``, ``.odt`` or ``.epub`` is a zip archive of XML parts. Before any
library parses it, :func:`read_package` checks what a hostile or damaged file can do: it
refuses a file that is not a zip (a password-protected Office file is an encrypted OLE
container, not a zip, and is named as such), one with more parts or more unpacked bytes
than any real document has (a zip bomb: the declared sizes are checked, then every part is
unpacked in blocks and counted, since a declared size can lie), a damaged part, and a
package without the part its format needs. The bytes are returned, so the library reads
them from memory and the input file is never opened for writing.
"""

from __future__ import annotations

import io
import shutil
import zipfile
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .base import DocumentError

#: The first bytes of an OLE compound file: what an encrypted (password-protected) Office
#: file is, and also a pre-2007 .ppt/.xls/.doc.
OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"


@dataclass(frozen=True)
class PackageLimits:
    """What a package may unpack to; far above any real document, far below a bomb."""

    max_unpacked: int = 500_000_000
    """Bytes all parts together may unpack to."""
    max_parts: int = 50_000
    """Parts the archive may hold."""


def read_package(path: Path, kind: str, required: str, limits: PackageLimits = PackageLimits()) -> bytes:
    """The bytes of the zip package at ``path``, once it is checked (see the module docstring).

    Args:
        path: The file.
        kind: What the file should be, for the messages ("a PowerPoint .pptx file").
        required: A part every package of this kind has (``ppt/presentation.xml``).
        limits: The caps.

    Raises:
        DocumentError: In one line: what is wrong and what to do.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise DocumentError(path, f"cannot read the file ({exc.strerror})") from None
    check_package(data, path, kind, required, limits)
    return data


def check_package(data: bytes, path: Path | str, kind: str, required: str,
                  limits: PackageLimits = PackageLimits()) -> None:
    """Check ``data`` as :func:`read_package` does; ``path`` only names it in messages.

    Raises:
        DocumentError: In one line: what is wrong and what to do.
    """
    def bad(why: str) -> DocumentError:
        return DocumentError(path, f"is not a usable {kind}: {why}")

    if data.startswith(OLE_MAGIC):
        raise bad("it is password-protected (encrypted) or in an old binary format; open it, remove the "
                  "password or save it in the current format, and translate that copy")
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, NotImplementedError):
        raise bad("it is not a zip archive, or a damaged one; open it in its application and save it again") from None
    if len(members) > limits.max_parts:
        raise bad(f"it holds {len(members)} parts, over the limit of {limits.max_parts}")
    limit_mb = limits.max_unpacked / 1e6
    declared = sum(m.file_size for m in members)
    if declared > limits.max_unpacked:
        raise bad(f"it unpacks to {declared / 1e6:.0f} MB, over the limit of {limit_mb:.0f} MB")
    names = {m.filename for m in members}
    if required not in names:
        raise bad(f"it has no {required} part (is it another kind of zip file?)")
    if any(m.flag_bits & 0x1 for m in members):
        raise bad("its parts are encrypted; remove the password and save it again")
    total = 0
    try:
        for member in members:
            got = 0
            with archive.open(member) as part:
                while block := part.read(1 << 20):
                    got += len(block)
                    total += len(block)
                    if got > member.file_size or total > limits.max_unpacked:
                        raise bad(f"{member.filename} unpacks to more than it declares, or the whole to over "
                                  f"{limit_mb:.0f} MB")
    except DocumentError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError, RuntimeError) as exc:
        raise bad(f"it is damaged ({type(exc).__name__}: {str(exc)[:80]}); open it in its application "
                  "and save it again") from None


def repack(archive: zipfile.ZipFile, parts: Mapping[str, Path | bytes], out: BinaryIO, stored: str | None = None) -> None:
    """Write the package again, in its order, with ``parts`` replaced (by a file's content or
    bytes) and every other part copied as it was, its compression and date kept.

    Args:
        archive: The package as read.
        parts: The new content of the parts that changed, by name.
        out: Where the new package goes.
        stored: A part that goes first and uncompressed whatever the input did (an EPUB's
            ``mimetype``, which reading systems look for at a fixed offset).
    """
    infos = archive.infolist()
    if stored is not None:
        infos = sorted(infos, key=lambda info: info.filename != stored)
    with zipfile.ZipFile(out, "w") as result:
        for info in infos:
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.compress_type, copy.external_attr, copy.comment = info.compress_type, info.external_attr, info.comment
            if info.filename == stored:
                copy.compress_type = zipfile.ZIP_STORED
                result.writestr(copy, archive.read(info))
                continue
            with result.open(copy, "w", force_zip64=True) as target:
                new = parts.get(info.filename)
                if isinstance(new, bytes):
                    target.write(new)
                elif new is not None:
                    with open(new, "rb") as source:
                        shutil.copyfileobj(source, target, 1 << 20)
                else:
                    with archive.open(info) as source:
                        shutil.copyfileobj(source, target, 1 << 20)
