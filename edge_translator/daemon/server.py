"""``edge-translator serve``: the daemon's process, under the waitress WSGI server.

Why waitress: it is pure Python with no dependencies (about 400 KB, nothing for
PyInstaller to get wrong), imports in about 30 ms, serves from a bounded pool of threads
(each request's thread waits on the shared engine, which is what batches them), and it
has what ``http.server`` lacks: a cap on open connections, a timeout that closes idle or
slow clients, a body size limit, and a way to tell that a client went away
(``channel_request_lookahead``), which cancels that client's work. Its server class is
subclassed (:mod:`.connections`) for a cap on the connections of each client and deadlines
for a request's headers and body, so that one slow client cannot hold every connection.

The process binds its address first, so a port in use fails at once and before anything
else is said; then it loads the model, translates one sentence to warm the sessions, takes
up the documents a previous run left, prints the address it listens on, and serves until
SIGTERM or SIGINT. Then it stops accepting, answers the requests in flight (up to
``drain_timeout`` seconds), and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import EdgeTranslatorError, InputError
from .app import App, AppOptions
from .documents import FileLimits
from .forwarded import parse_networks
from .limits import read_keys
from .service import Limits

logger = logging.getLogger(__name__)

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
#: waitress refuses bodies over this many times ``max_body`` itself (a plain-text 413); below
#: that the application answers a JSON 413 without reading the body.
BODY_SLACK = 4


@dataclass(frozen=True)
class ServeOptions:
    """How the daemon listens and what it allows."""

    host: str = "127.0.0.1"
    """Address to bind; the default only answers this machine."""
    port: int = 5000
    """TCP port (LibreTranslate's); 0 picks a free one."""
    model: str | None = None
    """Bundle directory; ``None`` uses the usual lookup (``EDGE_TRANSLATOR_MODEL``, the embedded model)."""
    threads: int | None = None
    """ONNX Runtime threads of each decoding worker (by default the physical cores shared among them)."""
    workers: int = 1
    """Decoding workers, each with its own copy of the model (:meth:`.Translator.load`)."""
    api_keys: str | None = None
    """Key file; when given, every request needs a key from it."""
    char_limit: int = 20_000
    """Most characters per request (0: unlimited)."""
    batch_limit: int = 64
    """Most texts per request."""
    max_body: int = 1 << 20
    """Largest request body in bytes."""
    timeout: float = 60.0
    """Seconds a translation may take, and an idle or slow client may stay connected."""
    req_limit: int = 0
    """Requests per minute per key (or per address without keys); 0: unlimited."""
    http_threads: int = 32
    """Requests answered at once (waiting requests hold a thread each)."""
    connections: int = 100
    """Most open connections; more wait in the listen backlog."""
    connections_per_client: int = 16
    """Most open connections from one address; more are answered 503 and closed at once (0: no cap
    but ``connections``). Trusted proxies are exempt."""
    header_timeout: float = 10.0
    """Seconds for a request's line and headers to arrive (0: only ``timeout``)."""
    body_min_rate: int = 500
    """Bytes a second a request's body must average once its first ``header_timeout`` seconds are
    over (0: only ``timeout``)."""
    trusted_proxies: tuple[str, ...] = ()
    """Reverse proxies (addresses or networks) whose ``X-Forwarded-For`` names the client."""
    drain_timeout: float = 30.0
    """Seconds to finish requests in flight after SIGTERM."""
    cache_size: int = 4096
    """Sentences kept in the in-memory translation cache (0: no cache)."""
    memory: str | None = None
    """A translation memory file (SQLite, the one ``edge-translator docs`` fills) consulted
    after the in-memory cache; sentences the daemon decodes are added to it."""
    cors_origin: str | None = None
    """Answer browsers from this origin (``"*"``: any) with CORS headers; ``None``: none."""
    lean_memory: bool = False
    """Give memory back after every step: ONNX Runtime without its arena (``memory="none"``)
    and glibc's mmap and trim thresholds fixed at 128 KiB, so freed buffers leave the process.
    Less RSS, and fewer requests a second, since each step maps and faults in its buffers
    afresh (docs/benchmarks.md measures both). For boards short of memory and light traffic."""
    state_dir: str | None = None
    """Where the server keeps what outlives a request (uploaded and translated documents,
    their journals, glossaries); ``None``: :func:`default_state_dir`. Created when first needed."""
    web: bool = True
    """Serve the web page at ``/``; ``False`` (``--no-web``): ``/`` is a 404."""
    max_file_size: int = 20_000_000
    """Largest uploaded document in bytes (413 above)."""
    files_ttl: float = 3600.0
    """Seconds a translated document (or its error) is kept before it is deleted."""
    files_quota: int = 1_000_000_000
    """Most bytes all documents may take on disk together (507 above)."""
    max_queued_documents: int = 8
    """Most documents waiting or being translated per key (429 above)."""
    files_dir: str | None = None
    """Where documents are kept; ``None``: ``files/`` in the state folder."""
    exact_length: bool = False
    """Benchmarks only: every sentence of a text request decodes exactly its length limit (no
    ``</s>`` before it, no repetition guard), as CTranslate2 does with ``min_decoding_length`` equal
    to ``max_decoding_length``: a random model's end of sentence comes at random, and two
    servers compared on one must decode as many tokens (``bench-serve --lt-length exact``)."""

    def __post_init__(self) -> None:
        for name in ("char_limit", "req_limit", "cache_size"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")
        for name in ("workers", "batch_limit", "max_body", "http_threads", "connections", "max_file_size", "files_quota",
                     "max_queued_documents"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be between 0 and 65535, not {self.port}")
        if self.timeout <= 0 or self.drain_timeout < 0:
            raise ValueError("timeout must be positive and drain_timeout not negative")
        if self.files_ttl <= 0:
            raise ValueError("files_ttl must be positive")
        for name in ("connections_per_client", "header_timeout", "body_min_rate"):
            if getattr(self, name) < 0:
                flag = "--" + name.replace("_", "-")
                raise ValueError(f"{flag} must not be negative, not {getattr(self, name)} (0 turns it off)")
        parse_networks(self.trusted_proxies)  # a malformed one is a ValueError naming it

    def connection_policy(self):
        """The cap per client and the request deadlines (:class:`.connections.ConnectionPolicy`; imports waitress)."""
        from .connections import ConnectionPolicy

        return ConnectionPolicy(per_client=self.connections_per_client, header_timeout=self.header_timeout,
                                body_min_rate=self.body_min_rate, idle_timeout=self.timeout,
                                trusted=parse_networks(self.trusted_proxies))


#: ``EngineOptions.min_new_tokens`` of ``--exact-length``: past every length limit, so no
#: sentence ends before its limit.
EXACT_LENGTH = 1 << 30


def engine_options(options: ServeOptions):
    """The scheduler's options for these serve options (``--exact-length``'s ``min_new_tokens``)."""
    from ..core.engine import EngineOptions

    return EngineOptions(min_new_tokens=EXACT_LENGTH if options.exact_length else 0)


def default_state_dir() -> Path:
    """systemd's ``$STATE_DIRECTORY`` (the unit's ``StateDirectory=``), else
    ``$XDG_STATE_HOME/edge-translator``, else ``~/.local/state/edge-translator``."""
    if os.environ.get("STATE_DIRECTORY"):
        return Path(os.environ["STATE_DIRECTORY"].split(":")[0])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "edge-translator"


def build_app(options: ServeOptions, translator) -> App:
    """The WSGI application for these options over a loaded translator."""
    keys = read_keys(options.api_keys, options.req_limit) if options.api_keys else None
    limits = Limits(char_limit=options.char_limit, batch_limit=options.batch_limit, timeout=options.timeout)
    state = Path(options.state_dir) if options.state_dir else default_state_dir()
    files = FileLimits(max_file_size=options.max_file_size, quota=options.files_quota,
                       max_queued=options.max_queued_documents, ttl=options.files_ttl,
                       folder=Path(options.files_dir) if options.files_dir else None)
    return App(translator, AppOptions(limits=limits, max_body=options.max_body, api_keys=keys,
                                      req_limit=options.req_limit, cors_origin=options.cors_origin,
                                      state_dir=state, web=options.web, files=files,
                                      exact_length=options.exact_length,
                                      trusted_proxies=parse_networks(options.trusted_proxies)))


def bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (the first address ``host`` resolves to), not yet listening.

    Raises:
        InputError: If the address cannot be bound (in use, not this machine's, unknown).
    """
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM,
                                                             socket.IPPROTO_TCP, socket.AI_PASSIVE)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError as exc:
        if sock is not None:
            sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; "
                         "choose another --port or --host") from None
    return sock


class Daemon:
    """The application under a waitress server: start it, :meth:`run` it, :meth:`stop` it from anywhere."""

    def __init__(self, options: ServeOptions, translator, sock: socket.socket | None = None):
        """Listen (not yet serving), then take up the documents a previous run left.

        Args:
            sock: The socket from :func:`bind`; ``None`` binds ``options.host:options.port`` here.

        Raises:
            InputError: If the key file is unusable or the address cannot be bound.
        """
        sock = sock or bind(options.host, options.port)
        self.options = options
        try:
            self.app = build_app(options, translator)
        except BaseException:
            sock.close()
            raise
        try:
            self.server = _create_server(self.app, sock, options)
        except BaseException:
            sock.close()
            self.app.close()
            raise
        self.app.metrics.watch_connections(lambda: len(self.server.active_channels))
        self.app.start()
        self._stop_at: float | None = None

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` it listens on (the port chosen when 0 was asked)."""
        return self.server.effective_host, self.server.effective_port

    @property
    def url(self) -> str:
        host, port = self.address
        return f"http://{_url_host(host)}:{port}"

    def stop(self) -> None:
        """Stop accepting and finish the requests in flight (safe from any thread or a signal handler)."""
        if self._stop_at is None:
            self._stop_at = time.monotonic()
            self.server.pull_trigger()  # wake the event loop, which may be waiting on its sockets

    def run(self) -> None:
        """Serve until :meth:`stop`, then until the requests in flight are answered (or
        ``drain_timeout`` passes); closes every connection on the way out."""
        server, app, adj = self.server, self.app, self.server.adj
        while True:
            server.asyncore.loop(timeout=adj.asyncore_loop_timeout, map=server._map,
                                 use_poll=adj.asyncore_use_poll, count=1)
            if self._stop_at is None:
                continue
            if server.accepting:  # first pass after stop(): no new connections
                app.draining = True
                server.accepting = False
                server.del_channel()
                server.socket.close()
            channels = [c for c in list(server._map.values()) if hasattr(c, "total_outbufs_len")]
            flushed = all(not c.requests and not c.total_outbufs_len for c in channels)
            overdue = time.monotonic() - self._stop_at > self.options.drain_timeout
            if (app.service.in_flight == 0 and flushed) or overdue:
                break
        if app.service.in_flight:
            logger.warning("%d request(s) still in flight after %.0f s; stopping anyway", app.service.in_flight,
                           self.options.drain_timeout)
        server.task_dispatcher.shutdown(timeout=1)
        for channel in list(server._map.values()):
            channel.close()
        app.close()


def _create_server(app: App, sock: socket.socket, options: ServeOptions):
    """waitress's TCP server over ``sock``, with the cap per client and the request deadlines
    (:mod:`.connections`); what ``waitress.create_server`` does for one socket, with our server class."""
    from waitress.adjustments import Adjustments
    from waitress.task import ThreadedTaskDispatcher

    from .connections import GuardedServer

    policy = options.connection_policy()
    # waitress counts its listening socket and its wake-up pipe among the connections. The
    # deadlines are checked in its maintenance pass, which then runs every second.
    adj = Adjustments(
        sockets=[sock], threads=options.http_threads,
        connection_limit=options.connections + 2, channel_timeout=int(max(1, options.timeout)),
        cleanup_interval=1 if policy.timed else int(max(1, min(30, options.timeout / 2))),
        max_request_body_size=max(BODY_SLACK * options.max_body, 2 * options.max_file_size + (1 << 20)),
        channel_request_lookahead=1,
        # X-Forwarded-For is read (from trusted proxies only) and the others dropped by the app (.forwarded)
        ident="edge-translator", clear_untrusted_proxy_headers=False, asyncore_loop_timeout=1)
    dispatcher = ThreadedTaskDispatcher()
    dispatcher.set_thread_count(adj.threads)
    return GuardedServer(app, policy, app.metrics, map={}, _start=True, _sock=sock, dispatcher=dispatcher, adj=adj,
                         bind_socket=False, sockinfo=(sock.family, sock.type, sock.proto, sock.getsockname()))


def serve(options: ServeOptions) -> int:
    """Load the model, serve until SIGTERM/SIGINT, drain, and return the exit code (0).

    Raises:
        BundleError: If the model cannot be loaded.
        InputError: If the key file is unusable or the address cannot be bound.
        MissingDependencyError: Without the ``serve`` extra.
    """
    from ..core.cache import ChainedCache, LRUCache
    from ..core.errors import require
    from ..core.memory import open_for_translating
    from ..core.sessions import lean_malloc
    from ..core.translator import Translator

    require("waitress", "serve")
    require("prometheus_client", "serve")
    if options.api_keys:
        read_keys(options.api_keys, options.req_limit)  # a bad key file fails before the model loads
    _check_folder(Path(options.state_dir) if options.state_dir else default_state_dir(),
                  "--state-dir" if options.state_dir else "the state folder")
    _check_folder(Path(options.files_dir) if options.files_dir else None, "--files-dir")
    started = time.perf_counter()
    sock = bind(options.host, options.port)  # a port in use fails at once, before anything is logged
    try:
        caches = [LRUCache(options.cache_size)] if options.cache_size else []
        if options.memory:
            memory = open_for_translating(options.memory)  # a full disk: a warning, served without it
            if memory is not None:
                caches.append(memory)
    except BaseException:
        sock.close()
        raise
    cache = ChainedCache(*caches) if len(caches) > 1 else (caches[0] if caches else None)
    # The decoder's threads spin between operators (the encoder's never do): with both
    # spinning they took the cores from the HTTP threads, while the decoder's alone serve
    # more requests a second, sequential and concurrent, than no spinning at all (measured
    # in docs/benchmarks.md). A server runs for months, so memory follows the work in hand
    # ("steady") or is given back at once.
    lean = lean_malloc()
    try:
        translator = Translator.load(options.model, options.threads, cache=cache, spin=True,
                                     engine=engine_options(options), memory="none" if options.lean_memory else "steady",
                                     workers=options.workers)
    except BaseException:
        sock.close()
        raise
    try:
        translator.translate("Ready.")  # the first run of each session allocates; do it before clients wait
        try:
            translator.dictionary  # noqa: B018 - loaded now, not by the first lone word a client sends
        except EdgeTranslatorError as exc:
            logger.warning("%s; words are translated by the model", exc)
        daemon = Daemon(options, translator, sock)
        host, port = daemon.address
        if options.host not in LOCAL_HOSTS and not options.api_keys:
            logger.warning("listening on %s without API keys: anyone who can reach port %d can use this "
                           "server; pass --api-keys FILE", options.host, port)
        b = translator.bundle
        logger.info("model %s (%s) loaded and warmed in %.1f s%s", b.name, b.quantization.get("mode"),
                    time.perf_counter() - started,
                    ("; lean memory" + ("" if lean else " (no glibc here: arena off only)")) if options.lean_memory
                    else "; steady memory")

        def on_signal(signum, frame) -> None:
            logger.info("%s: no new connections; finishing the requests in flight", signal.Signals(signum).name)
            daemon.stop()

        # before the line that tells a supervisor (or a test) the server is up, which may stop it at once
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        print(f"edge-translator serving {b.name} on {daemon.url}", file=sys.stderr, flush=True)
        try:
            daemon.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        translator.close(cancel=True)
    logger.info("stopped")
    return 0


def _check_folder(path: Path | None, what: str) -> None:
    """A folder the server creates when first needed must not be a file already."""
    if path is not None and path.exists() and not path.is_dir():
        raise InputError(f"{what} {path} is a file, not a folder; pass --state-dir or --files-dir with a folder "
                         "(it is created when first needed)")


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
