"""One block of corpus rows through a :class:`~edge_translator.core.translator.Translator`:
the same code on the local machine and in every Ray actor, so a cluster's output equals a
local run's.

A block's rows go to the engine as one bulk submission, sorted by length (the engine cuts
batches from it, and rows of like length waste the least padding); the results are put
back in row order. A row's score is the mean log-probability of all its output tokens.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.cache import CachedTranslation, CacheKey
from ..core.engine import Priority
from ..core.errors import EdgeTranslatorError
from ..core.translator import TranslateOptions, Translator, join_results

_JOINER = "\n\n"

Row = tuple["str | None", "float | None"]
#: A decoded sentence as a cache stores it.
Pair = tuple[CacheKey, CachedTranslation]


def needs_model(text: str | None) -> bool:
    """Whether a row goes to the model: it holds a letter or a digit (others are copied)."""
    return text is not None and any(ch.isalnum() for ch in text)


@dataclass
class Pending:
    """A submitted block: what :meth:`BlockTranslator.collect` needs to put it back together."""

    texts: Sequence[str | None]
    order: list[int]
    starts: list[int]
    submission: object


@dataclass(frozen=True)
class BlockCounts:
    """What a block cost."""

    decoded: int = 0
    """Sentences the model decoded."""
    reused: int = 0
    """Sentences found in the cache or the translation memory."""


class BlockTranslator:
    """Translates blocks of rows; :meth:`submit` returns at once, so the next block can be
    queued while this one decodes and the engine never waits between blocks."""

    def __init__(self, translator: Translator, options: TranslateOptions | None = None):
        self.translator = translator
        self.options = options or TranslateOptions()

    def submit(self, texts: Sequence[str | None]) -> Pending:
        """Queue one block's rows (``None`` for a row without text)."""
        order = sorted((i for i, t in enumerate(texts) if needs_model(t)), key=lambda i: len(texts[i]))
        pieces = [texts[i].strip() for i in order]
        starts, offset = [], 0
        for piece in pieces:
            starts.append(offset)
            offset += len(piece) + len(_JOINER)
        submission = self.translator.submit(_JOINER.join(pieces), self.options, priority=Priority.BULK,
                                            order="input") if pieces else None
        return Pending(texts, order, starts, submission)

    def cancel(self, pending: Pending) -> None:
        if pending.submission is not None:
            pending.submission.cancel()

    def collect(self, pending: Pending) -> tuple[list[Row], BlockCounts, list[Pair]]:
        """Wait for a submitted block.

        Returns:
            One ``(translation, score)`` per row, in row order; what the block cost; and the
            pairs this block decoded (its own, whatever else the translator did meanwhile),
            for a memory the translator's cache is not.

        Raises:
            EdgeTranslatorError: If the translator was closed before the block finished.
        """
        rows: list[Row] = [(t, None) if t is not None else (None, None) for t in pending.texts]
        if pending.submission is None:
            return rows, BlockCounts(), []
        grouped: list[list] = [[] for _ in pending.order]
        which, starts = 0, pending.starts
        decoded = reused = 0
        pairs: list[Pair] = []
        for index, result in enumerate(pending.submission):  # input order: result i is sentence i
            while which + 1 < len(starts) and result.span[0] >= starts[which + 1]:
                which += 1
            grouped[which].append(result)
            key = pending.submission.cache_key(index)
            if result.stop != "empty" and key is not None:  # the dictionary's answers are neither
                reused += result.cached
                decoded += not result.cached
                if not result.cached:
                    pairs.append((key, CachedTranslation(result.text, result.ids, result.stop, result.score)))
        if any(not results for results in grouped):
            raise EdgeTranslatorError("the model was closed while a block was translated; run the job again "
                                      "to resume")
        for row, results in zip(pending.order, grouped):
            rows[row] = (join_results(results).rstrip(), _score(results))
        return rows, BlockCounts(decoded, reused), pairs


def _score(results) -> float | None:
    tokens = total = 0.0
    for result in results:
        if result.ids and not math.isnan(result.score):
            tokens += len(result.ids)
            total += result.score * len(result.ids)
    return total / tokens if tokens else None
