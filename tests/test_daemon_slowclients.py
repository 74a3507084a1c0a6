"""Slow clients cannot lock others out of the daemon (issue #49).

Real ``edge-translator serve`` processes with small caps and short deadlines. Slow
connections come from 127.0.0.2 (Linux routes all of 127/8 to the loopback), ordinary
requests from 127.0.0.1, and a "proxy" from 127.0.0.3. Each test waits on what it can
observe (a socket closed by the server, a counter in ``/metrics``) with a bounded
deadline; a control run with the cap off shows the lockout the cap prevents.
"""

from __future__ import annotations

import http.client
import json
import re
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from edge_translator.daemon.forwarded import TrustedProxies, parse_networks
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import ROOT
from .test_daemon_clients import Served, _cjk
from .waiting import wait_until

pytest.importorskip("waitress")  # the serve extra; CI installs it

SLOW, ORDINARY, PROXY = "127.0.0.2", "127.0.0.1", "127.0.0.3"


def _address(served: Served) -> tuple[str, int]:
    host, port = served.url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


class Dribbler:
    """Connections from one address that send ``first`` at once, then ``data`` a byte at a time every
    ``interval`` seconds, and notice when the server closes them (a 503, an end of stream or a reset)."""

    def __init__(self, served: Served, count: int, data: bytes, source: str = SLOW, interval: float = 0.25,
                 first: bytes = b""):
        self.socks = []
        for _ in range(count):
            sock = socket.create_connection(_address(served), source_address=(source, 0))
            if first:
                sock.sendall(first)
            self.socks.append(sock)
        self.opened = time.monotonic()
        self.closed_at: dict[socket.socket, float] = {}
        self.answers: dict[socket.socket, bytes] = {}
        self._data, self._interval, self._sent = data, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            byte = self._data[self._sent:self._sent + 1]
            self._sent += 1
            for sock in self.open():
                self._poll(sock, byte)
            self._stop.wait(self._interval)

    def _poll(self, sock: socket.socket, byte: bytes) -> None:
        try:
            if select.select([sock], [], [], 0)[0]:
                answer = sock.recv(4096)
                self._close(sock, answer)
            elif byte:
                sock.send(byte)
        except OSError:
            self._close(sock, b"")

    def _close(self, sock: socket.socket, answer: bytes) -> None:
        self.answers[sock] = answer
        self.closed_at[sock] = time.monotonic()

    def open(self) -> list[socket.socket]:
        return [s for s in self.socks if s not in self.closed_at]

    def refused(self) -> int:
        """Connections answered with the cap's 503."""
        return sum(1 for answer in self.answers.values() if answer.startswith(b"HTTP/1.1 503"))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.socks:
            sock.close()


def _metric(served: Served, name: str, labels: str = "") -> float:
    text = urllib.request.urlopen(served.url + "/metrics", timeout=10).read().decode()
    match = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    assert match, f"{name}{labels} is not in /metrics"
    return float(match.group(1))


