"""Mapped buffers for a decoding batch's K/V cache, cross K/V and logits, outside ONNX Runtime's arena.

A greedy batch keeps its self-attention K/V, its cross K/V and its logits in anonymous
memory mappings of its own, which the decoder reads and writes through IO binding
(:mod:`.iobinding`), so that ONNX Runtime's arena only holds what one call needs.

With a ragged decoder graph (``GroupQueryAttention``, bundles exported since it) the cache is
one buffer per batch (:class:`SharedKV`) that the decoder reads and writes in place, each row
at its own length; with the earlier graphs it is two (:class:`KVBuffers`), the past and the
present that ``MultiHeadAttention`` writes beside it.

A finished batch hands its buffers to a :class:`BufferPool` that keeps a few whole ones for
the next batches (a fresh mapping costs a page fault per 4 KiB on first use) and unmaps the
rest. Whole buffers do not fragment: memory is bounded by the work in hand plus the pool's
spares. So that the pool does not keep the largest buffers it ever saw and lend them, fully
resident, to smaller batches, spares go after :data:`SPARE_AGE_S` untaken, and a spare lent
for fewer values hands back the pages past them.
"""

from __future__ import annotations

import mmap
import threading
import time

import numpy as np

#: Positions a batch's K/V buffers hold at first, and add each time a row needs more: growing
#: by a fixed step wastes at most that many positions (doubling wastes up to half the
#: buffer), and a growth's one copy is what every decoder step copies anyway.
INITIAL_CAPACITY = 64

#: Buffers a pool keeps for later batches (one greedy batch takes four: its K/V, the cross
#: K/V, the logits and their log-softmax; five with an earlier bundle's decoder, whose K/V
#: take two); the smallest are unmapped first.
SPARE_BUFFERS = 5

#: Seconds a spare is kept for a later batch after it came back (see :class:`BufferPool`).
SPARE_AGE_S = 2.0


def mapped(shape: tuple[int, ...], dtype=np.float32) -> np.ndarray:
    """A zeroed array in an anonymous memory mapping of its own.

    The mapping is unmapped, and its memory given back to the system, when the array and
    every view of it are freed; pages are only taken when first written.
    """
    count = int(np.prod(shape))
    size = max(count * np.dtype(dtype).itemsize, 1)
    if hasattr(mmap, "MAP_ANONYMOUS"):  # private: a plain mapping would be shared memory
        buffer = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    else:
        buffer = mmap.mmap(-1, size)
    return np.frombuffer(buffer, dtype, count=count).reshape(shape)


