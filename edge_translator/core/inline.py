"""Finding where formatted spans of a source paragraph landed in its translation.

A Word paragraph with one bold word, a Markdown sentence with a link, or an HTML sentence
with an inline element is translated whole, so the formatting must be put back on the
right part of the translation. The caller (the document job, :mod:`.markup`) translates
each marked span on its own as well; :func:`place_marks` looks for that
translation inside the whole one and, where it is not there verbatim (the model chose
other words in context), falls back to the same relative position, snapped to whole
words. A mark is therefore never lost, only approximately placed in the worst case.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

#: A ``(start, end)`` span of a string.
Span = tuple[int, int]

_EDGE_PUNCTUATION = "。，、；：！？.,;:!?\"'“”‘’「」()（） "
_LATIN_WORD = re.compile(r"[A-Za-z0-9_]")


def place_marks(source: str, marks: Sequence[Span], translation: str,
                mark_translations: Sequence[str | None]) -> tuple[Span | None, ...]:
    """Where each mark of ``source`` lies in ``translation``.

    Args:
        source: The source text the marks are spans of.
        marks: The marked spans of ``source``.
        translation: The translation of the whole source text.
        mark_translations: Each mark's text translated on its own (``None`` if not
            translated, e.g. it holds no words).

    Returns:
        One span of ``translation`` per mark, or ``None`` for a mark that cannot be
        placed (an empty translation).
    """
    placed: list[Span | None] = []
    taken: list[Span] = []
    n, m = max(len(source), 1), len(translation)
    for (start, end), alone in zip(marks, mark_translations):
        if m == 0 or end <= start:
            placed.append(None)
            continue
        if start == 0 and end >= len(source.rstrip()):
            placed.append((0, m))
            continue
        expected = start / n * m
        span = _find(translation, source[start:end], alone, expected, taken)
        if span is None:
            span = _proportional(translation, start / n, end / n)
        placed.append(span)
        if span is not None:
            taken.append(span)
    return tuple(placed)


def _candidates(source_text: str, alone: str | None) -> list[str]:
    """What to look for: the mark's own translation, then its source text (a name the
    model copied). A translation alone gains sentence punctuation that the mark did not
    have ("house" → "房子。"); it is stripped unless the source ends with punctuation too."""
    out: list[str] = []
    ends_bare = source_text.rstrip()[-1:].isalnum()
    for text in (alone, source_text):
        if not text:
            continue
        variants = (text.strip(_EDGE_PUNCTUATION), text.strip(), text) if ends_bare else \
            (text, text.strip(), text.strip(_EDGE_PUNCTUATION))
        for variant in variants:
            variant = unicodedata.normalize("NFC", variant)
            if variant and variant not in out:
                out.append(variant)
    return out


def _find(translation: str, source_text: str, alone: str | None, expected: float,
          taken: list[Span]) -> Span | None:
    """The occurrence of the mark's own translation (or its source text, for names left
    untranslated) nearest its expected place, not overlapping a placed mark."""
    best: tuple[float, Span] | None = None
    for needle in _candidates(source_text, alone):
        at = translation.find(needle)
        while at != -1:
            span = (at, at + len(needle))
            if not any(span[0] < t[1] and t[0] < span[1] for t in taken):
                distance = abs(at - expected)
                if best is None or distance < best[0]:
                    best = (distance, span)
            at = translation.find(needle, at + 1)
        if best is not None:
            return best[1]
    return None


def _proportional(translation: str, start: float, end: float) -> Span | None:
    """The same relative stretch of the translation, widened to whole Latin words."""
    m = len(translation)
    a = min(int(round(start * m)), m - 1)
    b = max(int(round(end * m)), a + 1)
    b = min(b, m)
    while a > 0 and _LATIN_WORD.match(translation[a - 1]) and _LATIN_WORD.match(translation[a]):
        a -= 1
    while b < m and _LATIN_WORD.match(translation[b - 1]) and _LATIN_WORD.match(translation[b]):
        b += 1
    while a < b and translation[a].isspace():
        a += 1
    while b > a and translation[b - 1].isspace():
        b -= 1
    return (a, b) if a < b else None
