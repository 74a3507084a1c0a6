"""The daemon soaked with mixed text and documents: whether its memory stays flat, nothing fails, and text stays quick.

:func:`run_soak_bench` starts ``edge-translator serve`` as a user would (a new process on
a free 127.0.0.1 port, its state folder in a temporary one, the cache off so every
request is decoded) and runs four phases:

1. *unloaded*: one client sends one-sentence ``/translate`` requests one after another;
2. *the soak*: a few text clients send one-sentence and short multi-sentence requests
   without pause while a document client uploads ``.txt`` and ``.docx`` files through
   ``/v1/documents``, polls them, downloads and checks each result, and deletes it; the
   daemon's RSS is sampled every second;
3. *one client during a document job*: the document client goes on alone with one
   client of one-sentence requests; only the requests made while a document was being
   translated count;
4. *unloaded* again: the lower p50 of the two unloaded runs is what the loaded ones are
   compared with, so that another process busy during one of them does not flatter the
   ratios.

Every response's status is counted, and so is the share of the CPU that processes other
than the daemon and this one took in each phase. It ends by itself: SIGTERM, and the
exit code is recorded.
"""

from __future__ import annotations

import io
import json
import logging
import secrets
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import require
from .daemonproc import RSSSampler, ServeProcess, percentile, rss_mb
from .machine import cpu_snapshot, machine_info, others_share

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SoakOptions:
    """What the soak runs."""

    minutes: float = 10.0
    """Length of the soak."""
    text_clients: int = 4
    """Text clients of the soak, each sending its next request as soon as the last is answered."""
    unloaded_seconds: float = 30.0
    """Length of each of the two one-client runs without load that the soak's latency is compared with."""
    probe_seconds: float = 30.0
    """Length of the run of one text client beside the document client alone."""
    multi_sentences: int = 4
    """Most sentences of a multi-sentence request (every third request has 2 to this many)."""
    doc_sentences: int = 40
    """Sentences of each uploaded document (paragraphs of four)."""
    threads: int = 2
    """ONNX Runtime threads of the daemon."""
    poll_s: float = 0.25
    """Seconds between status requests of a document being translated."""
    rss_sample_s: float = 1.0
    """Seconds between samples of the daemon's RSS during the soak."""
    fit_after_s: float = 60.0
    """The RSS slope is fitted to the samples after this many seconds of the soak (at most
    a fifth of it): ONNX Runtime allocates its buffers for the larger batches at first."""
    document_wait_s: float = 300.0
    """Most seconds the document client waits for a document it uploaded before the end."""

    def __post_init__(self) -> None:
        if self.minutes <= 0 or self.unloaded_seconds <= 0 or self.probe_seconds <= 0:
            raise ValueError("minutes, unloaded_seconds and probe_seconds must be positive")
        if self.text_clients < 1 or self.doc_sentences < 1 or self.multi_sentences < 2:
            raise ValueError("text_clients and doc_sentences must be at least 1, multi_sentences at least 2")


# -- HTTP -----------------------------------------------------------------------------------
def _call(method: str, url: str, body: bytes | None = None,
          content_type: str | None = None) -> tuple[int, bytes, float]:
    """One request: its status (0: no answer), body and seconds."""
    request = urllib.request.Request(url, body, {"Content-Type": content_type} if content_type else {},
                                     method=method)
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=180) as response:
            status, data = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, data = exc.code, exc.read()
    except OSError:
        status, data = 0, b""
    return status, data, time.perf_counter() - started


