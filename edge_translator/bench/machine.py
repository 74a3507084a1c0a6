"""What every benchmark records about where it ran, and the sizes it reports.

Shared by the benchmarks (none imports another for these): the machine's description
that each section of ``docs/benchmarks.md`` names, its memory read bandwidth, and the size
of a model directory on disk.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from pathlib import Path

import numpy as np


def machine_info() -> dict:
    """CPU model, cores and SIMD features of this machine."""
    from ..core.cpu import cpu_info

    cpu = cpu_info()
    info = {"python": platform.python_version(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "cpu": cpu.name, "simd": cpu.reported_flags()}
    from importlib import metadata

    for package in ("onnxruntime", "torch", "transformers", "ctranslate2", "numpy"):
        try:
            info[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            pass
    return info


def memory_bandwidth_gbs(size_mb: float = 512, repeats: int = 5, threads: int = 1) -> float:
    """Read bandwidth of numpy sums over ``size_mb`` MB split among ``threads`` threads, in GB/s
    (median of ``repeats`` rounds, each of passes taking at least 50 ms together).

    An array the size of one decoder step's weights measures what a step can read: on a CPU
    whose last-level cache holds the weights (480 MB of L3 on the machine of the published
    figures), that is the cache's rate, well above a 512 MB array's, which mostly comes from
    memory. numpy's sum releases the GIL, so the threads read at once, as ONNX Runtime's do.
    """
    from concurrent.futures import ThreadPoolExecutor

    data = np.ones(max(1, int(size_mb * (1 << 20)) // 8), dtype=np.float64)
    parts = np.array_split(data, max(1, threads))
    with ThreadPoolExecutor(len(parts)) as pool:
        def read() -> None:
            list(pool.map(np.sum, parts))

        read()
        start, passes = time.perf_counter(), 0
        while time.perf_counter() - start < 0.05:
            read()
            passes += 1
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            for _ in range(passes):
                read()
            times.append((time.perf_counter() - start) / passes)
    return data.nbytes / statistics.median(times) / 1e9


def dir_mb(path: Path) -> float:
    """Total size of the files in a directory, in MB."""
    return round(sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6, 1)


def cpu_snapshot(pid: int | None = None) -> tuple[float, float, float] | None:
    """Busy and total CPU seconds of the machine (``/proc/stat``), and the CPU seconds of
    this process (with process ``pid``'s, when given); ``None`` where ``/proc`` cannot be read."""
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in stat.readline().split()[1:9])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split() if pid is not None else None
    except (OSError, ValueError):
        return None
    tick, own = os.sysconf("SC_CLK_TCK"), os.times()
    busy = user + nice + system + irq + softirq + steal
    ours = own.user + own.system + ((int(fields[11]) + int(fields[12])) / tick if fields else 0.0)  # utime, stime
    return busy / tick, (busy + idle + iowait) / tick, ours


def others_share(before: tuple | None, after: tuple | None) -> float | None:
    """Share (0-1) of the machine's CPU time that other processes used between two
    :func:`cpu_snapshot` s (a busy machine makes every figure of the run slower)."""
    if before is None or after is None or after[1] <= before[1]:
        return None
    return max(0.0, (after[0] - before[0]) - (after[2] - before[2])) / (after[1] - before[1])
