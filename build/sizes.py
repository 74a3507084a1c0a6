"""What a one-file app is made of, compressed, as PyInstaller stored it.

Usage:
    python build/sizes.py APP              # its parts, largest first
    python build/sizes.py APP --without B  # what APP holds that B does not, by part

Run it with a Python that has PyInstaller (the build venv: work/build/venv/bin/python). The
second form measures what a build option saves: build once with and once without it (e.g.
``QT_FILTERS=0`` for the desktop app's Qt filters), then compare the two files.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import PurePosixPath


def part(name: str) -> str:
    """The group an archive entry counts towards: a Qt translation, plugin folder or
    library, a package, a top-level library, or the bytecode archive."""
    path = PurePosixPath(name)
    top = path.parts[0]
    if top == "PySide6" and len(path.parts) > 2 and path.parts[1] == "Qt":
        kind = path.parts[2]
        if kind == "translations":
            return "Qt translations"
        if kind == "plugins" and len(path.parts) > 3:
            return f"Qt plugins/{path.parts[3]}"
        if kind == "lib":
            return f"Qt lib {path.name.split('.so')[0]}"
    if top.endswith(".libs"):
        return top
    if len(path.parts) == 1:
        return path.name.split(".so")[0] if ".so" in path.name else path.name
    if top == "python3.11" or top.startswith("python3"):
        return "python extension modules"
    return top.split("-")[0] if top.endswith(".dist-info") else top


def entries(app: str) -> dict[str, int]:
    """Archive entry name -> compressed length, for every entry of ``app``."""
    from PyInstaller.archive.readers import CArchiveReader

    return {name: entry[1] for name, entry in CArchiveReader(app).toc.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("app")
    parser.add_argument("--without", metavar="OTHER", help="show only what OTHER does not hold")
    parser.add_argument("--top", type=int, default=25, help="how many parts to list")
    args = parser.parse_args()
    mine = entries(args.app)
    if args.without:
        theirs = entries(args.without)
        mine = {name: size for name, size in mine.items() if name not in theirs}
    totals = Counter()
    for name, size in mine.items():
        totals[part(name)] += size
    print(f"{args.app}{' without ' + args.without if args.without else ''}: "
          f"{sum(mine.values()) / 1e6:.2f} MB in {len(mine)} entries")
    for name, size in totals.most_common(args.top):
        print(f"  {size / 1e6:7.2f} MB  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
