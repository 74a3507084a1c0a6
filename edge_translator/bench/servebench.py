"""The daemon under load: N concurrent HTTP clients against sequential requests, on loopback.

:func:`run_serve_bench` starts ``edge-translator serve`` as a user would (a new process,
a free port, the cache off so every request is decoded), sends one client's requests one
after another for a while, then N clients' at once for a fixed time, and stops the daemon
with SIGTERM. It reports requests and sentences per second of both, the ratio, p50 and
p99 latency, every error, and the daemon's resident memory at the start and the end of
the concurrent run. It binds 127.0.0.1 only and always ends by itself.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from .machine import machine_info
from .report import RSS_SAMPLE_S

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeBenchOptions:
    """What the load test runs."""

    clients: int = 16
    """Concurrent clients of the loaded run."""
    seconds: float = 60.0
    """Length of the concurrent run."""
    sequential_seconds: float = 30.0
    """Length of the one-client run it is compared with."""
    sentences_per_request: int = 1
    """Sentences in each request's ``q`` (LibreTranslate ``/translate``)."""
    threads: int = 2
    """ONNX Runtime threads of the daemon."""
    http_threads: int = 32
    """The daemon's ``--http-threads``."""
    lean_memory: bool = False
    """Run the daemon with ``--lean-memory``."""
    warmup_seconds: float = 10.0
    """Concurrent requests before the measured run (not counted): ONNX Runtime allocates
    its buffers for the larger batches then, so RSS over the run shows growth, not that."""


def _percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def _rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


class _Daemon:
    def __init__(self, model: Path, opts: ServeBenchOptions):
        env = dict(os.environ)
        env.pop("EDGE_TRANSLATOR_MODEL", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "edge_translator.cli", "serve", "--port", "0", "--model", str(model),
             "--threads", str(opts.threads), "--cache", "0", "--char-limit", "0", "--timeout", "120",
             "--http-threads", str(opts.http_threads), *(["--lean-memory"] if opts.lean_memory else [])],
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

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def _post(url: str, text: str) -> tuple[int, float]:
    body = json.dumps({"q": text, "source": "en", "target": "zh"}).encode()
    request = urllib.request.Request(url + "/translate", body, {"Content-Type": "application/json"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            json.loads(response.read())["translatedText"]
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError, KeyError):
        status = 0
    return status, time.perf_counter() - started


def _run(url: str, texts: list[str], clients: int, seconds: float, start_at: int) -> dict:
    """``clients`` threads post texts (each its own stride through ``texts``) until ``seconds`` pass."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    done = [0] * clients
    lock = threading.Lock()
    deadline = time.perf_counter() + seconds

    def client(k: int) -> None:
        n = start_at + k
        while time.perf_counter() < deadline:
            status, took = _post(url, texts[n % len(texts)])
            n += clients
            with lock:
                if status == 200:
                    latencies.append(took)
                    done[k] += 1
                else:
                    errors[str(status)] = errors.get(str(status), 0) + 1

    started = time.perf_counter()
    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    requests = sum(done)
    return {"clients": clients, "seconds": round(elapsed, 1), "requests": requests,
            "req_s": round(requests / elapsed, 2), "errors": errors,
            "p50_ms": round(1000 * statistics.median(latencies), 1) if latencies else None,
            "p99_ms": round(1000 * _percentile(latencies, 0.99), 1) if latencies else None}


def run_serve_bench(model: Path, sentences: list[str], opts: ServeBenchOptions, command: str = "") -> dict:
    """Sequential, then concurrent, requests against a fresh daemon on ``model``; the figures as a dict."""
    from ..core.bundle import load_bundle

    k = opts.sentences_per_request
    texts = [" ".join(sentences[i:i + k]) for i in range(0, len(sentences) - k + 1, k)]
    bundle = load_bundle(model)
    daemon = _Daemon(model, opts)
    try:
        for text in texts[:4]:
            _post(daemon.url, text)  # warm-up
        rss_idle = _rss_mb(daemon.process.pid)
        sequential = _run(daemon.url, texts, 1, opts.sequential_seconds, 0)
        logger.info("sequential: %s", sequential)
        warmup = _run(daemon.url, texts, opts.clients, opts.warmup_seconds, sequential["requests"])
        rss_start = _rss_mb(daemon.process.pid)
        with _RSSSampler(daemon.process.pid, RSS_SAMPLE_S) as sampler:
            concurrent = _run(daemon.url, texts, opts.clients, opts.seconds,
                              sequential["requests"] + warmup["requests"])
        rss_end = _rss_mb(daemon.process.pid)
        logger.info("%d clients: %s", opts.clients, concurrent)
    finally:
        exit_code = daemon.stop()
    for row in (sequential, concurrent):
        row["sent_s"] = round(row["req_s"] * k, 2)
    return {
        "command": command, "machine": machine_info(), "options": asdict(opts),
        "model": bundle.name, "quantization": bundle.quantization.get("mode"),
        "sequential": sequential, "concurrent": concurrent,
        "ratio": round(concurrent["req_s"] / sequential["req_s"], 2) if sequential["req_s"] else None,
        "warmup": warmup, "rss_idle_mb": rss_idle, "rss_start_mb": rss_start, "rss_end_mb": rss_end,
        "rss_growth": round(rss_end / rss_start - 1, 3) if rss_start and rss_end else None,
        **sampler.halves(), "exit_code": exit_code,
    }


class _RSSSampler:
    """Samples a process's RSS on a thread of its own while the ``with`` block runs.

    RSS at one instant is mostly what the batches in flight hold (on the full shape it
    swings by a hundred MB from one second to the next), so growth is the highest RSS of
    the run's second half against that of its first half.
    """

    def __init__(self, pid: int, interval: float):
        self.pid, self.interval = pid, interval
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        start = time.perf_counter()
        while not self._stop.is_set():
            rss = _rss_mb(self.pid)
            if rss is not None:
                self.samples.append((time.perf_counter() - start, rss))
            self._stop.wait(self.interval)

    def __enter__(self) -> _RSSSampler:
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
