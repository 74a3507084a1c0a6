"""A full disk: telling a write that failed for lack of space, and the one line that says so.

A write fails for lack of space in two shapes: an ``OSError`` with ``ENOSPC`` (or ``EDQUOT``,
a user's quota) from a file, and a ``sqlite3`` error from SQLite: ``SQLITE_FULL``
("database or disk is full"), or ``SQLITE_IOERR_SHMSIZE`` when a WAL file is opened on a
disk with no room for its shared-memory file. :func:`is_full` knows both, and
:func:`no_space` turns either into a :class:`~.errors.NoSpace` that names the file, the
disk (its mount point) and how much is free on it, and says what to do.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import NoSpace

#: What a command run again does after a full disk (the CLI's advice).
RERUN = "free some space and run the same command again: finished files are kept"

_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
#: SQLITE_FULL, and SQLITE_IOERR_SHMSIZE (the -shm file of a WAL database could not grow).
_SQLITE_CODES = frozenset({13, 4874})


def is_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that failed because the disk (or the user's quota) is full
    (a :class:`~.errors.NoSpace` already said so)."""
    if isinstance(exc, NoSpace):
        return True
    if isinstance(exc, OSError):
        return exc.errno in _ERRNOS
    if isinstance(exc, sqlite3.Error):
        code = getattr(exc, "sqlite_errorcode", None)
        if code is not None:
            return code in _SQLITE_CODES
        return "database or disk is full" in str(exc)
    return False


def mount_point(path: str | Path) -> Path:
    """The mount point of the file system that holds ``path`` (or would, if it does not exist)."""
    at = Path(os.path.abspath(path))
    while not at.exists() and at.parent != at:
        at = at.parent
    while not os.path.ismount(at) and at.parent != at:
        at = at.parent
    return at


def free_bytes(path: str | Path) -> int | None:
    """Bytes an ordinary user may still write on ``path``'s file system; ``None`` if unknown."""
    try:
        st = os.statvfs(mount_point(path))
    except (OSError, AttributeError):  # AttributeError: Windows has no statvfs
        return None
    return st.f_bavail * st.f_frsize


def human(size: int) -> str:
    """``0 B``, ``812 KB``, ``3.4 MB``, ``1.2 GB``."""
    if size < 1000:
        return f"{size} B"
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1000
        if size < 1000 or unit == "TB":
            return f"{size:.0f} {unit}" if size >= 100 else f"{size:.1f} {unit}"
    raise AssertionError("unreachable")


def describe(path: str | Path) -> str:
    """``/mnt/card (0 B free)``: the disk that holds ``path``, and its free space."""
    free = free_bytes(path)
    return f"{mount_point(path)} ({'free space unknown' if free is None else human(free) + ' free'})"


def no_space(path: str | Path, advice: str = RERUN) -> NoSpace:
    """The error for a write of ``path`` that failed for lack of space (raise it)."""
    return NoSpace(f"no space left on {describe(path)} writing {path}; {advice}", Path(path))


@contextmanager
def writing(path: str | Path, advice: str = RERUN) -> Iterator[None]:
    """Turn a write failing for lack of space inside the block into :func:`no_space` of ``path``."""
    try:
        yield
    except (OSError, sqlite3.Error) as exc:
        if is_full(exc):
            raise no_space(path, advice) from None
        raise
