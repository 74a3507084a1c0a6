"""What a submission to the engine is made of and gives back: its rows, and the ticket their results arrive at.

:class:`.engine.Engine` takes :class:`Request` rows and returns a :class:`Ticket` at once;
the worker delivers each finished row to it as an :class:`Outcome` with its :class:`Timing`,
and callers on any thread wait on it, in finishing order or in input order.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .greedybatch import Hypothesis, RepetitionGuard


@dataclass(frozen=True)
class Request:
    """One row to decode."""

    source: tuple[int, ...]
    """Source ids: target token, pieces, ``</s>``."""
    max_new_tokens: int
    """Most generated tokens (``</s>`` included)."""
    beam_size: int = 1
    """1 for greedy decoding; rows share a batch only with rows of the same beam size."""
    guard: RepetitionGuard | None = None
    """Stops a greedy row caught in a loop; ``None`` for none."""
    shortlist: bool = True
    """Restrict the row to its candidates under the bundle's shortlist; rows share a batch only
    with rows that agree."""


@dataclass(frozen=True)
class Timing:
    """Where one sentence's time went, in seconds."""

    queued: float
    """From submission to the start of its batch."""
    decoding: float
    """From the start of its batch to its last token."""


@dataclass(frozen=True)
class Outcome:
    """A finished row: its hypothesis and its timing."""

    index: int
    hypothesis: Hypothesis
    timing: Timing


class Ticket:
    """The handle of one submission to the engine: results arrive here as rows finish."""

    def __init__(self, withdraw: Callable[[Ticket], None], size: int):
        """An empty ticket for ``size`` rows.

        Args:
            withdraw: Called with the ticket when it is cancelled, to take its rows that
                have not started out of the queue (the engine's).
            size: Rows submitted.
        """
        self._withdraw = withdraw
        self._size = size
        self._results: list[Outcome | None] = [None] * size
        self._completed: deque[int] = deque()
        self._finished = 0
        self._error: BaseException | None = None
        self._cancelled = False
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return self._size

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled

    @property
    def done(self) -> bool:
        """Whether every row has finished, or the ticket failed or was cancelled."""
        with self._cond:
            return self._cancelled or self._error is not None or self._finished == self._size

    def cancel(self) -> None:
        """Withdraw the rows not started and drop the running ones at their next step."""
        with self._cond:
            if self._cancelled or self._finished == self._size:
                return
            self._cancelled = True
            self._cond.notify_all()
        self._withdraw(self)

    def get(self, index: int, timeout: float | None = None) -> Outcome | None:
        """Wait for row ``index``; ``None`` once the ticket is cancelled.

        Raises:
            TranslationFailed: If the batch holding the row failed.
            TimeoutError: If ``timeout`` seconds pass first.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: self._results[index] is not None or self._cancelled
                                       or self._error is not None, timeout):
                raise TimeoutError(f"sentence {index} was not translated within {timeout} s")
            if self._cancelled:
                return None
            if self._results[index] is not None:
                return self._results[index]
            raise self._error  # type: ignore[misc]

    def completed(self, timeout: float | None = None) -> Iterator[Outcome]:
        """Yield rows in the order they finish, until all have (or the ticket is cancelled)."""
        taken = 0
        while taken < self._size:
            with self._cond:
                if not self._cond.wait_for(lambda: self._completed or self._cancelled or self._error is not None,
                                           timeout):
                    raise TimeoutError(f"no sentence was translated within {timeout} s")
                if self._cancelled:
                    return
                if not self._completed:
                    raise self._error  # type: ignore[misc]
                index = self._completed.popleft()
            taken += 1
            yield self._results[index]  # type: ignore[misc]

    def in_order(self, timeout: float | None = None) -> Iterator[Outcome]:
        """Yield rows in input order, each as soon as it and those before it are done."""
        for index in range(self._size):
            outcome = self.get(index, timeout)
            if outcome is None:
                return
            yield outcome

    # -- called by the engine's worker ---------------------------------------------------
    def deliver(self, outcome: Outcome) -> None:
        """Record a finished row (the engine's worker calls it; a row's second delivery is ignored)."""
        with self._cond:
            if self._results[outcome.index] is None:
                self._results[outcome.index] = outcome
                self._completed.append(outcome.index)
                self._finished += 1
                self._cond.notify_all()

    def fail(self, error: BaseException) -> None:
        """Fail the rows not delivered yet with ``error`` (the engine's worker calls it)."""
        with self._cond:
            if self._error is None:
                self._error = error
                self._cond.notify_all()
