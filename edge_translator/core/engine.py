"""The scheduler: worker threads own a model's sessions and decode everyone's sentences.

Callers on any thread :meth:`Engine.submit` source-id rows and get a :class:`.ticket.Ticket`
back at once. The worker gathers waiting rows into batches (a bounded wait of a few
milliseconds when it is idle and other callers are about), interleaving owners fairly and putting interactive work
ahead of bulk work, and advances the running batches one decoder step at a time, so a
row is delivered the moment it finishes and a cancelled row leaves its batch at the
next step. Only the workers run ONNX Runtime, with the thread count the sessions were
opened with, so any number of callers never oversubscribes the CPU.

By default one worker decodes with every core. Given several copies of the model's
sessions (one per worker, each with a share of the cores), as many workers take batches
from the same queues and decode them side by side: on two cores, two workers of one
thread each decode two batches in about the time one worker of two threads decodes one,
since a thread never waits for another inside an operator (docs/engine.md). A batch stays
with the worker that started it, whose sessions hold its cache.

With :attr:`EngineOptions.continuous`, waiting rows of the same priority take the seats that
finished rows left in a running greedy batch, at its next step (continuous batching): their
encoder runs on them alone and they decode from position 0 beside rows far along, which the
ragged decoder graph allows (each row has its own cached length); bundles exported before
that graph keep the rows a batch started with. It is off by default, since it measured
slower here (see the option). By default an interactive batch is started beside a running
bulk batch and is stepped first (the bulk batch waits with its cache intact, and still gets
a step every quarter second), and a new batch is started beside one that has emptied to
half, so the tail of a batch does not decode alone.
"""

from __future__ import annotations

import enum
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from .decode import Seq2Seq
from .errors import Busy, EngineClosed, TranslationFailed
from .greedybatch import GreedyBatch, Hypothesis
from .ticket import Outcome, Request, Ticket, Timing

logger = logging.getLogger(__name__)


class Priority(enum.IntEnum):
    """Who waits for a submission: a person (interactive) goes ahead of a batch job (bulk)."""

    INTERACTIVE = 0
    BULK = 1


