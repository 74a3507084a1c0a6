"""The offline English→Chinese dictionary for lone words and short terms, and an English word list.

A dictionary is a folder: ``dictionary.json`` (the manifest: format, sources, licence,
counts, and the sha256 and size of the data file) and one zlib-compressed data file of sorted
lines in four sections: the entries (``simplified, traditional, pinyin, glosses``, and the
source of an entry not from CC-CEDICT), the terms (an English term → its entries, best
first), the inflected forms the suffix rules of :mod:`.inflection` cannot undo (``went`` →
``go``), and the English words. Loading verifies
the checksum and keeps the decompressed bytes; a lookup is a binary search over them, so
nothing is parsed until it is asked for. ``edge-translator build-dictionary`` writes the folder.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import unicodedata
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BundleError
from .inflection import rule_lemmas

logger = logging.getLogger(__name__)

MANIFEST = "dictionary.json"
FORMAT = "edge-translator-dictionary"
FORMAT_VERSION = 2
#: The packaged dictionary, under ``edge_translator/dictionaries/``.
DEFAULT_DICTIONARY = "en-zh"
#: The sections of the data file, in order.
SECTIONS = ("entries", "terms", "forms", "words")
#: Longest term looked up, in words.
MAX_WORDS = 3
#: Words dropped from the front of a term: articles, and "to" before a verb.
LEADING = ("a", "an", "the", "to")

_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u201c": '"', "\u201d": '"', "\u00ab": '"',
                         "\u00bb": '"', "\u2010": "-", "\u2011": "-", "\u2013": "-", "\u2014": "-"})
_EDGES = "\"'.,;:!?¡¿()[]{}<>…*•·_/\\|~ \t\r\n-"
_lock = threading.Lock()
_default: Dictionary | None = None


def normalize_term(text: str) -> str:
    """A term as the dictionary keys it: NFKC, case-folded, curly quotes made straight,
    punctuation and quotes at both ends stripped, spaces collapsed, and a leading "a", "an",
    "the" or "to" dropped when words follow (``"To walk."`` → ``"walk"``)."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    words = " ".join(text.split()).strip(_EDGES).split()
    if len(words) > 1 and words[0] in LEADING:
        words = words[1:]
    return " ".join(words).strip(_EDGES)


def packaged_folder() -> Path:
    """Where the packaged en-zh dictionary lives: inside the installed package."""
    return Path(__file__).resolve().parent.parent / "dictionaries" / DEFAULT_DICTIONARY


@dataclass(frozen=True)
class DictionaryEntry:
    """One CC-CEDICT entry."""

    simplified: str
    """The headword in Simplified characters."""
    traditional: str
    """The headword in Traditional characters."""
    pinyin: str
    """Its reading, with tone marks: ``"chē zhàn"``."""
    glosses: tuple[str, ...]
    """The CC-CEDICT glosses, in the dictionary's order (an interface term's English)."""
    source: str = "cc-cedict"
    """Where the entry comes from: ``"cc-cedict"``, or ``"software"`` for an interface term of
    the software catalogs (no pinyin)."""

    def headword(self, target: str = "zh-Hans") -> str:
        """The headword in the script a target asks for: Traditional for ``"zh-Hant"``, else
        Simplified."""
        return self.traditional if target == "zh-Hant" else self.simplified


def _find(data: bytes, start: int, end: int, probe: bytes) -> int:
    """Binary search of sorted ``\\n``-terminated lines in ``data[start:end]``.

    Returns:
        The offset of the line that starts with ``probe`` (a key and its separator), or -1.
    """
    lo, hi = start, end
    while lo < hi:
        mid = (lo + hi) // 2
        line = max(data.rfind(b"\n", lo, mid) + 1, lo)
        after = data.index(b"\n", line) + 1
        if data[line:after] < probe:
            lo = after
        else:
            hi = line
    return lo if lo < end and data.startswith(probe, lo) else -1


