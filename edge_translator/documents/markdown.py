"""Markdown (CommonMark with GFM tables and strikethrough): translate the text, keep the markup.

The file is parsed with markdown-it-py. Every paragraph, heading (ATX and setext) and table
cell, wherever it sits (list items, block quotes), is one segment; fenced and indented
code, HTML blocks, front matter, thematic breaks, link reference definitions and a table's
delimiter row are never touched. Inside a segment, emphasis, strong, strikethrough and
links are marks (a link keeps its URL and title), and inline code, autolinks, inline HTML
and images are kept verbatim. Each segment is aligned with its exact source span, so a
segment whose translation is its own text is written back byte for byte, and a changed
one replaces only that span: every byte of markup outside it comes from the source.

Writing a changed segment:

* It comes back on one line after the first line's prefix (``> ``, ``- ``, ``## ``...):
  a soft line break is a space in the segment text. A hard break (two spaces or ``\\``
  before the line end) is a ``\\n`` in the text and is written back with the source's
  own break syntax and the next line's prefix.
* Characters that would become markup are escaped (``\\ ` * _ [ ] < ~``, an entity-like
  ``&``, ``|`` in a table cell, block starters at a line start, an ATX heading's closing
  ``#``); in a setext heading ``|`` is written ``&#124;`` (else the underline would
  become a table's delimiter row).
* A mark the translation could not place (``None``) loses its syntax, its text stays.
  A mark is clamped into its parent, shrunk off punctuation where the CommonMark
  flanking rules need it (``_`` becomes ``*`` between CJK letters), and dropped when it
  crosses a sibling or a kept span. The written line is parsed again: where its
  delimiters would pair up differently, the segment's emphasis is dropped. A link is
  never lost: one that covered the whole segment wraps the whole translation, any other
  is appended after it as in the source; a reference link by its text (``[ref]``) gets
  its label (``[译文][ref]``).

Limitations: the alt text of images is not translated; a blank translation leaves the
source text; markup nested more than 64 deep leaves its paragraph untranslated; TOML
(``+++``) front matter is read as Markdown.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from markdown_it import MarkdownIt
from markdown_it import rules_block
from markdown_it.common.utils import isMdAsciiPunct, isPunctChar, isWhiteSpace
from markdown_it.rules_inline import StateInline, backtick, image, link
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from . import textio
from .base import FormatOptions, Segment, Span, Translated

logger = logging.getLogger(__name__)

_NEWLINE = re.compile(r"\r\n?|\n")
_SOFT_BREAK = re.compile(r" ?\n[ \t]*")
_HARD_BREAK = re.compile(r"(?:\\| {2,})\n[ \t]*")
_LETTER = re.compile(r"[^\W\d_]")
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_ORDERED = re.compile(r"[0-9]{1,9}[.)]")
_FIRST_WORD = re.compile(r"\S*\s?")
_ALWAYS_ESCAPED = frozenset("\\`*[]<~")
_LINE_START_ESCAPED = frozenset("#>-+=|")
_MARKS = {"em_open": "em_close", "strong_open": "strong_close", "s_open": "s_close"}
_MAX_DEPTH = 64
"""Marks nested deeper than this leave the segment untranslated (the writer recurses)."""


@dataclass(frozen=True)
class _Source:
    """The decoded file and where its lines start and end (markdown-it's line model)."""

    encoding: textio.TextEncoding
    text: str
    starts: list[int]
    ends: list[int]

    def line(self, number: int) -> str:
        """Line ``number`` (0-based) without its line ending."""
        return self.text[self.starts[number]:self.ends[number]]


@dataclass(frozen=True)
class _Map:
    """Where the offsets of an inline token's content lie in the source text: each offset
    maps linearly from the breakpoint at or before it (a line start, a cell's ``\\|``)."""

    content: str
    starts: list[int]
    targets: list[int]

    def at(self, offset: int) -> int:
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.targets[i] + offset - self.starts[i]

    def source(self, text: str, begin: int, end: int) -> str:
        """The source of content ``[begin, end)``, on one line: across lines it is the
        content with each line break a space (what the parser saw, prefixes left out)."""
        piece = self.content[begin:end]
        return piece.replace("\n", " ") if "\n" in piece else text[self.at(begin):self.at(end)]


@dataclass(frozen=True)
class _Mark:
    """A formatting span of a segment and the source syntax around it."""

    span: Span
    parent: int | None
    opener: str
    closer: str
    link: str | None = None
    """For a link: its whole source, appended when the translation cannot place it."""


@dataclass(frozen=True)
class _Unit:
    """A segment, the source span it replaces and what the writer needs to rebuild it."""

    segment: Segment
    start: int
    end: int
    kind: str
    """``"paragraph"``, ``"setext"``, ``"atx"`` (headings) or ``"cell"``."""
    marks: tuple[_Mark, ...]
    breaks: tuple[str, ...]
    """The source of each hard break: its syntax, line ending and the next line's prefix."""


@dataclass(frozen=True)
class MarkdownDocument:
    """A Markdown file opened for translation."""

    path: Path

    def segments(self) -> Iterator[Segment]:
        """The paragraphs, headings and table cells, in document order.

        Raises:
            DocumentError: If the file is not text in a supported encoding.
        """
        for unit in _units(self.path, _read(self.path), _parser(), {}):
            yield unit.segment

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the file with each segment's source span replaced by its translation.

        Raises:
            DocumentError: If the file cannot be read again, or it changed so that the
                number of segments no longer matches.
        """
        source = _read(self.path)
        md, env = _parser(), {}

        def tags(body: str) -> list[str]:
            return _tags(md.parseInline(body, env))

        with textio.rewrite(self.path, translated, out, source.encoding) as (stream, take):
            done = 0
            for unit in _units(self.path, source, md, env):
                item = take(unit.segment.line)
                stream.write(source.text[done:unit.start])
                stream.write(_render(unit, item, source.text, tags))
                done = unit.end
            stream.write(source.text[done:])


@dataclass(frozen=True)
class MarkdownFormat:
    """Markdown files: ``.md`` and ``.markdown``."""

    name: str = "markdown"
    suffixes: tuple[str, ...] = (".md", ".markdown")

    def open(self, path: Path, options: FormatOptions) -> MarkdownDocument:
        """Open ``path``; nothing is read until :meth:`MarkdownDocument.segments`."""
        return MarkdownDocument(Path(path))


FORMAT = MarkdownFormat()


def _read(path: Path) -> _Source:
    encoding = textio.sniff(path)
    text = textio.read_all(path, encoding)
    starts, ends, pos = [], [], 0
    for match in _NEWLINE.finditer(text):
        starts.append(pos)
        ends.append(match.start())
        pos = match.end()
    starts.append(pos)
    ends.append(len(text))
    return _Source(encoding, text, starts, ends)


def _parser() -> MarkdownIt:
    """CommonMark with GFM tables and strikethrough, front matter, escapes kept apart
    (no ``text_join``), and each inline token told the column its block starts at."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"]).disable("text_join")
    front_matter_plugin(md)
    chains = ("paragraph", "reference", "blockquote", "list")
    for name, rule in (("table", rules_block.table), ("heading", rules_block.heading),
                       ("lheading", rules_block.lheading), ("paragraph", rules_block.paragraph)):
        alt = [chain for chain in chains if rule in md.block.ruler.getRules(chain)]
        md.block.ruler.at(name, _with_column(rule), {"alt": alt})
    return md