def _drop_pages(buffer: np.ndarray, keep: int) -> None:
    """Give the system back the pages of a mapped buffer past its first ``keep`` values (they
    read as zeros afterwards), so that a large spare lent for a small batch holds no more
    memory than the batch uses; pages come back, zeroed, as they are written again."""
    mapping = buffer.base
    while isinstance(mapping, np.ndarray):
        mapping = mapping.base
    mapping = getattr(mapping, "obj", mapping)
    if not isinstance(mapping, mmap.mmap) or not hasattr(mapping, "madvise") or not hasattr(mmap, "MADV_DONTNEED"):
        return
    start = -(-keep * buffer.itemsize // mmap.PAGESIZE) * mmap.PAGESIZE
    if start < len(mapping):
        mapping.madvise(mmap.MADV_DONTNEED, start, len(mapping) - start)


class BufferPool:
    """Flat float32 mapped buffers that finished batches gave back, for the next ones.

    Thread-safe. It keeps at most ``spares`` buffers, the largest, each for at most
    ``max_age_s`` seconds after it came back: under a steady load the next batch takes a
    spare within milliseconds, while one kept for a rare large batch would hold its memory
    for good. A buffer that goes out of it is unmapped as soon as nothing
    else holds it.
    """

    def __init__(self, spares: int = SPARE_BUFFERS, max_age_s: float = SPARE_AGE_S, clock=time.monotonic):
        if spares < 0 or max_age_s < 0:
            raise ValueError(f"spares and max_age_s must not be negative, not {spares} and {max_age_s}")
        self.spares, self.max_age_s, self.clock = spares, max_age_s, clock
        self._free: list[tuple[np.ndarray, float]] = []  # (buffer, when it came back), largest first
        self._lock = threading.Lock()

    def _expire(self) -> None:
        oldest = self.clock() - self.max_age_s
        self._free = [(b, t) for b, t in self._free if t >= oldest]

    def take(self, count: int) -> np.ndarray:
        """A flat buffer of at least ``count`` values: the smallest spare that is big enough,
        else a new mapping. Its contents are undefined."""
        with self._lock:
            self._expire()
            fits = [k for k, (b, _) in enumerate(self._free) if len(b) >= count]
            spare = self._free.pop(min(fits, key=lambda k: len(self._free[k][0])))[0] if fits else None
        if spare is None:
            return mapped((max(count, 1),))
        _drop_pages(spare, count)
        return spare

    def give(self, buffer: np.ndarray) -> None:
        """Return a buffer from :meth:`take`; the caller must hold no view of it any more."""
        with self._lock:
            self._expire()
            self._free.append((buffer, self.clock()))
            self._free.sort(key=lambda entry: len(entry[0]), reverse=True)
            del self._free[self.spares:]

    def clear(self) -> None:
        """Let every spare go (each is unmapped once nothing holds it)."""
        with self._lock:
            self._free.clear()

    @property
    def spare_bytes(self) -> int:
        """Bytes held for later batches (spares past their age included until the next call)."""
        with self._lock:
            return sum(b.nbytes for b, _ in self._free)


class KVBuffers:
    """Self-attention K and V of every layer of one batch, in two mapped buffers.

    Each buffer holds ``2 * layers`` segments (the keys of layers 0..L-1, then their values),
    each laid out ``[rows, heads, capacity, head_dim]``; a segment's first
    ``rows * heads * length * head_dim`` values are a contiguous ``[rows, heads, length,
    head_dim]`` array, which is what the decoder reads and writes.
    """

    def __init__(self, layers: int, rows: int, heads: int, head_dim: int, capacity: int = INITIAL_CAPACITY,
                 pool: BufferPool | None = None):
        """Make empty buffers (length 0) for ``rows`` rows and ``capacity`` positions.

        Args:
            pool: Where buffers come from and go back to (:meth:`release`); ``None``: a
                pool of this batch's own, which keeps nothing.
        """
        if min(layers, rows, heads, head_dim, capacity) < 1:
            raise ValueError("layers, rows, heads, head_dim and capacity must all be at least 1")
        self.segments, self.heads, self.head_dim = 2 * layers, heads, head_dim
        self.rows, self.length, self.growth = rows, 0, capacity
        self.pool = pool if pool is not None else BufferPool(spares=0)
        self._buffers: list[np.ndarray] = []
        self._allocate(rows, capacity)

    def _allocate(self, rows: int, capacity: int) -> None:
        self.capacity, self._stride = capacity, rows * self.heads * capacity * self.head_dim
        self._buffers = [self.pool.take(self.segments * self._stride) for _ in range(2)]
        self._addresses = [b.ctypes.data for b in self._buffers]
        self._current = 0

    @property
    def buffers(self) -> tuple[np.ndarray, ...]:
        """The mapped buffers held (the past's and the present's)."""
        return tuple(self._buffers)

    def addresses(self) -> tuple[int, int, int]:
        """Where the past and the present begin, and the bytes from one segment to the next:
        segment ``s`` of the past is at ``past + s * step`` (what binding needs, without views)."""
        return (self._addresses[self._current], self._addresses[1 - self._current],
                self._stride * self._buffers[0].itemsize)

    def release(self) -> None:
        """Give the buffers back to the pool; nothing of this object may be used afterwards."""
        for buffer in self._buffers:
            self.pool.give(buffer)
        self._buffers = []

    def _view(self, buffer: int, segment: int, rows: int, length: int) -> np.ndarray:
        start = segment * self._stride
        size = rows * self.heads * length * self.head_dim
        return self._buffers[buffer][start: start + size].reshape(rows, self.heads, length, self.head_dim)

    def past(self, segment: int) -> np.ndarray:
        """The K/V so far of one segment: ``[rows, heads, length, head_dim]``."""
        return self._view(self._current, segment, self.rows, self.length)

    def present(self, segment: int) -> np.ndarray:
        """Where the next call writes that segment, one position longer than :meth:`past`."""
        return self._view(1 - self._current, segment, self.rows, self.length + 1)

    def reserve(self) -> None:
        """Make room for one more position, growing by the first capacity (one copy) when full."""
        if self.length < self.capacity:
            return
        old, buffers = [self.past(s) for s in range(self.segments)], self._buffers
        self._allocate(self.rows, self.capacity + self.growth)
        for segment, values in enumerate(old):
            self.past(segment)[...] = values
        del old
        for buffer in buffers:
            self.pool.give(buffer)

    def advance(self) -> None:
        """The present just written becomes the past."""
        self._current = 1 - self._current
        self.length += 1

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows (positions in the batch, ascending), copied into the other buffer."""
        for segment in range(self.segments):
            target = self._view(1 - self._current, segment, len(slots), self.length)
            np.take(self.past(segment), slots, axis=0, out=target, mode="clip")  # "raise" would buffer
        self._current = 1 - self._current
        self.rows = len(slots)


class SharedKV:
    """Self-attention K and V of every layer of one batch, for a ragged decoder graph
    (``GroupQueryAttention``), in one mapped buffer that the decoder reads and writes in place.

    The buffer holds ``2 * layers`` segments (keys of layers 0..L-1, then values), each laid
    out ``[rows, heads, capacity, head_dim]``; row ``r`` holds ``lengths[r]`` positions. A step
    writes each row's new position into the same memory it reads the past from, so nothing is
    copied but the new position (:class:`KVBuffers` double-buffers and copies the whole past
    every step), and the cache takes half the memory.
    """

    def __init__(self, layers: int, rows: int, heads: int, head_dim: int, capacity: int = INITIAL_CAPACITY,
                 pool: BufferPool | None = None):
        """Make an empty cache (every length 0) for ``rows`` rows and ``capacity`` positions.

        Args:
            pool: Where the buffer comes from and goes back to (:meth:`release`); ``None``: a
                pool of this batch's own, which keeps nothing.
        """
        if min(layers, rows, heads, head_dim, capacity) < 1:
            raise ValueError("layers, rows, heads, head_dim and capacity must all be at least 1")
        self.segments, self.heads, self.head_dim = 2 * layers, heads, head_dim
        self.rows, self.growth = rows, capacity
        self.lengths = np.zeros(rows, np.int32)
        """Positions each row holds (bound as the graph's ``past_lengths``)."""
        self.pool = pool if pool is not None else BufferPool(spares=0)
        self._buffer: np.ndarray | None = None
        self._allocate(rows, capacity)

    def _allocate(self, row_capacity: int, capacity: int) -> None:
        self.row_capacity, self.capacity = row_capacity, capacity
        """Rows and positions the buffer is laid out for."""
        self._stride = row_capacity * self.heads * capacity * self.head_dim
        self._buffer = self.pool.take(self.segments * self._stride)
        self.address = self._buffer.ctypes.data
        """Where segment 0 begins; segment ``s`` is at ``address + s * step``."""
        self.step = self._stride * self._buffer.itemsize
        """Bytes from one segment to the next."""

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """The shape a segment is bound with: ``[rows, heads, capacity, head_dim]``."""
        return self.rows, self.heads, self.capacity, self.head_dim

    @property
    def buffers(self) -> tuple[np.ndarray, ...]:
        """The mapped buffer held."""
        return () if self._buffer is None else (self._buffer,)

    def past(self, segment: int) -> np.ndarray:
        """One segment's positions up to the longest row's length (a view, not contiguous)."""
        return self.segment(segment)[:, :, : int(self.lengths.max(initial=0))]

    def segment(self, segment: int) -> np.ndarray:
        """One segment's memory, ``[rows, heads, capacity, head_dim]`` (row r valid up to ``lengths[r]``)."""
        start = segment * self._stride
        return self._buffer[start: start + self.rows * self.heads * self.capacity * self.head_dim].reshape(self.shape)

    def reserve(self, new: int = 1) -> None:
        """Make room for ``new`` more positions in every row, growing by the first capacity
        (one copy of what the rows hold) when the longest row would not fit."""
        needed = int(self.lengths.max(initial=0)) + new
        if needed <= self.capacity:
            return
        self._relayout(self.row_capacity, self.capacity + self.growth * -(-(needed - self.capacity) // self.growth))

    def _relayout(self, row_capacity: int, capacity: int) -> None:
        """Move what the rows hold into a buffer laid out anew (one copy)."""
        longest = int(self.lengths.max(initial=0))
        old = [self.segment(s)[:, :, :longest] for s in range(self.segments)]
        buffer = self._buffer
        self._allocate(row_capacity, capacity)
        for segment, values in enumerate(old):
            self.segment(segment)[:, :, :longest] = values
        del old
        self.pool.give(buffer)

    def admit(self, count: int, row_capacity: int = 0) -> None:
        """Add ``count`` empty rows (length 0) after the current ones.

        Within the rows the buffer is laid out for, nothing is copied; beyond them the
        buffer is laid out anew for ``row_capacity`` rows (at least the rows then held),
        with one copy of what the rows hold.
        """
        if count < 1:
            raise ValueError(f"count must be at least 1, not {count}")
        rows = self.rows + count
        if rows > self.row_capacity:
            self._relayout(max(rows, row_capacity), self.capacity)
        self.lengths = np.concatenate([self.lengths, np.zeros(count, np.int32)])
        self.rows = rows

    def advance(self, new: int = 1) -> None:
        """The positions just written become part of every row's past."""
        self.lengths += new

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows, in this order, moved in place: row ``i`` comes from position
        ``slots[i]`` of the batch (ascending slots, or :func:`compaction_order`'s).

        Each moved row copies its own positions only; what lies past a row's length is never read.
        """
        segments = [self.segment(s) for s in range(self.segments)]
        for row, slot in enumerate(slots):  # no row is overwritten before it is read (see compaction_order)
            if row != slot and (length := int(self.lengths[slot])):
                for values in segments:
                    values[row, :, :length] = values[slot, :, :length]
        self.lengths = np.ascontiguousarray(self.lengths[slots])
        self.rows = len(slots)  # segments stay where they are: only their first rows are used

    def release(self) -> None:
        """Give the buffer back to the pool; nothing of this object may be used afterwards."""
        if self._buffer is not None:
            self.pool.give(self._buffer)
        self._buffer = None


def compaction_order(slots, rows: int) -> np.ndarray:
    """The order in which a batch of ``rows`` keeps the rows at ``slots`` (ascending) with
    the fewest moves: a kept row stays where it is unless it lies past the rows kept, and
    those fill the places of the rows that left, in turn.

    Moving every later row down by one instead (the kept rows in their old order) would copy
    the K/V cache and the cross K/V of all of them each time a row finished, and rows
    finish at almost every step once rows join a batch that is decoding. Each moved row
    reads from a place past the rows kept and writes into one that a leaving row held, so
    the rows can be moved in place in this order.

    Args:
        slots: Positions of the rows to keep, ascending.
        rows: Rows in the batch now.

    Returns:
        ``order`` [len(slots)] int64: row ``i`` of the kept batch is row ``order[i]`` of this one.
    """
    slots = np.asarray(slots, np.int64)
    kept = len(slots)
    if kept and (slots[-1] >= rows or np.any(np.diff(slots) <= 0)):
        raise ValueError(f"slots must be distinct positions below {rows}, ascending")
    order = np.arange(kept, dtype=np.int64)
    left = np.ones(kept, bool)  # not np.setdiff1d: it loads the masked arrays, which the apps leave out
    left[slots[slots < kept]] = False
    order[left] = slots[slots >= kept]
    return order
