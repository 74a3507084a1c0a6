"""The daemon's WSGI application: routing, keys and rate limits, errors, metrics.

Any WSGI server can run it; :mod:`.server` runs it under waitress. Handlers live with
their API (:mod:`.libre`, :mod:`.deepl`, :mod:`.native`); this module gives them a parsed
:class:`Request` and turns what they return or raise into an HTTP answer. No answer ever
carries a traceback: an unexpected error is logged and answered with a 500 and one line.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path

from ..core.diskspace import is_full
from ..core.translator import Translator
from . import deepl, deepl_glossaries, files_api, libre, native, web
from .context import Context
from .documents import DocumentStore, FileLimits
from .glossaries import GlossaryStore
from .forwarded import Network, TrustedProxies
from .http import HTTPError, Request, Response, json_response
from .languages import Targets
from .limits import Access
from .routes import Route, Router
from .service import Limits, Service

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppOptions:
    """What the application needs beyond the translator."""

    limits: Limits = field(default_factory=Limits)
    """Characters and texts per request, and the translation deadline."""
    max_body: int = 1 << 20
    """Largest request body in bytes (413 above)."""
    api_keys: dict[str, int] | None = None
    """``{key: requests per minute}``; ``None`` lets every client in."""
    req_limit: int = 0
    """Requests per minute per client address when there are no keys (0: unlimited)."""
    cors_origin: str | None = None
    """``Access-Control-Allow-Origin`` for browser clients (``"*"`` or one origin); ``None``: no CORS."""
    state_dir: Path | None = None
    """Where documents, their journals and glossaries are kept; created when first needed.
    ``None``: nothing outlives a request (document and glossary endpoints answer 503)."""
    web: bool = True
    """Serve the web page at ``/`` (:mod:`.web`); ``False``: ``/`` is a 404."""
    files: FileLimits = field(default_factory=FileLimits)
    """Uploaded documents: size, quota, per-key cap, how long results are kept, their folder."""
    trusted_proxies: tuple[Network, ...] = ()
    """Reverse proxies whose ``X-Forwarded-For`` names the client (:mod:`.forwarded`): the address
    that ``--req-limit`` counts, and that handlers see as ``REMOTE_ADDR``."""
    exact_length: bool = False
    """Benchmarks only (``serve --exact-length``): text requests decode with no repetition
    guard, so that with the engine's ``min_new_tokens`` every sentence runs to its length limit."""


Handler = Callable[[Context, Request], Response]

#: The API modules, each with its ``ROUTES``, and the error shape of its answers.
API_MODULES = ((libre, "libre"), (deepl, "deepl"), (native, "native"), (files_api, "native"),
               (deepl_glossaries, "deepl"))


