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
import statistics
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from .daemonproc import RSSSampler, ServeProcess, percentile, rss_mb
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
            "p99_ms": round(1000 * percentile(latencies, 0.99), 1) if latencies else None}


def run_serve_bench(model: Path, sentences: list[str], opts: ServeBenchOptions, command: str = "") -> dict:
    """Sequential, then concurrent, requests against a fresh daemon on ``model``; the figures as a dict."""
    from ..core.bundle import load_bundle

    k = opts.sentences_per_request
    texts = [" ".join(sentences[i:i + k]) for i in range(0, len(sentences) - k + 1, k)]
    bundle = load_bundle(model)
    daemon = ServeProcess(model, ["--threads", str(opts.threads), "--cache", "0", "--char-limit", "0",
                                  "--timeout", "120", "--http-threads", str(opts.http_threads),
                                  *(["--lean-memory"] if opts.lean_memory else [])])
    try:
        for text in texts[:4]:
            _post(daemon.url, text)  # warm-up
        rss_idle = rss_mb(daemon.process.pid)
        sequential = _run(daemon.url, texts, 1, opts.sequential_seconds, 0)
        logger.info("sequential: %s", sequential)
        warmup = _run(daemon.url, texts, opts.clients, opts.warmup_seconds, sequential["requests"])
        rss_start = rss_mb(daemon.process.pid)
        with RSSSampler(daemon.process.pid, RSS_SAMPLE_S) as sampler:
            concurrent = _run(daemon.url, texts, opts.clients, opts.seconds,
                              sequential["requests"] + warmup["requests"])
        rss_end = rss_mb(daemon.process.pid)
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