def _with_column(rule: Callable[..., bool]) -> Callable[..., bool]:
    """``rule``, which also sets ``meta["column"]`` on the inline tokens it makes: the
    column where their block's content starts on its first line (after ``>``, ``- ``...)."""

    def wrapped(state, start_line: int, end_line: int, silent: bool) -> bool:
        first = len(state.tokens)
        found = rule(state, start_line, end_line, silent)
        if found and not silent:
            for token in state.tokens[first:]:
                if token.type == "inline" and token.map:
                    pos = state.bMarks[token.map[0]] + state.tShift[token.map[0]]
                    token.meta["column"] = pos - state.src.rfind("\n", 0, pos) - 1
        return found
    return wrapped


def _units(path: Path, source: _Source, md: MarkdownIt, env: dict) -> Iterator[_Unit]:
    tokens = md.parse(source.text, env)
    rows: dict[int, int] = {}
    for i, token in enumerate(tokens):
        if token.type != "inline" or not token.map or not token.content:
            continue
        parent = tokens[i - 1]
        if parent.type in ("th_open", "td_open"):
            kind, smap = "cell", _align_cell(token, source, rows)
        elif parent.type == "heading_open" and parent.markup.startswith("#"):
            kind, smap = "atx", _align_atx(token, source)
        else:
            kind = "setext" if parent.type == "heading_open" else "paragraph"
            smap = _align_lines(token, source)
        built = smap and _walk(token, smap, source.text, StateInline(token.content, md, env, []))
        if built is None:
            logger.debug("%s:%d: cannot follow the text through its source; left as it is",
                         path, token.map[0] + 1)
            continue
        text, marks, keep, breaks = built
        if not _has_words(text, keep):
            continue
        segment = Segment(text, tuple(m.span for m in marks), keep, token.map[0] + 1)
        yield _Unit(segment, smap.at(0), smap.at(len(token.content)), kind, marks, breaks)


