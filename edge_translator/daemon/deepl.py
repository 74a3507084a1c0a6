"""The DeepL v2 API: ``/v2/translate``, ``/v2/usage``, ``/v2/languages`` (glossaries: :mod:`.deepl_glossaries`).

Accepts JSON (what the ``deepl`` Python client sends) and forms (``text`` repeated, as
curl examples and older clients send). The key comes in ``Authorization: DeepL-Auth-Key
KEY`` (or the legacy ``auth_key`` field). Errors are ``{"message": "..."}``, which is
what DeepL's clients read.
"""

from __future__ import annotations

from ..core.markup import HTML, XML, Markup, visible_text
from .context import Context
from .http import HTTPError, Request, Response, json_response, one, strings
from .keys import admit_deepl
from .languages import DEEPL_CODES, NAMES, auto_source, check_source

#: Usage reports this limit: the daemon has no quota of its own.
CHARACTER_LIMIT = 10**12


#: DeepL's formality values. Chinese has none: the prefer_ ones are ignored, more and less refused.
FORMALITY = frozenset({"default", "more", "less", "prefer_more", "prefer_less"})

def translate(app: Context, request: Request) -> Response:
    """``POST /v2/translate``: ``text``, ``target_lang``, ``source_lang``, ``tag_handling``, ``ignore_tags``.

    Without ``source_lang`` the request is checked as a whole (:func:`.languages.auto_source`)
    and texts already in Chinese come back as they are, reported as ``ZH``.
    """
    params = request.params
    owner = admit_deepl(app, request)
    texts, _ = strings(params, "text")
    source = one(params, "source_lang", "")
    if source:
        check_source(source, "source_lang")
    target = app.targets.resolve(one(params, "target_lang"), "target_lang", deepl=True)
    markup = _markup(params)
    _check_formality(one(params, "formality", "default"))
    glossary = _glossary(app, params, owner, source)
    app.service.check(texts)
    chinese = [False] * len(texts)
    if not source:
        chinese = auto_source([visible_text(t, markup) if markup else t for t in texts], "text", "source_lang")
    out = app.service.translate(texts, target, markup, gone=request.gone, unchanged=chinese, glossary=glossary)
    return json_response({"translations": [
        {"detected_source_language": "ZH" if done else "EN", "text": text, "billed_characters": len(source_text)}
        for text, source_text, done in zip(out, texts, chinese)]})


def _glossary(app: Context, params, owner: str, source: str):
    """The glossary ``glossary_id`` names (or the ones ``glossary_ids`` lists, merged), or
    ``None``. DeepL requires ``source_lang`` with a glossary, and so does this server."""
    ids = [one(params, "glossary_id")] if one(params, "glossary_id", "") else []
    if params.get("glossary_ids") not in (None, [None], []):
        if ids:
            raise HTTPError(400, "give glossary_id or glossary_ids, not both")
        values, _ = strings(params, "glossary_ids")
        ids = [part.strip() for value in values for part in value.split(",") if part.strip()]
    if not ids:
        return None
    if not source:
        raise HTTPError(400, "source_lang is required when a glossary is used; add source_lang=EN")
    return app.glossaries.merged(owner, ids)


def _check_formality(formality: str) -> None:
    """DeepL's rule for a target without formality: ``prefer_*`` is ignored, ``more``/``less`` refused."""
    value = (formality or "default").lower()
    if value in ("more", "less"):
        raise HTTPError(400, f"formality {formality!r} is not supported for Chinese; use prefer_{value} "
                             "(ignored where not supported) or leave it out")
    if value not in FORMALITY:
        raise HTTPError(400, f"formality {formality!r} must be one of {', '.join(sorted(FORMALITY))}")


def _markup(params) -> Markup | None:
    """What ``tag_handling`` and ``ignore_tags`` ask for: ``None`` for plain text."""
    tags = (one(params, "tag_handling", "") or "").lower()
    if tags not in ("", "html", "xml"):
        raise HTTPError(400, f"tag_handling {tags!r} is not supported; use html or xml, or leave it out")
    if not tags:
        return None
    markup = HTML if tags == "html" else XML
    ignored = []
    for value in params.get("ignore_tags") or []:
        if value is None:
            continue
        if not isinstance(value, str):
            raise HTTPError(400, f"field 'ignore_tags' must hold tag names, not {type(value).__name__}")
        ignored += value.split(",")
    return markup.ignoring(ignored) if ignored else markup


def usage(app: Context, request: Request) -> Response:
    """``GET /v2/usage``: characters translated since the daemon started."""
    admit_deepl(app, request)
    return json_response({"character_count": app.service.characters, "character_limit": CHARACTER_LIMIT})


def languages(app: Context, request: Request) -> Response:
    """``GET /v2/languages?type=source|target``."""
    admit_deepl(app, request)
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
