"""The LibreTranslate API: ``/translate``, ``/languages``, ``/detect``, ``/frontend/settings``.

Accepts what LibreTranslate's own clients send: JSON, urlencoded or multipart forms, ``q``
as one string, an array or a repeated field, the key as ``api_key`` (or ``apiKey`` in
JSON). Answers mirror the request: one ``translatedText`` string for one ``q``, a list
for a list; ``alternatives`` (when asked for) come from the dictionary for a lone word or
term. Errors are ``{"error": "..."}``.
"""

from __future__ import annotations

from ..core.errors import EdgeTranslatorError
from ..core.markup import HTML, visible_text
from ..core.translator import is_term
from .context import Context
from .http import HTTPError, Request, Response, json_response, one, strings
from .keys import admit_libre
from .languages import NAMES, auto_source, check_source, english_confidence
from .languages import detect as detect_language


def translate(app: Context, request: Request) -> Response:
    """``POST /translate``: ``q``, ``source``, ``target``, ``format``, ``api_key``, ``alternatives``."""
    params = request.params
    admit_libre(app, request)
    texts, as_list = strings(params, "q")
    auto = check_source(one(params, "source", "auto"))
    target = app.targets.resolve(one(params, "target", "zh"))
    fmt = (one(params, "format", "text") or "text").lower()
    if fmt not in ("text", "html"):
        raise HTTPError(400, f"format {fmt!r} is not supported; use text or html")
    alternatives = one(params, "alternatives", 0, int)  # below 1 asks for none, as in LibreTranslate
    app.service.check(texts)
    chinese = [False] * len(texts)
    if auto:
        visible = [visible_text(text) if fmt == "html" else text for text in texts]
        chinese = auto_source(visible, "q", "source")
    out = app.service.translate(texts, target, HTML if fmt == "html" else None, gone=request.gone, unchanged=chinese)
    body: dict = {"translatedText": out if as_list else out[0]}
    if auto:
        detected = [{"confidence": round(100 - english_confidence(v), 1), "language": "zh"} if done
                    else _detection(v) for v, done in zip(visible, chinese)]
        body["detectedLanguage"] = detected if as_list else detected[0]
    if alternatives > 0:
        found = [_alternatives(app, text, main, target, alternatives) if fmt == "text" and not done else []
                 for text, main, done in zip(texts, out, chinese)]
        body["alternatives"] = found if as_list else found[0]
    return json_response(body)


def _alternatives(app: Context, text: str, main: str, target: str, count: int) -> list[str]:
    """Up to ``count`` other translations of a lone word or term: the dictionary's other
    headwords, best first (LibreTranslate gives its model's; a sentence gets none here)."""
    if not is_term(text):
        return []
    try:
        entries = app.translator.lookup(text)
    except EdgeTranslatorError:
        return []
    found: list[str] = []
    for entry in entries:
        headword = entry.headword(target)
        if headword != main and headword not in found:
            found.append(headword)
    return found[:count]


def _detection(text: str) -> dict:
    return {"confidence": english_confidence(text), "language": "en"}


def detect(app: Context, request: Request) -> Response:
    """``POST /detect``: ``[{confidence, language}]``, English or not (see :mod:`.languages`)."""
    admit_libre(app, request)
    texts, _ = strings(request.params, "q")
    app.service.check(texts)
    return json_response(detect_language("\n".join(texts)))


def languages(app: Context, request: Request) -> Response:
    """``GET /languages`` (a form body, as some clients send with GET, is accepted and ignored)."""
    request.params  # read (and size-check) the body, so the connection stays usable
    codes = app.targets.codes()
    entries = [{"code": "en", "name": "English", "targets": codes}]
    for code in codes:
        name = NAMES.get(app.targets.resolve(code), "Chinese")
        entries.append({"code": code, "name": name, "targets": []})
    return json_response(entries)


def settings(app: Context, request: Request) -> Response:
    """``GET /frontend/settings``: the limits and defaults LibreTranslate's clients read."""
    limits = app.service.limits
    return json_response({
        "charLimit": limits.char_limit or -1,
        "batchLimit": limits.batch_limit,
        "frontendTimeout": 500,
        "apiKeys": app.access.required,
        "keyRequired": app.access.required,
        "suggestions": False,
        "filesTranslation": app.documents.enabled,
        "supportedFilesFormat": list(app.documents.suffixes()) if app.documents.enabled else [],
        "language": {"source": {"code": "en", "name": "English"},
                     "target": {"code": "zh", "name": NAMES[app.targets.default]}},
    })


def disabled(what: str):
    """An endpoint of LibreTranslate's that this server does not offer: 403, as LibreTranslate
    answers when the feature is turned off (its settings say so too)."""
    def answer(app: Context, request: Request) -> Response:
        raise HTTPError(403, f"{what} are disabled on this server")
    answer.__doc__ = f"{what}: disabled (403)."
    return answer


ROUTES = {
    ("POST", "/translate"): translate,
    ("POST", "/detect"): detect,
    ("GET", "/languages"): languages,
    ("POST", "/languages"): languages,
    ("GET", "/frontend/settings"): settings,
    ("POST", "/suggest"): disabled("suggestions"),
}
