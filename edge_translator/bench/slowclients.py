"""Slow clients against a running daemon: do ordinary requests still get through?

Issue #49's scenario: ``--slow`` connections from one address (127.0.0.2 by default;
Linux routes all of 127/8 to the loopback) send a request's headers one byte every
``--interval`` seconds, while ``--requests`` ordinary translations come from 127.0.0.1,
one a second, each with a ``--timeout``. It prints how many of them timed out, their
median and longest latency, and what became of the slow connections. Start the daemon
first (``edge-translator serve``), then::

    python -m edge_translator.bench.slowclients --url http://127.0.0.1:5000
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import statistics
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

#: What a slow client sends, a byte at a time: a request line, then header lines without end.
HEADERS = b"GET /health HTTP/1.1\r\nHost: bench\r\n" + b"".join(b"X-Pad-%d: a\r\n" % i for i in range(10_000))


class SlowClients:
    """``count`` connections from ``source`` dribbling :data:`HEADERS`, in one thread."""

    def __init__(self, host: str, port: int, count: int, source: str, interval: float):
        self.interval = interval
        self.open: list[socket.socket] = []
        self.failed = self.refused = self.dropped = 0
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(5)
            try:
                sock.bind((source, 0))
                sock.connect((host, port))
            except OSError:
                sock.close()
                self.failed += 1
                continue
            self.open.append(sock)
        self._sent = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            byte = HEADERS[self._sent % len(HEADERS):][:1]
            self._sent += 1
            for sock in list(self.open):
                self._feed(sock, byte)
            self._stop.wait(self.interval)

    def _feed(self, sock: socket.socket, byte: bytes) -> None:
        """Send one byte; a connection the server closed is counted (a 503 as refused) and forgotten."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                answer = sock.recv(64)
                raise ConnectionError(answer)
            sock.send(byte)
        except OSError as exc:
            answer = exc.args[0] if isinstance(exc, ConnectionError) and exc.args else b""
            if isinstance(answer, bytes) and answer.startswith(b"HTTP/1.1 503"):
                self.refused += 1
            else:
                self.dropped += 1
            self.open.remove(sock)
            sock.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        for sock in self.open:
            sock.close()


def ordinary(url: str, timeout: float) -> float | None:
    """Seconds one short translation took, or ``None`` if it timed out or failed."""
    body = json.dumps({"q": "Where is the train station?", "target": "zh"}).encode()
    request = urllib.request.Request(url + "/translate", body, {"Content-Type": "application/json"})
    started = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except (OSError, urllib.error.URLError):
        return None
    return time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:5000", help="the daemon (default http://127.0.0.1:5000)")
    parser.add_argument("--slow", type=int, default=150, help="slow connections (default 150)")
    parser.add_argument("--slow-from", default="127.0.0.2", help="their source address (default 127.0.0.2)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between their bytes (default 2)")
    parser.add_argument("--requests", type=int, default=10, help="ordinary requests (default 10)")
    parser.add_argument("--timeout", type=float, default=30.0, help="each ordinary request's timeout (default 30)")
    parser.add_argument("--settle", type=float, default=3.0, help="seconds between the slow connections and "
                        "the first ordinary request (default 3)")
    args = parser.parse_args(argv)
    parts = urlsplit(args.url)
    slow = SlowClients(parts.hostname, parts.port or 80, args.slow, args.slow_from, args.interval)
    time.sleep(args.settle)
    results: list[float | None] = [None] * args.requests
    threads = []
    for i in range(args.requests):
        thread = threading.Thread(target=lambda i=i: results.__setitem__(i, ordinary(args.url, args.timeout)))
        thread.start()
        threads.append(thread)
        time.sleep(1)
    for thread in threads:
        thread.join()
    held = len(slow.open)
    slow.close()
    answered = [r for r in results if r is not None]
    print(f"ordinary requests: {len(answered)} of {args.requests} answered, {args.requests - len(answered)} timed "
          f"out or failed ({args.timeout:.0f} s timeout)")
    if answered:
        print(f"latency of the answered: median {statistics.median(answered):.3f} s, longest {max(answered):.3f} s")
    print(f"slow connections: {args.slow} tried, {slow.failed} not connected, {slow.refused} refused (503), "
          f"{slow.dropped} closed by the server later, {held} still open at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
