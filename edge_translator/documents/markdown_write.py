"""Markdown out: a unit's source span rewritten with its translation, the markup kept.

The rules for writing a changed segment are in :mod:`.markdown`'s docstring: one line
after the first line's prefix, markup characters escaped, marks clamped and moved off
punctuation to satisfy the CommonMark flanking rules, links never lost.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
from markdown_it.token import Token

from .base import Span, Translated
from .markdown_parse import Mark, Unit

_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ORDERED = re.compile(r"[0-9]{1,9}[.)]")
_FIRST_WORD = re.compile(r"\S*\s?")
_ALWAYS_ESCAPED = frozenset("\\`*[]<~")
_LINE_START_ESCAPED = frozenset("#>-+=|")


def render(unit: Unit, item: Translated, source: str, tags: Callable[[str], list[str]]) -> str:
    """The source of ``unit`` with its text replaced by ``item`` (verbatim if unchanged).

    ``tags`` parses a rendered line into its mark tags; where they are not the marks that
    were written (a delimiter that pairs up differently), emphasis is dropped, links kept."""
    segment = unit.segment
    if item.text == segment.text and tuple(item.marks) == segment.marks:
        return source[unit.start:unit.end]
    text = item.text
    lo = len(text) - len(text.lstrip())
    hi = len(text.rstrip())
    if lo >= hi:
        return source[unit.start:unit.end]
    keeps = _locate(text, [segment.text[a:b] for a, b in segment.keep])
    placed, children, extra = _place(unit, item.marks, text, lo, hi, keeps)
    same_start = _first_word(text[lo:]) == _first_word(source[unit.start:unit.end])
    links = {spot[0] for spot in placed.values() if spot[2] == "["}
    chars = _escape(text, lo, hi, keeps, unit, not same_start, links)

    def emit(key: int, begin: int, end: int, last: str, after: str, links_only: bool):
        """Write ``[begin, end)`` of mark ``key`` and list the tags of the marks written;
        ``last`` and ``after`` are the characters around it (for the flanking rules)."""
        out, written, done = [], [], begin
        kids = sorted(children[key], key=lambda j: placed[j][:2])
        for n, i in enumerate(kids):
            start, stop, opener, closer = placed[i]
            out.append("".join(chars[done - lo:start - lo]))
            last = out[-1][-1:] or last
            if n + 1 < len(kids) and placed[kids[n + 1]][0] == stop:
                follow = placed[kids[n + 1]][2][:1]
            else:
                follow = (chars[stop - lo] or " ")[:1] if stop < end else after
            inner, inside = emit(i, start, stop, opener[-1], closer[:1] or follow, links_only)
            if opener[0] in "*_~" and (links_only or not (
                    _opens(last, inner[:1] or closer[0], opener[0])
                    and _closes(inner[-1:] or opener[-1], follow, opener[0]))):
                opener = closer = ""  # its inner marks are checked with the whole line below
            out += [opener, inner, closer]
            written += ([_tag(opener)] if opener else []) + inside
            last = (opener + inner + closer)[-1:] or last
            done = stop
        out.append("".join(chars[done - lo:end - lo]))
        return "".join(out), written

    body, written = emit(-1, lo, hi, " ", " ", False)
    if tags(body) != written:
        body = emit(-1, lo, hi, " ", " ", True)[0]
    body += "".join(" " + link_source for link_source in extra)
    if unit.kind == "cell" and body.endswith("\\"):
        body += " "
    return body


def _tag(opener: str) -> str:
    if opener == "[":
        return "link_open"
    if opener[0] == "~":
        return "s_open"
    return "strong_open" if len(opener) == 2 else "em_open"


def mark_tags(tokens: list[Token]) -> list[str]:
    """The mark tags of a parsed line, in order (autolinks are kept spans, not marks)."""
    return [child.type for token in tokens for child in token.children or ()
            if child.type in ("em_open", "strong_open", "s_open")
            or (child.type == "link_open" and child.markup != "autolink")]


class _Spans:
    """Sorted spans that do not overlap, with logarithmic lookups."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def overlaps(self, start: int, stop: int) -> bool:
        """Whether ``[start, stop)`` shares a character with a span, or an empty span lies
        strictly inside it, or it lies strictly inside a span."""
        i = bisect.bisect_left(self.starts, start)
        if i and self.ends[i - 1] > start:
            return True
        while i < len(self.starts) and self.starts[i] < stop:
            if self.ends[i] > start:
                return True
            i += 1
        return False

    def inside(self, at: int) -> bool:
        """Whether ``at`` is strictly inside a span."""
        i = bisect.bisect_left(self.starts, at) - 1
        return i >= 0 and self.ends[i] > at

    def add(self, start: int, stop: int) -> None:
        i = bisect.bisect_right(self.starts, start)
        self.starts.insert(i, start)
        self.ends.insert(i, stop)