def _translate(served: Served, text: str = "Where is the train station?", timeout: float = 10,
               source: str = ORDINARY, forwarded: str | None = None) -> tuple[int, dict]:
    host, port = _address(served)
    connection = http.client.HTTPConnection(host, port, timeout=timeout, source_address=(source, 0))
    headers = {"Content-Type": "application/json", **({"X-Forwarded-For": forwarded} if forwarded else {})}
    try:
        connection.request("POST", "/translate", json.dumps({"q": text, "target": "zh"}), headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


# -- the cap per client ---------------------------------------------------------------------------
CAPPED = ("--connections", "12", "--header-timeout", "0", "--body-min-rate", "0", "--http-threads", "4",
          "--trusted-proxy", PROXY)
HEADER_BYTES = b"GET /health HTTP/1.1\r\nHost: slow\r\n" + b"X-Pad: a\r\n" * 1000


@pytest.fixture(scope="module")
def capped():
    """A daemon whose only defence is the cap per client (no header or body deadline)."""
    daemon = Served(*CAPPED, "--connections-per-client", "4")
    yield daemon
    assert daemon.stop() == 0
    assert not any("Traceback" in line for line in daemon.log), "".join(daemon.log)


def test_one_address_holds_only_its_share_and_others_get_through(capped):
    slow = Dribbler(capped, 20, HEADER_BYTES)
    try:
        wait_until(lambda: slow.refused() == 16, timeout=30, what="16 of 20 slow connections refused with a 503")
        assert len(slow.open()) == 4
        assert b"too many open connections from your address" in next(iter(slow.answers.values()))
        for _ in range(10):
            started = time.monotonic()
            status, body = _translate(capped, timeout=10)
            assert status == 200 and _cjk(body["translatedText"])
            assert time.monotonic() - started < 10
        assert len(slow.open()) == 4, "the cap, not a deadline, let them through: the 4 are still held"
        assert _metric(capped, "edge_translator_connections_refused_total", '{reason="per_client"}') == 16
    finally:
        slow.stop()


def test_a_trusted_proxy_is_exempt_from_the_cap_per_client(capped):
    refused = _metric(capped, "edge_translator_connections_refused_total", '{reason="per_client"}')
    proxy = Dribbler(capped, 6, HEADER_BYTES, source=PROXY)
    try:
        # the 6 (over the cap of 4) and the scrape's own connection, all open at once
        wait_until(lambda: _metric(capped, "edge_translator_open_connections") == 7, timeout=30,
                   what="the proxy's 6 connections to be open")
        assert len(proxy.open()) == 6
        assert _metric(capped, "edge_translator_connections_refused_total", '{reason="per_client"}') == refused
    finally:
        proxy.stop()


def test_without_the_cap_the_slow_address_locks_others_out():
    """The control: the same slow clients with ``--connections-per-client 0`` take every connection."""
    daemon = Served(*CAPPED, "--connections-per-client", "0")
    slow = Dribbler(daemon, 20, HEADER_BYTES)
    try:
        with pytest.raises(OSError):  # socket.timeout: the request waits in the listen backlog
            _translate(daemon, timeout=5)
        assert slow.refused() == 0
    finally:
        slow.stop()
        assert daemon.stop() == 0


# -- deadlines for the headers and the body -------------------------------------------------------
@pytest.fixture(scope="module")
def timed():
    daemon = Served("--header-timeout", "2", "--body-min-rate", "2000", "--char-limit", "0", "--cache", "0")
    yield daemon
    assert daemon.stop() == 0
    assert not any("Traceback" in line for line in daemon.log), "".join(daemon.log)


def test_headers_that_dribble_and_a_silent_connection_are_dropped(timed):
    dribbling = Dribbler(timed, 1, HEADER_BYTES)
    silent = Dribbler(timed, 1, b"")
    try:
        for client in (dribbling, silent):
            wait_until(lambda c=client: not c.open(), timeout=20, what="the server to close the slow connection")
            elapsed = next(iter(client.closed_at.values())) - client.opened
            assert elapsed >= 1.9, f"closed after {elapsed:.1f} s, before the 2 s deadline"
            assert client.answers[client.socks[0]] == b""  # closed, not answered
        assert dribbling._sent > 4  # it was sending all along
        assert _metric(timed, "edge_translator_connections_dropped_total", '{reason="header_timeout"}') >= 2
    finally:
        dribbling.stop()
        silent.stop()


def test_a_body_that_dribbles_is_dropped_and_one_that_keeps_up_is_not(timed):
    head = (b"POST /translate HTTP/1.1\r\nHost: slow\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100000\r\n\r\n")
    body = Dribbler(timed, 1, b"{" + b" " * 99_999, first=head)
    try:
        wait_until(lambda: not body.open(), timeout=20, what="the server to drop the dribbling body")
        assert body.closed_at[body.socks[0]] - body.opened >= 1.9
        assert body._sent > 4  # it was sending all along
    finally:
        body.stop()
    assert _metric(timed, "edge_translator_connections_dropped_total", '{reason="body_too_slow"}') >= 1

    # 24,000 bytes in 8 parts, one every 0.5 s: 6,000 bytes a second, over the grace and above the rate
    payload = json.dumps({"q": "The body came in parts.", "target": "zh"}).encode()
    payload += b" " * (24_000 - len(payload))
    sock = socket.create_connection(_address(timed), source_address=(SLOW, 0), timeout=30)
    started = time.monotonic()
    sock.sendall(head.replace(b"100000", b"24000"))
    for i in range(0, len(payload), 3000):
        time.sleep(0.5)
        sock.sendall(payload[i:i + 3000])
    response = http.client.HTTPResponse(sock)
    response.begin()
    answer = json.loads(response.read())
    sock.close()
    assert time.monotonic() - started > 3, "the body must outlast the 2 s grace to test the rate"
    assert response.status == 200 and _cjk(answer["translatedText"])


def test_a_long_translation_and_an_idle_keep_alive_connection_are_not_cut(timed):
    host, port = _address(timed)
    connection = http.client.HTTPConnection(host, port, timeout=300)
    # A translation that outlasts the 2 s deadline and its check, however fast the machine:
    # the text doubles until one takes over 4 s (each answer on the way must be whole too).
    sentences, took = 600, 0.0
    while took <= 4:
        assert sentences <= 9600, f"{sentences // 2} sentences took only {took:.1f} s"
        text = " ".join(english_sentences(sentences, seed=23))
        started = time.monotonic()
        connection.request("POST", "/translate", json.dumps({"q": text, "target": "zh"}),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        body = json.loads(response.read())
        took = time.monotonic() - started
        assert response.status == 200 and _cjk(body["translatedText"])
        sentences *= 2
    local = connection.sock.getsockname()
    # idle between requests: longer than the header deadline (a fresh connection is dropped meanwhile)
    silent = Dribbler(timed, 1, b"", source=ORDINARY)
    try:
        wait_until(lambda: not silent.open(), timeout=20, what="a silent connection to be dropped")
    finally:
        silent.stop()
    connection.request("POST", "/translate", json.dumps({"q": "Still here.", "target": "zh"}),
                       {"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200 and _cjk(json.loads(response.read())["translatedText"])
    assert connection.sock.getsockname() == local, "the keep-alive connection was reopened"
    connection.close()


# -- X-Forwarded-For -----------------------------------------------------------------------------
def test_the_rate_limit_keys_off_the_forwarded_address_only_behind_a_trusted_proxy():
    daemon = Served("--req-limit", "2", "--trusted-proxy", PROXY, "--trusted-proxy", "10.0.0.0/8")
    try:
        def status(source: str, forwarded: str | None) -> int:
            return _translate(daemon, "Hi.", source=source, forwarded=forwarded)[0]

        # from the trusted proxy: each forwarded client has its own 2 a minute
        assert [status(PROXY, "198.51.100.7") for _ in range(3)] == [200, 200, 429]
        assert status(PROXY, "198.51.100.8") == 200
        # the rightmost hop that is not a trusted proxy; what the client wrote to its left is ignored
        assert status(PROXY, "192.0.2.1, 198.51.100.20, 10.1.2.3") == 200
        assert status(PROXY, "192.0.2.2, 198.51.100.20") == 200
        assert status(PROXY, "192.0.2.3, 198.51.100.20, 10.9.9.9") == 429
        # from an untrusted peer the header is ignored: a new spoofed address each time does not help
        assert [status(SLOW, f"198.51.100.{n}") for n in (30, 31, 32)] == [200, 200, 429]
        assert status(SLOW, None) == 429
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("peer,header,client", [
    ("127.0.0.3", "198.51.100.7", "198.51.100.7"),
    ("127.0.0.2", "198.51.100.7", "127.0.0.2"),                    # not a trusted proxy
    ("127.0.0.3", None, "127.0.0.3"),
    ("127.0.0.3", "1.1.1.1, 198.51.100.7, 10.0.0.5", "198.51.100.7"),
    ("127.0.0.3", "10.0.0.6, 10.0.0.5", "10.0.0.6"),                # every hop trusted: the leftmost
    ("127.0.0.3", "1.1.1.1, not-an-address, 10.0.0.5", "10.0.0.5"),  # a malformed hop stops the walk
    ("127.0.0.3", "198.51.100.7:5123", "198.51.100.7"),
    ("127.0.0.3", "[2001:db8::1]:443", "2001:db8::1"),
    ("::1", "2001:db8::2", "2001:db8::2"),
])
def test_the_client_behind_proxies(peer, header, client):
    proxies = TrustedProxies(parse_networks(["127.0.0.3", "10.0.0.0/8", "::1"]))
    assert proxies.client(peer, header) == client


def test_an_untrusted_peers_proxy_headers_are_dropped():
    environ = {"REMOTE_ADDR": "127.0.0.2", "HTTP_X_FORWARDED_FOR": "198.51.100.7", "HTTP_FORWARDED": "for=x"}
    TrustedProxies(parse_networks(["127.0.0.3"])).resolve(environ)
    assert environ["REMOTE_ADDR"] == "127.0.0.2" and "HTTP_X_FORWARDED_FOR" not in environ
    assert "HTTP_FORWARDED" not in environ and environ["edge_translator.peer"] == "127.0.0.2"


# -- bad values ----------------------------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (["--connections-per-client", "-1"], "--connections-per-client must not be negative"),
    (["--header-timeout", "-1"], "--header-timeout must not be negative"),
    (["--body-min-rate", "-5"], "--body-min-rate must not be negative"),
    (["--trusted-proxy", "10.0.0.0/33"], "--trusted-proxy '10.0.0.0/33' is not an IP address or network"),
    (["--trusted-proxy", "127.0.0.1", "--trusted-proxy", "proxy.lan"], "--trusted-proxy 'proxy.lan' is not"),
])
def test_bad_values_are_one_line_and_exit_2(args, message):
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "serve", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
