"""Which English terms a CC-CEDICT entry translates, and how good an answer it is to each.

An entry answers a term when one of its senses, cleaned (``"to walk"`` → ``"walk"``,
``"(of a person) tall"`` → ``"tall"``), is that term; a term that is merely a word inside a
longer sense does not count. Among the entries that answer one term, the best comes first:
the more common its Chinese headword (a word-frequency list), the earlier the sense stands
in the entry (the first is the main one), and the fewer marks it carries of a rare, literary,
regional, variant, surname or bound-form entry.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.dictionary import MAX_WORDS, normalize_term
from .dictionary import Entry, clean_gloss

#: Senses that are cross-references or notes, not translations: they give no term.
_NOT_A_SENSE = ("variant of", "old variant of", "archaic variant of", "japanese variant of", "erhua variant",
                "see ", "see also", "abbr. for", "abbr. of", "surname ", "cl:", "used in ", "also written",
                "also pr.", "also called", "also known as", "pr. ", "classifier for", "(classifier",
                "radical ", "kangxi radical", "same as", "equivalent to", "component in", "interjection",
                "particle", "(particle", "(onom.", "phonetic", "(phonetic", "letter ", "(used in",
                "(in names)", "taiwan pr.", "name of ", "(sound of", "(name of")
#: A sense marked as rare in use: literary, old, regional speech, slang, an idiom.
_REGISTER = ("(literary", "(archaic", "(old)", "(classical", "(obsolete", "(dialect", "(cantonese",
             "(slang", "(vulgar", "(derog", "(internet", "(neologism", "(euph", "(idiom", "(old-fashioned",
             "(in ancient", "(formal", "(polite", "(honorific", "(humble", "(loanword", "(archaic")
#: A sense of one region's usage other than the Mainland's.
_REGIONAL = ("(tw)", "(hk)", "(taiwan", "(hong kong", "(singapore", "(macau")
#: An entry whose first sense says it is another spelling.
_VARIANT = ("variant of", "old variant of", "archaic variant of", "japanese variant of", "erhua variant of")
_OBJECT = re.compile(r" (someone|something|oneself|one's|someone's)( [a-z]+)?$")


@dataclass(frozen=True)
class RankOptions:
    """How the entries that answer one English term are ordered (higher score first)."""

    position: float = 0.3
    """Score lost per sense before the matching one (the first sense is the main one)."""
    position_cap: int = 6
    """Senses counted at most for :attr:`position`."""
    register: float = 2.5
    """Lost by a sense marked literary, archaic, dialect, slang, idiom..."""
    regional: float = 1.0
    """Lost by a sense marked as Taiwan's or Hong Kong's usage."""
    variant: float = 3.0
    """Lost by an entry that is a variant spelling of another."""
    homograph: float = 1.0
    """Lost by a one-character entry that shares its Simplified headword with a fuller one
    (more senses): the character's frequency belongs mostly to that one (檯 "table" against
    臺, both 台)."""
    homograph_cap: float = 4.5
    """Highest Zipf frequency such a minor reading is counted with (的 "clear", dì, is not
    as common as 的, de)."""
    surname: float = 1.5
    """Lost by an entry whose first sense is a surname."""
    proper: float = 1.5
    """Lost by a proper noun (capitalized pinyin) and by a capitalized sense."""
    bound: float = 1.0
    """Lost by a sense marked as a bound form (a character that is no word alone)."""
    single_char: float = 0.15
    """Lost by a one-character headword (their counts include uses inside longer words)."""
    object_dropped: float = 0.5
    """Lost by a term made by dropping "someone"/"something" from a sense ("look after someone")."""
    not_han: float = 0.5
    """Lost by a headword with letters, digits or punctuation."""
    unknown_zipf: float = 1.0
    """Zipf frequency of a headword the frequency list cannot make up from its words."""


@dataclass(frozen=True)
class Sense:
    """One English term an entry answers, and the marks that lower it."""

    term: str
    """The term, as :func:`~edge_translator.core.dictionary.normalize_term` writes it."""
    position: int
    """How many senses stand before this one in the entry."""
    marks: tuple[str, ...]
    """The :class:`RankOptions` penalties that apply, by field name (the entry's included)."""

    def penalty(self, options: RankOptions) -> float:
        """The score this sense loses: its position and its marks."""
        return options.position * min(self.position, options.position_cap) + sum(
            getattr(options, mark) for mark in self.marks)


def _senses(entry: Entry) -> list[str]:
    """The entry's senses: its glosses, each split at "; ", in order."""
    return [part.strip() for gloss in entry.glosses for part in gloss.split("; ") if part.strip()]


def _has_han_only(text: str) -> bool:
    return all("\u3400" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff" or ch >= "\U00020000" for ch in text)


def entry_marks(entry: Entry) -> tuple[str, ...]:
    """The penalties of the whole entry, whatever the sense: a variant, a surname, a proper
    noun, a minor reading, one character, not only Chinese characters."""
    senses = [sense.casefold() for sense in _senses(entry)]
    marks = []
    if senses and senses[0].startswith(_VARIANT):
        marks.append("variant")
    if senses and senses[0].startswith("surname "):
        marks.append("surname")
    if entry.pinyin[:1].isupper():
        marks.append("proper")
    if len(entry.simplified) == 1:
        marks.append("single_char")
    if not _has_han_only(entry.simplified):
        marks.append("not_han")
    return tuple(marks)


def entry_senses(entry: Entry, extra: tuple[str, ...] = ()) -> list[Sense]:
    """Every English term of up to :data:`MAX_WORDS` words that the entry translates.

    Args:
        entry: One CC-CEDICT line.
        extra: Marks of the entry known from outside it (``homograph``).

    Returns:
        One :class:`Sense` per term, at its earliest position, in order.
    """
    base = entry_marks(entry) + extra
    all_senses = _senses(entry)
    found: dict[str, Sense] = {}
    for position, sense in enumerate(all_senses):
        lower = sense.casefold()
        if lower.startswith(_NOT_A_SENSE) or lower.startswith(("lit. ", "fig. ")):
            continue
        marks = list(base)
        if any(mark in lower for mark in _REGISTER):
            marks.append("register")
        if any(mark in lower for mark in _REGIONAL):
            marks.append("regional")
        if "(bound form)" in lower:
            marks.append("bound")
        text = re.sub(r"\([^()]*\)", " ", sense)  # qualifiers: "(of a person) tall" → "tall"
        cleaned = clean_gloss(text, max_words=MAX_WORDS + 1)
        if not cleaned:
            continue
        if cleaned[:1].isupper() and "proper" not in marks:
            marks.append("proper")
        candidates = [(normalize_term(cleaned), tuple(marks))]
        dropped = _OBJECT.sub("", cleaned)
        if dropped != cleaned:
            candidates.append((normalize_term(dropped), tuple(marks) + ("object_dropped",)))
        for term, term_marks in candidates:
            if term and len(term.split()) <= MAX_WORDS and term not in found:
                found[term] = Sense(term, position, term_marks)
    return list(found.values())


class Frequency:
    """Zipf frequencies of Chinese words from a word → frequency list (e.g. wordfreq's).

    A headword the list lacks is split into listed words, as wordfreq's own lookup does with
    jieba: the split with the highest combined frequency (``1/f = Σ 1/fᵢ``, divided by ten for
    each inferred break); a headword with a character the list lacks gets
    :attr:`RankOptions.unknown_zipf`.
    """

    def __init__(self, frequencies: dict[str, float], unknown_zipf: float = 1.0, longest: int = 8):
        self._freq = frequencies
        self._unknown = unknown_zipf
        self._longest = longest
        self._cache: dict[str, float] = {}

    def zipf(self, word: str) -> float:
        """The word's Zipf frequency (log10 of occurrences per billion words)."""
        if word not in self._cache:
            freq = self._freq.get(word) or self._split(word)
            self._cache[word] = round(math.log10(freq) + 9, 3) if freq else self._unknown
        return self._cache[word]

    def _split(self, word: str) -> float:
        """The frequency of the split into the fewest listed words (then the most frequent)."""
        best: list[tuple[int, float] | None] = [(0, 0.0)] + [None] * len(word)  # (parts, Σ 1/f)
        for end in range(1, len(word) + 1):
            for start in range(max(0, end - self._longest), end):
                part, before = self._freq.get(word[start:end]), best[start]
                if part and before is not None:
                    candidate = (before[0] + 1, before[1] + 1 / part)
                    if best[end] is None or candidate < best[end]:
                        best[end] = candidate
        found = best[len(word)]
        if not word or found is None:
            return 0.0
        return 1 / found[1] / 10 ** (found[0] - 1)


def minor_homographs(entries: list[Entry]) -> set[int]:
    """Indexes of the one-character entries that share their Simplified headword with a fuller one.

    Among the common-noun entries (lowercase pinyin) of one character, the one with the most
    senses (the first of equals) is the main one; the others are minor. Proper nouns are
    neither: they have their own penalty. Longer headwords are left alone: their readings
    share the frequency more evenly (台风 "typhoon" is the shorter entry, and the commoner).
    """
    main: dict[str, tuple[int, int]] = {}
    for index, entry in enumerate(entries):
        if entry.pinyin[:1].isupper() or len(entry.simplified) != 1:
            continue
        count = len(_senses(entry))
        if entry.simplified not in main or count > main[entry.simplified][0]:
            main[entry.simplified] = (count, index)
    return {index for index, entry in enumerate(entries)
            if entry.simplified in main and not entry.pinyin[:1].isupper() and main[entry.simplified][1] != index}


def rank_entries(entries: Iterable[Entry], frequency: Frequency,
                 options: RankOptions | None = None) -> dict[str, list[tuple[float, int]]]:
    """Every English term → the entries that answer it, best first.

    Args:
        entries: CC-CEDICT entries, in a fixed order (their index identifies them).
        frequency: Zipf frequencies of Simplified headwords.
        options: The weights; the defaults when ``None``.

    Returns:
        ``{term: [(score, entry index), ...]}`` sorted by score, then by fewer senses (老师
        "teacher" before 先生 "teacher; husband; Mister"), then entry index.
    """
    options = options or RankOptions()
    entries = list(entries)
    minor = minor_homographs(entries)
    by_term: dict[str, list[tuple[float, int]]] = {}
    for index, entry in enumerate(entries):
        zipf = frequency.zipf(entry.simplified)
        if index in minor:
            zipf = min(zipf, options.homograph_cap)
        for sense in entry_senses(entry, ("homograph",) if index in minor else ()):
            by_term.setdefault(sense.term, []).append((round(zipf - sense.penalty(options), 4), index))
    size = [len(_senses(entry)) for entry in entries]
    for ranked in by_term.values():
        ranked.sort(key=lambda item: (-item[0], size[item[1]], item[1]))
    return by_term
