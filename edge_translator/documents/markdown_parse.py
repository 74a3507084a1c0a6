"""Markdown in: the file parsed into units, each a segment aligned with its exact source span.

markdown-it-py parses the file. Every paragraph, heading (ATX and setext) and table cell,
wherever it sits, becomes one :class:`Unit`: its segment text (a soft line break is a
space, a hard break a ``\\n``), its marks (emphasis, strong, strikethrough, links) and
kept spans (inline code, autolinks, inline HTML, images), and the source span the
segment came from, so :mod:`.markdown_write` can replace that span and nothing else. A
block whose text cannot be followed through its source is logged and left out.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it import rules_block
from markdown_it.rules_inline import StateInline, backtick, image, link
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from . import textio
from .base import Segment, Span

logger = logging.getLogger(__name__)

_NEWLINE = re.compile(r"\r\n?|\n")
_SOFT_BREAK = re.compile(r" ?\n[ \t]*")
_HARD_BREAK = re.compile(r"(?:\\| {2,})\n[ \t]*")
_LETTER = re.compile(r"[^\W\d_]")
_MARKS = {"em_open": "em_close", "strong_open": "strong_close", "s_open": "s_close"}
_MAX_DEPTH = 64
"""Marks nested deeper than this leave the segment untranslated (the writer recurses)."""


@dataclass(frozen=True)
class Source:
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
class Mark:
    """A formatting span of a segment and the source syntax around it."""

    span: Span
    parent: int | None
    opener: str
    closer: str
    link: str | None = None
    """For a link: its whole source, appended when the translation cannot place it."""


@dataclass(frozen=True)
class Unit:
    """A segment, the source span it replaces and what the writer needs to rebuild it."""

    segment: Segment
    start: int
    end: int
    kind: str
    """``"paragraph"``, ``"setext"``, ``"atx"`` (headings) or ``"cell"``."""
    marks: tuple[Mark, ...]
    breaks: tuple[str, ...]
    """The source of each hard break: its syntax, line ending and the next line's prefix."""



def read_source(path: Path) -> Source:
    encoding = textio.sniff(path)
    text = textio.read_all(path, encoding)
    starts, ends, pos = [], [], 0
    for match in _NEWLINE.finditer(text):
        starts.append(pos)
        ends.append(match.start())
        pos = match.end()
    starts.append(pos)
    ends.append(len(text))
    return Source(encoding, text, starts, ends)


def parser() -> MarkdownIt:
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


def units(path: Path, source: Source, md: MarkdownIt, env: dict) -> Iterator[Unit]:
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
        yield Unit(segment, smap.at(0), smap.at(len(token.content)), kind, marks, breaks)


def _align_lines(token: Token, source: Source) -> _Map | None:
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


def _align_atx(token: Token, source: Source) -> _Map | None:
    line = source.line(token.map[0])
    pos = token.meta.get("column", 0)
    while line.startswith("#", pos):
        pos += 1
    pos = line.find(token.content, pos)
    if pos < 0:
        return None
    base = source.starts[token.map[0]] + pos
    return _Map(token.content, [0], [base])


def _align_cell(token: Token, source: Source, rows: dict[int, int]) -> _Map | None:
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
          ) -> tuple[str, tuple[Mark, ...], tuple[Span, ...], tuple[str, ...]] | None:
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
    done = tuple(Mark((m["start"], m["end"]), m["parent"], m["opener"], m["closer"], m.get("link"))
                 for m in marks)
    return "".join(parts), done, tuple(keep), tuple(breaks)


def _has_words(text: str, keep: tuple[Span, ...]) -> bool:
    done = 0
    for begin, end in (*keep, (len(text), len(text))):
        if _LETTER.search(text, done, begin):
            return True
        done = end
    return False

