"""The dictionary's evaluation: a sample of lone English words and one of short terms, how they
are drawn from sources apart from the dictionary's own ranking, and the metric.

Words: English base forms (nouns, verbs, adjectives) that HSK 3.0 words of levels 1–4 give as
a definition (``hsg``'s ``assets/hsk_new.csv``), common in English (wordfreq Zipf ≥ 3.5);
accepted: every HSK word of levels 1–6 that gives it. Terms: two- and three-word noun
compounds and phrasal verbs among the definitions of HSK levels 1–6 (accepted: every HSK word
that gives it), two- and three-word interface strings of the held-out software packages
(accepted: the zh_CN translation they give; never the training rows the dictionary is built
from), and a hand-written
list of everyday compounds (``assets/eval/dict-everyday.tsv``). Each sample is split in two
by the SHA-256 of the English: ``-dev`` for choosing the ranking's weights, the other for
reporting.

Metric: a row is right when :meth:`~edge_translator.core.dictionary.Dictionary.best` returns
one of its accepted headwords; no answer is wrong. Also reported: coverage (any answer),
precision (right among answered), top-3 (an accepted headword among the first three), the
main-sense variant (only the HSK words whose first definition the row is) and a looser one
(also right when the answer's own first CC-CEDICT sense is the row's English).
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.dictionary import Dictionary, normalize_term
from ..core.errors import require
from .dictionary import clean_gloss

#: Particles that make a phrasal verb ("give up", "look after", "log in").
PARTICLES = frozenset("up down off on out in over away back around about after for through along".split())
_POS = ("NOUN", "VERB", "ADJ")
_LEVELS = {"1", "2", "3", "4", "5", "6"}
#: Words that make no compound: pronouns, modals, quantifiers, degree words.
_FUNCTION = frozenset("i you he she we they it me him her us them may can will shall must might could would should "
                      "any all some more most no not each every other such own same very much many few less least "
                      "just only also still even well so too".split())
_HAN = re.compile(r"^[\u3400-\u9fff]+$")
_WORDS = re.compile(r"^[A-Za-z]+(?: [A-Za-z]+){1,2}$")


@dataclass(frozen=True)
class SampleRow:
    """One English word or term and the Chinese that counts as right."""

    english: str
    """The word or term, as a user would type it."""
    accepted: frozenset[str]
    """Simplified headwords that count as right."""
    main: frozenset[str]
    """Those of them whose first sense it is (the stricter metric); all of them for rows not
    from HSK."""
    origin: str
    """Where the row comes from: ``hsk``, ``software`` or ``everyday``."""


def hsk_rows() -> list[tuple[str, str, str]]:
    """``(level, simplified, definitions)`` of HSK 3.0 (``hsg``'s ``assets/hsk_new.csv``);
    the level is ``"1"`` … ``"6"`` or ``"7-9"``."""
    from .traindata import package_asset

    with open(package_asset("hsg", "assets/hsk_new.csv"), encoding="utf-8") as handle:
        return [(r["level"].strip(), r["simplified"].strip(), r["definitions"]) for r in csv.DictReader(handle)
                if r.get("simplified", "").strip()]


def senses(definitions: str) -> list[str]:
    """The cleaned, normalized English senses of an HSK definition (or a CC-CEDICT gloss)."""
    out = []
    for part in definitions.split("; "):
        cleaned = clean_gloss(re.sub(r"\([^()]*\)", " ", part), max_words=3)
        term = normalize_term(cleaned) if cleaned else ""
        if term and term not in out:
            out.append(term)
    return out


def _index(rows: Iterable[tuple[str, str, str]], levels: set[str], first: bool = False) -> dict[str, set[str]]:
    """English sense → the HSK words of these levels that give it (as their first sense only,
    with ``first``)."""
    index: dict[str, set[str]] = {}
    for level, simplified, definitions in rows:
        if level in levels:
            for sense in senses(definitions)[:1] if first else senses(definitions):
                index.setdefault(sense, set()).add(simplified)
    return index


class English:
    """Part of speech and commonness of English words (lemminflect, wordfreq: extra ``dictionary``)."""

    def __init__(self):
        self._lemmas = require("lemminflect", "dictionary").getAllLemmas
        self._zipf = require("wordfreq", "dictionary").zipf_frequency

    def zipf(self, word: str) -> float:
        """Zipf frequency of an English word."""
        return self._zipf(word, "en")

    def base(self, word: str, pos: tuple[str, ...] = _POS) -> bool:
        """Whether the word is its own lemma as one of these parts of speech."""
        found = self._lemmas(word)
        return any(word in found.get(p, ()) for p in pos)

    def plural(self, word: str) -> bool:
        """Whether the word is a noun's plural."""
        return any(lemma != word for lemma in self._lemmas(word).get("NOUN", ()))


def word_sample(rows: list[tuple[str, str, str]], english: English, min_zipf: float = 3.5) -> list[SampleRow]:
    """Lone words: the base-form nouns, verbs and adjectives that HSK levels 1–4 define,
    each with the HSK words of levels 1–6 that define it."""
    candidates = _index(rows, {"1", "2", "3", "4"})
    accepted = _index(rows, _LEVELS)
    main = _index(rows, _LEVELS, first=True)
    return [SampleRow(word, frozenset(accepted[word]), frozenset(main.get(word, ())), "hsk") for word in sorted(candidates)
            if " " not in word and word.isalpha() and english.base(word) and english.zipf(word) >= min_zipf]


def is_term(words: list[str], english: English) -> bool:
    """Whether 2–3 words make a noun compound (nouns, adjectives or verbs before a noun:
    "plastic bag", "open file") or a phrasal verb (a verb and particles: "give up")."""
    if len(words) not in (2, 3) or _FUNCTION & set(words):
        return False
    if english.base(words[0], ("VERB",)) and all(w in PARTICLES for w in words[1:]):
        return True
    last = words[-1]
    return (english.base(last, ("NOUN",)) or english.plural(last)) and all(
        english.base(w, ("NOUN", "ADJ", "VERB")) for w in words[:-1])


def hsk_term_sample(rows: list[tuple[str, str, str]], english: English, min_zipf: float = 3.0) -> list[SampleRow]:
    """Short terms of HSK levels 1–6: noun compounds and phrasal verbs of common words."""
    index = _index(rows, _LEVELS)
    main = _index(rows, _LEVELS, first=True)
    out = []
    for term, heads in sorted(index.items()):
        words = term.split()
        if _WORDS.match(term) and term.islower() and is_term(words, english) \
                and all(english.zipf(w) >= min_zipf for w in words):
            out.append(SampleRow(term, frozenset(heads), frozenset(main.get(term, ())), "hsk"))
    return out


def software_term_sample(paths: Iterable[Path], english: English, min_packages: int = 1,
                         min_zipf: float = 3.5) -> list[SampleRow]:
    """Interface strings of 2–3 common words that ``min_packages`` packages translate, each
    with every zh_CN translation seen (TSV: origin, zh_hans, zh_hant, en)."""
    seen: dict[str, set[str]] = {}
    packages: dict[str, set[str]] = {}
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                cols = line.rstrip("\n").split("\t")
                if len(cols) < 4:
                    continue
                text = cols[3].strip().rstrip(".:…").replace("_", "").replace("&", "").strip()
                zh = cols[1].strip()
                if _WORDS.match(text) and _HAN.match(zh) and len(zh) <= 8:
                    seen.setdefault(text.lower(), set()).add(zh)
                    packages.setdefault(text.lower(), set()).add(cols[0])
    return [SampleRow(term, frozenset(seen[term]), frozenset(seen[term]), "software") for term in sorted(seen)
            if len(packages[term]) >= min_packages and is_term(term.split(), english)
            and all(english.zipf(w) >= min_zipf for w in term.split())]


def split(rows: Iterable[SampleRow]) -> tuple[list[SampleRow], list[SampleRow]]:
    """``(dev, test)``: a row is dev when the first byte of the SHA-256 of its English is even."""
    dev, test = [], []
    for row in rows:
        (dev if hashlib.sha256(row.english.encode("utf-8")).digest()[0] % 2 == 0 else test).append(row)
    return dev, test


def write_sample(path: Path, rows: Iterable[SampleRow]) -> None:
    """Write rows as TSV: English, accepted headwords and main-sense headwords (each joined by
    ``|``, sorted), origin."""
    lines = [f"{r.english}\t{'|'.join(sorted(r.accepted))}\t{'|'.join(sorted(r.main))}\t{r.origin}\n"
             for r in rows]
    Path(path).write_text("".join(lines), encoding="utf-8")


def read_sample(path: Path, origin: str = "") -> list[SampleRow]:
    """Rows from a file :func:`write_sample` wrote, or of two columns (English, accepted:
    every one counts as main) given ``origin``."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        cols = line.split("\t")
        if len(cols) < 2 or not cols[0] or line.startswith("#"):
            continue
        accepted = frozenset(cols[1].split("|"))
        if len(cols) >= 4:
            rows.append(SampleRow(cols[0], accepted, frozenset(filter(None, cols[2].split("|"))), cols[3]))
        else:
            rows.append(SampleRow(cols[0], accepted, accepted, origin))
    return rows


def score(answer: Callable[[str], list[str]], rows: list[SampleRow],
          primary: Callable[[str], bool] | None = None) -> dict:
    """The metric on one sample.

    Args:
        answer: English → headwords, best first (e.g. :func:`dictionary_answer`); ``[]`` for
            no answer.
        rows: The sample.
        primary: English → whether the answer's first sense is that English
            (:func:`dictionary_primary`), for the looser variant; left out when ``None``.

    Returns:
        ``rows``, ``right`` and ``accuracy`` (the first headword is accepted; no answer is
        wrong), ``answered`` and ``coverage``, ``precision`` (right among answered), ``top3``,
        ``main_rows`` and ``main_accuracy`` (the first headword is one whose first sense the
        row is, over the rows that have such headwords), ``by_origin`` (accuracy per origin)
        ``misses`` (``(english, answer or "", accepted)``) and, with ``primary``,
        ``loose_accuracy`` (accepted, or the answer's own first sense is the row's English:
        口音 "accent" where HSK only accepts 调).
    """
    right = answered = top3 = main_rows = main_right = loose = 0
    by_origin: dict[str, list[int]] = {}
    misses = []
    for row in rows:
        heads = answer(row.english)
        ok = bool(heads) and heads[0] in row.accepted
        right += ok
        loose += ok or bool(heads) and primary is not None and primary(row.english)
        answered += bool(heads)
        top3 += any(h in row.accepted for h in heads[:3])
        if row.main:
            main_rows += 1
            main_right += bool(heads) and heads[0] in row.main
        counts = by_origin.setdefault(row.origin, [0, 0])
        counts[0] += ok
        counts[1] += 1
        if not ok:
            misses.append((row.english, heads[0] if heads else "", "|".join(sorted(row.accepted))))
    total = max(len(rows), 1)
    extra = {"loose_accuracy": round(loose / total, 4)} if primary is not None else {}
    return extra | {"rows": len(rows), "right": right, "accuracy": round(right / total, 4), "answered": answered,
            "coverage": round(answered / total, 4), "precision": round(right / max(answered, 1), 4),
            "top3": round(top3 / total, 4), "main_rows": main_rows,
            "main_accuracy": round(main_right / max(main_rows, 1), 4),
            "by_origin": {k: round(v[0] / v[1], 4) for k, v in sorted(by_origin.items())}, "misses": misses}


def dictionary_answer(dictionary: Dictionary, target: str = "zh-Hans") -> Callable[[str], list[str]]:
    """The answers :func:`score` takes, from a dictionary: its headwords, best first, unique."""
    def answer(term: str) -> list[str]:
        return list(dict.fromkeys(entry.headword(target) for entry in dictionary.lookup(term)))
    return answer


def dictionary_primary(dictionary: Dictionary) -> Callable[[str], bool]:
    """For the looser metric: whether the first entry :meth:`Dictionary.lookup` returns for a
    term has that term as its own first sense."""
    def primary(term: str) -> bool:
        entries = dictionary.lookup(term)
        return bool(entries) and senses(entries[0].glosses[0])[:1] == [normalize_term(term)]
    return primary


def make_samples(out: Path, software: list[Path], everyday: Path, min_packages: int = 1) -> dict[str, int]:
    """Draw the samples and write ``dict-words{,-dev}.tsv`` and ``dict-terms{,-dev}.tsv``.

    Args:
        out: The folder (``assets/eval``).
        software: The software catalogs' TSV files (origin, zh_hans, zh_hant, en): the
            held-out packages' (``software-test.tsv``, ``software-dev.tsv``), never the rows
            the dictionary is built from.
        everyday: The hand-written everyday compounds (English, accepted).
        min_packages: Packages that must translate an interface string for it to be drawn.

    Returns:
        File name → rows written.
    """
    english = English()
    rows = hsk_rows()
    words = word_sample(rows, english)
    terms = (hsk_term_sample(rows, english) + software_term_sample(software, english, min_packages)
             + read_sample(everyday, "everyday"))
    unique: dict[str, SampleRow] = {}
    for row in terms:  # a term in two sources keeps the first, HSK before software before everyday
        unique.setdefault(row.english.casefold(), row)
    written = {}
    for name, sample in (("words", words), ("terms", list(unique.values()))):
        dev, test = split(sample)
        for suffix, part in (("-dev", dev), ("", test)):
            write_sample(Path(out) / f"dict-{name}{suffix}.tsv", part)
            written[f"dict-{name}{suffix}.tsv"] = len(part)
    return written


def package_agreement(terms: Path, sample: list[SampleRow],
                      answer: Callable[[str], list[str]] | None = None) -> dict:
    """How often translators of one interface string agree: the ceiling of the exact-match
    metric on the software rows, which accepts only the held-out package's own Chinese.

    Args:
        terms: ``software-terms.tsv`` of ``harvest-software`` (the training packages' strings of
            1–3 words, one row per package: package, zh_hans, zh_hant, en).
        sample: The term sample; only its ``software`` rows are read.
        answer: The dictionary's answers, to score the rows a training package has apart from
            the rest.

    Returns:
        ``strings`` (2–3-word strings that two or more training packages translate) and
        ``agree`` (a package's Chinese equals the other packages' commonest, counted per
        package); ``rows`` (the sample's software rows), ``seen`` (of them, strings a training
        package has) and ``majority`` (of those, where the training packages' commonest Chinese
        is the held-out package's); with ``answer``, ``right_seen`` and ``right_unseen``.
    """
    by: dict[str, dict[str, Counter]] = {}
    with open(terms, encoding="utf-8") as handle:
        for line in handle:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 4:
                text = cols[3].strip().rstrip(".:…").replace("_", "").replace("&", "").strip().lower()
                by.setdefault(text, {}).setdefault(cols[0], Counter())[cols[1]] += 1
    strings = agree = 0
    for text, packages in by.items():
        if 2 <= len(text.split()) <= 3 and len(packages) >= 2:
            tops = [counts.most_common(1)[0][0] for counts in packages.values()]
            for i, top in enumerate(tops):
                strings += 1
                agree += Counter(tops[:i] + tops[i + 1:]).most_common(1)[0][0] == top
    rows = [row for row in sample if row.origin == "software"]
    seen = majority = right_seen = right_unseen = 0
    for row in rows:
        heads = answer(row.english) if answer else []
        right = bool(heads) and heads[0] in row.accepted
        packages = by.get(row.english)
        if packages:
            votes = Counter(counts.most_common(1)[0][0] for counts in packages.values())
            seen += 1
            majority += votes.most_common(1)[0][0] in row.accepted
            right_seen += right
        else:
            right_unseen += right
    out = {"strings": strings, "agree": agree, "rows": len(rows), "seen": seen, "majority": majority}
    return out | ({"right_seen": right_seen, "right_unseen": right_unseen} if answer else {})


def with_model(answer: Callable[[str], list[str]], rows: list[SampleRow], model: list[str]) -> dict:
    """The sample as ``translate()`` answers it: the dictionary's best headword where it has
    one, else the model's translation (sentence-final marks stripped).

    Args:
        answer: The dictionary's answers (:func:`dictionary_answer`).
        rows: The sample.
        model: The model's translation of each row's English, the dictionary off.

    Returns:
        ``model`` (the model alone right), ``product`` (what a user gets), ``either`` (the
        dictionary or the model right: what a choice between them could reach), each a share
        of the rows, and ``by_origin`` (``product`` per origin).
    """
    alone = product = either = 0
    by_origin: dict[str, list[int]] = {}
    for row, text in zip(rows, model, strict=True):
        heads = answer(row.english)
        from_dictionary = bool(heads) and heads[0] in row.accepted
        from_model = text.strip().rstrip("。！？.!?").strip() in row.accepted
        got = from_dictionary if heads else from_model
        alone += from_model
        product += got
        either += from_dictionary or from_model
        counts = by_origin.setdefault(row.origin, [0, 0])
        counts[0] += got
        counts[1] += 1
    total = max(len(rows), 1)
    return {"model": round(alone / total, 4), "product": round(product / total, 4),
            "either": round(either / total, 4), "by_origin": {k: round(v[0] / v[1], 4) for k, v in sorted(by_origin.items())}}
