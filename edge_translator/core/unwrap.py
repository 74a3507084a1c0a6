"""Hard-wrapped lines → the paragraphs they were: the one unwrapping rule of every face.

Text copied from a PDF, a plain-text e-mail or a terminal carries a line break every 60–80
characters. :func:`unwrap_edits` finds the breaks that only wrap a paragraph and says what
the model reads in their place; :func:`continuations` is the same rule for the lines of
one block, as the ``.txt`` reader streams them. The rule, for a block of non-blank lines
whose longest line is ``W`` characters:

- A line is **full** when the next line's first word would not have fit on it, with 15%
  slack for proportional fonts (``len + 1 + word > 0.85 W``), and ``W`` is at least
  :data:`MIN_WIDTH`. Only a full line can be a wrap.
- A full line is a **sure wrap** when the break falls inside a sentence: the next line
  starts with a lowercase letter or a digit, or the line ends with a hyphenated word
  part or with a word that never ends a sentence ("the", "of", "and", ...).
- A block with a sure wrap is wrapped prose: its other full lines join too (also where a
  sentence ends at the line's end), so it comes back as one paragraph. A block without
  one (verse, an address, one sentence per line, a heading above its text) keeps every
  line, so what people mean line by line stays line by line.
- Never joined: lines without a letter, a list item (``-``, ``*``, ``•``, ``1.``, ``a)``,
  ``(iv)``), a line indented otherwise than its paragraph (its first line may be indented
  more), code (a prompt, braces or semicolons at the end, four spaces of indentation),
  and lines of a block narrower than :data:`MIN_WIDTH`.
- A word hyphenated at the line end ("transla-" / "tion") is joined without its hyphen,
  unless both halves are words and the whole is not ("well-" / "known"); ``is_word``
  decides (without it: the hyphen is dropped before a lowercase suffix-like half).
- Across a page break (a form feed, or a page-number line between blank lines) inside a
  paragraph that goes on after it, the page's furniture (the page number, a running
  header or footer: short lines) is left out of what the model reads.
- Soft hyphens (U+00AD) are dropped and Latin ligatures (ﬁ ﬂ ﬀ ﬃ ﬄ ﬅ ﬆ) spelled out.

Limits: it is a heuristic. Prose wrapped narrower than :data:`MIN_WIDTH` stays line by
line; a two-line paragraph whose one break falls between sentences keeps its break (its
sentences translate the same either way); long verse lines that start in lowercase and
fill the width are joined like prose.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

MIN_WIDTH = 25
"""The narrowest block (its longest line, in characters) whose lines may be wraps."""
SLACK = 0.85
"""A line is full when the next word would take it past this share of the block's width."""
MAX_FURNITURE = 4
"""Most non-blank lines (page number, running header and footer) a page break may carry."""

LIGATURES = {"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"}
SOFT_HYPHEN = "\u00ad"
#: Words after which no sentence or verse line ends: a line ending in one is wrapped.
OPEN_ENDED = frozenset("""a an the of to in on at by for from with into onto upon about over under and or nor but
as than that which who whose whom where when while if because although though since until unless whether
is are was were be been being has have had do does did will would can could shall should may might must
not no its their our your my his her this these those such very more most some any each every all both
""".split())
#: Endings of the second half of a word hyphenated at a line end (used without ``is_word``).
_SUFFIXES = ("tion", "sion", "ment", "ness", "ing", "ed", "ly", "able", "ible", "ity", "ous", "ive", "al", "er",
             "est", "ful", "less", "ism", "ist", "ize", "ise", "ance", "ence", "ant", "ent", "ure", "age", "ship",
             "ty", "ry", "cy", "ic", "ics", "ate", "ated", "ation", "es", "s", "ial", "ical", "ally", "ward", "wise")

_BREAK = re.compile(r"\r\n|\r|\n")
_ITEM = re.compile(r"(?:[-*+•◦▪‣⁃–](?=\s)|\(?(?:\d{1,3}|[a-zA-Z]|[ivxlcIVXLC]{1,6})[.)](?=\s))")
_CODE_END = re.compile(r"(?:[{}]|[)\]];)\s*$|^\s*[})\]]+;?\s*$")
_CODE_START = re.compile(r"^\s*(?:\$ |# |>>> |\.\.\. |//|/\*|<\w+[ >/]|#include|(?:def|class|import|from|return|if|elif|"
                         r"else|for|while|try|except|with|var|let|const|function|public|private)\b.*[:{;(=]|"
                         r"\w+(?:\.\w+)*\s*(?:=|\+=|-=|==)\s*\S)")