class App:
    """The WSGI application over one translator."""

    def __init__(self, translator: Translator, options: AppOptions | None = None, metrics=None):
        """Args:
            translator: The loaded model; its engine is shared by every request.
            options: Limits, keys, body size.
            metrics: A :class:`~.metrics.Metrics`, or ``None`` to build one (needs
                ``prometheus_client``).
        """
        self.translator = translator
        self.options = options or AppOptions()
        self.service = Service(translator, self.options.limits, repetition_guard=not self.options.exact_length)
        self.access = Access(self.options.api_keys, self.options.req_limit)
        self.proxies = TrustedProxies(self.options.trusted_proxies)
        self.targets = Targets(tuple(translator.bundle.targets), translator.bundle.default_target)
        if metrics is None:
            from .metrics import Metrics

            metrics = Metrics(translator.engine)
        self.metrics = metrics
        self.service.on_sentence = self._count
        self.draining = False
        self.started = time.time()
        folder = self.options.files.folder or (self.options.state_dir / "files" if self.options.state_dir else None)
        self.documents = DocumentStore(translator, folder, self.options.files)
        self.glossaries = GlossaryStore(self.options.state_dir, shared=not self.access.required)
        self.router = Router()
        for module, style in API_MODULES:
            self.router.add_module(module.ROUTES, style)
        self.router.add_module(files_api.DEEPL_ROUTES, "deepl")
        if self.options.web:
            self.router.add_module(web.ROUTES, "web")

    # -- WSGI --------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response):
        started = time.perf_counter()
        self.proxies.resolve(environ)  # REMOTE_ADDR: the client, behind a trusted proxy too
        method = environ.get("REQUEST_METHOD", "GET").upper()
        path = environ.get("PATH_INFO", "/") or "/"
        if len(path) > 1:
            path = path.rstrip("/")
        route, args = self.router.match(method, path)
        style = route.style if route else ("deepl" if path.startswith(("/v2/", "/v3/")) else "libre")
        self.service.enter()
        try:
            response = self._dispatch(route, Request(environ, method, path, self.options.max_body, args), path)
        except HTTPError as exc:
            response = self._error(exc, style)
        except Exception as exc:  # noqa: BLE001 - answer with one line, log the details
            if is_full(exc):  # NoSpace, or a write no handler expected to fail
                logger.error("%s %s: the disk is full: %s", method, path, exc)
                response = self._error(HTTPError(507, "the server's disk is full; retry once space is freed "
                                                      "on the server"), style)
            else:
                logger.exception("unexpected error answering %s %s", method, path)
                response = self._error(HTTPError(500, "internal error; see the server log"), style)
        if isinstance(response.body, bytes | bytearray):
            self.service.leave()
            self._observe(route, path, response.status, started)
            body: Iterable[bytes] = [] if method == "HEAD" else [bytes(response.body)]
            length = (("Content-Length", str(len(response.body))),)
        else:
            body = _Streamed(response.body, lambda: (self.service.leave(),
                                                     self._observe(route, path, response.status, started)))
            length = ()
        start_response(_status_line(response.status), [("Content-Type", response.content_type), *length,
                                                       *response.headers, *self._cors()])
        return body

    def _dispatch(self, route: Route | None, request: Request, path: str) -> Response:
        if route is None:
            allowed = self.router.allowed(path)
            if request.method == "OPTIONS" and allowed:
                return Response(b"", 204, "text/plain", (("Allow", ", ".join(allowed + ["OPTIONS"])),
                                                         *self._cors_preflight()))
            if allowed:
                raise HTTPError(405, f"method {request.method} is not allowed on {path}",
                                (("Allow", ", ".join(allowed)),))
            raise HTTPError(404, f"no such endpoint: {path}")
        if self.draining and path not in ("/health", "/metrics"):
            raise HTTPError(503, "the server is shutting down", (("Retry-After", "5"), ("Connection", "close")))
        return route.handler(self, request)

    def _cors(self) -> tuple[tuple[str, str], ...]:
        origin = self.options.cors_origin
        return (("Access-Control-Allow-Origin", origin), ("Vary", "Origin")) if origin else ()

    def _cors_preflight(self) -> tuple[tuple[str, str], ...]:
        if not self.options.cors_origin:
            return ()
        return (("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"),
                ("Access-Control-Allow-Headers", "Content-Type, Authorization"),
                ("Access-Control-Max-Age", "600"))

    def _error(self, exc: HTTPError, style: str) -> Response:
        key = "message" if style == "deepl" else "error"
        return json_response({key: exc.message}, exc.status, exc.headers)

    def _observe(self, route: Route | None, path: str, status: int, started: float) -> None:
        name = route.template if route is not None else "other"
        self.metrics.observe(name, status, time.perf_counter() - started)

    # -- helpers for the handlers -------------------------------------------------------------
    def admit(self, request: Request, key: str | None, how: str = "pass api_key") -> str:
        """Check the API key and the rate limit (403, 429); ``how`` says how this API passes a key."""
        return self.access.admit(key, request.address, how)

    def _count(self, result) -> None:
        self.metrics.sentences.inc()
        self.metrics.tokens.inc(len(result.ids))
        self.metrics.characters.inc(len(result.source))

    def start(self) -> None:
        """Take up the documents a previous run left (see :meth:`.DocumentStore.start`)."""
        self.documents.start()

    def close(self) -> None:
        self.documents.close()
        self.service.close()
        self.glossaries.close()


class _Streamed:
    """A streamed body that runs ``done`` once, when the server closes it (finished or not)."""

    def __init__(self, chunks: Iterable[bytes], done: Callable[[], object]):
        self._chunks = iter(chunks)
        self._done = done
        self._closed = False

    def __iter__(self):
        return self

    def __next__(self) -> bytes:
        return next(self._chunks)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            close = getattr(self._chunks, "close", None)
            if close:
                close()
        finally:
            self._done()


def _status_line(status: int) -> str:
    if status == 499:
        return "499 Client Closed Request"
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Error"
