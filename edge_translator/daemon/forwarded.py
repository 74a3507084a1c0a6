"""Who the client is behind a reverse proxy: ``X-Forwarded-For``, believed only from trusted proxies.

A request's client is its TCP peer, unless the peer is a trusted proxy (``serve
--trusted-proxy``, addresses or networks). Then the client is the rightmost address of
``X-Forwarded-For`` that is not itself a trusted proxy: each proxy appends the address it
took the request from, so everything to the left of the last untrusted hop may be made up
by the client, and everything to its right was written by proxies we trust. A malformed
entry stops the walk: the client is then the trusted hop that passed it on.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

#: The proxy headers that are dropped from a request whose peer is not a trusted proxy.
PROXY_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PROTO",
                 "HTTP_X_FORWARDED_PORT", "HTTP_X_FORWARDED_BY", "HTTP_FORWARDED")
#: Where :meth:`TrustedProxies.resolve` keeps the TCP peer in the WSGI environ.
PEER_KEY = "edge_translator.peer"

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """``--trusted-proxy`` values (``10.0.0.7``, ``10.0.0.0/8``, ``::1``, ``fd00::/8``) as networks.

    Raises:
        ValueError: For a value that is neither an address nor a network, in one line.
    """
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"--trusted-proxy {value!r} is not an IP address or network; give one like "
                             "127.0.0.1, 10.0.0.0/8 or fd00::/8") from None
    return tuple(networks)


def _address(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """One hop of ``X-Forwarded-For`` (``1.2.3.4``, ``1.2.3.4:5678``, ``[::1]:80``, ``::1``), or ``None``."""
    text = text.strip().strip('"')
    if text.startswith("["):
        text = text[1:].split("]", 1)[0]
    elif text.count(":") == 1:  # IPv4 with a port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


class TrustedProxies:
    """The reverse proxies whose ``X-Forwarded-For`` is believed."""

    def __init__(self, networks: Iterable[Network] = ()):
        self.networks = tuple(networks)

    def __bool__(self) -> bool:
        return bool(self.networks)

    def trusts(self, address: str) -> bool:
        """Whether ``address`` (a TCP peer or a hop) is one of the trusted proxies."""
        if not self.networks:
            return False
        ip = _address(address)
        return ip is not None and any(ip in network for network in self.networks)

    def client(self, peer: str, forwarded_for: str | None) -> str:
        """The client's address: ``peer``, or the rightmost untrusted hop when ``peer`` is trusted.

        Args:
            peer: The TCP peer's address.
            forwarded_for: The ``X-Forwarded-For`` header (repeated headers joined by commas), if any.
        """
        if not forwarded_for or not self.trusts(peer):
            return peer
        client = peer
        for hop in reversed(forwarded_for.split(",")):
            ip = _address(hop)
            if ip is None:
                break
            client = str(ip)
            if not any(ip in network for network in self.networks):
                break
        return client

    def resolve(self, environ: dict) -> None:
        """Set ``REMOTE_ADDR`` to the client (the peer is kept under :data:`PEER_KEY`); drop the
        proxy headers of a peer that is not trusted, so nothing downstream believes them."""
        peer = environ.get("REMOTE_ADDR", "?")
        environ[PEER_KEY] = peer
        if self.trusts(peer):
            environ["REMOTE_ADDR"] = self.client(peer, environ.get("HTTP_X_FORWARDED_FOR"))
            return
        for name in PROXY_HEADERS:
            environ.pop(name, None)
