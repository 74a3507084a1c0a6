"""Glossary terms and verbatim spans: masked with placeholders before translation, restored after.

A glossary file is UTF-8 text (a BOM is allowed), one entry a line, columns split by a tab::

    # a comment; blank lines are ignored too
    router<TAB>路由器          translate "router" as 路由器
    Acme                       keep "Acme" as it is (do not translate)
    Acme Cloud<TAB>=           the same, written with "="
    re:\\b[A-Z]{2,}-\\d+\\b      keep whatever the regular expression matches (SKUs: XR-2040)
    re:\\bSKU (\\d+)<TAB>货号\\1  translate a match as the replacement (``\\1``, ``\\g<name>``)

An empty second column ("Acme<TAB>", as spreadsheets save it) also means "keep as it is".
A line whose first non-blank character is ``#`` is a comment, so a term cannot start with
``#``. Terms match whole words only, longest first; a term with a capital letter matches
with that case only, an all-lowercase term matches in any case. URLs (``http://``,
``https://``, ``ftp://``, ``www.``) and e-mail addresses are always kept, with or without a
glossary file.

:meth:`Glossary.mask` swaps every term, URL, address and kept span (inline code) for a
placeholder the model is likely to copy; :meth:`Glossary.unmask` puts the term back where
the placeholder landed, tolerating the damage models do to placeholders (spaces inside,
full-width characters, changed case). A placeholder that is gone, or that the model
wrote twice, is reported in :attr:`Restored.missing`, never guessed. The two placeholder
styles were chosen by measuring the demo model (``python -m
edge_translator.bench.placeholders``); a small model still loses some of them, which is
why the job retries a damaged sentence with the other style and warns when both fail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import count
from pathlib import Path

from .base import DocumentError

Span = tuple[int, int]

#: Scripts written without spaces between words: Han, kana, Hangul, CJK punctuation, full-width forms.
_CJK = "\u2e80-\u2fff\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f" \
       "\uac00-\ud7af\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef\U00020000-\U0003ffff"
_CJK_CHAR = re.compile(f"[{_CJK}]")
#: A letter or digit of a spaced script: what a whole-word match must not touch.
_WORD = f"[^\\W{_CJK}]"
_ALNUM = re.compile(r"[0-9A-Za-z]")
#: Blanks a model puts inside or around a placeholder (never a line break).
_BLANKS = " \t\u3000\xa0"
_BLANK = f"[{_BLANKS}]"
_BLANK_RUN = re.compile(f"{_BLANK}*")
#: What a model writes instead of an ASCII bracket or sign, besides its full-width form.
_LOOKALIKES = {"[": "【〔", "]": "】〕", "<": "〈《", ">": "〉》", "(": "（", ")": "）", "_": "＿"}

URL = re.compile(r"(?<![\w@/.-])(?:(?:https?|ftp)://|www\.)[^\s<>\"'`]+", re.IGNORECASE)
EMAIL = re.compile(r"(?<![\w.+%-])[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_TRAILING = ".,;:!?'\")]}>"


@dataclass(frozen=True)
class Entry:
    """One line of a glossary file."""

    source: str
    """The English term, or the regular expression (without ``re:``)."""
    target: str | None
    """The Chinese to write instead (a replacement template for a regex); ``None`` keeps it."""
    regex: bool = False
    """Whether :attr:`source` is a regular expression."""
    line: int | None = None
    """The line of the glossary file it came from."""


@dataclass(frozen=True)
class Slot:
    """One masked span: its placeholder and what goes back in its place."""

    placeholder: str
    """The text that stands for it in the masked text."""
    restore_to: str
    """What replaces the placeholder in the translation."""
    source: str
    """The span of the original text that was masked."""
    kind: str
    """``"keep"`` (a span the format keeps), ``"verbatim"`` (a do-not-translate term, URL,
    address or regex match) or ``"term"`` (translated as the glossary says)."""


@dataclass(frozen=True)
class Masked:
    """Text ready for the translator, and its slots in order of appearance."""

    text: str
    slots: tuple[Slot, ...]


@dataclass(frozen=True)
class Restored:
    """A translation with its placeholders replaced."""

    text: str
    missing: tuple[Slot, ...]
    """Slots whose placeholder was absent or written more than once: the result cannot be
    trusted for them (a duplicated one is restored at each place)."""
    mangled: bool
    """Whether some placeholder was found only in a damaged form (spaces, width, case)."""


@dataclass(frozen=True)
class PlaceholderForm:
    """How placeholders are written: first the fixed ``names``, then ``template`` numbered
    from ``start``. A placeholder the original text already holds is skipped."""

    name: str
    template: str
    """A placeholder with ``{}`` for its number, e.g. ``"__{}__"``."""
    names: tuple[str, ...] = ()
    """Placeholders used before the numbered ones."""
    start: int = 0

    def candidates(self) -> Iterator[str]:
        """Every placeholder of this form, in the order they are handed out."""
        yield from self.names
        for number in count(self.start):
            yield self.template.format(number)


#: The placeholder styles :meth:`Glossary.mask` offers: style 0 first, style 1 for the retry.
#: Chosen by measuring the embedded model (``python -m edge_translator.bench.placeholders``):
#: it copies the Latin words "Tatoeba", "CD" and "Linux" far more often than any bracketed or
#: coded form (``__0__``, ``{0}``, ``[0]``, ``ZX0``: none survived) or a number, which it
#: translates ("30%" becomes 三十%). Style 1 swaps the first two placeholders, so a retry gives
#: each term the other one, and the retry saves many of the sentences that lost one
#: (docs/benchmarks.md has the figures).
STYLES = (
    PlaceholderForm("tatoeba", "{}%", names=("Tatoeba", "CD", "Linux"), start=30),
    PlaceholderForm("cd", "{}%", names=("CD", "Tatoeba", "Linux"), start=30),
)


@lru_cache(maxsize=4096)
def tolerant(placeholder: str) -> re.Pattern:
    """A pattern that finds ``placeholder`` as a model may have written it: blanks inside,
    full-width or look-alike characters, any case; but not inside a longer word or number."""
    parts = []
    for char in placeholder:
        variants = {char, char.lower(), char.upper()}
        variants |= {chr(ord(v) + 0xFEE0) for v in list(variants) if "!" <= v <= "~"}
        variants |= set(_LOOKALIKES.get(char, ""))
        parts.append("[" + "".join(re.escape(v) for v in sorted(variants)) + "]")
    body = f"{_BLANK}*".join(parts)
    if _ALNUM.match(placeholder[0]):
        body = r"(?<![0-9A-Za-z０-９Ａ-Ｚａ-ｚ])" + body
    if _ALNUM.match(placeholder[-1]):
        body += r"(?![0-9A-Za-z０-９Ａ-Ｚａ-ｚ])"
    return re.compile(body)


@dataclass(frozen=True)
class _Match:
    start: int
    end: int
    rank: int
    """0 glossary term, 1 glossary regex, 2 built-in: the lower wins a tie."""
    restore_to: str
    kind: str


@dataclass(frozen=True)
class Glossary:
    """Terms to translate as given and to keep, plus the built-in URL and e-mail patterns."""

    entries: tuple[Entry, ...] = ()
    _words: tuple[Entry, ...] = field(default=(), init=False, repr=False, compare=False)
    _folded: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)
    _regexes: tuple[tuple[re.Pattern, Entry], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = sorted((e for e in self.entries if not e.regex),
                       key=lambda e: (-len(e.source), not _cased(e.source)))
        object.__setattr__(self, "_words", tuple(words))
        object.__setattr__(self, "_folded", tuple(e.source.casefold() for e in words))
        object.__setattr__(self, "_regexes", tuple((re.compile(e.source), e) for e in self.entries if e.regex))

    @classmethod
    def empty(cls) -> Glossary:
        """A glossary with only the built-in patterns (URLs and e-mail addresses)."""
        return cls()

    @classmethod
    def load(cls, path: str | Path) -> Glossary:
        """Read a glossary file (see the module docstring for its format).

        Raises:
            DocumentError: If the file cannot be read, is not UTF-8, or has a bad line.
        """
        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DocumentError(path, f"cannot read the glossary ({exc.strerror})") from None
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b"\n") + 1
            raise DocumentError(path, "the glossary is not UTF-8; save it as UTF-8", line=line) from None
        return cls.parse(text, path)

    @classmethod
    def parse(cls, text: str, path: str | Path = "<glossary>") -> Glossary:
        """Build a glossary from the text of a glossary file; ``path`` names it in errors.

        Raises:
            DocumentError: If a line is malformed.
        """
        entries: list[Entry] = []
        seen: dict[tuple[str, bool], Entry] = {}
        for number, line in enumerate(text.lstrip("\ufeff").splitlines(), 1):
            entry = _parse_line(line, number, path)
            if entry is None:
                continue
            key = (entry.source, entry.regex)
            earlier = seen.get(key)
            if earlier is not None and earlier.target != entry.target:
                raise DocumentError(path, f"{entry.source!r} is already in the glossary on line {earlier.line} "
                                          "with another translation; keep one of them", line=number)
            if earlier is None:
                seen[key] = entry
                entries.append(entry)
        return cls(tuple(entries))

    def matches(self, text: str, keep: Sequence[Span] = ()) -> list[tuple[Span, str, str]]:
        """Spans of ``text`` to mask, in order: ``((start, end), restore_to, kind)``.

        Kept spans come back as ``"keep"``; glossary and built-in matches that touch a kept
        span are dropped, and overlapping ones are settled earliest first, then longest.
        """
        found = [_Match(a, b, -1, text[a:b], "keep") for a, b in keep if b > a]
        blocked = sorted((m.start, m.end) for m in found)
        candidates = list(self._candidates(text))
        candidates.sort(key=lambda m: (m.start, m.start - m.end, m.rank))
        end = -1
        for m in candidates:
            if m.start < end or any(a < m.end and m.start < b for a, b in blocked):
                continue
            found.append(m)
            end = m.end
        found.sort(key=lambda m: m.start)
        return [((m.start, m.end), m.restore_to, m.kind) for m in found]

    def _candidates(self, text: str) -> Iterator[_Match]:
        """Every match of every term and pattern, overlaps included."""
        # Only the terms the text holds (compared case-folded: a superset of what matches) go
        # into the pattern, so a glossary of thousands of terms costs little per text.
        folded = text.casefold()
        present = tuple(i for i, term in enumerate(self._folded) if term in folded)
        if present:
            for hit in _alternation(tuple(self._words[i].source for i in present)).finditer(text):
                entry = self._words[present[int(hit.lastgroup[1:])]]
                start, end = hit.span(hit.lastgroup)
                kind = "verbatim" if entry.target is None else "term"
                yield _Match(start, end, 0, entry.target or text[start:end], kind)
        for pattern, entry in self._regexes:
            for hit in pattern.finditer(text):
                if hit.end() > hit.start():
                    restore = text[hit.start():hit.end()] if entry.target is None else hit.expand(entry.target)
                    yield _Match(hit.start(), hit.end(), 1, restore, "verbatim" if entry.target is None else "term")
        for pattern in (URL, EMAIL):
            for hit in pattern.finditer(text):
                start, end = hit.start(), _trim(text, hit.start(), hit.end())
                yield _Match(start, end, 2, text[start:end], "verbatim")

    def mask(self, text: str, keep: Sequence[Span] = (), style: int | PlaceholderForm = 0) -> Masked:
        """Replace terms, URLs, addresses and the ``keep`` spans by placeholders.

        Args:
            text: The text to translate.
            keep: Spans the format needs back verbatim (inline code); they must not overlap.
            style: Index into :data:`STYLES` (0, or 1 to retry a damaged sentence), or a form.

        Returns:
            The masked text and its slots in order.

        Raises:
            ValueError: If ``style`` is not a known style, or the ``keep`` spans overlap.
        """
        form = _form(style)
        _check_keep(text, keep)
        spans = self.matches(text, keep)
        if not spans:
            return Masked(text, ())
        banned: set[str] = set()
        while True:
            names = _placeholders(form, text, len(spans), banned)
            masked = _build(text, spans, names)
            clashes = {n for n in names if len(tolerant(n).findall(masked)) != 1}
            if not clashes:
                break
            banned |= clashes
        slots = tuple(Slot(name, restore, text[a:b], kind) for name, ((a, b), restore, kind) in zip(names, spans))
        return Masked(masked, slots)

    def unmask(self, translation: str, masked: Masked) -> Restored:
        """Put each slot's text back where its placeholder is in ``translation``.

        Blanks around a placeholder are dropped where the text on both sides is CJK.
        A slot whose placeholder is missing, or found more than once, is in ``missing``;
        so is one whose text is not in the result afterwards.
        """
        if not masked.slots:
            return Restored(translation, (), False)
        hits: list[tuple[int, int, Slot]] = []
        for slot in masked.slots:
            hits.extend((m.start(), m.end(), slot) for m in tolerant(slot.placeholder).finditer(translation))
        hits.sort(key=lambda h: (h[0], -h[1]))
        kept, end = [], -1
        for hit in hits:
            if hit[0] >= end:
                kept.append(hit)
                end = hit[1]
        mangled = any(translation[a:b] != slot.placeholder for a, b, slot in kept)
        text = _replace(translation, kept)
        counts = {id(slot): 0 for slot in masked.slots}
        for _, _, slot in hits:  # an overlapped hit counts too: the slot cannot be trusted then
            counts[id(slot)] += 1
        missing = tuple(s for s in masked.slots if counts[id(s)] != 1 or s.restore_to not in text)
        return Restored(text, missing, mangled)


def _form(style: int | PlaceholderForm) -> PlaceholderForm:
    if isinstance(style, PlaceholderForm):
        return style
    if isinstance(style, int) and 0 <= style < len(STYLES):
        return STYLES[style]
    raise ValueError(f"style must be 0 to {len(STYLES) - 1} or a PlaceholderForm, not {style!r}")


def _check_keep(text: str, keep: Sequence[Span]) -> None:
    end = 0
    for start, stop in sorted(keep):
        if start < end or not 0 <= start <= stop <= len(text):
            raise ValueError(f"keep spans must lie in the text and not overlap: {sorted(keep)}")
        end = stop


def _placeholders(form: PlaceholderForm, text: str, needed: int, banned: set[str]) -> list[str]:
    """The first ``needed`` placeholders of ``form`` that ``text`` does not hold already."""
    names: list[str] = []
    for name in form.candidates():
        if len(names) == needed:
            return names
        if name not in banned and not tolerant(name).search(text):
            names.append(name)
    return names  # pragma: no cover - candidates() never ends


def _build(text: str, spans: list[tuple[Span, str, str]], names: list[str]) -> str:
    """``text`` with each span replaced by its placeholder, spaced off from a touching word."""
    out, at = [], 0
    for ((start, end), _, _), name in zip(spans, names):
        out.append(text[at:start])
        before = text[start - 1] if start > 0 else ""
        after = text[end] if end < len(text) else ""
        pad_left = " " if _ALNUM.match(before) and _ALNUM.match(name[0]) else ""
        pad_right = " " if _ALNUM.match(after) and _ALNUM.match(name[-1]) else ""
        out.append(f"{pad_left}{name}{pad_right}")
        at = end
    out.append(text[at:])
    return "".join(out)


def _replace(translation: str, hits: list[tuple[int, int, Slot]]) -> str:
    """Restore each hit; blanks between it and a neighbour go where both sides are CJK."""
    starts = {start: slot.restore_to for start, _, slot in hits}
    out: list[str] = []
    last = ""  # the last character written so far
    at = 0
    for start, end, slot in hits:
        gap = translation[at:start]
        trimmed = gap.rstrip(_BLANKS)
        outer = trimmed[-1:] or last
        if trimmed != gap and _cjk(outer) and _cjk(slot.restore_to[:1]):
            gap = trimmed
        out += [gap, slot.restore_to]
        last = slot.restore_to[-1:] or gap[-1:] or last
        at = end
        after = _BLANK_RUN.match(translation, at).end()
        if after > at:
            outer = starts.get(after, translation[after:after + 1])[:1]
            if _cjk(outer) and _cjk(slot.restore_to[-1:]):
                at = after
    out.append(translation[at:])
    return "".join(out)


def _cased(term: str) -> bool:
    """Whether ``term`` matches only in its own case: it has a capital letter."""
    return term != term.lower()


def _cjk(char: str) -> bool:
    return bool(char) and _CJK_CHAR.match(char) is not None


def _trim(text: str, start: int, end: int) -> int:
    """Drop punctuation that ends a sentence rather than the URL; keep a balanced ``)``."""
    while end > start and text[end - 1] in _TRAILING:
        if text[end - 1] == ")" and text.count("(", start, end) >= text.count(")", start, end):
            break
        end -= 1
    return end


@lru_cache(maxsize=1024)
def _alternation(terms: tuple[str, ...]) -> re.Pattern:
    """One pattern that finds, at each position, the first of ``terms`` (longest first) that matches there."""
    alternatives = "|".join(f"(?P<t{i}>{_term_pattern(term)})" for i, term in enumerate(terms))
    return re.compile(f"(?=(?:{alternatives}))")


def _term_pattern(term: str) -> str:
    """A whole-word pattern for ``term``: case-sensitive if it has a capital letter."""
    body = re.escape(term)
    if not _cased(term):
        body = f"(?i:{body})"
    if re.match(_WORD, term[0]):
        body = f"(?<!{_WORD}){body}"
    if re.match(_WORD, term[-1]):
        body = f"{body}(?!{_WORD})"
    return body


def _parse_line(line: str, number: int, path: str | Path) -> Entry | None:
    """One glossary line as an entry, or ``None`` for a blank line or a comment."""
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    columns = line.split("\t")
    if len(columns) > 2:
        raise DocumentError(path, f"{len(columns)} columns; write 'english<TAB>中文' or the term alone "
                                  "(a tab inside a term is not allowed)", line=number)
    source = columns[0].strip()
    target = columns[1].strip() if len(columns) == 2 else ""
    target = None if target in ("", "=") else target
    if source.startswith("re:"):
        return _regex_entry(source[3:], target, number, path)
    if not source:
        raise DocumentError(path, "the term (first column) is empty", line=number)
    return Entry(source, target, False, number)


def _regex_entry(pattern: str, replacement: str | None, number: int, path: str | Path) -> Entry:
    if not pattern:
        raise DocumentError(path, "the regular expression after 're:' is empty", line=number)
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise DocumentError(path, f"bad regular expression {pattern!r} ({exc})", line=number) from None
    if compiled.match(""):
        raise DocumentError(path, f"the regular expression {pattern!r} matches empty text; "
                                  "make it match at least one character", line=number)
    if replacement is not None:
        names = {index: name for name, index in compiled.groupindex.items()}
        blank = "".join(f"(?P<{names[i]}>)" if i in names else "()" for i in range(1, compiled.groups + 1))
        try:  # an empty match with the same groups tells whether the replacement is valid
            re.compile(blank).match("").expand(replacement)
        except (re.error, IndexError) as exc:
            raise DocumentError(path, f"bad replacement {replacement!r} for {pattern!r} ({exc})",
                                line=number) from None
    return Entry(pattern, replacement, True, number)
