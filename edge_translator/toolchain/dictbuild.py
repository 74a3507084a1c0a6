"""``edge-translator build-dictionary``: the packaged English→Chinese dictionary, from its sources.

Three packages of the ``dictionary`` extra supply the data: CC-CEDICT (``hsg``'s copy)
gives the entries and their English senses; wordfreq's Chinese list ranks the headwords
that share a sense; lemminflect's lexicon gives the English word list and every inflected
form, of which only those that :func:`~edge_translator.core.inflection.rule_lemmas` cannot
undo are stored. The output is the folder :meth:`~edge_translator.core.dictionary.Dictionary.load`
reads, byte for byte the same for the same inputs.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import re
import shutil
import unicodedata
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core import durable
from ..core.dictionary import FORMAT, FORMAT_VERSION, MANIFEST, SECTIONS, Dictionary
from ..core.errors import ExportError, require
from ..core.inflection import rule_lemmas
from . import dictcooc
from .dictionary import Entry, parse_cedict
from .dictrank import Frequency, RankOptions, rank_entries
from .dictterms import interface_string, software_terms, term_entry

logger = logging.getLogger(__name__)

DATA_FILE = "en-zh.tsv.zlib"
LICENCE = "CC BY-SA 4.0"
#: What each input is, its licence, and what it is used for (the manifest lists them).
SOURCES = {
    "cedict": {"name": "CC-CEDICT", "licence": "CC BY-SA 4.0", "url": "https://cc-cedict.org",
               "package": "hsg", "file": "assets/cedict_ts.u8",
               "used_for": "the entries: headwords, pinyin, glosses; the English terms they translate"},
    "wordfreq": {"name": "wordfreq (Chinese, large)", "licence": "code Apache-2.0, data CC BY-SA 4.0 "
                 "(includes SUBTLEX-CH by Cai & Brysbaert, freely available; OpenSubtitles; Wikipedia)",
                 "url": "https://github.com/rspeer/wordfreq", "package": "wordfreq",
                 "used_for": "ranking the headwords that share an English term, most common first"},
    "lemminflect": {"name": "LemmInflect", "licence": "MIT (its lexicon derives from the NLM SPECIALIST "
                    "Lexicon, distributed without charge)", "url": "https://github.com/bjascob/LemmInflect",
                    "package": "lemminflect",
                    "used_for": "the English word list and the inflected forms the suffix rules cannot undo"},
    "tatoeba": {"name": "Tatoeba (the training split: cmn_id % 20 not 0 or 1)", "licence": "CC BY 2.0 FR",
                "url": "https://tatoeba.org", "package": "hsg", "file": "assets/tatoeba.tsv",
                "used_for": "ranking: how often an English term and each headword share a sentence pair"},
    "hsk_sentences": {"name": "hsk-sentences-audio", "licence": "CC BY-SA 4.0",
                      "url": "https://github.com/no7z/hsk-sentences-audio", "package": "hsk-sentences-audio",
                      "used_for": "ranking: how often an English term and each headword share a sentence pair"},
    "software": {"name": "software catalogs of Debian bookworm (main): the training rows of "
                 "`edge-translator harvest-software` (software.tsv; the held-out packages never read)",
                 "licence": "GPL or LGPL catalogs per package (software-sources.json names each); the dictionary "
                 "keeps short common interface terminology (1-3 words) and counts",
                 "url": "https://www.debian.org", "file": "software.tsv",
                 "used_for": "interface terms of 1-3 words whose Chinese rows of two packages confirm (entries "
                             "marked 'software'); ranking: how often a term and each headword share a row"},
    "software_terms": {"name": "software catalogs of Debian bookworm (main): the training packages' strings of 1-3 "
                       "words before the overlap filter (software-terms.tsv of `edge-translator harvest-software`; "
                       "the held-out packages never read)",
                       "licence": "GPL or LGPL catalogs per package (software-sources.json names each); the "
                       "dictionary keeps short common interface terminology (1-3 words)",
                       "url": "https://www.debian.org", "file": "software-terms.tsv",
                       "used_for": "interface terms of 1-3 words whose Chinese two training packages confirm, also "
                                   "those a held-out package has (\"Open File\"): learnt from the other packages"},
}
_WORD = re.compile(r"^[a-z][a-z'-]*[a-z]$|^[a-z]$")
_TONES = {"a": "āáǎàa", "e": "ēéěèe", "i": "īíǐìi", "o": "ōóǒòo", "u": "ūúǔùu", "ü": "ǖǘǚǜü"}


@dataclass(frozen=True)
class DictBuildOptions:
    """What the built dictionary keeps."""

    entries_per_term: int = 10
    """Entries kept for one English term, best first."""
    rank: RankOptions = field(default_factory=RankOptions)
    """How the entries of one term are ordered."""
    weak_plural: float = 4.0
    """A regular plural whose best entry scores under this (a rare word) ..."""
    plural_margin: float = 1.0
    """... and this much under its singular's best is left to its singular (see
    :func:`drop_weak_plurals`)."""
    evidence: dictcooc.EvidenceOptions = field(default_factory=dictcooc.EvidenceOptions)
    """How much the parallel text's co-occurrence counts move a headword up."""
    lemma_entries: int = 3
    """An inflected form with entries of its own is also offered this many of its lemma's best
    entries ("running": 跑 beside 营运) ..."""
    lemma_penalty: float = 0.5
    """... each scoring this much under what it scores for the lemma, when the form's own
    best scores under :attr:`lemma_weak` ..."""
    lemma_weak: float = 4.5
    """(a rare word: 营运 "running" scores 4.33) ..."""
    lemma_margin: float = 0.5
    """... and this much under the lemma's best (see :func:`offer_lemmas`)."""
    term_packages: int = 2
    """Packages whose rows must confirm an interface term's Chinese (see
    :func:`.dictterms.software_terms`) ..."""
    term_share: float = 0.5
    """... in at least this share of the rows that hold the term."""
    term_score: float = 4.0
    """The score of an interface term's entry before the evidence (a common word's Zipf)."""
    level: int = 9
    """zlib compression level of the data file (zlib, not xz: it decompresses four times
    faster, which keeps loading under 0.3 s)."""


