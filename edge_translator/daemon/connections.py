"""The daemon's connections under waitress: a cap per client address, and deadlines for a request's arrival.

``--connections`` caps every open connection together, so one client that holds them
(slowly sending headers, a byte every few seconds) locks everyone else out. Here:

- **A cap per client.** A connection from an address that already holds
  ``per_client`` open connections is answered with a short 503 and closed as it is
  accepted; it never takes a slot of the global cap. The address is the TCP peer's (a
  reverse proxy's, behind one): trusted proxies (``--trusted-proxy``) are exempt and meet
  only the global cap.
- **A deadline for the headers.** A request's line and headers must arrive within
  ``header_timeout`` seconds of its first byte (of the accept, for a connection's first
  request), however steadily they trickle.
- **A minimum rate for the body.** After its headers, a body gets ``header_timeout``
  seconds free (``idle_timeout`` when there is no header deadline), plus one second for
  every ``body_min_rate`` bytes that arrived: a body that stops or dribbles falls behind
  and the connection is dropped (Apache's ``mod_reqtimeout`` rule).

Only the arrival of a request is timed. While a request of the connection is being
answered the clocks stand still, so a long translation or a slow streamed reply is never
cut; between requests, a keep-alive connection is governed by ``--timeout`` as before.
The checks run in waitress's event loop once a second (its ``maintenance``), so a
connection is dropped within about two seconds of its deadline.

This module imports waitress: only :mod:`.server` imports it, when the daemon starts.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass

from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from .forwarded import Network, TrustedProxies

logger = logging.getLogger(__name__)

#: How often, at most, a warning says how many connections were refused or dropped (seconds).
WARN_EVERY = 60.0
#: Why a connection is dropped, as the metrics label it, and as the log says it.
_DROPPED = {"header_timeout": "dropped: their request's headers did not arrive within --header-timeout",
            "body_too_slow": "dropped: their request's body arrived slower than --body-min-rate"}


@dataclass(frozen=True)
class ConnectionPolicy:
    """What a client may do with its connections."""

    per_client: int = 16
    """Most open connections from one address (0: no cap but the global one)."""
    header_timeout: float = 10.0
    """Seconds for a request's line and headers to arrive (0: no deadline but ``idle_timeout``)."""
    body_min_rate: int = 500
    """Bytes a second a body must average after its first ``header_timeout`` seconds (0: no deadline)."""
    idle_timeout: float = 60.0
    """``--timeout``: the body's free start when there is no header deadline."""
    trusted: tuple[Network, ...] = ()
    """Reverse proxies, exempt from the cap per client."""

    @property
    def timed(self) -> bool:
        """Whether any deadline is on (the event loop then checks them every second)."""
        return bool(self.header_timeout or self.body_min_rate)


class Events:
    """What the server reports (counted by :class:`~.metrics.Metrics`); does nothing by default."""

    def connection_refused(self, reason: str) -> None:
        """A connection closed as it was accepted (``"per_client"``)."""

    def connection_dropped(self, reason: str) -> None:
        """A connection closed for a late request (``"header_timeout"``, ``"body_too_slow"``)."""

    def connection_limit_reached(self) -> None:
        """The global cap (``--connections``) filled; new connections wait in the listen backlog."""


class GuardedChannel(HTTPChannel):
    """waitress's channel, timing the arrival of each request."""

    def __init__(self, server, sock, addr, adj, map=None):
        super().__init__(server, sock, addr, adj, map=map)
        self._parser = None
        self._began: float | None = time.monotonic()  # awaiting its first request since the accept
        self._body_began: float | None = None

    def received(self, data):
        result = super().received(data)
        now, parser = time.monotonic(), self.request
        if parser is not self._parser:
            if parser is None:  # the request arrived whole: idle (or answering) until the next
                self._began = None
            elif not (self._parser is None and self._began is not None):  # not the connection's first
                self._began = now
            self._parser, self._body_began = parser, None
        if parser is not None and parser.headers_finished and self._body_began is None:
            self._body_began = now
        return result

    def hold(self, now: float) -> None:
        """Stop the clocks: a request of this connection is being answered."""
        if self._began is not None:
            self._began = now
        if self._body_began is not None:
            self._body_began = now

    def overdue(self, policy: ConnectionPolicy, now: float) -> str | None:
        """Why this connection is to be dropped now (``"header_timeout"``, ``"body_too_slow"``), or ``None``."""
        if self._began is None:
            return None
        parser = self.request
        if parser is not None and parser.headers_finished:
            if not policy.body_min_rate or self._body_began is None:
                return None
            grace = policy.header_timeout or policy.idle_timeout
            allowed = grace + parser.body_bytes_received / policy.body_min_rate
            return "body_too_slow" if now - self._body_began > allowed else None
        if policy.header_timeout and now - self._began > policy.header_timeout:
            return "header_timeout"
        return None