def _multipart(fields: dict[str, str], name: str, data: bytes) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body with ``fields`` and one file; the body and its content type."""
    boundary = secrets.token_hex(16)
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"\r\n\r\n{value}\r\n'.encode()
             for key, value in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


class _Tally:
    """What one phase's clients saw: every status, latencies by kind, documents."""

    def __init__(self):
        self.lock = threading.Lock()
        self.statuses: dict[str, int] = {}
        self.latencies: dict[str, list[float]] = {"single": [], "multi": [], "single_during_document": []}
        self.text_sentences = 0
        self.documents = {"done": 0, "failed": 0, "bad_results": 0, "sentences": 0, "txt": 0, "docx": 0}
        self.document_seconds: list[float] = []
        self.problems: list[str] = []
        """The first few failures, for the log."""

    def status(self, status: int, what: str) -> None:
        with self.lock:
            self.statuses[str(status)] = self.statuses.get(str(status), 0) + 1
            if (status == 0 or status >= 400) and len(self.problems) < 10:
                self.problems.append(f"{what}: {status or 'no answer'}")

    def summary(self, seconds: float, others_cpu: float | None = None) -> dict:
        def stats(values: list[float]) -> dict:
            return {"requests": len(values),
                    "p50_ms": round(1000 * statistics.median(values), 1) if values else None,
                    "p95_ms": round(1000 * percentile(values, 0.95), 1) if values else None}

        docs = dict(self.documents)
        docs["sent_s"] = round(docs["sentences"] / seconds, 2) if seconds else None
        docs["p50_s"] = round(statistics.median(self.document_seconds), 2) if self.document_seconds else None
        return {"seconds": round(seconds, 1), "statuses": dict(sorted(self.statuses.items())),
                "errors_5xx": sum(n for s, n in self.statuses.items() if int(s) == 0 or int(s) >= 500),
                "errors_4xx": sum(n for s, n in self.statuses.items() if 400 <= int(s) < 500),
                **{kind: stats(values) for kind, values in self.latencies.items()},
                "text_sentences": self.text_sentences,
                "text_sent_s": round(self.text_sentences / seconds, 2) if seconds else None,
                "documents": docs, "others_cpu": others_cpu, "problems": self.problems}


