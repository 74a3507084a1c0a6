"""A small file system that really fills: a tmpfs with a size limit, for the full-disk tests.

The tests run as root (here and in CI), which may mount one. :func:`mounted` mounts it and
always unmounts it; where mounting is not permitted it fails the test in one line rather
than skipping it, since a skipped test would hide that nothing was tested.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

#: tmpfs allocates whole pages: what a file of one byte takes.
PAGE = os.sysconf("SC_PAGE_SIZE")


class SmallDisk:
    """A mounted tmpfs at :attr:`path`, with a filler file that takes all but a few bytes."""

    def __init__(self, path: Path):
        self.path = path
        self.filler = path / "filler"

    def free(self) -> int:
        """Bytes free on it now."""
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int = 0) -> None:
        """Take all the space but ``leave`` bytes (a whole number of pages) with the filler."""
        assert leave % PAGE == 0, f"leave a whole number of {PAGE}-byte pages, not {leave} bytes"
        size = self.free() - leave
        assert size > 0, f"only {self.free()} bytes are free; cannot leave {leave}"
        with open(self.filler, "ab") as out:
            out.write(b"\0" * size)
        assert self.free() == leave, f"{self.free()} bytes free after the filler, not {leave}"

    def make_room(self) -> None:
        """Free the space: remove the filler."""
        self.filler.unlink(missing_ok=True)


@contextmanager
def mounted(path: Path, size: str = "2m") -> Iterator[SmallDisk]:
    """Mount a tmpfs of ``size`` at ``path`` (an empty folder) for the ``with`` block."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.fail(f"cannot mount a {size} tmpfs at {path} for the full-disk tests "
                    f"({(done.stderr or done.stdout).strip() or f'mount exited {done.returncode}'}); "
                    "run the tests as root (or with CAP_SYS_ADMIN), as CI does", pytrace=False)
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)  # a process still holds a file
