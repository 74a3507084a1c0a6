"""A daemon under test: ``edge-translator serve`` in a process of its own, its RSS and CPU, and latency percentiles.

Shared by the benchmarks that drive the daemon over HTTP (``bench-serve``, ``bench-soak``;
none imports another): start it as a user would on a free 127.0.0.1 port, read its
resident memory and the CPU that other processes take from ``/proc``, and stop it with
SIGTERM.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank ``share`` (0-1) percentile of ``values``; ``None`` when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def rss_mb(pid: int) -> float | None:
    """``VmRSS`` of process ``pid`` in MB (one decimal); ``None`` once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class ServeProcess:
    """``edge-translator serve --port 0 --model MODEL *flags`` on 127.0.0.1, started and waited for.

    Args:
        model: The bundle to serve.
        flags: More ``serve`` flags (threads, cache, state folder...). Every client of a
            benchmark is on 127.0.0.1, so the cap per client is off unless a flag sets it:
            a load test measures throughput, not the defence against one greedy address.

    Raises:
        RuntimeError: The daemon exited, or did not say where it serves within 300 s.
    """

    def __init__(self, model: Path, flags: list[str]):
        env = dict(os.environ)
        env.pop("EDGE_TRANSLATOR_MODEL", None)
        if not any(flag.startswith("--connections-per-client") for flag in flags):
            flags = [*flags, "--connections-per-client", "0"]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "edge_translator.cli", "serve", "--port", "0", "--model", str(model), *flags],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
        self.url = None
        deadline = time.monotonic() + 300
        while self.url is None and time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line:
                break
            match = re.search(r"serving \S+ on (http://\S+)", line)
            self.url = match.group(1) if match else None
        if self.url is None:
            self.process.kill()
            raise RuntimeError(f"edge-translator serve did not start (exit {self.process.wait()})")
        threading.Thread(target=lambda: [None for _ in self.process.stderr], daemon=True).start()

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> int:
        """SIGTERM, then its exit code (killed if it has not exited within 120 s)."""
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


class RSSSampler:
    """Samples a process's RSS on a thread of its own while the ``with`` block runs.

    RSS at one instant is mostly what the batches in flight hold (on the full shape it
    swings by a hundred MB from one second to the next), so growth is the highest RSS of
    the run's second half against that of its first half.
    """

    def __init__(self, pid: int, interval: float):
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float]] = []
        """``(seconds since the start, MB)`` pairs."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            rss = rss_mb(self.pid)
            if rss is not None:
                self.samples.append((time.perf_counter() - start, rss))
            self._stop.wait(self.interval)

    def __enter__(self) -> RSSSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def halves(self) -> dict:
        """``rss_peak_first_half_mb``, ``rss_peak_second_half_mb``, their ``rss_peak_growth``
        and the sample count (``None`` figures with fewer than two samples)."""
        middle = self.samples[-1][0] / 2 if self.samples else 0.0
        first = [mb for t, mb in self.samples if t <= middle]
        second = [mb for t, mb in self.samples if t > middle]
        a, b = (max(first), max(second)) if first and second else (None, None)
        return {"rss_samples": len(self.samples), "rss_peak_first_half_mb": a, "rss_peak_second_half_mb": b,
                "rss_peak_growth": round(b / a - 1, 3) if a and b else None}
