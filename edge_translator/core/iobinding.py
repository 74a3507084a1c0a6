"""A greedy batch's decoder and encoder calls through ONNX Runtime's IO binding, over memory the batch owns.

ONNX Runtime's outputs stay in its arena as long as Python holds them, and a greedy batch
holds its K/V from one call to the next, a new size at every step: the arena would fill
with long-lived pieces of every size that later requests no longer fit, and grow under a
steady load. Here the decoder reads and writes the batch's own
buffers (:mod:`.kvcache`) through IO binding, and the encoder writes the cross K/V
straight into the batch's memory (:func:`encode_bound`), so nothing is copied and the
arena only holds what one call needs.
"""

from __future__ import annotations

import numpy as np

from .graphio import (ATTENTION_MASK, ENCODER_ATTENTION_MASK, HIDDEN, INPUT_IDS, LOGITS, PAST_LENGTHS, aligned,
                      cross_key, cross_value, is_ragged, past_key, past_value, present_key, present_value)
from .kvcache import INITIAL_CAPACITY, BufferPool, KVBuffers, SharedKV
from .logsoftmax import INPUT, OUTPUT

#: A batch lays its cross K/V out anew, smaller, once the rows left need this many fewer
#: source positions than it holds (rows that join, :meth:`BoundDecoder.admit`, can make it
#: hold many more than most rows need): every step reads the cross K/V of every row (at 32
#: rows of the opus-mt-en-zh shape, 0.8 MB a position, as much as the weights at 64
#: positions), and a relayout costs about one step's reading.
SOURCE_SLACK = 32

#: What one more encoder call costs, in source positions (:func:`encoder_groups`): a call's
#: fixed cost is about what the encoder spends on this many positions of the full
#: opus-mt-en-zh shape (docs/benchmarks.md).
ENCODER_CALL_POSITIONS = 8


def _bind(binding, name: str, array: np.ndarray, output: bool = False) -> None:
    if not array.flags.c_contiguous:  # bound by address and shape: the layout must be plain
        raise ValueError(f"{name} must be C-contiguous to be bound")
    bind = binding.bind_output if output else binding.bind_input
    bind(name, "cpu", 0, array.dtype, array.shape, array.ctypes.data)


class _Binding:
    """An ONNX Runtime IO binding that binds a name again only when its address, shape or
    type changed.

    A decoder step binds some thirty names, and between steps of a batch whose rows stay
    the same, none of them moves (the K/V, the token ids, the hidden state and the logits
    live in the batch's own buffers): at batch 1 of the full opus-mt-en-zh shape, binding
    them all again was about a tenth of a step. A binding is by address, so an unchanged
    (address, shape, type) is the same binding, whatever array now lies there.
    """

    __slots__ = ("io", "_bound")

    def __init__(self, session):
        self.io = session.io_binding()
        self._bound: dict[tuple[str, bool], tuple] = {}

    def put(self, name: str, dtype, shape: tuple, address: int, output: bool = False) -> None:
        key = (address, tuple(shape), np.dtype(dtype))
        if self._bound.get((name, output)) != key:
            (self.io.bind_output if output else self.io.bind_input)(name, "cpu", 0, dtype, shape, address)
            self._bound[(name, output)] = key

    def array(self, name: str, array: np.ndarray, output: bool = False) -> None:
        if not array.flags.c_contiguous:  # bound by address and shape: the layout must be plain
            raise ValueError(f"{name} must be C-contiguous to be bound")
        self.put(name, array.dtype, array.shape, array.ctypes.data, output)