def _locate(text: str, kept: list[str]) -> _Spans:
    """Where the kept strings came back in ``text``: in order where possible."""
    found = _Spans()
    done = 0
    for piece in filter(None, kept):
        for begin in (done, 0):
            at = text.find(piece, begin)
            while at >= 0 and found.overlaps(at, at + len(piece)):
                at = text.find(piece, at + 1)
            if at >= 0:
                found.add(at, at + len(piece))
                done = at + len(piece)
                break
    return found


def _place(unit: Unit, spans, text: str, lo: int, hi: int, keeps: _Spans):
    """Resolve the translated marks into a well-nested tree under the root key ``-1``."""
    placed: dict[int, tuple[int, int, str, str]] = {-1: (lo, hi, " ", " ")}
    children: dict[int, list[int]] = {-1: []}
    taken = {-1: _Spans()}
    ends: dict[int, dict[int, str]] = {-1: {}}  # the syntax character written before/after
    begins: dict[int, dict[int, str]] = {-1: {}}  # a position, by its sibling marks
    extra: list[str] = []
    whole = (0, len(unit.segment.text))
    for i, mark in enumerate(unit.marks):
        parent = mark.parent
        while parent is not None and parent not in placed:
            parent = unit.marks[parent].parent
        key = -1 if parent is None else parent
        outer = placed[key]

        def before(at: int, key: int = key, outer=outer) -> str:
            return ends[key].get(at) or (outer[2][-1] if at <= outer[0] else text[at - 1])

        def after(at: int, key: int = key, outer=outer) -> str:
            return begins[key].get(at) or ((outer[3][:1] or " ") if at >= outer[1] else text[at])

        got = spans[i] if i < len(spans) else None
        if got is None and mark.link is not None and key == -1 and mark.span == whole:
            got = (lo, hi)
        spot = got and _fit(mark, got, text, outer[:2], keeps, taken[key], before, after)
        if not spot:
            if mark.link is not None:
                extra.append(mark.link)
            continue
        placed[i], taken[i], ends[i], begins[i] = spot, _Spans(), {}, {}
        children[key].append(i)
        children[i] = []
        taken[key].add(*spot[:2])
        ends[key][spot[1]], begins[key][spot[0]] = spot[3][-1:], spot[2][:1]
    del placed[-1]
    return placed, children, extra


def _fit(mark: Mark, got: Span, text: str, parent: Span, keeps: _Spans, siblings: _Spans,
         before: Callable[[int], str], after: Callable[[int], str]):
    start, stop = max(got[0], parent[0]), min(got[1], parent[1])
    while start < stop and text[start].isspace():
        start += 1
    while stop > start and text[stop - 1].isspace():
        stop -= 1
    if start > stop or (start == stop and mark.span[0] != mark.span[1]):
        return None
    opener, closer = mark.opener, mark.closer
    if mark.link is None:
        fitted = _flank(text, start, stop, opener, closer, before, after)
        if fitted is None:
            return None
        start, stop, opener, closer = fitted
    if keeps.inside(start) or keeps.inside(stop) or siblings.overlaps(start, stop):
        return None
    return start, stop, opener, closer


