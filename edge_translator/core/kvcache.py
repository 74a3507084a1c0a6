"""A decoding batch's memory outside ONNX Runtime's arena: the K/V cache, the cross K/V and the logits.

ONNX Runtime's outputs stay in its arena as long as Python holds them. A greedy batch holds
its self-attention K/V from one call to the next, a new size at every step, so between calls
the arena was full of long-lived pieces of every size; freed pieces no longer fitted later
requests and the arena kept growing under a steady load (#9's soak: 7-11 MB a minute after
warm-up, in steps). Here a batch keeps all of that in anonymous memory mappings of its own:
the decoder reads the past from one buffer and writes the present into the other through
IO binding, and the two swap at each step. The encoder writes the cross K/V straight into
the batch's mapping too (:func:`encode_bound`), so nothing is copied. The arena then only
holds what one call needs.

With a ragged decoder graph (``GroupQueryAttention``, bundles exported since it) the cache is
one buffer per batch (:class:`SharedKV`) that the decoder reads and writes in place, each row
at its own length; with the earlier graphs it is two (:class:`KVBuffers`), the past and the
present that ``MultiHeadAttention`` writes beside it.

A finished batch hands its buffers to a :class:`BufferPool` that keeps a few whole ones for
the next batches (a fresh mapping costs a page fault per 4 KiB on first use: 7% of the
decoding time of a batch of 64 on a virtual machine) and unmaps the rest. Whole buffers
do not fragment: memory is bounded by the work in hand plus the pool's spares. Measured
(AMD EPYC, bench-load's 10-minute soak, full shape): RSS now rises and falls with the
batches in flight (750-1080 MB after warm-up) instead of in steps, but its peaks still
crept up: the pool kept the largest buffers it had ever seen and lent them, fully
resident, to smaller batches. Now spares go after :data:`SPARE_AGE_S` untaken, and a spare
lent for fewer values hands back the pages past them (with ``memory="steady"``, 5-minute
soak: peak 455 MB, no upward trend, against 906 MB rising 11 MB/min).
"""

from __future__ import annotations

import mmap
import threading
import time

import numpy as np

from .logsoftmax import INPUT, OUTPUT

#: Positions a batch's K/V buffers hold at first, and add each time a row needs more: growing
#: by a fixed step wastes at most that many positions (doubling wasted up to half the buffer:
#: 32 rows at 130 positions held 256), and a growth's one copy is what every decoder step
#: copies anyway.
INITIAL_CAPACITY = 64

#: The batch-invariant graphs (int8r, q8, q4) pad the source axis of the cross-attention
#: K/V to a multiple of this; their encoder names that output axis :data:`ALIGNED_SOURCE`,
#: the others :data:`PLAIN_SOURCE` (the export writes these names, the runtime reads them).
SOURCE_ALIGN = 16
ALIGNED_SOURCE, PLAIN_SOURCE = "aligned_source_length", "source_length"

#: Buffers a pool keeps for later batches (one greedy batch takes four: its K/V, the cross
#: K/V, the logits and their log-softmax; five with an earlier bundle's decoder, whose K/V
#: take two); the smallest are unmapped first.
SPARE_BUFFERS = 5

#: Seconds a spare is kept for a later batch after it came back (see :class:`BufferPool`).
SPARE_AGE_S = 2.0

#: A batch lays its cross K/V out anew, smaller, once the rows left need this many fewer
#: source positions than it holds (rows that join, :meth:`BoundDecoder.admit`, can make it
#: hold many more than most rows need): every step reads the cross K/V of every row (at 32
#: rows of the opus-mt-en-zh shape, 0.8 MB a position, as much as the weights at 64
#: positions), and a relayout costs about one step's reading.
SOURCE_SLACK = 32

