"""The daemon under load: N concurrent HTTP clients against sequential requests, on loopback.

:func:`run_serve_bench` starts ``edge-translator serve`` as a user would (a new process,
a free port, the cache off so every request is decoded), sends one client's requests one
after another for a while, then N clients' at once for a fixed time, and stops the daemon
with SIGTERM. It reports requests and sentences per second of both, the ratio, p50 and
p99 latency, every error, and the daemon's resident memory at the start and the end of
the concurrent run. It binds 127.0.0.1 only and always ends by itself.

With :class:`.libretranslate.LibreTranslateOptions`, :func:`run_side_by_side` then runs
LibreTranslate on the same model beside it: a short sweep of its thread settings picks
its best for each measure, then rounds alternate the daemon and LibreTranslate (at its
best and at its defaults), each measure in a fresh process, and the medians and ratios
are reported.
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
from typing import TYPE_CHECKING

from .daemonproc import RSSSampler, ServeProcess, percentile, rss_mb
from .machine import machine_info
from .report import RSS_SAMPLE_S, ratio
from .spread import Spread, apart

if TYPE_CHECKING:
    from .libretranslate import LibreTranslateOptions

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
    """ONNX Runtime threads of each of the daemon's decoding workers."""
    workers: int = 1
    """The daemon's ``--workers``."""
    exact_length: bool = False
    """The daemon's ``--exact-length``: every sentence decodes its whole length limit, as
    LibreTranslate's CTranslate2 does with ``--lt-length exact`` (random models)."""
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


def _daemon_flags(opts: ServeBenchOptions) -> list[str]:
    return ["--threads", str(opts.threads), "--workers", str(opts.workers), "--cache", "0", "--char-limit", "0",
            "--timeout", "120", "--http-threads", str(opts.http_threads),
            *(["--lean-memory"] if opts.lean_memory else []), *(["--exact-length"] if opts.exact_length else [])]


def run_serve_bench(model: Path, sentences: list[str], opts: ServeBenchOptions, command: str = "",
                    libretranslate: LibreTranslateOptions | None = None) -> dict:
    """Sequential, then concurrent, requests against a fresh daemon on ``model``; the figures as a dict.

    Args:
        libretranslate: Also run LibreTranslate beside the daemon (:func:`run_side_by_side`);
            its figures are the result's ``libretranslate``.
    """
    from ..core.bundle import load_bundle

    k = opts.sentences_per_request
    texts = [" ".join(sentences[i:i + k]) for i in range(0, len(sentences) - k + 1, k)]
    bundle = load_bundle(model)
    daemon = ServeProcess(model, _daemon_flags(opts))
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
        **({"libretranslate": run_side_by_side(model, texts, opts, libretranslate)} if libretranslate else {}),
    }