def _align_lines(token: Token, source: _Source) -> _Map | None:
    """Paragraphs and setext headings: each content line ends where its source line does
    (the last one before trailing blanks); leading blanks were stripped by the parser."""
    starts, targets = [], []
    offset = 0
    parts = token.content.split("\n")
    for k, part in enumerate(parts):
        number = token.map[0] + k
        if number >= token.map[1]:
            return None
        line = source.line(number)
        core = part.lstrip(" \t")
        pos = line.rfind(core) if core else -1
        if pos < 0 or (k + 1 < len(parts) and pos + len(core) != len(line)):
            return None
        if k == 0 and pos < token.meta.get("column", 0):
            return None
        base = source.starts[number] + pos
        starts.append(offset + len(part) - len(core))
        targets.append(base)
        offset += len(part) + 1
    return _Map(token.content, starts, targets)


def _align_atx(token: Token, source: _Source) -> _Map | None:
    line = source.line(token.map[0])
    pos = token.meta.get("column", 0)
    while line.startswith("#", pos):
        pos += 1
    pos = line.find(token.content, pos)
    if pos < 0:
        return None
    base = source.starts[token.map[0]] + pos
    return _Map(token.content, [0], [base])


def _align_cell(token: Token, source: _Source, rows: dict[int, int]) -> _Map | None:
    """A table cell: the parser dropped the backslash of each ``\\|``; cells are found in
    order from the row's start."""
    number = token.map[0]
    line = source.line(number)
    cursor = rows.get(number, token.meta.get("column", 0))
    form = token.content.replace("|", "\\|")
    pos = line.find(form, cursor)
    if pos < 0:
        return None
    rows[number] = pos + len(form)
    base = source.starts[number] + pos
    starts, targets = [0], [base]
    for shift, found in enumerate(re.finditer(r"\|", token.content), 1):
        starts.append(found.start() + 1)
        targets.append(base + found.start() + 1 + shift)
    return _Map(token.content, starts, targets)