@dataclass(frozen=True)
class Inputs:
    """The data a build reads, and what it records about it."""

    cedict_lines: list[str]
    """CC-CEDICT's text, one line each."""
    frequencies: dict[str, float]
    """Chinese word → frequency (a fraction of all words)."""
    lemmas: dict[str, dict[str, str]]
    """English lemma → its inflected forms (lowercase words) → ``"noun"``, ``"verb"`` or ``"adj"``."""
    versions: dict[str, str]
    """Input key of :data:`SOURCES` → the version of the package that supplied it."""
    sentences: list[tuple[str, str]] = field(default_factory=list)
    """Everyday ``(english, chinese)`` sentence pairs: Tatoeba's training split and
    hsk-sentences-audio."""
    software: list[tuple[str, str, str, str]] = field(default_factory=list)
    """The software catalogs' training rows ``(package, zh_hans, zh_hant, en)``."""
    terms: list[tuple[str, str, str, str]] = field(default_factory=list)
    """The training packages' strings of 1-3 words before the overlap filter, one row per package
    (``software-terms.tsv``); when empty, the interface terms come from :attr:`software` alone."""


def _version(dist: str, extra: str = "dictionary") -> str:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        raise ExportError(f"{dist} is needed to build the dictionary: run `pip install "
                          f"'edge-translator[{extra}]'`") from None


def read_software(path: Path, option: str = "--software") -> list[tuple[str, str, str, str]]:
    """The rows ``(package, zh_hans, zh_hant, en)`` of a ``software.tsv`` or ``software-terms.tsv``.

    Raises:
        ExportError: If the file is missing, or holds a row of a held-out package.
    """
    from .softwaredata import HELDOUT

    path = Path(path)
    if not path.is_file():
        raise ExportError(f"{path} is missing: the software catalogs' training rows come from `edge-translator "
                          f"harvest-software work/software`; pass {option} FILE")
    held = {name for names in HELDOUT.values() for name in names}
    rows = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            cols = line.rstrip("\n").split("\t")
            if len(cols) == 4:
                if cols[0] in held:
                    raise ExportError(f"{path} holds rows of the held-out package {cols[0]}: pass the training rows "
                                      f"of `edge-translator harvest-software` ({option})")
                rows.append((cols[0], cols[1], cols[2], cols[3]))
    return rows


