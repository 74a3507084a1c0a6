"""Where one short request's time goes: HTTP, the application, the translator, the engine,
ONNX Runtime and the parts around it, each measured on its own, in one process.

A user who sends one sentence at a time (the desktop app, a script, a chat tool) waits for
the sum of these, so each is timed as the median of many calls of the same sentence, and
the layers are peeled one at a time:

- ``http``: ``POST /translate`` (LibreTranslate) to the daemon on loopback, a new
  connection each time as ``urllib`` clients make it;
- ``http_health``: ``GET /health`` the same way: the HTTP server and connection alone;
- ``app``: the WSGI application called directly (routing, JSON, limits, the service);
- ``translate``: :meth:`.Translator.translate` (segmentation, tokens, the engine's queue);
- ``engine_queued`` and ``engine_decoding``: the engine's own timing of that sentence;
- ``ort_encoder``, ``ort_decoder`` and ``ort_score``: the time inside ONNX Runtime's calls
  (encoder, decoder steps, the log-softmax that gives the score), summed per request;
- ``segment`` and ``tokens``: segmentation and SentencePiece of the sentence.

The differences between neighbours are what each layer adds. The daemon runs in this
process (waitress in a thread) so that nothing but loopback separates client and server.
"""

from __future__ import annotations

import http.client
import io
import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .machine import machine_info

SENTENCE = "Where is the train station?"


@dataclass(frozen=True)
class RequestBenchOptions:
    """What the breakdown measures."""

    calls: int = 300
    """Calls per measure; medians are reported."""
    threads: int = 2
    """ONNX Runtime threads of the translator (as ``serve --threads``)."""
    sentence: str = SENTENCE


def _median_ms(call, count: int) -> float:
    for _ in range(max(3, count // 20)):
        call()
    times = []
    for _ in range(count):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return round(1000 * statistics.median(times), 3)


class _Timed:
    """An ONNX Runtime session whose ``run_with_iobinding`` calls are timed (the rest passes through)."""

    def __init__(self, session, into: list[float]):
        self._session, self._into = session, into

    def __getattr__(self, name):
        return getattr(self._session, name)

    def run_with_iobinding(self, binding, run_options=None):
        start = time.perf_counter()
        try:
            return self._session.run_with_iobinding(binding, run_options)
        finally:
            self._into.append(time.perf_counter() - start)


def _ort_split(model_dir: Path, sentence: str, opts: RequestBenchOptions) -> dict:
    """Milliseconds inside each session's calls per translation (median over the calls)."""
    from ..core.translator import Translator

    translator = Translator.load(model_dir, threads=opts.threads, cache=None)
    try:
        model = translator.model
        spent = {"encoder": [], "decoder": [], "normalizer": []}
        for name in spent:
            session = getattr(model, name, None)
            if session is not None:
                setattr(model, name, _Timed(session, spent[name]))
        per_call = {name: [] for name in spent}
        for _ in range(max(3, opts.calls // 20)):
            translator.translate(sentence)
        for _ in range(opts.calls):
            for times in spent.values():
                times.clear()
            translator.translate(sentence)
            for name, times in spent.items():
                per_call[name].append((sum(times), len(times)))
        return {f"ort_{'score' if name == 'normalizer' else name}":
                round(1000 * statistics.median(t for t, _ in calls), 3) if calls and calls[0][1] else 0.0
                for name, calls in per_call.items()} | {
            "decoder_calls": statistics.median(n for _, n in per_call["decoder"])}
    finally:
        translator.close()


def run_request_bench(model_dir: Path, opts: RequestBenchOptions, command: str = "") -> dict:
    """Every measure of the module docstring, for one sentence, as a dict for the report."""
    from ..core.text import segment
    from ..core.translator import Translator
    from ..daemon.server import Daemon, ServeOptions

    sentence = opts.sentence
    translator = Translator.load(model_dir, threads=opts.threads, cache=None)
    state = tempfile.TemporaryDirectory(prefix="edge-translator-bench-")
    daemon = Daemon(ServeOptions(host="127.0.0.1", port=0, threads=opts.threads, cache_size=0,
                                 state_dir=state.name), translator)
    server = threading.Thread(target=daemon.run, name="bench-daemon", daemon=True)
    server.start()
    host, port = daemon.address
    body = json.dumps({"q": sentence, "source": "en", "target": "zh"}).encode()

    def post() -> None:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"POST /translate answered {response.status}: {response.read()[:200]!r}")
        response.read()
        connection.close()

    def health() -> None:
        connection = http.client.HTTPConnection(host, port, timeout=60)
        connection.request("GET", "/health")
        connection.getresponse().read()
        connection.close()

    def app() -> None:
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/translate", "QUERY_STRING": "",
                   "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(body)),
                   "wsgi.input": io.BytesIO(body), "REMOTE_ADDR": "127.0.0.1", "SERVER_NAME": host,
                   "SERVER_PORT": str(port), "wsgi.url_scheme": "http"}
        b"".join(daemon.app(environ, lambda status, headers, exc_info=None: None))

    timings: list = []

    def translate() -> None:
        timings.append(next(iter(translator.translate_iter(sentence))).timing)

    try:
        tokenizer, bundle = translator.tokenizer, translator.bundle
        target = bundle.targets[bundle.default_target].id
        result = {"http": _median_ms(post, opts.calls), "http_health": _median_ms(health, opts.calls),
                  "app": _median_ms(app, opts.calls), "translate": _median_ms(translate, opts.calls)}
        measured = timings[-opts.calls:]
        result["engine_queued"] = round(1000 * statistics.median(t.queued for t in measured), 3)
        result["engine_decoding"] = round(1000 * statistics.median(t.decoding for t in measured), 3)
        result["segment"] = _median_ms(lambda: segment(sentence, tokenizer, bundle.max_positions), opts.calls)
        result["tokens"] = _median_ms(lambda: tokenizer.encode(sentence, target), opts.calls)
        output = translator.translate(sentence)
        stats = translator.engine.stats()
    finally:
        daemon.stop()
        server.join(30)
        state.cleanup()
    result |= _ort_split(model_dir, sentence, opts)
    return {"machine": machine_info(), "options": asdict(opts), "command": command, "model": str(model_dir),
            "output": output, "gathered": stats.gathered, "ms": result}