def _flank(text: str, start: int, stop: int, opener: str, closer: str,
           before: Callable[[int], str], after: Callable[[int], str]):
    """Move an emphasis span off edge punctuation until its delimiters can open and close
    (CommonMark flanking rules); ``_`` falls back to ``*`` inside words. ``before(i)`` and
    ``after(i)`` are the characters written around position ``i``."""
    starred = (opener.replace("_", "*"), closer.replace("_", "*"))
    for left, right in dict.fromkeys(((opener, closer), starred)):
        a, b = start, stop
        while a < b and not _opens(before(a), text[a], left[0]) and _punct(text[a]):
            a += 1
        while b > a and not _closes(text[b - 1], after(b), right[0]) and _punct(text[b - 1]):
            b -= 1
        if a < b and _opens(before(a), text[a], left[0]) and _closes(text[b - 1], after(b), right[0]):
            return a, b, left, right
    return None


def _punct(ch: str) -> bool:
    return isPunctChar(ch) or isMdAsciiPunct(ord(ch))


def _space(ch: str) -> bool:
    return isWhiteSpace(ord(ch))


def _flanking(before: str, after: str) -> tuple[bool, bool]:
    left = not _space(after) and (not _punct(after) or _space(before) or _punct(before))
    right = not _space(before) and (not _punct(before) or _space(after) or _punct(after))
    return left, right


def _opens(before: str, after: str, delimiter: str) -> bool:
    """Whether a ``delimiter`` run between these characters can open emphasis."""
    left, right = _flanking(before, after)
    return left and (delimiter != "_" or not right or _punct(before))


def _closes(before: str, after: str, delimiter: str) -> bool:
    """Whether a ``delimiter`` run between these characters can close emphasis."""
    left, right = _flanking(before, after)
    return right and (delimiter != "_" or not left or _punct(after))


def _first_word(text: str) -> str:
    return text[:_FIRST_WORD.match(text).end()]


def _escape(text: str, lo: int, hi: int, keeps: _Spans, unit: Unit, line_start: bool,
            links: set[int]) -> list[str]:
    """How each character of ``text[lo:hi]`` is written: kept spans verbatim, hard breaks
    with the source's syntax, markup characters escaped (a ``!`` before a link at one of
    ``links``). Block starters at the start are escaped if ``line_start`` (not where the
    source starts with the same word: a table row starting with ``- `` is a row because
    the source one was)."""
    out = list(text[lo:hi])
    verbatim = bytearray(hi - lo)
    for a, b in zip(keeps.starts, keeps.ends):
        for i in range(max(a, lo), min(b, hi)):
            verbatim[i - lo] = 1
    trailing = len(text[:hi].rstrip("#")) if unit.kind == "atx" else hi
    ordered, breaks, fresh = -1, text[:lo].count("\n"), False
    for i in range(lo, hi):
        ch = text[i]
        if verbatim[i - lo]:
            line_start = fresh = False
            continue
        if ch == "\n":
            if unit.breaks:
                syntax = unit.breaks[min(breaks, len(unit.breaks) - 1)]
                if fresh and syntax.startswith(" "):  # a line of spaces would end the paragraph
                    syntax = "\\" + syntax.lstrip(" ")
                out[i - lo] = syntax
                breaks, line_start, fresh = breaks + 1, True, True
            else:
                out[i - lo] = " "
            continue
        if line_start and ch in " \t":
            out[i - lo] = ""
            continue
        number = _ORDERED.match(text, i) if line_start else None
        if number:
            ordered = number.end() - 1
        escaped = (ch in _ALWAYS_ESCAPED or i == ordered or i >= trailing
                   or (ch == "!" and i + 1 in links)
                   or (line_start and ch in _LINE_START_ESCAPED)
                   or (ch == "|" and unit.kind == "cell")
                   or (ch == "&" and _ENTITY.match(text, i))
                   or (ch == "_" and not (0 < i < len(text) - 1 and text[i - 1].isalnum()
                                          and text[i + 1].isalnum())))
        out[i - lo] = "\\" + ch if escaped else ch
        if ch == "|" and unit.kind == "setext":
            out[i - lo] = "&#124;"  # any "|", even escaped, makes "---" a table's delimiter row
        line_start = fresh = False
    return out
