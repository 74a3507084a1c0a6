"""Which source sentence produced which part of the translation (no Qt here).

The translation pane shows the results joined the way
:func:`~edge_translator.core.translator.render` joins them. :class:`Alignment` builds
that text one result at a time and records, for each sentence, its span in the source
(the result's ``span``) and the span of its translation in the rendered text, so the
window can highlight a sentence and its counterpart. Spans are Python string indices;
:func:`to_utf16` and :func:`from_utf16` convert them to and from the UTF-16 positions
Qt's text documents count in.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

#: Below this mean log-probability a translation is doubtful: on the evaluation set, the
#: sentences scored under it are translated far worse than the rest (docs/python-api.md).
DOUBTFUL_SCORE = -1.0


def doubtful(result) -> bool:
    """Whether a sentence's translation is doubtful: its score is below :data:`DOUBTFUL_SCORE`.

    Args:
        result: A :class:`~edge_translator.core.translator.SentenceResult`.

    Returns:
        ``True`` for a score under -1.0; a NaN score (a blank sentence) is not doubtful.
    """
    score = result.score
    return score is not None and not math.isnan(score) and score < DOUBTFUL_SCORE


@dataclass(frozen=True)
class Pair:
    """One source sentence and its translation."""

    index: int
    """Position of the sentence in the submission."""
    source: tuple[int, int]
    """``(start, end)`` of the sentence in the source text."""
    target: tuple[int, int]
    """``(start, end)`` of its translation in the rendered text."""
    doubtful: bool
    """Whether the translation is doubtful (:func:`doubtful`)."""
    score: float
    """The result's mean log-probability."""


class Alignment:
    """The rendered translation of a stream of results, and where each sentence sits in it."""

    def __init__(self, source: str = ""):
        """Args:
            source: The submitted text (kept for :meth:`source_text`; spans come from the results).
        """
        self.source = source
        self.pairs: list[Pair] = []
        self._parts: list[str] = []
        self._length = 0
        self._held = None
        self._source_starts: list[int] = []
        self._target_starts: list[int] = []
        self._source_spans: list[tuple[int, int]] = []
        self._target_spans: list[tuple[int, int]] = []

    @classmethod
    def build(cls, source: str, results) -> Alignment:
        """Align a complete list of results (the rendered text is :attr:`text`)."""
        alignment = cls(source)
        for result in results:
            alignment.append(result)
        alignment.finish()
        return alignment

    def append(self, result) -> str:
        """Add the next result (in input order).

        Args:
            result: A :class:`~edge_translator.core.translator.SentenceResult`.

        Returns:
            The text to append to the translation pane: the previous sentence's separator
            where :func:`render` keeps it, then this sentence's translation.
        """
        prefix = ""
        held = self._held
        if held is not None and ("\n" in held.separator or not held.text):
            prefix = held.separator
        start = self._length + len(prefix)
        chunk = prefix + result.text
        self._parts.append(chunk)
        self._length += len(chunk)
        pair = Pair(len(self.pairs), tuple(result.span), (start, start + len(result.text)), doubtful(result),
                    result.score)
        self.pairs.append(pair)
        self._source_starts.append(pair.source[0])
        self._target_starts.append(start)
        self._source_spans.append(pair.source)
        self._target_spans.append(pair.target)
        self._held = result
        return chunk

    def finish(self) -> str:
        """Close the stream.

        Returns:
            The text that still ends the translation: the last sentence's separator.
        """
        held, self._held = self._held, None
        if held is None:
            return ""
        self._parts.append(held.separator)
        self._length += len(held.separator)
        return held.separator

    @property
    def text(self) -> str:
        """The translation rendered so far."""
        return "".join(self._parts)

    def __len__(self) -> int:
        return len(self.pairs)

    def source_span(self, index: int) -> tuple[int, int]:
        """``(start, end)`` of sentence ``index`` in the source text."""
        return self.pairs[index].source

    def target_span(self, index: int) -> tuple[int, int]:
        """``(start, end)`` of the translation of sentence ``index`` in the rendered text."""
        return self.pairs[index].target

    def pair_at_source(self, pos: int) -> int | None:
        """The sentence whose source holds position ``pos`` (a caret just after a sentence
        counts), or ``None`` where there is none (between paragraphs, past the end)."""
        return self._at(self._source_starts, self._source_spans, pos)

    def pair_at_target(self, pos: int) -> int | None:
        """The sentence whose translation holds position ``pos`` in the rendered text, or ``None``."""
        return self._at(self._target_starts, self._target_spans, pos)

    @staticmethod
    def _at(starts: list[int], spans: list[tuple[int, int]], pos: int) -> int | None:
        # Spans are in increasing order and do not overlap; find the last starting at or before pos.
        i = bisect.bisect_right(starts, pos) - 1
        # Skip back over empty spans (blank sentences) sharing this start.
        while i >= 0:
            start, end = spans[i]
            if start < end:
                if pos < end:
                    return i
                if pos == end and (i + 1 >= len(spans) or spans[i + 1][0] > pos):
                    return i
                return None
            i -= 1
        return None


def to_utf16(text: str, index: int) -> int:
    """Convert a Python string index in ``text`` to a UTF-16 position (Qt's)."""
    return len(text[:index].encode("utf-16-le", "surrogatepass")) // 2


def from_utf16(text: str, pos: int) -> int:
    """Convert a UTF-16 position in ``text`` (Qt's) to a Python string index (a position inside
    a surrogate pair counts as after its character)."""
    if pos <= 0:
        return 0
    units = text.encode("utf-16-le", "surrogatepass")[:2 * pos]
    return len(units.decode("utf-16-le", "surrogatepass"))