_CODE_INSIDE = re.compile(r"\w\.\w+\(|\w\(\)|\w\[\w*\]|->|::|&&|\|\||\s==\s|!=")
_PAGE_NUMBER = re.compile(r"(?i)^\s*(?:[-–—]\s*)?(?:page\s+|p\.\s*)?(?:\d{1,4}|[ivxlc]{1,7})(?:\s*(?:/|of)\s*\d{1,4})?"
                          r"(?:\s*[-–—])?\s*$")
_ENDS_SENTENCE = re.compile(r"[.!?…:;。！？；：][\"'”’)\]}»」』]*$")
_NUMBER_ENDS = re.compile(r"\d[\d,.]*[.,;:!?)]$")  # "in" / "1603." ends a sentence across the break
_HYPHENATED = re.compile(r"([^\W\d_]+)-$")
_FIRST_WORD = re.compile(r"\S+")
_LETTERS = re.compile(r"[^\W\d_]+")


@dataclass(frozen=True)
class Edit:
    """Read ``replacement`` where the input holds ``text[start:end]``."""

    start: int
    end: int
    replacement: str


@dataclass(frozen=True)
class _Line:
    start: int
    """Offset of the line's first character in the text."""
    content: str
    """The line without its line break."""
    end: int
    """Offset just past its line break."""

    @property
    def body(self) -> str:
        return self.content.strip().lstrip("\f")

    @property
    def indent(self) -> int:
        stripped = self.content.lstrip(" \t\f")
        return len(self.content[:len(self.content) - len(stripped)].replace("\t", "    ").replace("\f", ""))

    @property
    def width(self) -> int:
        return self.indent + len(self.body)

    @property
    def blank(self) -> bool:
        return not self.body


def _lines(text: str) -> list[_Line]:
    lines, at = [], 0
    for m in _BREAK.finditer(text):
        lines.append(_Line(at, text[at:m.start()], m.end()))
        at = m.end()
    if at < len(text):
        lines.append(_Line(at, text[at:], len(text)))
    return lines


def _has_letter(text: str) -> bool:
    return _LETTERS.search(text) is not None


def _is_item(body: str) -> bool:
    return _ITEM.match(body) is not None


def _is_code(line: _Line, paragraph_indent: int) -> bool:
    return bool(_CODE_END.search(line.content) or _CODE_START.match(line.content) or _CODE_INSIDE.search(line.body)
                or line.indent >= paragraph_indent + 4)


def _first_word(body: str) -> str:
    m = _FIRST_WORD.match(body)
    return m.group() if m else ""


def _full(prev: _Line, nxt: _Line, width: int) -> bool:
    return width >= MIN_WIDTH and prev.width + 1 + len(_first_word(nxt.body)) > SLACK * width


def _sure_wrap(prev: str, nxt: str) -> bool:
    """Whether a break between ``prev`` and ``nxt`` falls inside a sentence."""
    first = nxt[:1]
    if first.islower() or (first.isdigit() and not _ENDS_SENTENCE.search(prev)):
        return True
    if _HYPHENATED.search(prev):
        return True
    last = prev.rsplit(None, 1)[-1].lower() if prev.split() else ""
    return last in OPEN_ENDED


def continuations(lines: Sequence[str]) -> list[bool]:
    """For one block of lines (no blank line among them, line breaks removed): whether each
    line after the first continues the line before it. ``result[i]`` is about ``lines[i + 1]``."""
    parsed = []
    at = 0
    for content in lines:
        parsed.append(_Line(at, content, at + len(content) + 1))
        at += len(content) + 1
    return _block_joins(parsed)


def _block_joins(block: Sequence[_Line]) -> list[bool]:
    """:func:`continuations` of parsed lines (the rule in the module docstring)."""
    if len(block) < 2:
        return []
    width = max(line.width for line in block)
    candidates, sure = [], False
    head, indent = block[0], block[0].indent  # the paragraph's first line, and its lines' indentation
    for prev, nxt in zip(block, block[1:]):
        if prev is head:
            indent = _hanging(head) if _is_item(head.body) else min(head.indent, nxt.indent)
        ok = (not _is_item(nxt.body) and _has_letter(prev.body)
              and (_has_letter(nxt.body) or (_NUMBER_ENDS.match(nxt.body) and not _ENDS_SENTENCE.search(prev.body)))
              and not _is_code(prev, prev.indent if prev is head else indent) and not _is_code(nxt, indent)
              and nxt.indent == indent and _full(prev, nxt, width))
        candidates.append(ok)
        if ok:
            sure = sure or _sure_wrap(prev.body, nxt.body)
        else:
            head = nxt
    return [ok and sure for ok in candidates]


