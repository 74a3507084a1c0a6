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


def memory_bandwidth_gbs(size_mb: int = 512, repeats: int = 5) -> float:
    """Read bandwidth of a large numpy sum, in GB/s (median)."""
    data = np.ones(size_mb * (1 << 20) // 8, dtype=np.float64)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        data.sum()
        times.append(time.perf_counter() - start)
    return data.nbytes / statistics.median(times) / 1e9


def dir_mb(path: Path) -> float:
    """Total size of the files in a directory, in MB."""
    return round(sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 1e6, 1)
