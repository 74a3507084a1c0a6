"""Writes that survive a power cut: a temporary file, fsync, rename, then fsync of its folder.

A rename is atomic, but without fsyncs a power cut can leave the new name pointing at a
file whose data never reached the disk (an empty or partial file) or undo the rename
altogether. So a final file is written here in four steps: the data goes to a temporary
file in the same folder, the file is fsynced, it is renamed over the final name, and the
folder is fsynced so the rename itself is on the disk. After a power cut the final name
then holds the old complete file or the new complete one, never a mix. A folder written
as a whole (an installed model) gets every file and folder fsynced before its rename.

Where a folder cannot be fsynced (Windows, some network and FUSE file systems) that step
is skipped quietly: it is all those systems offer.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

logger = logging.getLogger(__name__)

#: What ``fsync`` of a folder answers on file systems that do not support it.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF, errno.EISDIR})


def fsync_dir(path: str | Path) -> None:
    """Make the entries of the folder ``path`` (a rename or a new file in it) durable.

    A no-op on Windows and where the file system cannot fsync a folder.

    Raises:
        OSError: If the disk reports an error (EIO): what was renamed may be lost.
    """
    if os.name == "nt":
        return
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as exc:
        logger.debug("cannot open the folder %s to fsync it: %s", path, exc)
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise
        logger.debug("the file system of %s cannot fsync a folder: %s", path, exc)
    finally:
        os.close(fd)


def fsync_file(path: str | Path) -> None:
    """Make the data of the file ``path``, written by someone else, durable.

    Raises:
        OSError: If it cannot be opened or the disk reports an error.
    """
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows commits writable handles only
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(path: str | Path) -> None:
    """Create the folder ``path`` and its missing parents, each new one durable in its parent."""
    path = Path(path)
    missing = []
    at = path
    while not at.is_dir():
        missing.append(at)
        if at.parent == at:
            break
        at = at.parent
    path.mkdir(parents=True, exist_ok=True)
    for folder in reversed(missing):
        fsync_dir(folder.parent)


def replace(temp: str | Path, path: str | Path) -> None:
    """Put the finished file ``temp`` (written by someone else, in the same folder) at ``path``:
    ``temp`` is fsynced, renamed over ``path``, and the folder fsynced.

    Raises:
        OSError: If a step fails; ``temp`` is then left where it is, for the caller to remove.
    """
    fsync_file(temp)
    os.replace(temp, path)
    fsync_dir(Path(path).parent)


def temp_name(path: str | Path, suffix: str = ".tmp") -> Path:
    """The temporary name this process writes ``path`` under: hidden, beside it, with its pid."""
    path = Path(path)
    return path.with_name(f".{path.name}.{os.getpid()}{suffix}")


@contextmanager
def open_atomic(path: str | Path, mode: str = "wb", *, temp: str | Path | None = None,
                encoding: str | None = None, newline: str | None = None) -> Iterator[IO]:
    """A file to write ``path``'s new content into: it takes the name only when the ``with``
    block ends without an exception (flushed, fsynced, renamed, the folder fsynced).

    Args:
        path: The final file.
        mode: ``"wb"`` or ``"w"``.
        temp: The temporary file (default :func:`temp_name`); it must be in ``path``'s folder.
        encoding: For text mode.
        newline: For text mode.

    Raises:
        OSError: If a step fails; the temporary file is removed and ``path`` is untouched.
    """
    path = Path(path)
    temp = Path(temp) if temp is not None else temp_name(path)
    try:
        with open(temp, mode, encoding=encoding, newline=newline) as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def write_atomic(path: str | Path, data: bytes | str, *, temp: str | Path | None = None,
                 encoding: str = "utf-8") -> None:
    """Write ``data`` (text is encoded with ``encoding``) to ``path`` through :func:`open_atomic`."""
    with open_atomic(path, "wb", temp=temp) as out:
        out.write(data.encode(encoding) if isinstance(data, str) else data)


def fsync_tree(root: str | Path) -> None:
    """Make a folder written as a whole durable: every file, then every folder, deepest first,
    ``root`` last. Call it before the rename that gives the folder its final name, and
    :func:`fsync_dir` on the parent after.

    Raises:
        OSError: If a file cannot be fsynced.
    """
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in files:
            if not os.path.islink(os.path.join(folder, name)):
                fsync_file(os.path.join(folder, name))
        fsync_dir(folder)
