"""Check that every aarch64 ELF file in the emulated root resolves its DT_NEEDED libraries.

    python3 closure.py ROOT [EXTRA_DIR ...]

Walks ROOT (the unpacked Debian arm64 packages) and each EXTRA_DIR (the installed
wheels), reads each ELF file's DT_NEEDED and DT_RUNPATH/DT_RPATH entries (stdlib only, no
binutils), and looks each needed library up where the aarch64 loader would: the RUNPATH
(``$ORIGIN`` expanded) and Debian's multiarch directories inside ROOT. Prints the
libraries nobody provides and exits 1 if there are any. Run on the host (x86) Python.
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

EM_AARCH64 = 183
DT_NEEDED, DT_RPATH, DT_RUNPATH, DT_STRTAB, DT_STRSZ = 1, 15, 29, 5, 10
SYSTEM_DIRS = ("lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu", "lib", "usr/lib")


def dynamic(path: Path) -> tuple[list[str], list[str]] | None:
    """``(needed, runpath)`` of an aarch64 ELF shared object or executable, else ``None``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            if struct.unpack_from("<H", head, 18)[0] != EM_AARCH64:
                return None
            phoff, = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            fh.seek(phoff)
            table = fh.read(phentsize * phnum)
            loads, dyn = [], None
            for i in range(phnum):
                p_type, _, p_offset, p_vaddr, _, p_filesz, _, _ = struct.unpack_from("<IIQQQQQQ", table, i * phentsize)
                if p_type == 1:
                    loads.append((p_vaddr, p_offset, p_filesz))
                elif p_type == 2:
                    dyn = (p_offset, p_filesz)
            if dyn is None:
                return [], []
            fh.seek(dyn[0])
            raw = fh.read(dyn[1])
            entries = [struct.unpack_from("<qQ", raw, k) for k in range(0, len(raw) - 15, 16)]

            def offset(vaddr: int) -> int:
                for base, off, size in loads:
                    if base <= vaddr < base + size:
                        return vaddr - base + off
                raise ValueError("address outside the file")

            values = dict((t, v) for t, v in entries if t in (DT_STRTAB, DT_STRSZ))
            fh.seek(offset(values[DT_STRTAB]))
            strtab = fh.read(values[DT_STRSZ])
    except (OSError, ValueError, KeyError, struct.error):
        return None

    def string(index: int) -> str:
        return strtab[index:strtab.index(b"\0", index)].decode()

    needed = [string(v) for t, v in entries if t == DT_NEEDED]
    runpath = [d for t, v in entries if t in (DT_RPATH, DT_RUNPATH) for d in string(v).split(":") if d]
    return needed, runpath


def main(argv: list[str]) -> int:
    root = Path(argv[0]).resolve()
    trees = [root] + [Path(a).resolve() for a in argv[1:]]
    missing: dict[str, list[str]] = {}
    checked = 0
    for tree in trees:
        for dirpath, _, names in os.walk(tree):
            if Path(dirpath).is_relative_to(root / "proc"):
                continue
            for name in names:
                path = Path(dirpath) / name
                if path.is_symlink() or not path.is_file():
                    continue
                info = dynamic(path)
                if info is None:
                    continue
                checked += 1
                needed, runpath = info
                dirs = [Path(d.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent)))
                        for d in runpath]
                dirs += [root / d for d in SYSTEM_DIRS]
                for lib in needed:
                    if not any((d / lib).exists() for d in dirs):
                        missing.setdefault(lib, []).append(str(path.relative_to(tree)))
    for lib, users in sorted(missing.items()):
        print(f"missing {lib}: needed by {', '.join(users[:4])}{' ...' if len(users) > 4 else ''}")
    print(f"closure: {checked} aarch64 ELF files checked, {len(missing)} libraries missing")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