#: What one more encoder call costs, in source positions (:func:`encoder_groups`): on the
#: opus-mt-en-zh shape a call took about 2.9 ms besides 0.35 ms a position (AMD EPYC, 2
#: threads, int8r; 1 row of 8 tokens: 5.8 ms, 16 rows of 279: 1.62 s).
ENCODER_CALL_POSITIONS = 8


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
    for good (the pool kept the five largest buffers it had ever seen, so under a long
    load it held ever more). A buffer that goes out of it is unmapped as soon as nothing
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

    Moving every later row down by one instead (the kept rows in their old order) copied
    the K/V cache and the cross K/V of all of them each time a row finished, and rows
    finish at almost every step once rows join a batch that is decoding: on the full
    opus-mt-en-zh shape, 16 callers, that was 14 ms a compaction, a fifth of the decoding
    time. Each moved row reads from a place past the rows kept and writes into one that a
    leaving row held, so the rows can be moved in place in this order.

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


def _aligned(length, align: int = SOURCE_ALIGN):
    """``length`` (an int or an array of them) rounded up to a multiple of ``align``."""
    return -(-length // align) * align


def _bind(binding, name: str, array: np.ndarray, output: bool = False) -> None:
    if not array.flags.c_contiguous:  # bound by address and shape: the layout must be plain
        raise ValueError(f"{name} must be C-contiguous to be bound")
    bind = binding.bind_output if output else binding.bind_input
    bind(name, "cpu", 0, array.dtype, array.shape, array.ctypes.data)


def cross_alignment(encoder) -> int | None:
    """What the encoder rounds the cross K/V's source axis up to a multiple of (1: nothing),
    from the name of that axis in its outputs; ``None`` for a graph that names it neither way."""
    names = {o.shape[2] if len(o.shape) == 4 else None for o in encoder.get_outputs() if o.name.startswith("cross_")}
    return {ALIGNED_SOURCE: SOURCE_ALIGN, PLAIN_SOURCE: 1}.get(names.pop()) if len(names) == 1 else None


def encoder_groups(lengths, align: int = 1, call_positions: int | None = None) -> list[np.ndarray]:
    """Split a batch's rows into groups for the encoder, each run padded to its own longest row.

    One call pads every row to the batch's longest source, and the encoder's cost is its
    positions, padding included. A batch taken from a length-sorted queue is mostly of one
    length, but its last batch holds the long tail: of 256 prose sentences at batch 64 the
    last batch runs from 58 to 279 tokens, and its one padded call took 7.3 s of the job's
    25.6 (2.7 s in groups).
    The groups are the split of the rows, sorted by length, that runs the fewest positions
    (each rounded up to ``align``, as the encoder lays its K/V out), counting each call as
    ``call_positions`` more; found exactly, by dynamic programming over the split points.

    Args:
        lengths: Each row's source length (its mask's sum).
        align: The encoder's :func:`cross_alignment`.
        call_positions: The cost of one more call, in positions (``None``:
            :data:`ENCODER_CALL_POSITIONS`).

    Returns:
        The groups' row indices (ascending within each group), shortest rows first; one
        group holding every row when a split saves nothing.
    """
    call_positions = ENCODER_CALL_POSITIONS if call_positions is None else call_positions
    lengths = np.maximum(np.asarray(lengths, np.int64), 1)  # a call needs a position
    order = np.argsort(lengths, kind="stable")
    width = _aligned(lengths[order], align)
    rows = len(width)
    best = np.zeros(rows + 1)  # best[j]: the cheapest split of the first j sorted rows
    cut = np.zeros(rows + 1, np.int64)
    starts = np.arange(rows)
    for end in range(1, rows + 1):  # the group that ends at row end - 1 is padded to its width
        costs = best[:end] + (end - starts[:end]) * width[end - 1] + call_positions
        cut[end] = int(np.argmin(costs))
        best[end] = costs[cut[end]]
    groups, end = [], rows
    while end > 0:
        groups.append(np.sort(order[cut[end]:end]))
        end = cut[end]
    return groups[::-1]


def encode_bound(encoder, input_ids: np.ndarray, mask: np.ndarray, layers: int, heads: int, head_dim: int,
                 align: int = 1, run_options=None, pool: BufferPool | None = None,
                 call_positions: int | None = None) -> tuple[np.ndarray, list, list]:
    """Run the encoder with its cross K/V written into one buffer from ``pool``.

    The encoder's largest outputs (a batch of 32 sources of 60 tokens: 94 MB on the
    opus-mt-en-zh shape) then never pass through ONNX Runtime's arena, which kept the
    largest such piece it was ever asked for, and the decoder copies nothing
    (:class:`BoundDecoder` with ``cross_buffer``). Rows of very different lengths are
    encoded in groups (:func:`encoder_groups`), each into a spare buffer of its own size
    and copied in, the positions past a group's length zeroed: the decoder masks them.
    Each row's K/V are those of the encoder run on the batch at once, to the float
    near-ties of any two batches.

    Args:
        encoder: The encoder's ONNX Runtime session (outputs ``cross_key.i`` and
            ``cross_value.i``, float32 ``[rows, heads, source, head_dim]``).
        input_ids: ``[rows, source]`` int64; ``mask`` likewise, right-padded (each row's
            ones first).
        align: The encoder's :func:`cross_alignment`: the K/V hold ``source`` rounded up
            to a multiple of it.

    Returns:
        ``(buffer, cross_k, cross_v)``: the flat buffer, and per layer the keys and the
        values, views of it that together form one ``[2 * layers, rows, heads, source,
        head_dim]`` array (keys of layers 0..L-1, then values).
    """
    pool = pool if pool is not None else BufferPool(spares=0)
    rows, source = input_ids.shape
    shape = (2 * layers, rows, heads, _aligned(source, align), head_dim)
    count = int(np.prod(shape))
    buffer = pool.take(count)
    cross = buffer[:count].reshape(shape)
    input_ids, mask = np.ascontiguousarray(input_ids, np.int64), np.ascontiguousarray(mask, np.int64)
    lengths = mask.sum(axis=1)
    groups = encoder_groups(lengths, align, call_positions) if rows > 1 else [np.arange(rows)]
    try:
        if len(groups) == 1:
            _encode_into(encoder, input_ids, mask, cross, layers, run_options)
        else:
            for group in groups:
                width = max(1, int(lengths[group].max()))
                _encode_group(encoder, input_ids, mask, width, group, cross, align, run_options, pool)
    except BaseException:
        pool.give(buffer)
        raise
    return buffer, [cross[i] for i in range(layers)], [cross[layers + i] for i in range(layers)]


def _encode_group(encoder, input_ids: np.ndarray, mask: np.ndarray, width: int, group: np.ndarray,
                  cross: np.ndarray, align: int, run_options, pool: BufferPool) -> None:
    """Encode the rows ``group`` of a right-padded batch, cut to ``width`` positions, into a
    spare buffer, and copy their cross K/V into ``cross``, zeros past them."""
    held = _aligned(width, align)
    shape = (cross.shape[0], len(group), cross.shape[2], held, cross.shape[4])
    count = int(np.prod(shape))
    spare = pool.take(count)
    try:
        part = spare[:count].reshape(shape)
        _encode_into(encoder, np.ascontiguousarray(input_ids[group, :width]), np.ascontiguousarray(mask[group, :width]),
                     part, cross.shape[0] // 2, run_options)
        cross[:, group, :, :held] = part
        cross[:, group, :, held:] = 0.0
    finally:
        pool.give(spare)


def _encode_into(encoder, input_ids: np.ndarray, mask: np.ndarray, cross: np.ndarray, layers: int,
                 run_options) -> None:
    """One encoder call with its cross K/V bound to ``cross`` (``[2 * layers, rows, ...]``)."""
    binding = encoder.io_binding()
    _bind(binding, "input_ids", input_ids)
    _bind(binding, "attention_mask", mask)
    for i in range(layers):
        _bind(binding, f"cross_key.{i}", cross[i], output=True)
        _bind(binding, f"cross_value.{i}", cross[layers + i], output=True)
    encoder.run_with_iobinding(binding, run_options)


class BoundDecoder:
    """The decoder calls of one greedy batch, through IO binding, over memory the batch owns.

    It holds the batch's K/V (:class:`KVBuffers`), the encoder's cross K/V (written there
    by :func:`encode_bound`, or copied in), the logits buffer and, with a normaliser, a
    log-probabilities buffer, all mapped.
    """

    def __init__(self, session, cross_k: list, cross_v: list, mask: np.ndarray, width: int,
                 run_options=None, pool: BufferPool | None = None, capacity: int = INITIAL_CAPACITY,
                 normalizer=None, ragged: bool | None = None, cross_buffer: np.ndarray | None = None):
        """Take the cross K/V and bind what stays the same from step to step.

        Args:
            session: The decoder's ONNX Runtime session.
            cross_k: The encoder's cross-attention keys, one ``[rows, heads, source, head_dim]``
                array a layer; ``cross_v`` likewise.
            mask: The source attention mask, ``[rows, source]``.
            width: Columns of the logits (the vocabulary, or the restricted output layer).
            run_options: Passed to every call, or ``None``.
            pool: Where the buffers come from and go back to (:meth:`release`); ``None``: new
                mappings, unmapped when the batch is freed.
            capacity: Positions the K/V buffers hold before they first grow.
            normalizer: A session of :data:`.logsoftmax.GRAPH` for :meth:`log_probs`, or
                ``None`` (then :meth:`log_probs` is not available).
            ragged: The decoder graph takes ``past_lengths`` and writes the new K/V into the
                past's memory (:class:`SharedKV`); ``False``: it returns a new present
                (:class:`KVBuffers`); ``None``: whichever the session's inputs say.
            cross_buffer: The buffer from ``pool`` that ``cross_k`` and ``cross_v`` are
                views of, as :func:`encode_bound` returns them: this decoder takes it over
                and copies nothing. ``None``: they are copied into a buffer of the pool.
        """
        self.session, self.run_options = session, run_options
        self.pool = pool if pool is not None else BufferPool(spares=0)
        self.layers, self.width = len(cross_k), width
        rows, heads, _, head_dim = cross_k[0].shape
        if ragged is None:
            ragged = any(i.name == "past_lengths" for i in session.get_inputs())
        self.ragged = ragged
        self.kv = (SharedKV if ragged else KVBuffers)(self.layers, rows, heads, head_dim, capacity, self.pool)
        size = 2 * self.layers * cross_k[0].size
        if cross_buffer is None:
            cross_buffer = self.pool.take(size)
            self.cross = cross_buffer[:size].reshape(2 * self.layers, *cross_k[0].shape)
            for segment, values in enumerate(list(cross_k) + list(cross_v)):
                self.cross[segment] = values
        else:
            self.cross = cross_buffer[:size].reshape(2 * self.layers, *cross_k[0].shape)
            if cross_k[0].ctypes.data != self.cross[0].ctypes.data or \
                    cross_v[-1].ctypes.data != self.cross[-1].ctypes.data:
                raise ValueError("cross_k and cross_v must be the views of cross_buffer that encode_bound returns")
        self._full = self.cross
        """The cross K/V of every row the buffer is laid out for; :attr:`cross` is its first rows."""
        self.source_lengths = np.asarray(mask).sum(axis=1)
        """Each row's own source length (its mask's ones; the cross K/V may hold more)."""
        self._owned = [cross_buffer, self.pool.take(rows * width)]
        self.mask = np.ascontiguousarray(mask)
        self.logits = self._owned[1][: rows * width].reshape(rows, 1, width)
        self.normalizer = normalizer
        self._post = None
        if normalizer is not None:
            self._owned.append(self.pool.take(rows * width))
            self._log_probs = self._owned[2][: rows * width].reshape(rows, 1, width)
            self._post = normalizer.io_binding()
        self.tokens: np.ndarray | None = None
        self.binding = session.io_binding()
        self._names = [(f"past_{kind}.{i}", f"present_{kind}.{i}") for kind in ("key", "value")
                       for i in range(self.layers)]  # in segment order
        self._bind_rows()

    def _bind_rows(self) -> None:
        """Bind the inputs that only change when rows leave."""
        _bind(self.binding, "encoder_attention_mask", self.mask)
        for i in range(self.layers):
            _bind(self.binding, f"cross_key.{i}", self.cross[i])
            _bind(self.binding, f"cross_value.{i}", self.cross[self.layers + i])

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """Run the decoder on one new token a row ``[rows, 1]``; return the logits ``[rows, 1, width]``.

        The logits are a view that the next step overwrites.
        """
        kv = self.kv
        kv.reserve()
        self.tokens = np.ascontiguousarray(tokens, np.int64)  # bound by address: kept alive
        _bind(self.binding, "input_ids", self.tokens)
        if self.ragged:
            return self._step_in_place()
        past, present, step = kv.addresses()
        past_shape = (kv.rows, kv.heads, kv.length, kv.head_dim)
        present_shape = (kv.rows, kv.heads, kv.length + 1, kv.head_dim)
        bind_input, bind_output = self.binding.bind_input, self.binding.bind_output
        for segment, (past_name, present_name) in enumerate(self._names):
            bind_input(past_name, "cpu", 0, np.float32, past_shape, past + segment * step)
            bind_output(present_name, "cpu", 0, np.float32, present_shape, present + segment * step)
        logits = self.logits[: kv.rows]
        _bind(self.binding, "logits", logits, output=True)
        self.session.run_with_iobinding(self.binding, self.run_options)
        kv.advance()
        return logits

    def _step_in_place(self) -> np.ndarray:
        kv = self.kv
        _bind(self.binding, "past_lengths", kv.lengths)
        bind_input, bind_output = self.binding.bind_input, self.binding.bind_output
        for segment, (past_name, present_name) in enumerate(self._names):
            address = kv.address + segment * kv.step
            bind_input(past_name, "cpu", 0, np.float32, kv.shape, address)
            bind_output(present_name, "cpu", 0, np.float32, kv.shape, address)
        logits = self.logits[: kv.rows]
        _bind(self.binding, "logits", logits, output=True)
        self.session.run_with_iobinding(self.binding, self.run_options)
        kv.advance()
        return logits

    def log_probs(self) -> np.ndarray:
        """The log-softmax of the logits :meth:`step` returned last, ``[rows, 1, width]``.

        Call it before anything writes into those logits (masking a column); the result is
        a view that the next call overwrites.

        Raises:
            RuntimeError: If the decoder was made without a normaliser.
        """
        if self._post is None:
            raise RuntimeError("this BoundDecoder has no normalizer session")
        rows = self.kv.rows
        logits, out = self.logits[:rows], self._log_probs[:rows]
        _bind(self._post, INPUT, logits)
        _bind(self._post, OUTPUT, out, output=True)
        self.normalizer.run_with_iobinding(self._post, self.run_options)
        return out

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows, in this order: row ``i`` comes from position ``slots[i]``
        (ascending slots, or :func:`compaction_order`'s)."""
        self.kv.keep(slots)
        for row, slot in enumerate(slots):  # in place: no row is overwritten before it is read
            if row != slot:
                self.cross[:, row] = self.cross[:, slot]
        self.cross = self._full[:, : len(slots)]
        self.mask = self.mask[slots]
        self.source_lengths = self.source_lengths[slots]
        needed = _aligned(int(self.source_lengths.max(initial=1)))
        if self._full.shape[3] - needed >= SOURCE_SLACK:  # the rows with the longest sources have left
            self._relayout_cross(self._full.shape[1], needed)
        self._bind_rows()

    def _relayout_cross(self, capacity: int, length: int) -> None:
        """Lay the cross K/V and the mask out anew for ``capacity`` rows and ``length``
        source positions (one copy of the rows held; positions past what was held are zeros)."""
        _, rows, heads, held, head_dim = self.cross.shape
        keep = min(held, length)
        count = 2 * self.layers * capacity * heads * length * head_dim
        buffer = self.pool.take(count)
        full = buffer[:count].reshape(2 * self.layers, capacity, heads, length, head_dim)
        full[:, :rows, :, :keep] = self.cross[:, :, :, :keep]
        full[:, :rows, :, keep:] = 0.0  # a pool's spare holds anything, NaN included: masked is not enough
        self.cross = self._full = None
        self.pool.give(self._owned[0])
        self._owned[0], self._full, self.cross = buffer, full, full[:, :rows]
        mask = np.zeros((rows, length), np.int64)
        mask[:, : min(length, self.mask.shape[1])] = self.mask[:, :length]
        self.mask = mask

    def admit(self, cross_k: list, cross_v: list, mask: np.ndarray, row_capacity: int = 0) -> None:
        """Seat new rows after the current ones, each with an empty self-attention cache:
        from the next :meth:`step` on they decode beside the others (continuous batching).

        Only a ragged decoder graph can do this: its rows sit at positions of their own.
        The cross K/V and the masks share one source length, the longest held; a row's
        positions past its own source are zeros and masked out, as padding in any batch is.
        The buffers are laid out for ``row_capacity`` rows (at least the rows then held) and
        the longest source, rounded up to :data:`SOURCE_ALIGN`, whenever the rows or a source
        no longer fit, with one copy of what is held; otherwise nothing already held moves.
        Once the rows that needed the longest sources have left, :meth:`keep` lays the cross
        K/V out for fewer positions (:data:`SOURCE_SLACK`).

        Args:
            cross_k: The new rows' cross-attention keys from the encoder, one ``[count,
                heads, source, head_dim]`` array a layer; ``cross_v`` likewise.
            mask: Their source attention mask, ``[count, source]`` or narrower.
            row_capacity: Rows to lay the buffers out for when they must grow.

        Raises:
            ValueError: If the decoder is not ragged, or the shapes do not fit the batch.
        """
        if not self.ragged:
            raise ValueError("rows can join a decoding batch only with a ragged decoder graph; "
                             "export the bundle again (or `edge-translator upgrade` it)")
        count, heads, source, head_dim = cross_k[0].shape
        if len(cross_k) != self.layers or len(cross_v) != self.layers or (heads, head_dim) != self._full.shape[2::2] \
                or mask.shape[0] != count or mask.shape[1] > source:
            raise ValueError("the new rows' cross K/V and mask do not fit this batch")
        rows = self.kv.rows
        total, held = rows + count, self._full.shape[3]
        if total > self._full.shape[1] or source > held:
            self._relayout_cross(max(total, row_capacity, self._full.shape[1]), max(held, _aligned(source)))
        capacity, length = self._full.shape[1], self._full.shape[3]
        new = self._full[:, rows:total]
        for segment, values in enumerate(list(cross_k) + list(cross_v)):
            new[segment, :, :, :source] = values
        new[:, :, :, source:] = 0.0
        self.cross = self._full[:, :total]
        widened = np.zeros((total, length), np.int64)  # one width for all: the longest source held
        widened[:rows, : self.mask.shape[1]] = self.mask
        widened[rows:, : mask.shape[1]] = mask
        self.mask = widened
        self.source_lengths = np.concatenate([self.source_lengths, np.asarray(mask).sum(axis=1)])
        for k in range(1, len(self._owned)):  # the logits (and their log-softmax), one row each
            if len(self._owned[k]) < capacity * self.width:
                self.logits = self._log_probs = None
                self.pool.give(self._owned[k])
                self._owned[k] = self.pool.take(capacity * self.width)
        self.logits = self._owned[1][: capacity * self.width].reshape(capacity, 1, self.width)
        if len(self._owned) > 2:
            self._log_probs = self._owned[2][: capacity * self.width].reshape(capacity, 1, self.width)
        self.kv.admit(count, capacity)
        self._bind_rows()

    def release(self) -> None:
        """Give every buffer back to the pool; this object must not be used afterwards."""
        self.binding = self._post = self.cross = self.logits = self._log_probs = None  # bindings hold addresses
        self.kv.release()
        for buffer in self._owned:
            self.pool.give(buffer)
        self._owned = []