# -- the clients ----------------------------------------------------------------------------
def _text_client(url: str, sentences: list[str], k: int, clients: int, deadline: float, multi: int,
                 tally: _Tally, translating: threading.Event) -> None:
    """Post one-sentence (and, when ``multi``, every third request 2 to ``multi`` sentences) until ``deadline``."""
    n = k
    while time.perf_counter() < deadline:
        count = 2 + (n // 3) % (multi - 1) if multi and n % 3 == 2 else 1
        start = (n * 7) % len(sentences)
        text = " ".join(sentences[(start + i) % len(sentences)] for i in range(count))
        during = translating.is_set()
        body = json.dumps({"q": text, "source": "en", "target": "zh"}).encode()
        status, data, took = _call("POST", url + "/translate", body, "application/json")
        if status == 200:
            try:
                json.loads(data)["translatedText"]
            except (ValueError, KeyError):
                status = 0  # an answer that is not one counts as a failure
        during = during and translating.is_set()
        n += clients
        with tally.lock:
            if status == 200:
                tally.latencies["single" if count == 1 else "multi"].append(took)
                if count == 1 and during:
                    tally.latencies["single_during_document"].append(took)
                tally.text_sentences += count
        tally.status(status, "POST /translate")


def make_document(sentences: list[str], index: int, size: int) -> tuple[str, bytes]:
    """Document ``index`` of the soak: ``size`` sentences from a rolling offset in paragraphs of
    four, as ``.docx`` (even ``index``: the first is one) or ``.txt`` (odd); its file name and bytes.

    Raises:
        MissingDependencyError: A ``.docx`` without python-docx (extra ``docs``).
    """
    start = index * size
    chosen = [sentences[(start + i) % len(sentences)] for i in range(size)]
    paragraphs = [" ".join(chosen[i:i + 4]) for i in range(0, size, 4)]
    if index % 2 == 1:
        return f"soak-{index}.txt", ("\n\n".join(paragraphs) + "\n").encode()
    docx = require("docx", "docs")
    document = docx.Document()
    document.add_heading(f"Soak document {index}", level=1)
    for paragraph in paragraphs:
        document.add_paragraph(paragraph)
    buffer = io.BytesIO()
    document.save(buffer)
    return f"soak-{index}.docx", buffer.getvalue()


def _result_ok(name: str, data: bytes) -> bool:
    """A translated file has text, and a ``.docx`` opens with some."""
    if not data.strip():
        return False
    if not name.endswith(".docx"):
        return True
    import docx

    try:
        return any(p.text.strip() for p in docx.Document(io.BytesIO(data)).paragraphs)
    except Exception:  # noqa: BLE001 - python-docx raises many kinds for a broken file
        return False


def _document_client(url: str, sentences: list[str], opts: SoakOptions, stop: threading.Event, first: int,
                     tally: _Tally, translating: threading.Event) -> int:
    """Upload, poll, download, check and delete documents until ``stop``; the next document's index.

    A document uploaded before ``stop`` is still waited for (up to ``document_wait_s``).
    """
    index = first
    while not stop.is_set():
        name, data = make_document(sentences, index, opts.doc_sentences)
        index += 1
        body, content_type = _multipart({"target": "zh"}, name, data)
        started = time.perf_counter()
        status, answer, _ = _call("POST", url + "/v1/documents", body, content_type)
        tally.status(status, "POST /v1/documents")
        if status != 202:
            time.sleep(1.0)
            continue
        doc_id = json.loads(answer)["id"]
        translating.set()
        state: dict = {}
        while time.perf_counter() - started < opts.document_wait_s:
            status, answer, _ = _call("GET", f"{url}/v1/documents/{doc_id}")
            tally.status(status, "GET /v1/documents/{id}")
            state = json.loads(answer) if status == 200 else {}
            if state.get("status") in ("done", "error") or status != 200:
                break
            time.sleep(opts.poll_s)
        translating.clear()
        took = time.perf_counter() - started
        if state.get("status") == "done":
            status, result, _ = _call("GET", f"{url}/v1/documents/{doc_id}/result")
            tally.status(status, "GET /v1/documents/{id}/result")
            good = status == 200 and _result_ok(name, result)
            with tally.lock:
                if good:
                    tally.documents["done"] += 1
                    tally.documents[name.rsplit(".", 1)[1]] += 1
                    tally.documents["sentences"] += state.get("sentences_total", 0)
                    tally.document_seconds.append(took)
                else:
                    tally.documents["bad_results"] += 1
        else:
            with tally.lock:
                tally.documents["failed"] += 1
                if len(tally.problems) < 10:
                    tally.problems.append(f"document {name}: {state.get('status')} {state.get('error') or ''}")
        status, _, _ = _call("DELETE", f"{url}/v1/documents/{doc_id}")
        tally.status(status, "DELETE /v1/documents/{id}")
    return index


def _phase(daemon: ServeProcess, sentences: list[str], opts: SoakOptions, clients: int, seconds: float, multi: int,
           documents: bool, first_document: int = 0) -> tuple[dict, int]:
    """``clients`` text clients for ``seconds`` (and the document client, when ``documents``):
    the phase's summary and the next document's index."""
    url, tally, translating, stop = daemon.url, _Tally(), threading.Event(), threading.Event()
    deadline = time.perf_counter() + seconds
    threads = [threading.Thread(target=_text_client, args=(url, sentences, k, clients, deadline, multi, tally,
                                                           translating)) for k in range(clients)]
    next_document = [first_document]
    if documents:
        threads.append(threading.Thread(target=lambda: next_document.__setitem__(0, _document_client(
            url, sentences, opts, stop, first_document, tally, translating))))
    started, cpu = time.perf_counter(), cpu_snapshot(daemon.pid)
    for thread in threads:
        thread.start()
    for thread in threads[:clients]:
        thread.join()
    stop.set()
    for thread in threads[clients:]:
        thread.join()
    return tally.summary(time.perf_counter() - started, _rounded(others_share(cpu, cpu_snapshot(daemon.pid)))), next_document[0]


# -- memory ---------------------------------------------------------------------------------
def rss_trend(samples: list[tuple[float, float]], fit_after_s: float) -> dict:
    """Highest RSS in each minute, and the least-squares slope (MB/min) of the samples after ``fit_after_s``.

    Args:
        samples: ``(seconds, MB)`` pairs in time order.
        fit_after_s: Samples before this are left out of the fit.

    Returns:
        ``peak_per_minute_mb``, ``slope_mb_per_min`` (``None`` with fewer than two samples to
        fit), ``peak_mb``, ``start_mb``, ``end_mb``.
    """
    peaks: dict[int, float] = {}
    for t, mb in samples:
        peaks[int(t // 60)] = max(mb, peaks.get(int(t // 60), 0.0))
    fit = [(t, mb) for t, mb in samples if t >= fit_after_s]
    slope = None
    if len(fit) >= 2:
        mean_t, mean_mb = statistics.fmean(t for t, _ in fit), statistics.fmean(mb for _, mb in fit)
        var = sum((t - mean_t) ** 2 for t, _ in fit)
        if var > 0:
            slope = round(60 * sum((t - mean_t) * (mb - mean_mb) for t, mb in fit) / var, 2)
    return {"peak_per_minute_mb": [peaks[m] for m in sorted(peaks)], "slope_mb_per_min": slope,
            "peak_mb": max((mb for _, mb in samples), default=None),
            "start_mb": samples[0][1] if samples else None, "end_mb": samples[-1][1] if samples else None}


# -- the run --------------------------------------------------------------------------------
def run_soak_bench(model: Path, sentences: list[str], opts: SoakOptions, command: str = "") -> dict:
    """The phases against a fresh daemon on ``model``; the figures as a dict.

    Args:
        model: The bundle to serve.
        sentences: English sentences for the requests and the documents.
        opts: What to run.
        command: The command line, recorded in the report.

    Returns:
        ``unloaded``, ``soak``, ``during_document`` and ``unloaded_again`` (each phase's summary),
        ``rss`` (of the soak), the latency ratios against the lower unloaded p50 (and p95), the
        error counts of all phases,
        ``exit_code``, and what it ran on.

    Raises:
        ValueError: Fewer than ``opts.multi_sentences`` sentences.
    """
    from ..core.bundle import load_bundle

    if len(sentences) < opts.multi_sentences:
        raise ValueError(f"the soak needs at least {opts.multi_sentences} sentences, got {len(sentences)}")
    bundle = load_bundle(model)
    seconds = 60 * opts.minutes
    fit_after = min(opts.fit_after_s, seconds / 5)
    with tempfile.TemporaryDirectory(prefix="edge-translator-soak-") as state:
        daemon = ServeProcess(model, ["--threads", str(opts.threads), "--cache", "0", "--char-limit", "0",
                                      "--timeout", "120", "--state-dir", state])
        try:
            for text in sentences[:4]:
                _call("POST", daemon.url + "/translate",
                      json.dumps({"q": text, "source": "en", "target": "zh"}).encode(), "application/json")
            rss_idle = rss_mb(daemon.pid)
            unloaded, _ = _phase(daemon, sentences, opts, 1, opts.unloaded_seconds, 0, False)
            logger.info("unloaded: %s", unloaded)
            with RSSSampler(daemon.pid, opts.rss_sample_s) as sampler:
                soak, next_document = _phase(daemon, sentences, opts, opts.text_clients, seconds,
                                             opts.multi_sentences, True)
            logger.info("soak: %s", soak)
            during, _ = _phase(daemon, sentences, opts, 1, opts.probe_seconds, 0, True, next_document)
            logger.info("one client during a document job: %s", during)
            again, _ = _phase(daemon, sentences, opts, 1, opts.unloaded_seconds, 0, False)
            logger.info("unloaded again: %s", again)
            rss_end = rss_mb(daemon.pid)
        finally:
            exit_code = daemon.stop()
    base = min(filter(None, (unloaded["single"]["p50_ms"], again["single"]["p50_ms"])), default=None)
    base_p95 = min(filter(None, (unloaded["single"]["p95_ms"], again["single"]["p95_ms"])), default=None)
    rss = {"idle_mb": rss_idle, "after_mb": rss_end, "sample_s": opts.rss_sample_s, "fit_after_s": fit_after,
           **rss_trend(sampler.samples, fit_after), **sampler.halves()}
    phases = (unloaded, soak, during, again)
    return {
        "command": command, "machine": machine_info(), "options": asdict(opts),
        "model": bundle.name, "quantization": bundle.quantization.get("mode"),
        "unloaded": unloaded, "soak": soak, "during_document": during, "unloaded_again": again, "rss": rss,
        "unloaded_p50_ms": base, "unloaded_p95_ms": base_p95,
        "ratio_p50": _ratio(soak["single"]["p50_ms"], base), "ratio_p95": _ratio(soak["single"]["p95_ms"], base_p95),
        "during_document_ratio_p50": _ratio(during["single_during_document"]["p50_ms"], base),
        "errors_5xx": sum(p["errors_5xx"] for p in phases), "errors_4xx": sum(p["errors_4xx"] for p in phases),
        "exit_code": exit_code,
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def _rounded(share: float | None) -> float | None:
    return None if share is None else round(share, 2)