class Dictionary:
    """An English→Chinese dictionary of words and terms of up to :data:`MAX_WORDS` words.

    Immutable once loaded, so one instance can serve every thread. Build it with
    :meth:`load`; ``__init__`` takes the verified data (for tests).
    """

    def __init__(self, data: bytes, sections: dict[str, tuple[int, int]], info: dict[str, Any]):
        self._data = data
        self._sections = sections
        self.info = info
        """Name, source, licence, version and counts, from the manifest."""

    @classmethod
    def load(cls, folder: str | Path | None = None) -> Dictionary:
        """Load and verify a dictionary folder (the packaged en-zh one when ``None``, loaded once
        and shared).

        Args:
            folder: A folder written by ``edge-translator build-dictionary``.

        Returns:
            The dictionary.

        Raises:
            BundleError: If the manifest or the data file is missing, corrupt, of another
                format version or does not match the manifest; the message names the file.
        """
        global _default
        if folder is not None:
            return cls._read(Path(folder))
        with _lock:
            if _default is None:
                _default = cls._read(packaged_folder())
            return _default

    @classmethod
    def _read(cls, folder: Path) -> Dictionary:
        fix = "reinstall edge-translator, or write the folder again with `edge-translator build-dictionary`"
        manifest_path = folder / MANIFEST
        if not manifest_path.is_file():
            raise BundleError(f"{manifest_path} is missing: not a dictionary folder; {fix}")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            if manifest.get("format") != FORMAT:
                raise BundleError(f"{manifest_path} is not an edge-translator dictionary manifest "
                                  f"(format {manifest.get('format')!r}); {fix}")
            version = manifest.get("format_version")
            if version != FORMAT_VERSION:
                raise BundleError(f"{manifest_path} has format_version {version}, this edge-translator reads "
                                  f"{FORMAT_VERSION}; {fix}")
            name = manifest["data"]["file"]
            expected = manifest["files"][name]
            size, sha256, length = int(expected["size"]), str(expected["sha256"]), int(manifest["data"]["length"])
            sections = {key: (int(manifest["data"]["sections"][key][0]), int(manifest["data"]["sections"][key][1]))
                        for key in SECTIONS}
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            raise BundleError(f"{manifest_path} is not a valid dictionary manifest ({exc!r}); {fix}") from None
        path = folder / name
        if Path(name).name != name or not path.is_file():
            raise BundleError(f"{path} is missing (named by {manifest_path}); {fix}")
        raw = path.read_bytes()
        if len(raw) != size:
            raise BundleError(f"{path} has {len(raw)} bytes, the manifest says {size}: the file is damaged; {fix}")
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise BundleError(f"{path} does not match the sha256 in {manifest_path}: the file is damaged; {fix}")
        try:
            data = zlib.decompress(raw)
        except zlib.error as exc:
            raise BundleError(f"{path} is not valid zlib data ({exc}); {fix}") from None
        previous = 0
        for key in SECTIONS:
            start, end = sections[key]
            if not (previous <= start <= end <= len(data)) or (end > start and data[end - 1:end] != b"\n"):
                raise BundleError(f"{path}: section {key!r} at {start}-{end} does not fit its {len(data)} bytes; {fix}")
            previous = end
        if len(data) != length:
            raise BundleError(f"{path} holds {len(data)} bytes, the manifest says {length}; {fix}")
        info = {key: manifest.get(key) for key in ("name", "source", "licence", "version", "counts")}
        logger.debug("dictionary %s: %d entries", folder, (info.get("counts") or {}).get("entries", 0))
        return cls(data, sections, info)

    def _value(self, section: str, key: str, separator: bytes) -> str | None:
        start, end = self._sections[section]
        probe = key.encode("utf-8") + separator
        found = _find(self._data, start, end, probe)
        if found < 0:
            return None
        return self._data[found + len(probe):self._data.index(b"\n", found)].decode("utf-8")

    def _entry(self, offset: int) -> DictionaryEntry:
        start = self._sections["entries"][0] + offset
        line = self._data[start:self._data.index(b"\n", start)].decode("utf-8")
        simplified, traditional, pinyin, glosses, *source = line.split("\t")
        return DictionaryEntry(simplified, traditional, pinyin, tuple(glosses.split("/")), *source)

    def _known(self, word: str) -> bool:
        return self._value("words", word, b"\n") is not None

    def lemmas(self, word: str) -> list[str]:
        """The lemmas of a lowercase English word that this dictionary's word list holds:
        its stored irregular forms first (``went`` → ``go``), then what the suffix rules of
        :mod:`.inflection` propose; ``[]`` for a word that is no inflection of a known one."""
        stored = self._value("forms", word, b"\t")
        found = stored.split(",") if stored else []
        for candidate in rule_lemmas(word):
            if candidate not in found and self._known(candidate):
                found.append(candidate)
        return found

    def _variants(self, key: str) -> list[str]:
        """The keys to try for a normalized term: itself (with its hyphens as spaces and
        dropped), then the lemma of its last word (nouns: "shopping malls"), then of its first
        (verbs: "turned off")."""
        spelled = [key]
        for other in (key.replace("-", " "), key.replace("-", "")):
            if other not in spelled and other:
                spelled.append(other)
        out = list(spelled)
        for text in spelled:
            words = text.split()
            for lemma in self.lemmas(words[-1]):
                out.append(" ".join(words[:-1] + [lemma]))
            if len(words) > 1:
                for lemma in self.lemmas(words[0]):
                    out.append(" ".join([lemma] + words[1:]))
        return list(dict.fromkeys(out))

    def lookup(self, term: str) -> list[DictionaryEntry]:
        """The entries that translate an English word or term, best first.

        Case does not matter; quotes and punctuation around the term, and a leading "a",
        "an", "the" or "to", are dropped. The term itself is tried first, then its lemmas.

        Args:
            term: A word or a term of up to :data:`MAX_WORDS` words.

        Returns:
            The entries of the first form that the dictionary knows; ``[]`` when none.

        Raises:
            ValueError: If ``term`` is not a string.
        """
        if not isinstance(term, str):
            raise ValueError(f"lookup takes a string, not {type(term).__name__}")
        key = normalize_term(term)
        if not key or len(key.split()) > MAX_WORDS:
            return []
        for variant in self._variants(key):
            found = self._value("terms", variant, b"\t")
            if found:
                return [self._entry(int(offset, 36)) for offset in found.split(",")]
        return []

    def best(self, term: str, target: str = "zh-Hans") -> str | None:
        """The best headword for a word or term in the target's script, or ``None`` when the
        dictionary does not know it.

        Args:
            term: As for :meth:`lookup`.
            target: ``"zh-Hans"`` (Simplified) or ``"zh-Hant"`` (Traditional).

        Returns:
            The headword of the first entry :meth:`lookup` returns, or ``None``.
        """
        entries = self.lookup(term)
        return entries[0].headword(target) if entries else None

    def is_word(self, word: str) -> bool:
        """Whether a single English word exists, inflected forms included: ``"translation"``,
        ``"studies"`` and ``"went"`` do, ``"transla"`` and ``"wellknown"`` do not.

        Args:
            word: One word; case and surrounding punctuation do not matter.

        Returns:
            ``True`` when the word or one of its lemmas is in the word list.
        """
        key = normalize_term(word) if isinstance(word, str) else ""
        if not key or " " in key:
            return False
        return self._known(key) or bool(self.lemmas(key))
