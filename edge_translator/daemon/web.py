"""The web page at ``/``: plain HTML, CSS and JavaScript kept in the package (``web/``).

The page talks to the daemon's own API (``/v1/translate`` streamed, ``/v1/documents``,
``/frontend/settings``, ``/health``), so it needs nothing from anywhere else: no CDN, no
web fonts, no build step. Its three files are read once, on the first request, and kept
in memory with their ETags. Only those names are served (``/static/{name}`` looks the
name up; nothing is ever read from a path a client sent). Every answer carries a strict
Content-Security-Policy: no inline script or style, nothing from another origin, no
framing. ``serve --no-web`` leaves these routes out (``/`` is then a 404).
"""

from __future__ import annotations

import functools
import hashlib
import logging
from dataclasses import dataclass
from importlib import resources

from .context import Context
from .http import HTTPError, Request, Response

logger = logging.getLogger(__name__)

#: The files served, by name, and their types.
FILES = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)


@dataclass(frozen=True)
class Asset:
    """One file of the page, as it is served."""

    body: bytes
    content_type: str
    etag: str
    """A strong validator: a digest of the body, quoted."""


@functools.cache
def assets() -> dict[str, Asset]:
    """The page's files, read from the package on first use.

    Raises:
        HTTPError: 500 naming the file when the installation lacks one.
    """
    folder = resources.files(__package__) / "web"
    found = {}
    for name, content_type in FILES.items():
        try:
            body = (folder / name).read_bytes()
        except OSError as exc:
            logger.error("the web page's file %s is missing from this installation: %s", name, exc)
            raise HTTPError(500, f"the web page's file {name} is missing from this installation; reinstall "
                                 "edge-translator, or serve with --no-web") from None
        found[name] = Asset(body, content_type, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')
    return found


def _serve(request: Request, name: str) -> Response:
    asset = assets().get(name)
    if asset is None:
        raise HTTPError(404, f"no such file: /static/{name}")
    # Revalidate every time: an upgraded daemon serves the new page at once, and an
    # unchanged file costs a 304 with no body.
    headers = (("ETag", asset.etag), ("Cache-Control", "no-cache"), *SECURITY_HEADERS)
    tags = [tag.strip() for tag in request.header("If-None-Match").split(",")]
    if asset.etag in tags or "*" in tags:
        return Response(b"", 304, asset.content_type, headers)
    return Response(asset.body, 200, asset.content_type, headers)


def page(app: Context, request: Request) -> Response:
    """``GET /``: the page."""
    return _serve(request, "index.html")


def static(app: Context, request: Request) -> Response:
    """``GET /static/{name}``: the page's script and style sheet (only those; anything else is a 404)."""
    name = request.args["name"]
    if name == "index.html":
        raise HTTPError(404, f"no such file: /static/{name}")
    return _serve(request, name)


ROUTES = {
    ("GET", "/"): page,
    ("GET", "/static/{name}"): static,
}
