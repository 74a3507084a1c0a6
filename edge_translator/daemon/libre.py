"""The LibreTranslate API: ``/translate``, ``/languages``, ``/detect``, ``/frontend/settings``.

Accepts what LibreTranslate's own clients send: JSON, urlencoded or multipart forms, ``q``
as one string, an array or a repeated field, the key as ``api_key`` (or ``apiKey`` in
JSON). Answers mirror the request: one ``translatedText`` string for one ``q``, a list
for a list. Errors are ``{"error": "..."}``.
"""

from __future__ import annotations

from ..core.markup import extract
from .app import App, Request, Response, json_response
from .languages import ENGLISH_THRESHOLD, NAMES, check_source, english_confidence, mostly_han
from .params import HTTPError, one, strings


HOW = "pass api_key (apiKey in JSON)"


def _key(request: Request) -> str | None:
    params = request.params
    return one(params, "api_key", "") or one(params, "apiKey", "") or None


def translate(app: App, request: Request) -> Response:
    """``POST /translate``: ``q``, ``source``, ``target``, ``format``, ``api_key``, ``alternatives``."""
    params = request.params
    app.admit(request, _key(request), HOW)
    texts, as_list = strings(params, "q")
    auto = check_source(one(params, "source", "auto"))
    target = app.targets.resolve(one(params, "target", "zh"))
    fmt = (one(params, "format", "text") or "text").lower()
    if fmt not in ("text", "html"):
        raise HTTPError(400, f"format {fmt!r} is not supported; use text or html")
    alternatives = one(params, "alternatives", 0, int)
    if alternatives < 0:
        raise HTTPError(400, "alternatives must not be negative")
    app.service.check(texts)
    detected = None
    if auto:
        detected = [_detection(visible_text(text) if fmt == "html" else text) for text in texts]
        for k, found in enumerate(detected):
            if found["confidence"] < ENGLISH_THRESHOLD:
                where = f"q[{k}]" if as_list else "q"
                raise HTTPError(400, f"{where} does not look like English (confidence {found['confidence']}); "
                                     "this server translates English only")
    out = app.service.translate(texts, target, html=fmt == "html", gone=request.gone)
    body: dict = {"translatedText": out if as_list else out[0]}
    if detected is not None:
        body["detectedLanguage"] = detected if as_list else detected[0]
    if "alternatives" in params:
        body["alternatives"] = [[] for _ in out] if as_list else []
    return json_response(body)


def visible_text(html: str) -> str:
    """The text an HTML document shows (what detection should look at)."""
    return " ".join(piece.text for piece in extract(html))


def _detection(text: str) -> dict:
    return {"confidence": english_confidence(text), "language": "en"}


def detect(app: App, request: Request) -> Response:
    """``POST /detect``: ``[{confidence, language}]``, English or not (see :mod:`.languages`)."""
    app.admit(request, _key(request), HOW)
    texts, _ = strings(request.params, "q")
    app.service.check(texts)
    text = "\n".join(texts)
    confidence = english_confidence(text)
    answer = [{"confidence": confidence, "language": "en"}]
    if confidence < 50:  # not English: say Chinese when Han characters dominate, else undetermined
        answer.insert(0, {"confidence": round(100 - confidence, 1), "language": "zh" if mostly_han(text) else "und"})
    return json_response(answer)


def languages(app: App, request: Request) -> Response:
    """``GET /languages`` (a form body, as some clients send with GET, is accepted and ignored)."""
    request.params  # read (and size-check) the body, so the connection stays usable
    codes = app.targets.codes()
    entries = [{"code": "en", "name": "English", "targets": codes}]
    for code in codes:
        name = NAMES.get(app.targets.resolve(code), "Chinese")
        entries.append({"code": code, "name": name, "targets": []})
    return json_response(entries)


def settings(app: App, request: Request) -> Response:
    """``GET /frontend/settings``: the limits and defaults LibreTranslate's clients read."""
    limits = app.service.limits
    return json_response({
        "charLimit": limits.char_limit or -1,
        "batchLimit": limits.batch_limit,
        "frontendTimeout": 500,
        "apiKeys": app.access.required,
        "keyRequired": app.access.required,
        "suggestions": False,
        "filesTranslation": False,
        "supportedFilesFormat": [],
        "language": {"source": {"code": "en", "name": "English"},
                     "target": {"code": "zh", "name": NAMES[app.targets.default]}},
    })


ROUTES = {
    ("POST", "/translate"): translate,
    ("POST", "/detect"): detect,
    ("GET", "/languages"): languages,
    ("POST", "/languages"): languages,
    ("GET", "/frontend/settings"): settings,
}