def read_inputs(software: Path, terms: Path | None = None) -> Inputs:
    """The installed packages' data (CC-CEDICT, wordfreq's Chinese list, lemminflect's lexicon,
    Tatoeba's training split, hsk-sentences-audio) and the software catalogs' training rows.

    Args:
        software: The ``software.tsv`` of ``edge-translator harvest-software`` (its held-out
            packages' files are never read).
        terms: Its ``software-terms.tsv`` (the training packages' short strings before the
            overlap filter), or None to take the interface terms from ``software`` alone.

    Raises:
        ExportError: If a package or one of its files is missing.
        MissingDependencyError: If wordfreq or lemminflect cannot be imported.
    """
    from .traindata import cedict_path, hsk_pairs, package_asset, read_pairs, split_pairs, tatoeba_path

    versions = {"cedict": _version("hsg"), "wordfreq": _version("wordfreq"), "lemminflect": _version("lemminflect"),
                "tatoeba": _version("hsg"), "hsk_sentences": _version("hsk-sentences-audio")}
    software_rows = read_software(software)
    versions["software"] = "sha256 " + hashlib.sha256(Path(software).read_bytes()).hexdigest()
    term_rows = []
    if terms is not None:
        term_rows = read_software(terms, "--software-terms")
        versions["software_terms"] = "sha256 " + hashlib.sha256(Path(terms).read_bytes()).hexdigest()
    sentences = [(en, zh) for _, zh, _, en in split_pairs(read_pairs(tatoeba_path()))["train"]]
    sentences += [(en, zh) for zh, en in hsk_pairs()]
    lines = cedict_path().read_text(encoding="utf-8").splitlines()
    wordfreq = require("wordfreq", "dictionary")
    frequencies = dict(wordfreq.get_frequency_dict("zh", "large"))
    lemminflect = require("lemminflect", "dictionary")
    table = package_asset("lemminflect", "lemminflect/resources/infl_lu.csv.gz")
    lemmas: dict[str, dict[str, str]] = {}
    with gzip.open(table, "rt", encoding="utf-8") as handle:
        for line in handle:
            lemma, upos = line.split(",")[:2]
            if lemma.islower() and _WORD.match(lemma) and upos in ("noun", "verb", "adj"):
                forms = lemmas.setdefault(lemma, {})
                for spellings in lemminflect.getAllInflections(lemma, upos.upper()).values():
                    for form in spellings:
                        if form.islower() and _WORD.match(form) and form != lemma:
                            forms.setdefault(form, upos)
    for spellings in lemminflect.getAllInflections("be", "AUX").values():
        lemmas.setdefault("be", {}).update((form, "verb") for form in spellings if form != "be")
    return Inputs(lines, frequencies, lemmas, versions, sentences, software_rows, term_rows)


def pinyin_marks(numbered: str) -> str:
    """CC-CEDICT's numbered pinyin with tone marks: ``"che1 zhan4"`` → ``"chē zhàn"``,
    ``"lu:4"`` → ``"lǜ"``; the neutral tone (5) and anything else are left unmarked."""
    out = []
    for syllable in numbered.split():
        match = re.match(r"^([A-Za-z:]+)([1-5])$", syllable)
        if not match:
            out.append(syllable.replace("u:", "ü").replace("U:", "Ü"))
            continue
        letters, tone = match.group(1).replace("u:", "ü").replace("U:", "Ü"), int(match.group(2))
        lower = letters.lower()
        if tone == 5 or not any(v in lower for v in _TONES):
            out.append(letters)
            continue
        if "a" in lower or "e" in lower:
            at = lower.index("a" if "a" in lower else "e")
        elif "ou" in lower:
            at = lower.index("o")
        else:
            at = max(i for i, ch in enumerate(lower) if ch in _TONES)
        marked = _TONES[lower[at]][tone - 1]
        out.append(letters[:at] + (marked.upper() if letters[at].isupper() else marked) + letters[at + 1:])
    return unicodedata.normalize("NFC", " ".join(out))


