"""A decoding batch's memory outside ONNX Runtime's arena: the K/V cache, the cross K/V and the logits.

ONNX Runtime's outputs stay in its arena as long as Python holds them. A greedy batch holds
its self-attention K/V from one call to the next, a new size at every step, so between calls
the arena was full of long-lived pieces of every size; freed pieces no longer fitted later
requests and the arena kept growing under a steady load (#9's soak: 7-11 MB a minute after
warm-up, in steps). Here a batch keeps all of that in anonymous memory mappings of its own:
the decoder reads the past from one buffer and writes the present into the other through
IO binding, and the two swap at each step. The arena then only holds what one call needs.

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
crept up. Lending a spare only for requests of at least half its size changed nothing
measurable (peak 1068 MB, end 936).
"""

from __future__ import annotations

import mmap
import threading

import numpy as np

from .logsoftmax import INPUT, OUTPUT

#: Positions a batch's K/V buffers hold at first, and add each time a row needs more: growing
#: by a fixed step wastes at most that many positions (doubling wasted up to half the buffer:
#: 32 rows at 130 positions held 256), and a growth's one copy is what every decoder step
#: copies anyway.
INITIAL_CAPACITY = 64

#: Buffers a pool keeps for later batches (one greedy batch takes four: its K/V, the cross
#: K/V, the logits and their log-softmax; five with an earlier bundle's decoder, whose K/V
#: take two); the smallest are unmapped first.
SPARE_BUFFERS = 5


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


class BufferPool:
    """Flat float32 mapped buffers that finished batches gave back, for the next ones.

    Thread-safe. It keeps at most ``spares`` buffers, the largest; a buffer that goes out
    of it is unmapped as soon as nothing else holds it.
    """

    def __init__(self, spares: int = SPARE_BUFFERS):
        self.spares = spares
        self._free: list[np.ndarray] = []
        self._lock = threading.Lock()

    def take(self, count: int) -> np.ndarray:
        """A flat buffer of at least ``count`` values: the smallest spare that is big enough,
        else a new mapping. Its contents are undefined."""
        with self._lock:
            fits = [k for k, b in enumerate(self._free) if len(b) >= count]
            if fits:
                return self._free.pop(min(fits, key=lambda k: len(self._free[k])))
        return mapped((max(count, 1),))

    def give(self, buffer: np.ndarray) -> None:
        """Return a buffer from :meth:`take`; the caller must hold no view of it any more."""
        with self._lock:
            self._free.append(buffer)
            self._free.sort(key=len, reverse=True)
            del self._free[self.spares:]

    def clear(self) -> None:
        """Let every spare go (each is unmapped once nothing holds it)."""
        with self._lock:
            self._free.clear()

    @property
    def spare_bytes(self) -> int:
        """Bytes held for later batches."""
        with self._lock:
            return sum(b.nbytes for b in self._free)


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
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self._stride = self.rows * self.heads * capacity * self.head_dim
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
        longest = int(self.lengths.max(initial=0))
        old = [self.segment(s)[:, :, :longest] for s in range(self.segments)]
        buffer = self._buffer
        self._allocate(self.capacity + self.growth * -(-(needed - self.capacity) // self.growth))
        for segment, values in enumerate(old):
            self.segment(segment)[:, :, :longest] = values
        del old
        self.pool.give(buffer)

    def advance(self, new: int = 1) -> None:
        """The positions just written become part of every row's past."""
        self.lengths += new

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows (positions in the batch, ascending), moved down in place."""
        longest = int(self.lengths[slots].max(initial=0))
        for segment in range(self.segments):
            values = self.segment(segment)
            for row, slot in enumerate(slots):  # slots ascend: no row is overwritten before it is read
                if row != slot:
                    values[row, :, :longest] = values[slot, :, :longest]
        self.lengths = np.ascontiguousarray(self.lengths[slots])
        self.rows = len(slots)  # segments stay where they are: only their first rows are used

    def release(self) -> None:
        """Give the buffer back to the pool; nothing of this object may be used afterwards."""
        if self._buffer is not None:
            self.pool.give(self._buffer)
        self._buffer = None


def _bind(binding, name: str, array: np.ndarray, output: bool = False) -> None:
    if not array.flags.c_contiguous:  # bound by address and shape: the layout must be plain
        raise ValueError(f"{name} must be C-contiguous to be bound")
    bind = binding.bind_output if output else binding.bind_input
    bind(name, "cpu", 0, array.dtype, array.shape, array.ctypes.data)


class BoundDecoder:
    """The decoder calls of one greedy batch, through IO binding, over memory the batch owns.

    It holds the batch's K/V (:class:`KVBuffers`), a copy of the encoder's cross K/V, the
    logits buffer and, with a normaliser, a log-probabilities buffer, all mapped; the
    encoder's own outputs can be let go as soon as it is made.
    """

    def __init__(self, session, cross_k: list, cross_v: list, mask: np.ndarray, width: int,
                 run_options=None, pool: BufferPool | None = None, capacity: int = INITIAL_CAPACITY,
                 normalizer=None, ragged: bool | None = None):
        """Copy the cross K/V in and bind what stays the same from step to step.

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
        """
        self.session, self.run_options = session, run_options
        self.pool = pool if pool is not None else BufferPool(spares=0)
        self.layers = len(cross_k)
        rows, heads, _, head_dim = cross_k[0].shape
        if ragged is None:
            ragged = any(i.name == "past_lengths" for i in session.get_inputs())
        self.ragged = ragged
        self.kv = (SharedKV if ragged else KVBuffers)(self.layers, rows, heads, head_dim, capacity, self.pool)
        self._owned = [self.pool.take(2 * self.layers * cross_k[0].size), self.pool.take(rows * width)]
        self.cross = self._owned[0][: 2 * self.layers * cross_k[0].size].reshape(2 * self.layers, *cross_k[0].shape)
        for segment, values in enumerate(list(cross_k) + list(cross_v)):
            self.cross[segment] = values
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
        """Keep only these rows (positions in the batch, ascending)."""
        self.kv.keep(slots)
        for row, slot in enumerate(slots):  # in place: slots ascend, so no row is overwritten before it is read
            if row != slot:
                self.cross[:, row] = self.cross[:, slot]
        self.cross = self.cross[:, : len(slots)]
        self.mask = self.mask[slots]
        self._bind_rows()

    def release(self) -> None:
        """Give every buffer back to the pool; this object must not be used afterwards."""
        self.binding = self._post = self.cross = self.logits = self._log_probs = None  # bindings hold addresses
        self.kv.release()
        for buffer in self._owned:
            self.pool.give(buffer)
        self._owned = []
