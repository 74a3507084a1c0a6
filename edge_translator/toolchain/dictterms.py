"""Short interface terms that the software catalogs translate consistently, as extra entries of
the dictionary ("Open File" → 打开文件, "Print Preview" → 打印预览).

A term is an interface string of one to three words (mnemonics, trailing dots and colons
dropped) whose Chinese the rows of at least two packages confirm (see :func:`software_terms`). Its Traditional form is the one the zh_TW catalogs
give beside it, or else CC-CEDICT's, word by word.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from ..core.dictionary import MAX_WORDS, normalize_term
from .dictionary import Entry

_ENGLISH = re.compile(r"^[A-Za-z][A-Za-z'-]*(?: [A-Za-z][A-Za-z'-]*)*$")
_HAN = re.compile(r"^[\u3400-\u9fff]+$")
_WORDS = re.compile(r"[a-z]+(?:['-][a-z]+)*")
#: The marker of an extra entry's source in the data file and in :class:`DictionaryEntry`.
SOFTWARE = "software"


@dataclass(frozen=True)
class Term:
    """An interface term and the translation its packages agree on."""

    english: str
    """The term as the dictionary keys it (lowercase)."""
    simplified: str
    """The Chinese most packages give."""
    traditional: str
    """Its Traditional form."""
    packages: int
    """How many packages give that Chinese."""


def interface_string(text: str) -> str | None:
    """An interface string as a term: ``"_Open File…"`` → ``"open file"``; ``None`` when it is
    not one to :data:`MAX_WORDS` plain words."""
    text = text.replace("_", "").replace("&", "").strip().rstrip(".:…").strip()
    if not _ENGLISH.match(text) or len(text.split()) > MAX_WORDS:
        return None
    return normalize_term(text)


def to_traditional(text: str, entries: list[Entry], longest: int = 8) -> str:
    """Simplified text in Traditional characters, by CC-CEDICT's words, longest first (a
    character no headword has stays as it is)."""
    table: dict[str, str] = {}
    for entry in entries:
        if len(entry.simplified) == len(entry.traditional) and not entry.pinyin[:1].isupper():
            table.setdefault(entry.simplified, entry.traditional)
    out, start = [], 0
    while start < len(text):
        for end in range(min(len(text), start + longest), start, -1):
            if text[start:end] in table or end == start + 1:
                out.append(table.get(text[start:end], text[start:end]))
                start = end
                break
    return "".join(out)


def _character_pairs(entries: list[Entry]) -> set[tuple[str, str]]:
    """Every (Simplified, Traditional) character pair CC-CEDICT's headwords spell."""
    return {pair for entry in entries if len(entry.simplified) == len(entry.traditional)
            for pair in zip(entry.simplified, entry.traditional)}


def _same_text(simplified: str, traditional: str, pairs: set[tuple[str, str]]) -> bool:
    """Whether a zh_TW string is the zh_CN one in Traditional characters, not another wording
    (帧 and 張 are two words for "frame")."""
    return len(simplified) == len(traditional) and all(
        s == t or (s, t) in pairs for s, t in zip(simplified, traditional))


def software_terms(rows: Iterable[tuple[str, str, str, str]], entries: list[Entry],
                   min_packages: int = 2, min_share: float = 0.5, max_chars: int = 8) -> list[Term]:
    """The interface terms whose translation the catalogs confirm.

    A candidate is a row whose English is a term of one to :data:`MAX_WORDS` words and whose
    Chinese is a short run of Chinese characters. The catalogs are deduplicated (a string two
    packages translate alike is one row), so agreement is counted over every row whose English
    holds the term as whole words: the Chinese is confirmed when rows of ``min_packages``
    packages hold it and it stands in ``min_share`` of those rows.

    Args:
        rows: ``(package, zh_hans, zh_hant, en)`` training rows of the software catalogs.
        entries: CC-CEDICT, for Traditional forms the catalogs do not give.
        min_packages: Packages whose rows must hold the term and its Chinese.
        min_share: Share of the rows holding the term that must hold the Chinese.
        max_chars: Longest Chinese kept (Chinese characters only).

    Returns:
        The terms, sorted.
    """
    rows = [row for row in rows if len(row) == 4]
    pairs = _character_pairs(entries)
    given: dict[str, set[str]] = {}
    traditional: dict[str, Counter] = {}
    for _, simplified, hant, english in rows:
        term = interface_string(english)
        simplified = simplified.strip()
        if term and _HAN.match(simplified) and len(simplified) <= max_chars:
            given.setdefault(term, set()).add(simplified)
            if _same_text(simplified, hant.strip(), pairs):
                traditional.setdefault(simplified, Counter())[hant.strip()] += 1
    seen: Counter = Counter()
    packages: dict[tuple[str, str], set[str]] = {}
    support: Counter = Counter()
    for package, simplified, _, english in rows:
        words = _WORDS.findall(english.replace("_", "").replace("&", "").casefold())
        found = {" ".join(words[i:i + n]) for n in range(1, MAX_WORDS + 1) for i in range(len(words) - n + 1)}
        for term in found & given.keys():
            seen[term] += 1
            for chinese in given[term]:
                if chinese in simplified:
                    packages.setdefault((term, chinese), set()).add(package)
                    support[(term, chinese)] += 1
    out = []
    for term, translations in sorted(given.items()):
        best = min(translations, key=lambda zh: (-len(packages.get((term, zh), ())), -support[(term, zh)], zh))
        if len(packages.get((term, best), ())) < min_packages or support[(term, best)] < min_share * seen[term]:
            continue
        forms = traditional.get(best)
        hant = min(forms, key=lambda form: (-forms[form], form)) if forms else to_traditional(best, entries)
        out.append(Term(term, best, hant, len(packages[(term, best)])))
    return out


def term_entry(term: Term) -> Entry:
    """The dictionary entry of an interface term (no reading: the catalogs give none)."""
    return Entry(term.traditional, term.simplified, "", (term.english,), SOFTWARE)
