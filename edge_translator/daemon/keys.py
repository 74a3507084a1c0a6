"""Where each API carries its key, read once for every handler of that API.

Each reader admits the request through :meth:`~.context.Context.admit` (key and rate
limit: 403, 429) and returns the caller's identity, which owns documents and glossaries.
"""

from __future__ import annotations

from .context import Context
from .http import HTTPError, Request, one

LIBRE_HOW = "pass api_key (apiKey in JSON)"
DEEPL_HOW = "send the header 'Authorization: DeepL-Auth-Key YOUR_KEY'"
NATIVE_HOW = "pass api_key, or the header 'Authorization: Bearer YOUR_KEY'"


def libre_key(request: Request) -> str | None:
    """LibreTranslate's ``api_key`` field (``apiKey`` in JSON)."""
    params = request.params
    return one(params, "api_key", "") or one(params, "apiKey", "") or None


def deepl_key(app: Context, request: Request) -> str | None:
    """DeepL's ``Authorization: DeepL-Auth-Key KEY`` header, or the legacy ``auth_key`` field."""
    auth = request.header("Authorization").strip()
    if auth:
        scheme, _, key = auth.partition(" ")
        if scheme.lower() == "deepl-auth-key" and key.strip():
            return key.strip()
        if app.access.required:
            raise HTTPError(403, "the Authorization header must be 'DeepL-Auth-Key YOUR_KEY'")
        return None  # no keys needed: another scheme (a proxy's, say) is not ours to judge
    return one(request.params, "auth_key", "") or None


def native_key(request: Request) -> str | None:
    """Our API's ``Authorization: Bearer KEY`` header, or the ``api_key`` field."""
    bearer = request.header("Authorization").strip()
    if bearer.lower().startswith("bearer "):
        return bearer[7:].strip() or None
    return one(request.params, "api_key", "") or None


def admit_libre(app: Context, request: Request) -> str:
    """Admit a LibreTranslate request; the caller's identity."""
    return app.admit(request, libre_key(request), LIBRE_HOW)


def admit_deepl(app: Context, request: Request) -> str:
    """Admit a DeepL request; the caller's identity."""
    return app.admit(request, deepl_key(app, request), DEEPL_HOW)


def admit_native(app: Context, request: Request) -> str:
    """Admit a request to our own API; the caller's identity."""
    return app.admit(request, native_key(request), NATIVE_HOW)
