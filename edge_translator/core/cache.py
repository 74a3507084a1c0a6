"""Caches of finished translations: an interface, and the in-memory LRU used by default.

A cache maps a :class:`CacheKey` (the model's identity, the normalized sentence and
every option that changes the output) to a :class:`CachedTranslation`. Anything with
``get`` and ``put`` will do, so a persistent translation memory can be passed in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CacheKey:
    """What decides a sentence's translation."""

    model: str
    """The bundle's identity: a digest of its files' checksums."""
    sentence: str
    """The source sentence with its whitespace runs collapsed."""
    target: str
    """The target variant, e.g. ``"zh-Hans"``."""
    beam_size: int
    max_length: int | None
    repetition_guard: bool
    shortlist: bool = True
    """Whether the bundle's shortlist restricted the output (``False`` too when it has none)."""


@dataclass(frozen=True)
class CachedTranslation:
    """A stored result."""

    text: str
    ids: tuple[int, ...]
    stop: str
    score: float


class TranslationCache(Protocol):
    """What the translator needs of a cache. Implementations must be thread-safe."""

    def get(self, key: CacheKey) -> CachedTranslation | None:
        """The stored translation, or ``None``."""

    def put(self, key: CacheKey, value: CachedTranslation) -> None:
        """Store a translation."""


class LRUCache:
    """A thread-safe in-memory cache that forgets the least recently used entries."""

    def __init__(self, max_entries: int = 4096):
        """Args:
            max_entries: Most sentences kept.
        """
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[CacheKey, CachedTranslation] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: CacheKey) -> CachedTranslation | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: CacheKey, value: CachedTranslation) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


class ChainedCache:
    """Several caches in order, e.g. the in-memory LRU before a persistent translation memory.

    ``get`` asks each in turn and copies a hit into the ones before it; ``put`` stores in all.
    """

    def __init__(self, *caches: TranslationCache):
        """Args:
            caches: The caches, fastest first.
        """
        if not caches:
            raise ValueError("ChainedCache needs at least one cache")
        self.caches = caches

    def get(self, key: CacheKey) -> CachedTranslation | None:
        for i, cache in enumerate(self.caches):
            value = cache.get(key)
            if value is not None:
                for earlier in self.caches[:i]:
                    earlier.put(key, value)
                return value
        return None

    def put(self, key: CacheKey, value: CachedTranslation) -> None:
        for cache in self.caches:
            cache.put(key, value)