def _hanging(head: _Line) -> int:
    """The indentation of a list item's continuation lines (under its text)."""
    m = _ITEM.match(head.body)
    if not m:
        return head.indent
    rest = head.body[m.end():]
    return head.indent + m.end() + len(rest) - len(rest.lstrip())


def glue(prev: str, nxt: str, is_word: Callable[[str], bool] | None = None) -> tuple[int, str]:
    """How two joined lines meet: ``(characters to drop from the end of prev, text between)``:
    ``(0, " ")``, or for a word hyphenated at the line end ``(1, "")`` ("transla-" "tion")
    or ``(0, "")`` when the hyphen belongs to a compound ("well-" "known")."""
    m = _HYPHENATED.search(prev)
    if not m or not nxt[:1].isalpha() or not nxt[:1].islower():
        return 0, " "
    left = m.group(1)
    right = _LETTERS.match(nxt).group()
    if is_word is not None:
        whole = is_word((left + right).lower())
        if not whole and is_word(left.lower()) and is_word(right.lower()):
            return 0, ""  # "well-" + "known": a compound keeps its hyphen
        return 1, ""
    if right.lower().endswith(_SUFFIXES) and len(right) <= 6 or len(left) <= 2:
        return 1, ""
    return 0, ""


def _running(lines: list[_Line]) -> set[str]:
    """Running headers and footers: among the two non-blank lines on each side of a page
    break (a form feed or a page-number line, those close together counted once; the
    text's start is a page's top), a text found on two lines or more, the same but for its
    digits."""
    signs = [k for k, line in enumerate(lines) if "\f" in line.content or _PAGE_NUMBER.match(line.body)
             and not line.blank]
    breaks: list[list[int]] = []
    for k in signs:
        if breaks and k - breaks[-1][-1] <= 4:
            breaks[-1].append(k)
        else:
            breaks.append([k])
    if any("\f" in line.content for line in lines):
        breaks.insert(0, [-1])  # the text's start is a page's top too
    seen: dict[str, set[int]] = {}  # the lines of each text: the same text on two lines is running
    for group in breaks:
        before = [j for j in range(group[0] - 1, max(-1, group[0] - 8), -1) if not lines[j].blank][:2]
        after = [j for j in range(group[-1] + 1, min(len(lines), group[-1] + 8)) if not lines[j].blank][:2]
        nearby = before + after + [k for k in group if k >= 0 and "\f" in lines[k].content]
        for j in nearby:
            key = _furniture_key(lines[j].body)
            if key and len(key) < 80:
                seen.setdefault(key, set()).add(j)
    return {key for key, found in seen.items() if len(found) >= 2}


def _furniture_key(body: str) -> str:
    return re.sub(r"\d+", "#", body.strip())


def _goes_on(lines: list[_Line], last: int, width: int, running: set[str]) -> int | None:
    """The line where a paragraph ending at ``lines[last]`` goes on after a page break: past
    blank lines, a form feed and at most :data:`MAX_FURNITURE` lines of furniture (a page
    number, a running header or footer seen at other page breaks, a short line), at the
    first line that continues the sentence; a capitalised one only when no line in
    lowercase follows it. ``None`` without a sign of a page break (a form feed or a
    page-number line) before it, or without such a line."""
    after = [j for j in range(last + 1, min(len(lines), last + 3 * MAX_FURNITURE + 3)) if not lines[j].blank]
    page = False
    for n, j in enumerate(after[:MAX_FURNITURE + 1]):
        line = lines[j]
        page = page or any("\f" in lines[k].content for k in range(last + 1, j + 1))
        if _PAGE_NUMBER.match(line.body):
            page = True
            continue
        if _furniture_key(line.body) in running:
            continue
        if page and _sure_wrap(lines[last].body, line.body) and not _is_item(line.body):
            following = lines[after[n + 1]] if n + 1 < len(after) else None
            if line.body[:1].islower() or following is None or not following.body[:1].islower():
                return j
        if line.width >= SLACK * width or line.body[:1].islower():
            return None  # text, not furniture
    return None


