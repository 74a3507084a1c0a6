"""Evidence from parallel text for the dictionary's ranking: how often an English term and each
of its candidate Chinese headwords turn up in the same sentence pair.

The English side is lowercased and split into words; a term is seen when its words, each as
written or as one of its lemmas ("took" → "take"), stand in a row. A headword is seen when
its Simplified or Traditional spelling is a substring of the Chinese side that is not part of
a longer candidate of the same term (车站 "station" does not also count as 站 "station").
From the counts: Dice's coefficient, ``2·both / (term + headword)``, where the headword's
count is every sentence that holds it, so a character that turns up everywhere (以, 为)
scores low for any one English term.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.dictionary import MAX_WORDS

_TOKEN = re.compile(r"[a-z]+(?:['-][a-z]+)*")


@dataclass(frozen=True)
class Candidate:
    """One Chinese headword a term may be translated by."""

    simplified: str
    """The key its evidence is counted under."""
    spellings: tuple[str, ...]
    """The strings that count as it in a sentence (Simplified and Traditional)."""


class Cooccurrence:
    """Counts over sentence pairs: each term's sentences, each headword's, and both together."""

    def __init__(self, sentences: int, terms: Counter, heads: Counter, joint: Counter):
        self.sentences = sentences
        """Sentence pairs read."""
        self.terms = terms
        """English term → sentence pairs whose English holds it."""
        self.heads = heads
        """Simplified headword → sentence pairs whose Chinese holds it (anywhere)."""
        self.joint = joint
        """``(term, headword)`` → sentence pairs with both (the headword not inside a longer
        candidate of the term)."""

    def dice(self, term: str, head: str) -> float:
        """Dice's coefficient of a term and a headword; 0 when either was never seen."""
        both = self.joint.get((term, head), 0)
        return 2 * both / (self.terms[term] + self.heads[head]) if both else 0.0

    def share(self, term: str, head: str) -> float:
        """Of the term's sentence pairs, the fraction whose Chinese holds the headword."""
        seen = self.terms.get(term, 0)
        return self.joint.get((term, head), 0) / seen if seen else 0.0


def english_terms(text: str, lemmas: dict[str, list[str]], known: set[str] | frozenset[str]) -> set[str]:
    """The known terms of up to :data:`MAX_WORDS` words in an English sentence.

    Args:
        text: The English side.
        lemmas: Inflected form → its lemmas ("took" → ["take"]).
        known: The terms to look for.

    Returns:
        Each known term whose words stand in a row in ``text``, each word as written or as
        one of its lemmas.
    """
    words = [[token] + lemmas.get(token, []) for token in _TOKEN.findall(text.casefold())]
    found = set()
    for start in range(len(words)):
        grams = [""]
        for size in range(MAX_WORDS):
            if start + size >= len(words):
                break
            grams = [f"{gram} {word}" if gram else word for gram in grams for word in words[start + size]][:16]
            found.update(gram for gram in grams if gram in known)
    return found


def _occurrences(text: str, spelled: dict[str, tuple[str, ...]], longest: int) -> dict[str, list[tuple[int, int]]]:
    """Headword → the ``(start, end)`` spans where one of its spellings stands in ``text``."""
    out: dict[str, list[tuple[int, int]]] = {}
    for start in range(len(text)):
        for end in range(start + 1, min(len(text), start + longest) + 1):
            for head in spelled.get(text[start:end], ()):
                out.setdefault(head, []).append((start, end))
    return out


def _alone(head: str, spans: dict[str, list[tuple[int, int]]], rivals: Iterable[str]) -> bool:
    """Whether one of the headword's spans is not inside a longer span of a rival."""
    longer = [span for rival in rivals if rival != head and len(rival) > len(head) for span in spans.get(rival, ())]
    return any(not any(s <= start and end <= e for s, e in longer) for start, end in spans[head])


def count(pairs: Iterable[tuple[str, str]], candidates: dict[str, list[Candidate]],
          lemmas: dict[str, list[str]], max_chars: int = 300) -> Cooccurrence:
    """Count terms, headwords and both over English–Chinese sentence pairs.

    Args:
        pairs: ``(english, chinese)`` sentence pairs.
        candidates: Term → the headwords that may translate it.
        lemmas: Inflected form → its lemmas, for :func:`english_terms`.
        max_chars: Pairs whose Chinese is longer are skipped (paragraphs of documentation).

    Returns:
        The counts.
    """
    spelled: dict[str, set[str]] = {}
    for found in candidates.values():
        for candidate in found:
            for spelling in candidate.spellings:
                spelled.setdefault(spelling, set()).add(candidate.simplified)
    frozen = {spelling: tuple(sorted(heads)) for spelling, heads in spelled.items()}
    longest = max((len(s) for s in frozen), default=1)
    heads_of = {term: tuple(dict.fromkeys(c.simplified for c in found)) for term, found in candidates.items()}
    known = frozenset(candidates)
    sentences, terms, heads, joint = 0, Counter(), Counter(), Counter()
    for english, chinese in pairs:
        if not chinese or len(chinese) > max_chars:
            continue
        sentences += 1
        spans = _occurrences(chinese, frozen, longest)
        heads.update(spans.keys())
        for term in english_terms(english, lemmas, known):
            terms[term] += 1
            rivals = [head for head in heads_of[term] if head in spans]
            for head in rivals:
                if _alone(head, spans, rivals):
                    joint[(term, head)] += 1
    return Cooccurrence(sentences, terms, heads, joint)


@dataclass(frozen=True)
class EvidenceOptions:
    """How much the parallel text's evidence moves a headword up among a term's candidates."""

    everyday: float = 2.0
    """Score gained per unit of Dice over everyday sentences (Tatoeba's training split and
    hsk-sentences-audio)."""
    software: float = 0.5
    """Score gained per unit of Dice over the software catalogs' training rows."""
    max_chars: int = 300
    """Pairs whose Chinese is longer are not read."""


def rerank(ranked: dict[str, list[tuple[float, int]]], heads: list[str], evidence: dict[str, Cooccurrence],
           weights: dict[str, float]) -> dict[str, list[tuple[float, int]]]:
    """Each term's candidates with the evidence added to their scores, best first.

    Args:
        ranked: Term → ``[(score, entry index)]``.
        heads: Entry index → its Simplified headword.
        evidence: Source name → its counts.
        weights: Source name → score gained per unit of Dice.

    Returns:
        Term → ``[(score, entry index)]``, sorted by score (the earlier order breaks ties).
    """
    out = {}
    for term, found in ranked.items():
        scored = []
        for order, (score, index) in enumerate(found):
            gain = sum(weights[name] * counts.dice(term, heads[index]) for name, counts in evidence.items())
            scored.append((round(score + gain, 4), order, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        out[term] = [(score, index) for score, _, index in scored]
    return out