class GuardedServer(TcpWSGIServer):
    """waitress's TCP server with a cap per client and the request deadlines of a :class:`ConnectionPolicy`."""

    channel_class = GuardedChannel

    def __init__(self, application, policy: ConnectionPolicy, events: Events | None = None, **kw):
        """Args:
            application: The WSGI application.
            policy: The cap per client and the deadlines.
            events: Told of each refused or dropped connection.
            **kw: :class:`waitress.server.TcpWSGIServer`'s own arguments.
        """
        self.policy = policy
        self.events = events or Events()
        self.trusted = TrustedProxies(policy.trusted)
        message = (f"too many open connections from your address (the limit is {policy.per_client}); "
                   "close some and retry")
        body = json.dumps({"error": message}).encode()
        self._refusal = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                         b"Retry-After: 5\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        self._tallies = {"refused": _Tally(), **{reason: _Tally() for reason in _DROPPED}}
        super().__init__(application, **kw)

    # -- the cap per client, at accept --------------------------------------------------------
    def accept(self):
        pair = super().accept()
        if pair is None:
            return None
        conn, addr = pair
        host = addr[0] if isinstance(addr, tuple) else str(addr)
        cap = self.policy.per_client
        if cap and not self.trusted.trusts(host) and self.open_from(host) >= cap:
            self._refuse(conn, host)
            return None
        return pair

    def open_from(self, host: str) -> int:
        """Open connections from ``host``."""
        return sum(1 for channel in list(self.active_channels.values()) if channel.addr[0] == host)

    def _refuse(self, conn: socket.socket, host: str) -> None:
        """A short 503, then close; what the client sent is read first, so that closing does not reset."""
        try:
            conn.setblocking(False)
            try:
                conn.recv(65536)
            except OSError:
                pass
            conn.send(self._refusal)
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        finally:
            conn.close()
        self.events.connection_refused("per_client")
        self._tallies["refused"].add(host, f"refused over --connections-per-client {self.policy.per_client}")

    # -- the global cap ----------------------------------------------------------------------
    def readable(self):
        was_full = self.in_connection_overflow
        result = super().readable()
        if self.in_connection_overflow and not was_full:
            self.events.connection_limit_reached()
        return result

    # -- the deadlines, once a second ---------------------------------------------------------
    def maintenance(self, now):
        super().maintenance(now)
        if not self.policy.timed:
            return
        moment = time.monotonic()
        for channel in list(self.active_channels.values()):
            if channel.will_close or channel.close_when_flushed:
                continue
            if channel.requests:
                channel.hold(moment)
                continue
            reason = channel.overdue(self.policy, moment)
            if reason:
                channel.will_close = True  # closed by the event loop's next pass (writable, then handle_close)
                self.events.connection_dropped(reason)
                self._tallies[reason].add(channel.addr[0], _DROPPED[reason])


class _Tally:
    """Counts events of one kind and logs a warning about them at most every :data:`WARN_EVERY` seconds
    (the metrics count every one)."""

    def __init__(self):
        self.count = 0
        self.last_warned: float | None = None

    def add(self, host: str, what: str) -> None:
        self.count += 1
        logger.debug("%s: %s", host, what)
        now = time.monotonic()
        if self.last_warned is None or now - self.last_warned >= WARN_EVERY:
            since = "" if self.last_warned is None else f" in the last {now - self.last_warned:.0f} s"
            logger.warning("%d connection(s) %s%s (the last from %s)", self.count, what, since, host)
            self.count, self.last_warned = 0, now
