"""Our own API: ``/v1/translate`` (optionally streamed), ``/v1/lookup`` (the dictionary),
``/health`` and ``/metrics``.

``POST /v1/translate`` takes JSON ``{"text": str | [str], "target": "zh-Hans", "stream":
false, "unwrap": true, "api_key": ...}`` (``unwrap: false`` ends a sentence at every line
break, :attr:`.TranslateOptions.unwrap`). Without ``stream`` it answers every text with its sentences
(source span, translation, ids, stop reason, score, timing). With ``stream: true`` the
answer is newline-delimited JSON: one line per sentence the moment the engine finishes
it (text by text, in input order), then ``{"done": true, ...}``; an error after the first
line ends the stream with ``{"error": "..."}``.
"""

from __future__ import annotations

import json
import time

from ..core.errors import BundleError
from ..core.translator import SentenceResult, join_results
from .context import Context
from .http import HTTPError, Request, Response, json_response, one, strings
from .keys import admit_native


def _sentence(result: SentenceResult) -> dict:
    timing = result.timing
    return {
        "source": result.source,
        "text": result.text,
        "span": list(result.span),
        "separator": result.separator,
        "ids": list(result.ids),
        "stop": result.stop,
        "score": None if result.score != result.score else round(result.score, 4),
        "cached": result.cached,
        "queued_ms": None if timing is None else round(1000 * timing.queued, 1),
        "decode_ms": None if timing is None else round(1000 * timing.decoding, 1),
    }


def translate(app: Context, request: Request) -> Response:
    """``POST /v1/translate``."""
    params = request.params
    admit_native(app, request)
    texts, as_list = strings(params, "text", "q")
    target = app.targets.resolve(one(params, "target", "zh"))
    stream = one(params, "stream", False, bool)
    unwrap = one(params, "unwrap", True, bool)
    app.service.check(texts)
    if stream:  # submitted here, so a full queue or bad text is still an HTTP error, not a 200
        results = app.service.stream(texts, target, gone=request.gone, unwrap=unwrap)
        return Response(_ndjson(results, target), content_type="application/x-ndjson")
    started = time.perf_counter()
    items: list[list[SentenceResult]] = [[] for _ in texts]
    for k, result in app.service.stream(texts, target, gone=request.gone, unwrap=unwrap):
        items[k].append(result)
    answers = [{"text": join_results(results), "sentences": [_sentence(r) for r in results]} for results in items]
    elapsed = round(1000 * (time.perf_counter() - started), 1)
    return json_response({"translations": answers if as_list else answers[0], "target": target,
                          "model": app.translator.bundle.name, "elapsed_ms": elapsed})


def _ndjson(results, target: str):
    started = time.perf_counter()
    count = 0
    try:
        for k, result in results:
            count += 1
            yield (json.dumps({"item": k, **_sentence(result)}, ensure_ascii=False) + "\n").encode("utf-8")
    except HTTPError as exc:
        yield (json.dumps({"error": exc.message, "status": exc.status}) + "\n").encode("utf-8")
        return
    finally:
        results.close()
    yield (json.dumps({"done": True, "sentences": count, "target": target,
                       "elapsed_ms": round(1000 * (time.perf_counter() - started), 1)}) + "\n").encode("utf-8")


def lookup(app: Context, request: Request) -> Response:
    """``GET`` or ``POST /v1/lookup``: ``term``, ``target``: the dictionary's entries for a
    word or a term of up to three words, best first (``[]`` when it has none)."""
    admit_native(app, request)
    term = one(request.params, "term")
    target = app.targets.resolve(one(request.params, "target", "zh"))
    if not term.strip() or len(term) > 200:
        raise HTTPError(400, "field 'term' must be a word or a term of up to three words")
    try:
        entries = app.translator.lookup(term)
    except BundleError as exc:
        raise HTTPError(503, f"the dictionary is not available: {exc}") from None
    return json_response({"term": term, "target": target, "entries": [
        {"headword": e.headword(target), "simplified": e.simplified, "traditional": e.traditional,
         "pinyin": e.pinyin, "glosses": list(e.glosses)} for e in entries]})


def health(app: Context, request: Request) -> Response:
    """``GET /health``: ready or not, and which model answers."""
    bundle = app.translator.bundle
    body = {
        "status": "draining" if app.draining else "ready",
        "model": bundle.name,
        "quantization": bundle.quantization.get("mode"),
        "checksum": app.translator.model_id,
        "targets": list(app.targets.offered),
        "uptime_s": round(time.time() - app.started, 1),
        "in_flight": app.service.in_flight - 1,
        "queued": app.translator.engine.queued,
    }
    return json_response(body, 503 if app.draining else 200)


def metrics(app: Context, request: Request) -> Response:
    """``GET /metrics``: Prometheus text format."""
    content_type, body = app.metrics.render()
    return Response(body, content_type=content_type)


ROUTES = {
    ("POST", "/v1/translate"): translate,
    ("GET", "/v1/lookup"): lookup,
    ("POST", "/v1/lookup"): lookup,
    ("GET", "/health"): health,
    ("GET", "/metrics"): metrics,
}
