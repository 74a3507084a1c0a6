"""The DeepL v2 API: ``/v2/translate``, ``/v2/usage``, ``/v2/languages``.

Accepts JSON (what the ``deepl`` Python client sends) and forms (``text`` repeated, as
curl examples and older clients send). The key comes in ``Authorization: DeepL-Auth-Key
KEY`` (or the legacy ``auth_key`` field). Errors are ``{"message": "..."}``, which is
what DeepL's clients read.
"""

from __future__ import annotations

from .app import App, Request, Response, json_response
from .languages import DEEPL_CODES, NAMES, check_source
from .params import HTTPError, one, strings

#: Usage reports this limit: the daemon has no quota of its own.
CHARACTER_LIMIT = 10**12


HOW = "send the header 'Authorization: DeepL-Auth-Key YOUR_KEY'"


def _key(app: App, request: Request) -> str | None:
    auth = request.header("Authorization").strip()
    if auth:
        scheme, _, key = auth.partition(" ")
        if scheme.lower() == "deepl-auth-key" and key.strip():
            return key.strip()
        if app.access.required:
            raise HTTPError(403, "the Authorization header must be 'DeepL-Auth-Key YOUR_KEY'")
        return None  # no keys needed: another scheme (a proxy's, say) is not ours to judge
    return one(request.params, "auth_key", "") or None


def translate(app: App, request: Request) -> Response:
    """``POST /v2/translate``: ``text``, ``target_lang``, ``source_lang``, ``tag_handling``."""
    params = request.params
    app.admit(request, _key(app, request), HOW)
    texts, _ = strings(params, "text")
    source = one(params, "source_lang", "")
    if source:
        check_source(source, "source_lang")
    target = app.targets.resolve(one(params, "target_lang"), "target_lang", deepl=True)
    tags = (one(params, "tag_handling", "") or "").lower()
    if tags not in ("", "html"):
        raise HTTPError(400, f"tag_handling {tags!r} is not supported; use html, or leave it out")
    app.service.check(texts)
    out = app.service.translate(texts, target, html=tags == "html", gone=request.gone)
    return json_response({"translations": [
        {"detected_source_language": "EN", "text": text, "billed_characters": len(source_text)}
        for text, source_text in zip(out, texts)]})


def usage(app: App, request: Request) -> Response:
    """``GET /v2/usage``: characters translated since the daemon started."""
    app.admit(request, _key(app, request), HOW)
    return json_response({"character_count": app.service.characters, "character_limit": CHARACTER_LIMIT})


def languages(app: App, request: Request) -> Response:
    """``GET /v2/languages?type=source|target``."""
    app.admit(request, _key(app, request), HOW)
    kind = (one(request.params, "type", "source") or "source").lower()
    if kind == "source":
        return json_response([{"language": "EN", "name": "English"}])
    if kind != "target":
        raise HTTPError(400, f"type {kind!r} must be source or target")
    entries = [{"language": "ZH", "name": "Chinese", "supports_formality": False}]
    entries += [{"language": DEEPL_CODES[name], "name": NAMES[name], "supports_formality": False}
                for name in app.targets.offered if name in DEEPL_CODES]
    return json_response(entries)


ROUTES = {
    ("POST", "/v2/translate"): translate,
    ("GET", "/v2/usage"): usage,
    ("POST", "/v2/usage"): usage,
    ("GET", "/v2/languages"): languages,
    ("POST", "/v2/languages"): languages,
}