def encoder_groups(lengths, align: int = 1, call_positions: int | None = None) -> list[np.ndarray]:
    """Split a batch's rows into groups for the encoder, each run padded to its own longest row.

    One call pads every row to the batch's longest source, and the encoder's cost is its
    positions, padding included. A batch taken from a length-sorted queue is mostly of one
    length, but its last batch holds the long tail, and one padded call spends most of its
    time on padding. The groups are the split of the rows, sorted by length, that runs the
    fewest positions (each rounded up to ``align``, as the encoder lays its K/V out),
    counting each call as ``call_positions`` more; found exactly, by dynamic programming
    over the split points.

    Args:
        lengths: Each row's source length (its mask's sum).
        align: The encoder's :func:`.graphio.cross_alignment`.
        call_positions: The cost of one more call, in positions (``None``:
            :data:`ENCODER_CALL_POSITIONS`).

    Returns:
        The groups' row indices (ascending within each group), shortest rows first; one
        group holding every row when a split saves nothing.
    """
    call_positions = ENCODER_CALL_POSITIONS if call_positions is None else call_positions
    lengths = np.maximum(np.asarray(lengths, np.int64), 1)  # a call needs a position
    order = np.argsort(lengths, kind="stable")
    width = aligned(lengths[order], align)
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

    The encoder's largest outputs then never pass through ONNX Runtime's arena, which keeps
    the largest such piece it is ever asked for, and the decoder copies nothing
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
        align: The encoder's :func:`.graphio.cross_alignment`: the K/V hold ``source`` rounded up
            to a multiple of it.

    Returns:
        ``(buffer, cross_k, cross_v)``: the flat buffer, and per layer the keys and the
        values, views of it that together form one ``[2 * layers, rows, heads, source,
        head_dim]`` array (keys of layers 0..L-1, then values).
    """
    pool = pool if pool is not None else BufferPool(spares=0)
    rows, source = input_ids.shape
    shape = (2 * layers, rows, heads, aligned(source, align), head_dim)
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
    held = aligned(width, align)
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
    _bind(binding, INPUT_IDS, input_ids)
    _bind(binding, ATTENTION_MASK, mask)
    for i in range(layers):
        _bind(binding, cross_key(i), cross[i], output=True)
        _bind(binding, cross_value(i), cross[layers + i], output=True)
    encoder.run_with_iobinding(binding, run_options)


class BoundHead:
    """A split bundle's output layer for one batch, through IO binding: hidden state → logits.

    It runs the whole vocabulary's graph, or the shortlist graph on the batch's gathered
    rows (bound again only when rows that joined made the union grow).
    """

    def __init__(self, model, columns=None):
        """Args:
            model: The :class:`.decode.Seq2Seq` of a split bundle.
            columns: The batch's :class:`.shortlist.BatchOutputs`, or ``None`` for every column.
        """
        self.columns = columns
        self.session = model.projection if columns is None else model.shortlisted
        self.weight_names = model.weight_names
        self.full_width = model.logits_width
        self.run_options = model.run_options
        self.binding = _Binding(self.session)
        self._version: int | None = None
        self._feeds: list | None = None  # bound by address: kept alive

    @property
    def width(self) -> int:
        """Columns of the logits now."""
        return self.full_width if self.columns is None else self.columns.width

    def run(self, hidden: np.ndarray, logits: np.ndarray) -> None:
        """Write the logits ``[rows, 1, width]`` of the hidden states ``[rows, 1, d_model]``."""
        if self.columns is not None and self._version != self.columns.version:
            self._feeds = self.columns.feeds
            for name, array in zip(self.weight_names, self._feeds):
                self.binding.array(name, array)
            self._version = self.columns.version
        self.binding.array(HIDDEN, hidden)
        self.binding.array(LOGITS, logits, output=True)
        self.session.run_with_iobinding(self.binding.io, self.run_options)

    def release(self) -> None:
        """Drop the binding and the weights it points at."""
        self.binding = self._feeds = None


class BoundDecoder:
    """The decoder calls of one greedy batch, through IO binding, over memory the batch owns.

    It holds the batch's K/V (:class:`.kvcache.KVBuffers`), the encoder's cross K/V (written there
    by :func:`encode_bound`, or copied in), the logits buffer and, with a normaliser, a
    log-probabilities buffer, all mapped.
    """

    def __init__(self, session, cross_k: list, cross_v: list, mask: np.ndarray, width: int,
                 run_options=None, pool: BufferPool | None = None, capacity: int = INITIAL_CAPACITY,
                 normalizer=None, ragged: bool | None = None, cross_buffer: np.ndarray | None = None,
                 head: BoundHead | None = None):
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
                past's memory (:class:`.kvcache.SharedKV`); ``False``: it returns a new present
                (:class:`.kvcache.KVBuffers`); ``None``: whichever the session's inputs say.
            cross_buffer: The buffer from ``pool`` that ``cross_k`` and ``cross_v`` are
                views of, as :func:`encode_bound` returns them: this decoder takes it over
                and copies nothing. ``None``: they are copied into a buffer of the pool.
            head: A split bundle's output layer (its width replaces ``width``): the decoder
                writes the hidden states into the batch's memory and the head the logits.
        """
        self.session, self.run_options = session, run_options
        self.pool = pool if pool is not None else BufferPool(spares=0)
        self.head = head
        width = width if head is None else head.width
        self.layers, self.width = len(cross_k), width
        rows, heads, _, head_dim = cross_k[0].shape
        self.d_model = heads * head_dim
        self._hidden_buffer = None if head is None else self.pool.take(rows * self.d_model)
        if ragged is None:
            ragged = is_ragged([i.name for i in session.get_inputs()])
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
            self._post = _Binding(normalizer)
        self.tokens: np.ndarray | None = None
        self._ids = np.zeros((rows, 1), np.int64)
        """The step's token ids, bound by address: one buffer, so that it stays bound."""
        self.binding = _Binding(session)
        self._kv_layout: tuple | None = None
        self._names = [(past(i), present(i)) for past, present in ((past_key, present_key), (past_value, present_value))
                       for i in range(self.layers)]  # in segment order: keys of every layer, then values
        self._bind_rows()

    def _bind_rows(self) -> None:
        """Bind the inputs that only change when rows leave."""
        self.binding.array(ENCODER_ATTENTION_MASK, self.mask)
        for i in range(self.layers):
            self.binding.array(cross_key(i), self.cross[i])
            self.binding.array(cross_value(i), self.cross[self.layers + i])

    def step(self, tokens: np.ndarray) -> np.ndarray:
        """Run the decoder on one new token a row ``[rows, 1]``; return the logits ``[rows, 1, width]``.

        The logits are a view that the next step overwrites.
        """
        kv = self.kv
        kv.reserve()
        rows = len(tokens)
        if len(self._ids) < rows:
            self._ids = np.zeros((max(rows, 2 * len(self._ids)), 1), np.int64)
        self._ids[:rows] = tokens
        self.tokens = self._ids[:rows]
        self.binding.array(INPUT_IDS, self.tokens)
        if self.ragged:
            return self._step_in_place()
        past, present, step = kv.addresses()
        past_shape = (kv.rows, kv.heads, kv.length, kv.head_dim)
        present_shape = (kv.rows, kv.heads, kv.length + 1, kv.head_dim)
        put = self.binding.put
        for segment, (past_name, present_name) in enumerate(self._names):
            put(past_name, np.float32, past_shape, past + segment * step)
            put(present_name, np.float32, present_shape, present + segment * step, output=True)
        return self._run(kv.rows)

    def _run(self, rows: int) -> np.ndarray:
        """Bind the step's last output, run the decoder (and the head), advance the cache."""
        logits = self.logits[:rows]
        if self.head is None:
            self.binding.array(LOGITS, logits, output=True)
            self.session.run_with_iobinding(self.binding.io, self.run_options)
        else:
            hidden = self._hidden_buffer[: rows * self.d_model].reshape(rows, 1, self.d_model)
            self.binding.array(HIDDEN, hidden, output=True)
            self.session.run_with_iobinding(self.binding.io, self.run_options)
            self.head.run(hidden, logits)
        self.kv.advance()
        return logits

    def _step_in_place(self) -> np.ndarray:
        kv = self.kv
        self.binding.array(PAST_LENGTHS, kv.lengths)
        layout = (kv.address, kv.shape, kv.step)
        if layout != self._kv_layout:  # the cache moved or its rows changed: bind its segments again
            put, shape = self.binding.put, kv.shape
            for segment, (past_name, present_name) in enumerate(self._names):
                address = kv.address + segment * kv.step
                put(past_name, np.float32, shape, address)
                put(present_name, np.float32, shape, address, output=True)
            self._kv_layout = layout
        return self._run(kv.rows)

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
        self._post.array(INPUT, logits)
        self._post.array(OUTPUT, out, output=True)
        self.normalizer.run_with_iobinding(self._post.io, self.run_options)
        return out

    def keep(self, slots: np.ndarray) -> None:
        """Keep only these rows, in this order: row ``i`` comes from position ``slots[i]``
        (ascending slots, or :func:`.kvcache.compaction_order`'s)."""
        self.kv.keep(slots)
        for row, slot in enumerate(slots):  # in place: no row is overwritten before it is read
            if row != slot:
                self.cross[:, row] = self.cross[:, slot]
        self.cross = self._full[:, : len(slots)]
        self.mask = self.mask[slots]
        self.source_lengths = self.source_lengths[slots]
        needed = aligned(int(self.source_lengths.max(initial=1)))
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
        the longest source, rounded up to :data:`.graphio.SOURCE_ALIGN`, whenever the rows or a source
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
            self._relayout_cross(max(total, row_capacity, self._full.shape[1]), max(held, aligned(source)))
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
        if self.head is not None:  # the union of the rows' candidates may have grown
            self.width = self.head.width
            if len(self._hidden_buffer) < capacity * self.d_model:
                self.pool.give(self._hidden_buffer)
                self._hidden_buffer = self.pool.take(capacity * self.d_model)
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
        if self.head is not None:
            self.head.release()
            self.pool.give(self._hidden_buffer)
            self._hidden_buffer = None
        for buffer in self._owned:
            self.pool.give(buffer)
        self._owned = []
