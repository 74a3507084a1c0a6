"""Cold start of built apps: wall time from exec to exit of ``APP translate SENTENCE``
(``APP --self-test SENTENCE`` offscreen for the desktop app: its window shows the translation).

Usage: python build/startup.py APP [APP ...] [--runs N]

Each run is a new process (a one-file app unpacks itself every time); the runs of the apps
alternate, and the medians are printed with the CPU's name. The page cache stays warm, as
on a machine that started the app before.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (the machine name elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("apps", nargs="+", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sentence", default="Hello. Where is the station?")
    args = parser.parse_args()
    times: dict[Path, list[float]] = {app: [] for app in args.apps}
    for _ in range(args.runs):
        for app in args.apps:
            gui = app.name.endswith("-gui")
            command = [str(app), "--self-test" if gui else "translate", args.sentence]
            env = dict(os.environ, QT_QPA_PLATFORM="offscreen") if gui else None
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            times[app].append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"{app} failed: {done.stderr.strip()[-300:]}")
    print(f"{cpu_name()}, {args.runs} runs each, median (min-max) seconds to a translated sentence:")
    for app, values in times.items():
        files = app.parent.rglob("*") if app.parent.name == app.name else [app]  # one-folder: the folder
        size = sum(p.lstat().st_size for p in files if p.is_file() and not p.is_symlink())
        print(f"  {app}: {statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f}), "
              f"{size / 1e6:.1f} MB on disk")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