def _sorted_lines(lines: Iterable[str]) -> bytes:
    return b"".join(sorted(line.encode("utf-8") + b"\n" for line in lines))


def _base36(number: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        number, rest = divmod(number, 36)
        out = digits[rest] + out
        if not number:
            return out


def _owners(lemmas: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """Inflected form → {lemma: part of speech}."""
    of: dict[str, dict[str, str]] = {}
    for lemma, forms in lemmas.items():
        for form, upos in forms.items():
            of.setdefault(form, {})[lemma] = upos
    return of


def drop_weak_plurals(ranked: dict[str, list[tuple[float, int]]], lemmas: dict[str, dict[str, str]],
                      weak: float, margin: float) -> list[str]:
    """Remove the plurals whose own entries are rare words, so that their singular answers.

    "cities" is a sense of 城邑 only (a rare word), "city" one of 城市: a lookup of "cities"
    should find 城市. A regular plural goes when its best entry scores under ``weak`` and
    ``margin`` under its singular's best; "goods" (商品) and "glasses" keep their own.

    Args:
        ranked: Term → ``[(score, entry index)]``, best first; changed in place.
        lemmas: Lemma → inflected form → part of speech.
        weak: Best score under which a plural's own entries count as rare.
        margin: How much better the singular's best entry must score.

    Returns:
        The plurals removed, sorted.
    """
    removed = set()
    for lemma, forms in lemmas.items():
        for form, upos in forms.items():
            if upos != "noun" or form not in ranked or lemma not in ranked or lemma not in rule_lemmas(form):
                continue
            own, singular = ranked[form][0][0], ranked[lemma][0][0]
            if own < weak and singular - own >= margin:
                removed.add(form)
    for form in removed:
        del ranked[form]
    return sorted(removed)


def inflection_exceptions(lemmas: dict[str, dict[str, str]], words: set[str],
                          strength: dict[str, float]) -> dict[str, list[str]]:
    """The inflected forms that are no term and whose best lemma the suffix rules miss.

    A form's best lemma is the one whose own best entry scores highest ("does" → "do", not
    "doe"). The form needs no entry when the first of its rule candidates that is a known
    word is that lemma ("stopped" → "stop"). The rest ("went", "children", "does") are
    stored with all their lemmas, best first.

    Args:
        lemmas: Lemma → inflected form → part of speech.
        words: The word list (every lemma is in it).
        strength: Term → the score of its best entry.

    Returns:
        Form → its lemmas, in the order the runtime tries them.
    """
    out: dict[str, list[str]] = {}
    for form, owners in sorted(_owners(lemmas).items()):
        if form in strength:
            continue
        order = sorted(owners, key=lambda lemma: (-strength.get(lemma, float("-inf")), lemma))
        known = [c for c in rule_lemmas(form) if c in words]
        if known and known[0] == order[0]:
            continue
        out[form] = order
    return out


def offer_lemmas(ranked: dict[str, list[tuple[float, int]]], lemmas: dict[str, dict[str, str]],
                 heads: list[str], count: int, penalty: float, weak: float, margin: float) -> int:
    """Offer an inflected form that has entries of its own its lemmas' best entries too.

    "running" is a sense of 营运 (to run a business) only; 跑, the first answer for "run",
    should be able to win it. When the form's best entry scores under ``weak`` and ``margin``
    under its lemma's, each lemma's first ``count`` entries join the form's, ``penalty``
    under their score for the lemma, unless the form already has that headword; the
    evidence then decides (see :func:`.dictcooc.rerank`). "heading" (标题) and "moving"
    (感动) keep their own.

    Args:
        ranked: Term → ``[(score, entry index)]``, best first; changed in place.
        lemmas: Lemma → inflected form → part of speech.
        heads: Entry index → its Simplified headword.
        count: Entries offered from each lemma.
        penalty: Score they lose.
        weak: Best score under which a form's own entries count as rare.
        margin: How much better the lemma's best entry must score.

    Returns:
        How many forms were offered entries.
    """
    offered = 0
    for form, owners in sorted(_owners(lemmas).items()):
        strongest = max((ranked[lemma][0][0] for lemma in owners if lemma in ranked), default=None)
        if form not in ranked or strongest is None or not (ranked[form][0][0] < weak
                                                            and strongest - ranked[form][0][0] >= margin):
            continue
        own = {heads[index] for _, index in ranked[form]}
        extra = [(round(score - penalty, 4), index) for lemma in sorted(owners) if lemma in ranked
                 for score, index in ranked[lemma][:count] if heads[index] not in own]
        if extra:
            ranked[form] = sorted(ranked[form] + extra, key=lambda item: -item[0])
            offered += 1
    return offered


def add_terms(ranked: dict[str, list[tuple[float, int]]], entries: list[Entry], inputs: Inputs,
              options: DictBuildOptions) -> int:
    """Add the interface terms of the software catalogs (:func:`.dictterms.software_terms`) that
    CC-CEDICT does not know as entries ("print preview"; "window" keeps 窗户 and 窗口 and
    leaves 窗口's rank to the evidence).

    With :attr:`Inputs.terms`, the short strings are those rows (every training package's,
    including strings a held-out package also has) and the longer rows of :attr:`Inputs.software`
    count towards agreement; the short rows of ``software`` are in ``terms`` already.

    Returns:
        How many entries were added (appended to ``entries``).
    """
    rows = inputs.software
    if inputs.terms:
        rows = inputs.terms + [row for row in inputs.software if interface_string(row[3]) is None]
    added = 0
    for term in software_terms(rows, entries, options.term_packages, options.term_share):
        if term.english in ranked:
            continue
        entries.append(term_entry(term))
        ranked.setdefault(term.english, []).append((options.term_score, len(entries) - 1))
        added += 1
    return added


def gather_evidence(ranked: dict[str, list[tuple[float, int]]], entries: list[Entry], inputs: Inputs,
                    options: DictBuildOptions) -> dict[str, dictcooc.Cooccurrence]:
    """The co-occurrence counts of every term and its candidates, over the everyday sentences
    and over the software rows, apart."""
    candidates = {term: [dictcooc.Candidate(entries[i].simplified, tuple(sorted({entries[i].simplified,
                                                                                  entries[i].traditional})))
                         for _, i in found] for term, found in ranked.items()}
    forms = {form: sorted(owners) for form, owners in _owners(inputs.lemmas).items()}
    software = [(english.replace("_", "").replace("&", ""), chinese) for _, chinese, _, english in inputs.software]
    limit = options.evidence.max_chars
    return {"everyday": dictcooc.count(inputs.sentences, candidates, forms, limit),
            "software": dictcooc.count(software, candidates, forms, limit)}


def build_data(inputs: Inputs, options: DictBuildOptions | None = None) -> tuple[bytes, dict]:
    """The data file's contents (uncompressed) and the manifest's ``data`` and ``counts``.

    Args:
        inputs: What :func:`read_inputs` gathered (or a small excerpt, in tests).
        options: What to keep; the defaults when ``None``.

    Returns:
        ``(data, {"sections": ..., "counts": ...})``.
    """
    options = options or DictBuildOptions()
    entries: list[Entry] = parse_cedict(inputs.cedict_lines)
    frequency = Frequency(inputs.frequencies, options.rank.unknown_zipf)
    ranked = rank_entries(entries, frequency, options.rank)
    added = add_terms(ranked, entries, inputs, options)
    heads = [entry.simplified for entry in entries]
    offered = offer_lemmas(ranked, inputs.lemmas, heads, options.lemma_entries, options.lemma_penalty,
                           options.lemma_weak, options.lemma_margin)
    evidence = gather_evidence(ranked, entries, inputs, options)
    weights = {"everyday": options.evidence.everyday, "software": options.evidence.software}
    ranked = dictcooc.rerank(ranked, heads, evidence, weights)
    drop_weak_plurals(ranked, inputs.lemmas, options.weak_plural, options.plural_margin)
    kept = {term: [index for _, index in found[: options.entries_per_term]] for term, found in ranked.items()}
    used = sorted({index for indexes in kept.values() for index in indexes})
    offsets: dict[int, int] = {}
    entry_lines = []
    position = 0
    for index in used:
        entry = entries[index]
        fields = (entry.simplified, entry.traditional, pinyin_marks(entry.pinyin), "/".join(entry.glosses))
        line = "\t".join(fields + ((entry.source,) if entry.source else ())).encode("utf-8") + b"\n"
        offsets[index] = position
        position += len(line)
        entry_lines.append(line)
    words = {w for w in inputs.lemmas} | {t for t in kept if _WORD.match(t)}
    forms = inflection_exceptions(inputs.lemmas, words, {term: found[0][0] for term, found in ranked.items()})
    sections = {
        "entries": b"".join(entry_lines),
        "terms": _sorted_lines(f"{term}\t{','.join(_base36(offsets[i]) for i in indexes)}"
                               for term, indexes in kept.items()),
        "forms": _sorted_lines(f"{form}\t{','.join(lemmas)}" for form, lemmas in forms.items()),
        "words": _sorted_lines(words),
    }
    data, bounds = b"", {}
    for name in SECTIONS:
        bounds[name] = [len(data), len(data) + len(sections[name])]
        data += sections[name]
    counts = {"entries": len(used), "terms": len(kept), "forms": len(forms), "words": len(words),
              "software_entries": sum(1 for i in used if entries[i].source), "lemma_offers": offered,
              "sentences": {name: counts.sentences for name, counts in evidence.items()}}
    logger.debug("interface terms added: %d", added)
    return data, {"sections": bounds, "counts": counts}


def _cedict_version(lines: list[str]) -> str:
    for line in lines[:60]:
        if line.startswith("#! date="):
            return line.split("=", 1)[1].strip()
    return "unknown"


def build_dictionary(out: Path, inputs: Inputs | None = None, options: DictBuildOptions | None = None,
                     force: bool = False, software: Path = Path("work/software/software.tsv"),
                     terms: Path | None = None) -> dict:
    """Write a dictionary folder: ``dictionary.json`` and the zlib-compressed data file.

    Args:
        out: The folder to write (created; an existing one only with ``force``).
        inputs: The data; :func:`read_inputs` when ``None``.
        options: What to keep; the defaults when ``None``.
        force: Replace ``out`` if it exists.
        software: The software catalogs' training rows, for :func:`read_inputs`.
        terms: The training packages' short strings (``software-terms.tsv``), for
            :func:`read_inputs`.

    Returns:
        The manifest written.

    Raises:
        ExportError: If ``out`` exists without ``force``, or an input is missing.
    """
    options = options or DictBuildOptions()
    out = Path(out)
    if out.exists() and not force:
        raise ExportError(f"{out} exists; pass --force to replace it")
    inputs = inputs or read_inputs(software, terms)
    data, layout = build_data(inputs, options)
    packed = zlib.compress(data, options.level)
    cedict_date = _cedict_version(inputs.cedict_lines)
    sources = []
    for key, source in SOURCES.items():
        if key == "software_terms" and key not in inputs.versions:
            continue  # interface terms from software.tsv alone
        source = dict(source, version=inputs.versions.get(key, "unknown"))
        if key == "cedict":
            source["date"] = cedict_date
        sources.append(source)
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION, "name": "en-zh",
        "source_language": "en", "target_language": "zh",
        "source": f"CC-CEDICT {cedict_date} and interface terms of Debian's software catalogs, ranked by wordfreq "
                  f"{inputs.versions.get('wordfreq', '?')} and co-occurrence in Tatoeba, HSK sentences and the catalogs",
        "version": cedict_date, "licence": LICENCE, "sources": sources, "counts": layout["counts"],
        "data": {"file": DATA_FILE, "compression": "zlib", "length": len(data), "sections": layout["sections"]},
        "files": {DATA_FILE: {"sha256": hashlib.sha256(packed).hexdigest(), "size": len(packed)}},
        "options": asdict(options),
    }
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / DATA_FILE).write_bytes(packed)
    (staging / MANIFEST).write_text(json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                                    encoding="utf-8")
    Dictionary.load(staging)  # what was written must load
    durable.fsync_tree(staging)
    if out.exists():
        shutil.rmtree(out)
    staging.rename(out)
    durable.fsync_dir(out.parent)
    logger.info("dictionary %s: %s, %d bytes", out, layout["counts"], len(packed))
    return manifest