def _translation(url: str, text: str) -> str | None:
    body = json.dumps({"q": text, "source": "en", "target": "zh"}).encode()
    request = urllib.request.Request(url + "/translate", body, {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())["translatedText"]
    except (OSError, ValueError, KeyError):
        return None


def _measured(start, texts: list[str], clients: int, seconds: float, sample: list[str] | None = None) -> dict:
    """Start a server, warm it up, then one client for ``seconds`` and ``clients`` for ``seconds``; stop it.

    Both servers get the same texts in the same order. ``sample``: texts whose
    translations are kept (to compare the two servers' output).
    """
    server = start()
    row: dict = {}
    try:
        for text in texts[:4]:
            _post(server.url, text)
        _run(server.url, texts, clients, min(5.0, seconds / 4), len(texts) // 2)  # warm-up, other texts
        row["sequential"] = _run(server.url, texts, 1, seconds, 0)
        row["concurrent"] = _run(server.url, texts, clients, seconds, 0)
        row["rss_end_mb"] = rss_mb(server.pid)
        if sample:
            row["sample"] = [_translation(server.url, text) for text in sample]
    finally:
        row["exit_code"] = server.stop()
    if hasattr(server, "log_facts"):
        row.update(server.log_facts())
    return row


def _errors(row: dict) -> int:
    return sum(row["sequential"]["errors"].values()) + sum(row["concurrent"]["errors"].values())


def _rate(row: dict, measure: str) -> float:
    """Requests/s of one measure, 0 for a run with errors (it cannot be a peer's best)."""
    return 0.0 if _errors(row) else row[measure]["req_s"]


def _median_row(rows: list[dict]) -> dict:
    def med(measure: str, key: str):
        values = [r[measure][key] for r in rows if r[measure][key] is not None]
        return round(statistics.median(values), 2) if values else None

    return {"seq_req_s": med("sequential", "req_s"), "con_req_s": med("concurrent", "req_s"),
            "seq_p50_ms": med("sequential", "p50_ms"), "con_p50_ms": med("concurrent", "p50_ms"),
            "con_p99_ms": med("concurrent", "p99_ms"), "errors": sum(_errors(r) for r in rows),
            "seq_req_s_all": [r["sequential"]["req_s"] for r in rows],
            "con_req_s_all": [r["concurrent"]["req_s"] for r in rows],
            "rss_end_mb": [r.get("rss_end_mb") for r in rows], "exit_codes": [r["exit_code"] for r in rows]}


def _apart(mine: dict, theirs: dict, key: str) -> bool:
    """Whether every round of one server is above every round of the other (:mod:`.spread`)."""
    return apart(Spread.of(mine[key]), Spread.of(theirs[key]))


def _normalized(text: str | None) -> str | None:
    """A translation without whitespace and final punctuation (LibreTranslate rewrites a
    final 。 to the source's final mark)."""
    return None if text is None else "".join(text.split()).rstrip(".。!?！？,，;；")


def agreement(ours: list[str | None], theirs: list[str | None]) -> dict:
    """How many of the sample's translations the two servers gave alike, and their mean lengths."""
    a, b = [_normalized(t) for t in ours], [_normalized(t) for t in theirs]
    pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
    return {"sentences": len(a), "answered": len(pairs), "identical": sum(x == y for x, y in pairs),
            "ours_chars": round(statistics.mean(len(x) for x, _ in pairs), 1) if pairs else None,
            "theirs_chars": round(statistics.mean(len(y) for _, y in pairs), 1) if pairs else None}


def _relative(value: str) -> str:
    """A path under the current directory as a relative one (the report is published)."""
    here = str(Path.cwd()) + "/"
    return value[len(here):] if value.startswith(here) else value


def run_side_by_side(model: Path, texts: list[str], opts: ServeBenchOptions, lt: LibreTranslateOptions) -> dict:
    """The daemon and LibreTranslate on the same model, alternating; medians and ratios.

    A sweep of ``lt.tune_seconds`` per measure over LibreTranslate's settings (its
    defaults and ``lt.grid``) picks its best for the sequential and for the concurrent
    measure (runs with errors cannot be best). Then ``lt.rounds`` rounds each run the
    daemon, then LibreTranslate at each best and at its defaults, every one in a fresh
    process with the same texts. Ratios are ours over theirs, of the medians.
    """
    from ..core.bundle import load_bundle
    from . import argospackage, ltlauncher
    from . import libretranslate as peer

    bundle = load_bundle(model)
    python = peer.ensure_venv(lt)
    package = argospackage.ensure_package(bundle, lt.packages, lt.work / "checkpoints", lt.checkpoint)

    def ours() -> ServeProcess:
        return ServeProcess(model, _daemon_flags(opts))

    def theirs(setting):
        return lambda: peer.LibreTranslateProcess(python, lt, setting, bundle.source_language,
                                                  bundle.target_language, bundle.max_positions)

    sweep = {}
    for setting in lt.settings:
        sweep[setting.name] = _measured(theirs(setting), texts, opts.clients, lt.tune_seconds)
        logger.info("LibreTranslate %s: %s", setting.name, _median_row([sweep[setting.name]]))
    best = {m: max(lt.settings, key=lambda s: _rate(sweep[s.name], m)) for m in ("sequential", "concurrent")}
    chosen = list(dict.fromkeys([best["sequential"], best["concurrent"], peer.Setting()]))
    sample = texts[:lt.agreement_sentences]
    rounds: dict[str, list[dict]] = {"ours": [], **{s.name: [] for s in chosen}}
    for r in range(lt.rounds):
        rounds["ours"].append(_measured(ours, texts, opts.clients, lt.seconds, sample if r == 0 else None))
        for setting in chosen:
            rounds[setting.name].append(_measured(theirs(setting), texts, opts.clients, lt.seconds,
                                                  sample if r == 0 else None))
        logger.info("round %d: %s", r + 1, {k: (v[-1]["sequential"]["req_s"], v[-1]["concurrent"]["req_s"])
                                             for k, v in rounds.items()})
    medians = {name: _median_row(rows) for name, rows in rounds.items()}
    mine, default = medians["ours"], medians[peer.DEFAULTS]
    seq_best, con_best = medians[best["sequential"].name], medians[best["concurrent"].name]
    lt_rows = [row for name, rows in rounds.items() if name != "ours" for row in rows] + list(sweep.values())
    return {
        "versions": peer.versions(python), "package": str(package), "ct2_quantization": "int8",
        "checkpoint": str(lt.checkpoint) if lt.checkpoint else "unbundled from the bundle (dequantized)",
        "environment": {k: _relative(v) for k, v in peer.environment(lt, peer.Setting()).items()
                        if k.startswith(("ARGOS_", "XDG_")) or k in ("HOME", "PYTHONNOUSERSITE")},
        "settings": {s.name: s.environment() for s in lt.settings},
        "command": f"{python} -I {Path(ltlauncher.__file__).name} --segmenter core/text.py"
                   + (f" --length {lt.length} --max-positions {bundle.max_positions}" if lt.length else "")
                   + " -- libretranslate --host 127.0.0.1 "
                   f"--port P --load-only {bundle.source_language},{bundle.target_language}",
        "patches": {**ltlauncher.PATCHES, **({f"length_{lt.length}": ltlauncher.LENGTH_PATCHES[lt.length]}
                                              if lt.length else {})},
        "applied": sorted({p for row in lt_rows for p in row.get("patches", [])}),
        "refused_connections": sum(row.get("refused_connections", 0) for row in lt_rows),
        "options": {"seconds": lt.seconds, "tune_seconds": lt.tune_seconds, "rounds": lt.rounds,
                    "clients": opts.clients, "threads": opts.threads, "workers": opts.workers,
                    "length": lt.length},
        "sweep": {name: {"seq_req_s": row["sequential"]["req_s"], "con_req_s": row["concurrent"]["req_s"],
                         "errors": _errors(row)} for name, row in sweep.items()},
        "best": {m: s.name for m, s in best.items()}, "medians": medians,
        "ratios": {"sequential": {"best": ratio(mine["seq_req_s"], seq_best["seq_req_s"]),
                                  "defaults": ratio(mine["seq_req_s"], default["seq_req_s"]),
                                  "best_apart": _apart(mine, seq_best, "seq_req_s_all"),
                                  "defaults_apart": _apart(mine, default, "seq_req_s_all")},
                   "concurrent": {"best": ratio(mine["con_req_s"], con_best["con_req_s"]),
                                  "defaults": ratio(mine["con_req_s"], default["con_req_s"]),
                                  "best_apart": _apart(mine, con_best, "con_req_s_all"),
                                  "defaults_apart": _apart(mine, default, "con_req_s_all")}},
        "errors": sum(m["errors"] for m in medians.values()),
        "agreement": agreement(rounds["ours"][0]["sample"], rounds[best["concurrent"].name][0]["sample"]),
    }