def _walk(token: Token, smap: _Map, text: str, state: StateInline
          ) -> tuple[str, tuple[_Mark, ...], tuple[Span, ...], tuple[str, ...]] | None:
    """Follow the inline children through the content, building the segment text, its
    marks, kept spans and hard breaks. ``None`` when a child is not where expected."""
    content = token.content
    parts: list[str] = []
    size = 0
    marks: list[dict] = []
    keep: list[Span] = []
    breaks: list[str] = []
    open_marks: list[int] = []
    links: list[tuple[int, int, int]] = []  # (label end, link end, posMax outside)
    pos, limit, autolink = 0, len(content), False

    def add(piece: str) -> None:
        nonlocal size
        parts.append(piece)
        size += len(piece)

    def kept(end: int) -> None:
        begin = size
        add(smap.source(text, pos, end))
        keep.append((begin, size))

    for child in token.children or ():
        kind = child.type
        if autolink:
            autolink = kind != "link_close"
            continue
        if kind in ("text", "html_inline", "text_special"):
            raw = child.markup if kind == "text_special" else child.content
            if not content.startswith(raw, pos):
                return None
            if kind == "html_inline":
                kept(pos + len(raw))
            else:
                add(child.content)
            pos += len(raw)
        elif kind in ("softbreak", "hardbreak"):
            found = (_SOFT_BREAK if kind == "softbreak" else _HARD_BREAK).match(content, pos)
            if not found:
                return None
            add(" " if kind == "softbreak" else "\n")
            if kind == "hardbreak":
                breaks.append(text[smap.at(pos):smap.at(found.end())])
            pos = found.end()
        elif kind in ("code_inline", "image") or (kind == "link_open" and child.markup == "autolink"):
            state.pos, state.posMax = pos, limit
            if kind == "link_open":
                end, autolink = content.find(">", pos) + 1, True
            elif (backtick if kind == "code_inline" else image)(state, True):
                end = state.pos
            else:
                return None
            if end <= pos:
                return None
            kept(end)
            pos = end
        elif kind == "link_open":
            state.pos, state.posMax = pos, limit
            label_end = state.md.helpers.parseLinkLabel(state, pos, True)
            state.pos = pos
            if label_end < 0 or not link(state, True):
                return None
            if len(open_marks) >= _MAX_DEPTH:
                return None
            links.append((label_end, state.pos, limit))
            marks.append({"start": size, "parent": open_marks[-1] if open_marks else None,
                          "opener": "[", "kind": "link_close", "from": pos})
            open_marks.append(len(marks) - 1)
            limit, pos = label_end, pos + 1
        elif kind in _MARKS:
            if not content.startswith(child.markup, pos) or len(open_marks) >= _MAX_DEPTH:
                return None
            marks.append({"start": size, "parent": open_marks[-1] if open_marks else None,
                          "opener": child.markup, "kind": _MARKS[kind]})
            open_marks.append(len(marks) - 1)
            pos += len(child.markup)
        elif kind in ("link_close", *_MARKS.values()):
            if not open_marks or marks[open_marks[-1]]["kind"] != kind:
                return None
            mark = marks[open_marks.pop()]
            if kind == "link_close":
                label_end, end, limit = links.pop()
                if pos != label_end:
                    return None
                mark["closer"] = smap.source(text, pos, end)
                if mark["closer"] in ("]", "][]"):  # the link text is its reference label
                    mark["closer"] = "][" + smap.source(text, mark["from"] + 1, pos) + "]"
                mark["link"] = smap.source(text, mark["from"], end)
                pos = end
            elif content.startswith(child.markup, pos):
                mark["closer"] = child.markup
                pos += len(child.markup)
            else:
                return None
            mark["end"] = size
        else:
            return None
    if pos != len(content) or open_marks:
        return None
    done = tuple(_Mark((m["start"], m["end"]), m["parent"], m["opener"], m["closer"], m.get("link"))
                 for m in marks)
    return "".join(parts), done, tuple(keep), tuple(breaks)


def _has_words(text: str, keep: tuple[Span, ...]) -> bool:
    done = 0
    for begin, end in (*keep, (len(text), len(text))):
        if _LETTER.search(text, done, begin):
            return True
        done = end
    return False


def _render(unit: _Unit, item: Translated, source: str, tags: Callable[[str], list[str]]) -> str:
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


def _tags(tokens: list[Token]) -> list[str]:
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


def _place(unit: _Unit, spans, text: str, lo: int, hi: int, keeps: _Spans):
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


def _fit(mark: _Mark, got: Span, text: str, parent: Span, keeps: _Spans, siblings: _Spans,
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


def _escape(text: str, lo: int, hi: int, keeps: _Spans, unit: _Unit, line_start: bool,
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