def _blocks(lines: list[_Line]) -> list[list[int]]:
    """Indices of the lines of each block (runs of non-blank lines)."""
    blocks, current = [], []
    for k, line in enumerate(lines):
        if line.blank or "\f" in line.content:
            if current:
                blocks.append(current)
            current = [] if line.blank else [k]
        else:
            current.append(k)
    if current:
        blocks.append(current)
    return blocks


def unwrap_edits(text: str, is_word: Callable[[str], bool] | None = None) -> list[Edit]:
    """What the model reads instead of the wraps, page furniture, soft hyphens and ligatures
    of ``text``: edits in order, none overlapping (see the module docstring for the rule).

    Args:
        text: Any text.
        is_word: Says whether a lowercase word is an English word (for words hyphenated at
            a line end); ``None``: a suffix rule decides.
    """
    lines = _lines(text)
    edits: list[Edit] = []
    blocks = _blocks(lines)
    joined_after: dict[int, tuple[int, int]] = {}  # line index → (next line index, furniture end)
    for block in blocks:
        parsed = [lines[k] for k in block]
        for k, ok in zip(block, _block_joins(parsed)):
            if ok:
                joined_after[k] = (k + 1, -1)
    # page breaks: a paragraph's last line that is full and ends no sentence, then furniture
    running = _running(lines) if "\f" in text or len(blocks) > 2 else set()
    for before in blocks:
        last = lines[before[-1]]
        if len(before) < 2 or not _has_letter(last.body) or _ENDS_SENTENCE.search(last.body):
            continue
        width = max(lines[k].width for k in before)
        goes_on = _goes_on(lines, before[-1], width, running)
        if goes_on is not None and _full(last, lines[goes_on], width):
            joined_after[before[-1]] = (goes_on, -1)
    joined = set()
    for k, (nxt_index, _) in sorted(joined_after.items()):
        prev, nxt = lines[k], lines[nxt_index]
        drop, between = glue(prev.body, nxt.body, is_word)
        body_end = prev.start + len(prev.content.rstrip())
        next_start = nxt.start + len(nxt.content) - len(nxt.content.lstrip(" \t\f"))
        edits.append(Edit(body_end - drop, next_start, between))
        joined.update(range(k + 1, nxt_index))
    if "\f" in text:  # the furniture of page breaks where no paragraph goes on: read as nothing
        for k in sorted(_furniture(lines, running) - joined):
            edits.append(Edit(lines[k].start, lines[k].end, ""))
    edits.sort(key=lambda e: e.start)
    starts = [e.start for e in edits]
    for m in re.finditer(f"[{SOFT_HYPHEN}{''.join(LIGATURES)}]", text):
        at = bisect.bisect_right(starts, m.start()) - 1
        if at < 0 or not edits[at].start <= m.start() < edits[at].end:
            edits.append(Edit(m.start(), m.end(), "" if m.group() == SOFT_HYPHEN else LIGATURES[m.group()]))
    edits.sort(key=lambda e: e.start)
    return edits


def _furniture(lines: list[_Line], running: set[str]) -> set[int]:
    """Lines that are a page's furniture: page numbers beside a form feed, and running
    headers and footers (see :func:`_running`)."""
    found = set()
    for k, line in enumerate(lines):
        if line.blank:
            continue
        if _furniture_key(line.body) in running:
            found.add(k)
        elif _PAGE_NUMBER.match(line.body) and any("\f" in lines[j].content
                                                  for j in range(max(0, k - 3), min(len(lines), k + 4))):
            found.add(k)
    return found


def apply_edits(text: str, edits: Sequence[Edit]) -> tuple[str, list[int]]:
    """``text`` as the model reads it, and where each of its offsets (and its end) lies in ``text``.

    A replacement's characters map to its edit's start and the character after it to the
    edit's end, so a span of the result maps to the span of the input it came from.
    """
    out: list[str] = []
    back: list[int] = []
    at = 0
    for edit in edits:
        out.append(text[at:edit.start])
        back.extend(range(at, edit.start))
        out.append(edit.replacement)
        back.extend([edit.start] * len(edit.replacement))
        at = edit.end
    out.append(text[at:])
    back.extend(range(at, len(text) + 1))
    return "".join(out), back