@dataclass(frozen=True)
class EngineOptions:
    """How the scheduler forms and runs batches."""

    max_batch_size: int = 32
    """Most rows decoded together in one batch."""
    max_wait_ms: float = 4.0
    """How long an idle worker waits for more rows before it starts a batch that is not full,
    when other callers are about (the last batch held several callers' rows, or several
    are waiting). A lone caller's rows start at once: nobody else is coming to fill the batch."""
    max_queued: int = 4096
    """Most rows waiting to start (back-pressure). A submission larger than this is let
    in only when nothing else is waiting."""
    max_interactive_batches: int = 1
    """Most interactive batches decoding at once (stepped in turn; another starts only when
    the running ones are half empty). One is fastest: each step of a batch reads all the
    weights, so several small batches read them several times for the same rows."""
    max_bulk_batches: int = 2
    """Most bulk batches decoding at once; likewise, another starts at half empty."""
    continuous: bool = False
    """Rows join a greedy batch that is decoding, as its rows finish (continuous batching),
    where the bundle's decoder graph allows it (ragged, since GroupQueryAttention); else
    a batch keeps the rows it started with. Off by default: it measured slower on a sorted
    bulk job and no faster for many callers (docs/engine.md): its decoder steps cost as much
    as full ones, and the joining rows' encoder calls and the batch's compactions come on top."""
    bulk_step_interval_ms: float = 250.0
    """Under continuous interactive work, a bulk batch still gets one step this often, so
    bulk work is delayed but never starved."""
    idle_release_s: float = 2.0
    """After this many seconds with nothing to do, the worker gives the decoding buffers it
    keeps for the next batches back to the system (hundreds of MB after a large bulk batch
    of the full opus-mt-en-zh shape); under steady work they are reused."""
    min_new_tokens: int = 0
    """Benchmarks only: no ``</s>`` before this many tokens, so that a random model decodes as
    long as its peer does (``serve --exact-length`` sets it past every length limit)."""

    def __post_init__(self) -> None:
        for name in ("max_batch_size", "max_queued", "max_interactive_batches", "max_bulk_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.min_new_tokens < 0:
            raise ValueError(f"min_new_tokens must not be negative, not {self.min_new_tokens}")
        if self.max_wait_ms < 0 or self.bulk_step_interval_ms < 0 or self.idle_release_s < 0:
            raise ValueError("max_wait_ms, bulk_step_interval_ms and idle_release_s must not be negative")


@dataclass(frozen=True)
class EngineStats:
    """Counters of an engine since it was created (for monitoring)."""

    queued: int
    """Rows waiting to start."""
    decoding: int
    """Rows in running batches."""
    batches: int
    """Batches started."""
    admitted: int
    """Rows that joined a batch already decoding (:attr:`EngineOptions.continuous`)."""
    steps: int
    """Decoder steps run (all batches)."""
    rows_done: int
    """Rows delivered."""
    tokens: int
    """Output tokens of the delivered rows."""
    failed_batches: int
    """Batches that ONNX Runtime failed on."""
    gathered: int
    """Times an idle worker waited for batch-mates (:attr:`EngineOptions.max_wait_ms`)."""
    batch_sizes: dict[int, int]
    """Rows a batch started with → how many batches did."""


class _Row:
    __slots__ = ("request", "ticket", "index", "queued_at", "started_at")

    def __init__(self, request: Request, ticket: Ticket, index: int, queued_at: float):
        self.request, self.ticket, self.index, self.queued_at = request, ticket, index, queued_at
        self.started_at = 0.0


class _Batch:
    """Rows decoding together, on one worker: a step-wise greedy batch, or a beam-search generator.

    ``rows[k]`` is the row that :meth:`advance` reports as ``k``. Rows that :meth:`admit`
    takes wait in ``pending`` until the worker next steps the batch, which seats them (their
    encoder runs then, outside the engine's lock).
    """

    def __init__(self, model: Seq2Seq, rows: list[_Row], priority: Priority, min_new_tokens: int,
                 row_capacity: int = 0, worker: int = 0):
        self.rows = rows
        self.worker = worker
        self.priority = priority
        self.row_capacity = row_capacity
        self.started_at = time.perf_counter()
        for row in rows:
            row.started_at = self.started_at
        self.model, self.min_new_tokens = model, min_new_tokens
        self.pending: list[int] = []
        self.seated = list(range(len(rows)))  # the greedy batch's row g is rows[seated[g]]
        sources = [list(r.request.source) for r in rows]
        limits = [r.request.max_new_tokens for r in rows]
        beam, self.shortlist = rows[0].request.beam_size, rows[0].request.shortlist
        if beam == 1:
            self.greedy = GreedyBatch(model, sources, limits, [r.request.guard for r in rows],
                                      min_new_tokens=min_new_tokens, shortlist=self.shortlist)
            self.beam = None
        else:
            self.greedy = None
            self.beam = model.beam(sources, limits, beam, shortlist=self.shortlist)
        self.open = set(range(len(rows)))

    def __len__(self) -> int:
        return len(self.open)

    @property
    def can_admit(self) -> bool:
        """Whether rows may join this batch while it decodes."""
        return self.greedy is not None and self.greedy.can_admit

    def admit(self, rows: list[_Row]) -> None:
        """Take greedy rows to seat at the next step (the caller holds the engine's lock)."""
        now = time.perf_counter()
        for row in rows:
            row.started_at = now
            self.pending.append(len(self.rows))
            self.open.add(len(self.rows))
            self.rows.append(row)

    def drop_cancelled(self) -> None:
        gone = {k for k in self.open if self.rows[k].ticket.cancelled}
        if not gone:
            return
        self.open.difference_update(gone)
        self.pending = [k for k in self.pending if k not in gone]
        if self.greedy is not None:
            self.greedy.drop([g for g, k in enumerate(self.seated) if k in gone])
        elif not self.open:
            self.beam.close()

    def _seat(self) -> None:
        """Seat the pending rows in the greedy batch, which encodes them."""
        pending, self.pending = self.pending, []
        rows = [self.rows[k] for k in pending]
        sources, limits = [list(r.request.source) for r in rows], [r.request.max_new_tokens for r in rows]
        guards = [r.request.guard for r in rows]
        if self.greedy.done:  # every seated row was cancelled: the pending ones make a batch of their own
            self.greedy = GreedyBatch(self.model, sources, limits, guards, min_new_tokens=self.min_new_tokens,
                                      shortlist=self.shortlist)
            self.seated = pending
        else:
            self.greedy.admit(sources, limits, guards, row_capacity=self.row_capacity)
            self.seated += pending  # the greedy batch numbers its rows in the order they came

    def advance(self) -> list[tuple[int, Hypothesis]]:
        """Seat pending rows, then one greedy step; or beam search until its next source finishes."""
        if self.greedy is not None:
            if self.pending:
                self._seat()
            finished = [(self.seated[g], h) for g, h in self.greedy.step()]
        else:
            finished = []
            try:
                finished.append(next(self.beam))
            except StopIteration:
                self.open.clear()
        for k, _ in finished:
            self.open.discard(k)
        return [(k, h) for k, h in finished if not self.rows[k].ticket.cancelled]


class Engine:
    """One scheduler per loaded model: the only caller of its ONNX Runtime sessions."""

    def __init__(self, model: Seq2Seq | Sequence[Seq2Seq], options: EngineOptions | None = None):
        """Take ready sessions; the worker threads start with the first submission.

        Args:
            model: The model whose sessions the worker runs; or several copies of one model's
                sessions, one per worker (:meth:`.translator.Translator.load` ``workers``).
            options: Batch size, wait, queue bound and concurrency of batches (of each worker).
        """
        self.models: list[Seq2Seq] = list(model) if isinstance(model, Sequence) else [model]
        if not self.models:
            raise ValueError("an engine needs at least one model")
        self.model = self.models[0]
        self.options = options or EngineOptions()
        self._cond = threading.Condition()
        self._queues: dict[Priority, deque[tuple[Ticket, deque[_Row]]]] = {p: deque() for p in Priority}
        self._queued = 0
        self._active: list[_Batch] = []
        self._turn = itertools.count()
        self._last_owners = 0
        """Callers whose rows the last batch started with: one means a lone caller."""
        self._last_bulk_step = [time.perf_counter()] * len(self.models)
        self._closing = False
        self._workers: list[threading.Thread] = []
        self._crash: BaseException | None = None
        self._counts = {"batches": 0, "admitted": 0, "steps": 0, "rows_done": 0, "tokens": 0, "failed_batches": 0,
                        "gathered": 0}
        self._batch_sizes: dict[int, int] = {}

    # -- public ------------------------------------------------------------------------------
    def submit(self, requests: Sequence[Request], priority: Priority = Priority.INTERACTIVE, *,
               block: bool = True, timeout: float | None = None) -> Ticket:
        """Queue rows for decoding and return their ticket at once.

        Args:
            requests: The rows, in input order.
            priority: Interactive rows start ahead of bulk rows.
            block: When the queue is full, wait for room (``True``) or raise :class:`Busy`.
            timeout: Most seconds to wait for room; then :class:`Busy`.

        Raises:
            ValueError: If a request is malformed.
            Busy: If the queue stays full.
            EngineClosed: After :meth:`close`.
        """
        priority = Priority(priority)
        for request in requests:
            if not request.source:
                raise ValueError("a request needs at least one source id")
            if request.max_new_tokens < 1:
                raise ValueError(f"max_new_tokens must be at least 1, not {request.max_new_tokens}")
            if not 1 <= request.beam_size <= 16:
                raise ValueError(f"beam_size must be between 1 and 16, not {request.beam_size}")
        ticket = Ticket(self._withdraw, len(requests))
        if not requests:
            return ticket
        now = time.perf_counter()
        rows = deque(_Row(r, ticket, k, now) for k, r in enumerate(requests))
        if priority == Priority.BULK:
            rows = deque(_length_sorted_windows(list(rows), 8 * self.options.max_batch_size))
        limit = self.options.max_queued
        with self._cond:
            if self._closing:
                raise EngineClosed("the translator is closed; load it again to translate more")
            if not self._cond.wait_for(lambda: self._closing or self._queued == 0
                                       or self._queued + len(rows) <= limit, timeout if block else 0):
                raise Busy(f"the translation queue is full ({self._queued} of {limit} sentences waiting); "
                           "retry later, or submit with block=True")
            if self._closing:
                raise EngineClosed("the translator is closed; load it again to translate more")
            if self._crash is not None:
                raise TranslationFailed(f"the translation worker stopped: {self._crash}")
            self._queues[priority].append((ticket, rows))
            self._queued += len(rows)
            if not self._workers:
                for w in range(len(self.models)):
                    name = "edge-translator-engine" + (f"-{w}" if w else "")
                    self._workers.append(threading.Thread(target=self._run, args=(w,), name=name, daemon=True))
                    self._workers[-1].start()
            self._cond.notify_all()
        return ticket

    @property
    def workers(self) -> int:
        """Worker threads, each with its own copy of the sessions."""
        return len(self.models)

    @property
    def queued(self) -> int:
        """Rows waiting to start."""
        with self._cond:
            return self._queued

    def stats(self) -> EngineStats:
        """A snapshot of the engine's counters."""
        with self._cond:
            return EngineStats(queued=self._queued, decoding=sum(len(b) for b in self._active),
                               batch_sizes=dict(self._batch_sizes), **self._counts)

    def close(self, cancel: bool = False, timeout: float | None = None) -> None:
        """Stop taking submissions, finish (or cancel) what is queued, and stop the workers.

        Safe to call more than once.

        Args:
            cancel: Cancel queued and running work instead of finishing it.
            timeout: Most seconds to wait for each worker.
        """
        with self._cond:
            self._closing = True
            tickets = [t for q in self._queues.values() for t, _ in q] + [r.ticket for b in self._active
                                                                           for r in b.rows]
            self._cond.notify_all()
        if cancel:
            for ticket in set(tickets):
                ticket.cancel()
        for worker in list(self._workers):
            if worker is not threading.current_thread():
                worker.join(timeout)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close(cancel=exc[0] is not None)

    # -- called by tickets ------------------------------------------------------------------
    def _withdraw(self, ticket: Ticket) -> None:
        with self._cond:
            for queue in self._queues.values():
                for entry in list(queue):
                    if entry[0] is ticket:
                        queue.remove(entry)
                        self._queued -= len(entry[1])
            self._cond.notify_all()

    # -- the worker ------------------------------------------------------------------------------
    def _own(self, worker: int) -> list[_Batch]:
        return [b for b in self._active if b.worker == worker]

    def _has_work(self, worker: int) -> bool:
        return bool(self._closing or self._queued or self._crash is not None or self._own(worker))

    def _run(self, worker: int) -> None:
        released = True  # nothing is held before the first batch
        try:
            while True:
                with self._cond:
                    work = self._cond.wait_for(lambda: self._has_work(worker),
                                               None if released else self.options.idle_release_s)
                if not work:  # idle for a while: let the kept buffers go, outside the lock
                    release = getattr(self.models[worker], "release_buffers", None)
                    if release is not None:
                        release()
                    released = True
                    continue
                released = False
                with self._cond:
                    if self._crash is not None:
                        return  # another worker stopped, and failed everything
                    if not self._has_work(worker):
                        continue
                    if not self._own(worker) and not self._queued:
                        if self._closing:
                            return  # closing, and nothing left
                        continue  # another worker took what was waiting
                    if not self._own(worker) and self._company_expected():
                        self._gather()
                    self._admit(worker)
                    if not self._own(worker):
                        continue
                    batch = self._pick(worker)
                self._advance(batch)
        except BaseException as exc:  # noqa: BLE001 - a bug must not leave callers waiting forever
            logger.exception("the translation worker stopped")
            with self._cond:
                self._crash = exc
                tickets = {t for q in self._queues.values() for t, _ in q}
                tickets |= {r.ticket for b in self._active for r in b.rows}
                for queue in self._queues.values():
                    queue.clear()
                self._queued = 0
                self._active.clear()
                self._cond.notify_all()
            for ticket in tickets:
                ticket.fail(TranslationFailed(f"the translation worker stopped: {exc}"))

    def _company_expected(self) -> bool:
        """Whether more callers' rows are likely within the gather wait: several callers are
        queued now, or the last batch held several. One client's requests one after another
        (a desktop user, a script) then never wait for a batch-mate that is not coming, while
        under many clients the first batch after a lull is a lone one and the next gather."""
        return self._last_owners > 1 or sum(len(q) for q in self._queues.values()) > 1

    def _gather(self) -> None:
        """Idle worker, first rows waiting: wait a few milliseconds for a fuller batch."""
        deadline = time.perf_counter() + self.options.max_wait_ms / 1000
        self._counts["gathered"] += 1
        while self._queued < self.options.max_batch_size and not self._closing:
            left = deadline - time.perf_counter()
            if left <= 0:
                break
            self._cond.wait(left)

    def _admit(self, worker: int) -> None:
        """Start new batches from the queues, interactive first.

        Another batch of a priority starts only when every running batch of it is half
        empty: batches started at once run slower than one, since each step then reads the
        weights for a few rows.
        """
        o = self.options
        for priority, most in ((Priority.INTERACTIVE, o.max_interactive_batches), (Priority.BULK, o.max_bulk_batches)):
            running = [b for b in self._own(worker) if b.priority == priority]
            if o.continuous:  # first fill the seats that finished rows left
                for batch in running:
                    free = o.max_batch_size - len(batch)
                    if free > 0 and self._queues[priority] and batch.can_admit:
                        rows = self._take(priority, free, (1, batch.shortlist))
                        if rows:
                            batch.admit(rows)
                            self._counts["admitted"] += len(rows)
            while (self._queues[priority] and len(running) < most
                   and all(len(b) <= o.max_batch_size // 2 for b in running)):
                running.append(self._start(priority, worker))

    def _take(self, priority: Priority, count: int, kind: tuple[int, bool]) -> list[_Row]:
        """Take up to ``count`` waiting rows of one kind (beam size, shortlist), one owner at a time in turn."""
        queue, rows, skipped = self._queues[priority], [], []
        while queue and len(rows) < count:
            ticket, pending = queue.popleft()
            if (pending[0].request.beam_size, pending[0].request.shortlist) != kind:
                skipped.append((ticket, pending))
                continue
            rows.append(pending.popleft())
            if pending:
                queue.append((ticket, pending))
        queue.extendleft(reversed(skipped))
        self._queued -= len(rows)
        if rows:
            self._cond.notify_all()  # room in the queue for blocked submitters
        return rows

    def _start(self, priority: Priority, worker: int) -> _Batch:
        """Start a batch on ``worker`` of up to the batch size of waiting rows, all of the first one's kind."""
        first = self._queues[priority][0][1][0].request
        rows = self._take(priority, self.options.max_batch_size, (first.beam_size, first.shortlist))
        batch = _Batch(self.models[worker], rows, priority, self.options.min_new_tokens, self.options.max_batch_size,
                       worker)
        self._active.append(batch)
        self._last_owners = len({id(r.ticket) for r in rows})
        self._counts["batches"] += 1
        self._batch_sizes[len(rows)] = self._batch_sizes.get(len(rows), 0) + 1
        return batch

    def _pick(self, worker: int) -> _Batch:
        """The batch of ``worker`` to step: the most urgent priority, its batches in turn; bulk
        at least once every ``bulk_step_interval_ms``."""
        own = self._own(worker)
        top = min(b.priority for b in own)
        now = time.perf_counter()
        if top == Priority.INTERACTIVE and \
                now - self._last_bulk_step[worker] >= self.options.bulk_step_interval_ms / 1000:
            if any(b.priority == Priority.BULK for b in own):
                top = Priority.BULK
        if top == Priority.BULK:
            self._last_bulk_step[worker] = now
        candidates = [b for b in own if b.priority == top]
        return candidates[next(self._turn) % len(candidates)]

    def _advance(self, batch: _Batch) -> None:
        """Run one step of ``batch`` outside the lock and deliver what finished."""
        batch.drop_cancelled()
        try:
            finished = batch.advance() if len(batch) else []
        except Exception as exc:  # noqa: BLE001 - ONNX Runtime failures fail this batch only
            logger.warning("a batch of %d sentences failed: %s", len(batch.rows), exc)
            error = TranslationFailed(f"ONNX Runtime failed on a batch of {len(batch.rows)} sentences: "
                                      f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}")
            for ticket in {r.ticket for r in batch.rows}:
                ticket.fail(error)
            batch.open.clear()
            finished = []
            failed = 1
        else:
            failed = 0
        now = time.perf_counter()
        with self._cond:
            self._counts["steps"] += 1
            self._counts["failed_batches"] += failed
            self._counts["rows_done"] += len(finished)
            self._counts["tokens"] += sum(len(h.ids) for _, h in finished)
        for k, hypothesis in finished:
            row = batch.rows[k]
            row.ticket.deliver(Outcome(row.index, hypothesis,
                                        Timing(row.started_at - row.queued_at, now - row.started_at)))
        if not len(batch):
            with self._cond:
                if batch in self._active:  # a crashing worker may have cleared them all
                    self._active.remove(batch)
                self._cond.notify_all()  # a worker waiting for the closing engine to drain


def _length_sorted_windows(rows: list[_Row], window: int) -> list[_Row]:
    """Bulk rows in windows of input order, each sorted by source length (less padding)."""
    out: list[_Row] = []
    for start in range(0, len(rows), window):
        out.extend(sorted(rows[start:start + window], key=lambda r: len(r.request.source)))
    return out
