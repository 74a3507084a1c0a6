"""A file-system double of a power cut: what the disk holds is only what was fsynced.

:class:`PowerCut` watches a folder while real code writes into it. It patches ``os.fsync``
(an fsynced file's bytes, an fsynced folder's entries become durable) and ``os.replace`` /
``os.rename``, and at every one of those calls, before and after, it checks the caller's
invariant on the two extreme disks a power cut could leave:

- ``"fsynced"``: every folder lists only what it listed at its last fsync (the renames
  since are lost), every file holds what it held at its last fsync;
- ``"metadata"``: every rename and new name reached the disk (as a journaling file system
  may write them ahead of the data), but a file's bytes are still only what was fsynced:
  a file never fsynced is empty.

Before the watch, everything under the folder counts as durable. Linux only (file bytes
are read back through ``/proc/self/fd``).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

WORLDS = ("fsynced", "metadata")


def supported() -> bool:
    return Path("/proc/self/fd").is_dir()


def _key(st: os.stat_result) -> tuple:
    """A file version: its inode, size and change time (an inode number can be reused)."""
    return st.st_ino, st.st_size, st.st_mtime_ns


class Disk:
    """One world's view of the watched folder after a cut."""

    def __init__(self, cut: PowerCut, world: str):
        self.cut, self.world = cut, world

    def _entries(self, path: Path) -> dict[str, tuple] | None:
        """``{name: (is_dir, key)}`` of a folder on this disk, or ``None`` if it is not there."""
        relative = path.relative_to(self.cut.root)
        if self.world == "metadata":
            if not path.is_dir() or path.is_symlink():
                return None
            out = {}
            for entry in os.scandir(path):
                st = entry.stat(follow_symlinks=False)
                out[entry.name] = (stat.S_ISDIR(st.st_mode), st.st_ino if stat.S_ISDIR(st.st_mode) else _key(st))
            return out
        entries = self.cut.folders.get(self.cut.root_ino)
        for part in relative.parts:
            found = (entries or {}).get(part)
            if found is None or not found[0]:
                return None
            entries = self.cut.folders.get(found[1], {})  # a folder never fsynced is empty
        return entries

    def read(self, path: str | Path) -> bytes | None:
        """The bytes at ``path`` (``b""`` for a file whose data was never fsynced), or ``None``."""
        path = self.cut.root / path
        entries = self._entries(path.parent)
        found = (entries or {}).get(path.name)
        if found is None or found[0]:
            return None
        return self.cut.data.get(found[1], b"")

    def tree(self, path: str | Path = ".") -> dict[str, bytes] | None:
        """``{relative path: bytes}`` of every file under the folder ``path``, or ``None``."""
        path = (self.cut.root / path).resolve()
        entries = self._entries(path)
        if entries is None:
            return None
        out = {}
        for name, (is_dir, key) in entries.items():
            if is_dir:
                out.update({f"{name}/{k}": v for k, v in (self.tree(path / name) or {}).items()})
            else:
                out[name] = self.cut.data.get(key, b"")
        return out


class PowerCut:
    """Watch ``root`` (see the module docstring)."""

    def __init__(self, root: Path, monkeypatch):
        self.root = Path(root).resolve()
        self.root_ino = self.root.stat().st_ino
        self.folders: dict[int, dict[str, tuple]] = {}
        self.data: dict[tuple, bytes] = {}
        self.invariant: Callable[[Disk], None] | None = None
        self.violations: list[str] = []
        self.checks = 0
        self.events: list[tuple[str, str]] = []
        for folder, dirs, files in os.walk(self.root):
            self._durable_folder(os.open(folder, os.O_RDONLY), close=True)
            for name in files:
                path = os.path.join(folder, name)
                if not os.path.islink(path):
                    self.data[_key(os.lstat(path))] = Path(path).read_bytes()
        self._fsync, self._replace, self._rename = os.fsync, os.replace, os.rename
        monkeypatch.setattr(os, "fsync", self.fsync)
        monkeypatch.setattr(os, "replace", lambda a, b, **kw: self._renamed(self._replace, a, b, **kw))
        monkeypatch.setattr(os, "rename", lambda a, b, **kw: self._renamed(self._rename, a, b, **kw))

    def _durable_folder(self, fd: int, close: bool = False) -> None:
        try:
            entries = {}
            for name in os.listdir(fd):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                entries[name] = (stat.S_ISDIR(st.st_mode), st.st_ino if stat.S_ISDIR(st.st_mode) else _key(st))
            self.folders[os.fstat(fd).st_ino] = entries
        finally:
            if close:
                os.close(fd)

    def fsync(self, fd: int) -> None:
        self._fsync(fd)
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            self._durable_folder(fd)
            self.events.append(("fsync-dir", os.readlink(f"/proc/self/fd/{fd}")))
        else:
            with open(f"/proc/self/fd/{fd}", "rb") as again:
                self.data[_key(st)] = again.read()
            self.events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        self.check()

    def _renamed(self, real, src, dst, **kw) -> None:
        self.check()
        real(src, dst, **kw)
        self.events.append(("replace", f"{os.fspath(src)} -> {os.fspath(dst)}"))
        self.check()

    def watch(self, invariant: Callable[[Disk], None]) -> None:
        """Check ``invariant(disk)`` (it asserts) on both worlds now and at every fsync and rename."""
        self.invariant = invariant
        self.check()

    def check(self) -> None:
        """Record every world where the invariant fails (the code under test may run it in
        another thread, so nothing is raised here)."""
        if self.invariant is None:
            return
        self.checks += 1
        for world in WORLDS:
            try:
                self.invariant(Disk(self, world))
            except AssertionError as exc:
                last = self.events[-1] if self.events else ("start", "")
                self.violations.append(f"{world} disk after {last[0]} {last[1]}: {exc}")

    def disk(self, world: str = "fsynced") -> Disk:
        return Disk(self, world)
