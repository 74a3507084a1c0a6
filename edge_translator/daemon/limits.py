"""API keys and per-key rate limits.

Keys come from a text file, one per line, optionally followed by that key's own limit in
requests per minute (``# comments`` and blank lines are ignored)::

    3f9c0a7e-team-a
    7b21d4c0-batch-host  600

Without a key file every client is let in, and rate-limited by its address.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import InputError
from .http import HTTPError


def read_keys(path: str | Path, default_limit: int) -> dict[str, int]:
    """``{key: requests per minute}`` from a key file.

    Raises:
        InputError: If the file is missing, unreadable, empty or malformed.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"API key file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read API key file {path}: {exc}") from None
    keys: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) > 2 or (len(fields) == 2 and not fields[1].isdigit()):
            raise InputError(f"{path}, line {number}: expected 'KEY' or 'KEY REQUESTS_PER_MINUTE'")
        keys[fields[0]] = int(fields[1]) if len(fields) == 2 else default_limit
    if not keys:
        raise InputError(f"API key file {path} holds no keys")
    return keys


@dataclass
class _Bucket:
    tokens: float
    stamp: float


class RateLimiter:
    """A token bucket per client: ``limit`` requests a minute, in bursts of up to ``limit``."""

    def __init__(self, clock=time.monotonic, max_clients: int = 100_000):
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}
        self._lock = threading.Lock()
        self._max_clients = max_clients

    def check(self, client: str, limit: int) -> None:
        """Take one request from ``client``'s bucket.

        Args:
            client: The API key, or the address of a client without one.
            limit: Requests per minute; 0 means unlimited.

        Raises:
            HTTPError: 429 with ``Retry-After`` when the bucket is empty.
        """
        if limit <= 0:
            return
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(client)
            if bucket is None:
                if len(self._buckets) >= self._max_clients:
                    self._forget_full(now, limit)
                bucket = self._buckets[client] = _Bucket(float(limit), now)
            bucket.tokens = min(float(limit), bucket.tokens + (now - bucket.stamp) * limit / 60)
            bucket.stamp = now
            if bucket.tokens < 1:
                wait = max(1, int((1 - bucket.tokens) * 60 / limit + 0.999))
                raise HTTPError(429, f"too many requests: the limit is {limit} a minute; retry in {wait} s",
                                (("Retry-After", str(wait)),))
            bucket.tokens -= 1

    def _forget_full(self, now: float, limit: int) -> None:
        """Drop buckets that have refilled (they hold no state worth keeping); bounds memory."""
        full = [c for c, b in self._buckets.items() if b.tokens + (now - b.stamp) * limit / 60 >= limit]
        for client in full or list(self._buckets)[: len(self._buckets) // 2]:
            del self._buckets[client]


class Access:
    """Who may call, and how often."""

    def __init__(self, keys: dict[str, int] | None, default_limit: int, limiter: RateLimiter | None = None):
        """Args:
            keys: ``{key: requests per minute}``; ``None`` lets every client in.
            default_limit: Requests per minute for clients without a key of their own.
            limiter: The token buckets (tests pass one with a fake clock).
        """
        self.keys = keys
        self.default_limit = default_limit
        self.limiter = limiter or RateLimiter()

    @property
    def required(self) -> bool:
        """Whether requests must carry a key."""
        return self.keys is not None

    def admit(self, key: str | None, address: str, how: str = "pass api_key") -> str:
        """Check the key and the rate; return the identity the request is counted under.

        Args:
            key: The key the request carries, if any.
            address: The client's address (rate-limited by it when there are no keys).
            how: How this API passes a key, for the message when it is missing.

        Raises:
            HTTPError: 403 for a missing or unknown key, 429 over the rate.
        """
        if self.keys is not None:
            if not key:
                raise HTTPError(403, f"an API key is required: {how}")
            if key not in self.keys:
                raise HTTPError(403, "invalid API key")
            self.limiter.check("key:" + key, self.keys[key])
            return key
        self.limiter.check("addr:" + address, self.default_limit)
        return address
