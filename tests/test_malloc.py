"""``sessions.lean_malloc``: with it, a large buffer freed leaves the process (glibc)."""

import platform
import subprocess
import sys

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

#: In a fresh process: free a 16 MiB buffer (glibc then raises its mmap threshold to 16 MiB),
#: then hold a 2 MiB one and print whether glibc mapped it on its own (mallinfo2's hblkhd:
#: bytes in such mappings), i.e. whether freeing it would hand it back to the system.
PROBE = r"""
import ctypes, sys
from edge_translator.core.sessions import lean_malloc
libc = ctypes.CDLL("libc.so.6")
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "lean":
    assert lean_malloc() is True
libc.free(libc.malloc(16 << 20))
before = libc.mallinfo2().hblkhd
block = libc.malloc(2 << 20)
print(libc.mallinfo2().hblkhd - before >= 2 << 20)
libc.free(block)
"""


def _mapped_on_its_own(mode: str) -> bool:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    return out.stdout.strip() == "True"


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc only")
def test_lean_malloc_keeps_large_buffers_out_of_the_heap():
    assert not _mapped_on_its_own("default")  # what glibc does by default: the 2 MiB comes from the heap
    assert _mapped_on_its_own("lean")


def test_lean_malloc_changes_nothing_without_glibc(monkeypatch):
    import ctypes

    from edge_translator.core.sessions import lean_malloc

    def no_libc(name, *args, **kwargs):
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert lean_malloc() is False
