"""Subtitles (``.srt`` and ``.vtt``): only the cue text is translated; the rest is kept.

Cue numbers, identifiers, timings, cue settings, ``WEBVTT`` headers, ``NOTE``/``STYLE``/
``REGION`` blocks, blank lines and line endings come back byte for byte. The file is read
as a stream (:func:`textio.lines`): memory holds one group of at most :data:`MAX_CUES`
cues, whatever the size of the file.

Segments: a cue whose text does not end a sentence (``. ! ? … ♪ ;``, their CJK forms or
a closing bracket, maybe followed by a closing quote) is grouped with the cues after it,
so a sentence spoken across cues is translated whole. A group ends at a sentence end,
at :data:`MAX_CUES` cues, at a gap of more than :data:`MAX_GAP` seconds, before a cue
that starts with a speaker dash, and at a ``NOTE`` block. Its text joins the cues' lines
with single spaces. A cue with no letter or digit (``♪♪``) is copied as it is.

Each text line is taken apart as *head* (styling tags, spaces and a speaker dash such as
``- `` at its start: ``<i>``, ``{\\an8}``, ``<v Bob>``), *body* and *tail* (tags and spaces
at its end). Head and tail are put back around the line's translation. A tag pair inside
a body (``a <b>big</b> dog``) becomes a :attr:`Segment.marks` span, so its tags wrap the
translation of those words (on each output line the translated span reaches). Any other
tag inside a body (a karaoke timestamp ``<00:01.000>``, a ``</i>`` closing a tag opened at
the line's start or on another line) goes back at the same relative position of the
line's translation, moved out of any Latin word. Character references (``&amp;``) are
:attr:`Segment.keep` spans.

Writing back: a group's translation is cut across its cues in proportion to their source
characters, and each cue's share across its lines the same way, preferring cuts after
punctuation near the proportional point and never inside a Latin word, number or
character reference. A share too short for its lines (under :data:`MIN_LINE` characters
a line) gets fewer lines; the tags of the lines it loses go on its last line. A share
equal to its source text is cut at the original places, so an untranslated file comes
back unchanged.

Limitations: timings are never changed, so a long translation stays on the cues the
source had. A tag pair spanning lines is kept as head and tail, or placed proportionally,
never as a mark. Line breaks in a translation become spaces; ``<`` and ``>`` in it are not
escaped. A blank line inside a cue's text (which players do not allow either) is an
error, as is a malformed timing line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from . import textio
from .base import DocumentError, FormatOptions, Segment, Span, Translated

MAX_CUES = 6
"""A segment holds at most this many cues."""
MAX_GAP = 2.0
"""A pause longer than this many seconds between two cues ends a segment."""
CUE_REACH = 1 / 3
"""How far (a fraction of the average cue's share) a cut between cues may move to fall
after punctuation; small, as the cues' timings do not move with the text."""
LINE_REACH = 1 / 2
"""The same for a cut between the lines of one cue."""
MIN_LINE = 4
"""A translated cue line is at least this many characters long (else the cue gets fewer lines)."""

_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})[,.](\d{1,3})"
_TIMING = re.compile(rf"\s*{_TIME}\s*-->\s*{_TIME}(?:\s.*)?")
_TAG = re.compile(r"</?[A-Za-z][^<>\r\n]*>|<(?:\d+:)?\d{1,2}:\d{2}[.,]\d{3}>|\{\\[^{}\r\n]*\}")
_TAG_NAME = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)")
_ENTITY = re.compile(r"&(?:[A-Za-z]+|#\d+|#x[0-9A-Fa-f]+);")
_WORD = r"[0-9A-Za-z\u00C0-\u024F\u0370-\u03FF\u0400-\u04FF]"
_ATOM = re.compile(rf"{_ENTITY.pattern}|{_WORD}+(?:['’.,:\-]{_WORD}+)*")
_ENDS_SENTENCE = re.compile(r"[.!?…♪;。！？；)\]）】][\"'”’»」』]*\Z")
_VTT_BLOCK = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t]|\Z)")
_STRONG, _WEAK = set(".!?…;。！？；♪"), set(",:，、：")
_NO_START = set("，。！？、；：,.!?;:…)]）》」』”’")
_NO_END = set("([（《「『“‘")
_DASHES = "-–"
_QUOTES = "\"'”’»」』"


@dataclass(frozen=True)
class _Syntax:
    """What differs between SRT and WebVTT."""

    vtt: bool
    example: str


_SRT = _Syntax(False, "00:00:01,000 --> 00:00:02,000")
_VTT = _Syntax(True, "00:01.000 --> 00:02.000")


@dataclass(frozen=True)
class _Tag:
    """A tag inside a line's body, at ``offset`` characters of its text."""

    offset: int
    raw: str
    pair: int | None = None
    """The index of the tag that closes (or opens) it in the same body, if any."""


@dataclass(frozen=True)
class _Line:
    """A cue text line: ``head + body (with tags) + tail + ending`` is the line."""

    raw: str
    head: str
    body: str
    """The text between head and tail, without its tags."""
    tail: str
    ending: str
    tags: tuple[_Tag, ...]


@dataclass(frozen=True)
class _Cue:
    """A cue with text to translate."""

    lead: str
    """The identifier (if any) and timing lines, verbatim."""
    lines: tuple[_Line, ...]
    blank: str
    """The blank lines after the cue, verbatim."""
    start: float
    end: float
    number: int
    """The 1-based line number of the first text line."""

    @property
    def text(self) -> str:
        return " ".join(line.body for line in self.lines if line.body)

    @property
    def raw(self) -> str:
        return self.lead + "".join(line.raw for line in self.lines) + self.blank


@dataclass(frozen=True)
class _Block:
    """Consecutive non-blank lines, from line ``number``, and the blank lines after them."""

    number: int
    lines: tuple[str, ...]
    blank: str


# --- reading -------------------------------------------------------------------------

def _blocks(lines: Iterable[str]) -> Iterator[_Block]:
    """Runs of non-blank lines, each with the blank lines after it."""
    block: list[str] = []
    blank: list[str] = []
    start = 1
    for number, line in enumerate(lines, 1):
        if not line.strip():
            blank.append(line)
            continue
        if blank:
            yield _Block(start, tuple(block), "".join(blank))
            block, blank = [], []
        if not block:
            start = number
        block.append(line)
    if block or blank:
        yield _Block(start, tuple(block), "".join(blank))


def _items(path: Path, encoding: textio.TextEncoding, syntax: _Syntax) -> Iterator[str | _Cue]:
    """The file as literal text (``str``) and cues."""
    header = not syntax.vtt
    for block in _blocks(textio.lines(path, encoding)):
        if not block.lines:
            yield block.blank
        elif not header:
            if not block.lines[0].startswith("WEBVTT") or block.lines[0][6:7].strip():
                raise DocumentError(path, "is not a WebVTT file: its first line must be WEBVTT; "
                                    "rename it to .srt if it is SubRip", block.number)
            header = True
            _no_timing(path, block, "put a blank line between the WEBVTT header and the first cue")
            yield "".join(block.lines) + block.blank
        elif syntax.vtt and _VTT_BLOCK.match(_strip_eol(block.lines[0])):
            yield "".join(block.lines) + block.blank
        else:
            cue = _cue(path, block, syntax)
            yield cue if any(ch.isalnum() for ch in cue.text) else cue.raw


def _cue(path: Path, block: _Block, syntax: _Syntax) -> _Cue:
    lines = block.lines
    at = 0 if "-->" in lines[0] else 1
    if at == len(lines):
        raise DocumentError(path, f"expected a cue number, then a timing like {syntax.example} (found "
                            f"{_shown(lines[0])}); a cue's text cannot hold blank lines", block.number)
    timing = _TIMING.fullmatch(_strip_eol(lines[at]))
    if not timing:
        raise DocumentError(path, f"expected a timing like {syntax.example}, found {_shown(lines[at])}",
                            block.number + at)
    _no_timing(path, _Block(block.number + at + 1, lines[at + 1:], ""),
               "a timing inside a cue's text: put a blank line before the next cue")
    times = [float(g or 0) for g in timing.groups()]
    start = times[0] * 3600 + times[1] * 60 + times[2] + times[3] / 10 ** len(timing.group(4))
    end = times[4] * 3600 + times[5] * 60 + times[6] + times[7] / 10 ** len(timing.group(8))
    return _Cue("".join(lines[:at + 1]), tuple(_line(line) for line in lines[at + 1:]), block.blank,
                start, end, block.number + at + 1)


def _no_timing(path: Path, block: _Block, message: str) -> None:
    for i, line in enumerate(block.lines):
        if "-->" in line and _TIMING.fullmatch(_strip_eol(line)):
            raise DocumentError(path, message, block.number + i)


def _strip_eol(line: str) -> str:
    return line.rstrip("\r\n")  # a line holds no line break but its own ending


def _shown(line: str) -> str:
    line = _strip_eol(line)
    return repr(line if len(line) <= 50 else line[:47] + "...")


def _line(raw: str) -> _Line:
    """Take a text line apart into head, body with its tags, tail and ending."""
    ending = raw[len(_strip_eol(raw)):]
    text = raw[:len(raw) - len(ending)]
    tags = {m.start(): m.end() for m in _TAG.finditer(text)} if "<" in text or "{" in text else {}
    ends = {end: start for start, end in tags.items()}
    i, dash = 0, False
    while i < len(text):
        if i in tags:
            i = tags[i]
        elif text[i].isspace():
            i += 1
        elif text[i] in _DASHES and not dash and text[i + 1:i + 2] not in ("-", "–", *"0123456789"):
            i, dash = i + 1, True
        else:
            break
    j = len(text)
    while j > i:
        if j in ends and ends[j] >= i:
            j = ends[j]
        elif text[j - 1].isspace():
            j -= 1
        else:
            break
    body, found = [], []
    pos, size = i, 0
    for start in sorted(s for s in tags if i <= s < j):
        body.append(text[pos:start])
        size += start - pos
        found.append((size, text[start:tags[start]]))
        pos = tags[start]
    body.append(text[pos:j])
    return _Line(raw, text[:i], "".join(body), text[j:], ending, _paired(found))


def _paired(found: list[tuple[int, str]]) -> tuple[_Tag, ...]:
    """Tags with each opening tag linked to its closing one, where both enclose text."""
    pair: dict[int, int] = {}
    stack: list[tuple[str, int]] = []
    for k, (_, raw) in enumerate(found):
        name = _TAG_NAME.match(raw)
        if not name:
            continue
        if not raw.startswith("</"):
            stack.append((name.group(1).lower(), k))
            continue
        for s in range(len(stack) - 1, -1, -1):
            if stack[s][0] == name.group(1).lower():
                opened = stack.pop(s)[1]
                if found[opened][0] < found[k][0]:
                    pair[opened], pair[k] = k, opened
                break
    return tuple(_Tag(offset, raw, pair.get(k)) for k, (offset, raw) in enumerate(found))


# --- grouping ------------------------------------------------------------------------

def _continues(group: list[_Cue], cue: _Cue) -> bool:
    last = group[-1]
    return (len(group) < MAX_CUES and not _ENDS_SENTENCE.search(last.text)
            and last.start <= cue.start and cue.start - last.end <= MAX_GAP
            and not set(_DASHES) & set(_TAG.sub("", next(line for line in cue.lines if line.body).head)))


def _grouped(items: Iterator[str | _Cue]) -> Iterator[str | tuple[_Cue, ...]]:
    """Literal text, and groups of cues translated as one segment."""
    group: list[_Cue] = []
    for item in items:
        if isinstance(item, _Cue) and group and _continues(group, item):
            group.append(item)
            continue
        if group:
            yield tuple(group)
            group = []
        if isinstance(item, _Cue):
            group = [item]
        else:
            yield item
    if group:
        yield tuple(group)


@dataclass(frozen=True)
class _Layout:
    """A group's segment text, its marks and kept spans, and the tags of each mark."""

    text: str
    marks: tuple[Span, ...]
    keep: tuple[Span, ...]
    tags: tuple[tuple[str, str], ...]
    """The opening and closing tag of each mark."""


def _layout(group: tuple[_Cue, ...]) -> _Layout:
    parts: list[str] = []
    at = 0
    marks, keep, tags = [], [], []
    for cue in group:
        for line in cue.lines:
            if not line.body:
                continue
            if parts:
                parts.append(" ")
                at += 1
            for k, tag in enumerate(line.tags):
                if tag.pair is not None and tag.pair > k:
                    marks.append((at + tag.offset, at + line.tags[tag.pair].offset))
                    tags.append((tag.raw, line.tags[tag.pair].raw))
            for m in _ENTITY.finditer(line.body):
                if not any(m.start() < tag.offset < m.end() for tag in line.tags):
                    keep.append((at + m.start(), at + m.end()))
            parts.append(line.body)
            at += len(line.body)
    return _Layout("".join(parts), tuple(marks), tuple(keep), tuple(tags))


# --- writing -------------------------------------------------------------------------

def _strip(text: str, a: int, b: int) -> Span:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _cut_points(text: str, a: int, b: int) -> list[int]:
    """Where ``text[a:b]`` may be cut: not inside a word, number or reference, not before
    closing punctuation, not after an opening bracket."""
    inside = {p for m in _ATOM.finditer(text, a, b) for p in range(m.start() + 1, m.end())}
    return [p for p in range(a + 1, b)
            if p not in inside and text[p] not in _NO_START and text[p - 1] not in _NO_END]


def _rank(text: str, p: int, target: float, window: float) -> tuple[int, float]:
    """How good a cut at ``p`` is (smaller is better): after a sentence end, then after a
    comma, within ``window`` of the proportional point ``target``; else the nearest."""
    distance = abs(p - target)
    before = text[max(0, p - 4):p].rstrip().rstrip(_QUOTES)[-1:]
    if distance > window or not before:
        return 2, distance
    return (0 if before in _STRONG else 1 if before in _WEAK else 2), distance


def _split(text: str, span: Span, sources: list[str], reach: float, min_width: int = 0) -> list[Span]:
    """Cut ``text[span]`` into one piece per source, in proportion to their lengths.

    A cut goes after punctuation if there is some within ``reach`` (a fraction of the
    average piece) of the proportional point, else at the nearest allowed place. With
    ``min_width``, fewer pieces than sources are made (the last ones empty) when the text
    is too short for pieces of that width. A text equal to the sources joined by spaces is
    cut where they were joined. Pieces are ``(p, p)`` where the text runs out.
    """
    a, b = span
    if text[a:b] == " ".join(sources):
        out, at = [], a
        for source in sources:
            out.append((at, at + len(source)))
            at += len(source) + 1
        return out
    a, b = _strip(text, a, b)
    weights = [max(len(s), 1) for s in sources]
    if min_width:
        count = max(1, min(len(weights), (b - a) // min_width))
        weights = weights[:count - 1] + [sum(weights[count - 1:])] + [0] * (len(weights) - count)
    points = _cut_points(text, a, b)
    total, per = sum(weights), (b - a) / len(weights)
    cuts, prev, acc = [a], a, 0
    for k, weight in enumerate(weights[:-1]):
        acc += weight
        target = a + (b - a) * acc / total
        later = max(0, sum(1 for w in weights[k + 1:] if w) - 1)
        candidates = [p for p in points if p > prev]
        candidates = candidates[:len(candidates) - later] if len(candidates) > later else candidates[:1]
        if weight and candidates and weights[k + 1]:
            prev = min(candidates, key=lambda p: _rank(text, p, target, per * reach))
        elif weight:
            prev = b
        cuts.append(prev)
    cuts.append(b)
    return [_strip(text, cuts[k], cuts[k + 1]) for k in range(len(sources))]


def _render(group: tuple[_Cue, ...], layout: _Layout, item: Translated) -> str:
    identity = item.text == layout.text and tuple(item.marks) == layout.marks
    text = item.text if identity else re.sub(r"[\r\n]", " ", item.text)
    marks = [(span, tags) for span, tags in zip(item.marks, layout.tags) if span is not None]
    shares = _split(text, (0, len(text)), [cue.text for cue in group], CUE_REACH)
    out: list[str] = []
    for cue, share in zip(group, shares):
        bodies = [line for line in cue.lines if line.body]
        pieces = [p for p in _split(text, share, [line.body for line in bodies], LINE_REACH, MIN_LINE)
                  if p[0] < p[1]]
        out.append(cue.lead)
        k = -1
        for line in cue.lines:
            if not line.body:
                out.append(line.raw)
                continue
            k += 1
            if k < len(pieces) - 1:
                out.append(_render_line(text, pieces[k], [line], marks, identity))
            elif k == len(pieces) - 1:
                out.append(_render_line(text, pieces[k], bodies[k:], marks, identity))
        out.append(cue.blank)
    return "".join(out)


def _render_line(text: str, piece: Span, lines: list[_Line], marks: list, identity: bool) -> str:
    """One output line: the translation ``text[piece]`` with the tags of ``lines`` (one
    line, or the last lines of a cue merged into one) and the marks that overlap it.

    Tags meeting at one place keep their source order when the segment is untranslated;
    otherwise closing tags come first, then loose ones, then opening ones (outer first).
    """
    a, b = piece
    first = lines[0]
    events: list[tuple[tuple, str]] = []
    for k, tag in enumerate(first.tags):
        if tag.pair is None:
            at = a + round(tag.offset * (b - a) / len(first.body))
            events.append(((at, k) if identity else (_snap(text, at, a, b), 1, k), tag.raw))
    for n, line in enumerate(lines[1:], 1):
        events += [((b, 3, n, k), tag.raw) for k, tag in enumerate(line.tags) if tag.pair is None]
    for index, ((s, e), (opening, closing)) in enumerate(marks):
        s, e = max(s, a), min(e, b)
        if s < e and identity:
            events += [((s, _seq(first, opening, s - a)), opening), ((e, _seq(first, closing, e - a)), closing)]
        elif s < e:
            s, e = _snap(text, s, a, b, -1), _snap(text, e, a, b, 1)
            events += [((s, 2, -e, index), opening), ((e, 0, -s, -index), closing)]
    out, pos = [first.head + "".join(_TAG.findall("".join(line.head for line in lines[1:])))], a
    for (at, *_), raw in sorted(events, key=lambda event: event[0]):
        out += [text[pos:at], raw]
        pos = at
    out.append(text[pos:b])
    return "".join(out) + "".join(line.tail for line in lines) + lines[-1].ending


def _snap(text: str, at: int, a: int, b: int, toward: int = 0) -> int:
    """``at`` moved out of the Latin word, number or character reference it falls in: to
    its start (``toward`` < 0), its end (> 0) or the nearer of the two (0)."""
    for m in _ATOM.finditer(text, a, b):
        if m.start() < at < m.end():
            nearer_start = toward < 0 or (toward == 0 and at - m.start() <= m.end() - at)
            return m.start() if nearer_start else m.end()
    return at


def _seq(line: _Line, raw: str, offset: int) -> int:
    """The index of the paired tag ``raw`` at ``offset`` in ``line`` (identity output only)."""
    return next((k for k, tag in enumerate(line.tags) if tag.offset == offset and tag.raw == raw), 0)


# --- the format ----------------------------------------------------------------------

@dataclass(frozen=True)
class SubtitleDocument:
    """An opened ``.srt`` or ``.vtt`` file; see the module docstring."""

    path: Path
    encoding: textio.TextEncoding
    syntax: _Syntax

    def _groups(self) -> Iterator[str | tuple[_Cue, ...]]:
        return _grouped(_items(self.path, self.encoding, self.syntax))

    def segments(self) -> Iterator[Segment]:
        """The cue texts to translate, a sentence spanning cues as one segment, read lazily.

        Raises:
            DocumentError: If a timing line is malformed, or the file is not text in a
                supported encoding.
        """
        for group in self._groups():
            if not isinstance(group, str):
                layout = _layout(group)
                yield Segment(layout.text, layout.marks, layout.keep, group[0].number)

    def write(self, translated: Iterable[Translated], out: BinaryIO) -> None:
        """Write the file again with each cue group's text replaced by its translation.

        Args:
            translated: One translation per segment of :meth:`segments`, in order.
            out: The binary stream to write to; it is flushed, not closed.

        Raises:
            DocumentError: If the file cannot be read again, or it changed so that the
                number of segments no longer matches.
        """
        with textio.rewrite(self.path, translated, out, self.encoding) as (stream, take):
            for group in self._groups():
                if isinstance(group, str):
                    stream.write(group)
                else:
                    stream.write(_render(group, _layout(group), take(group[0].number)))


@dataclass(frozen=True)
class SubtitleFormat:
    """A subtitle format; ``FORMAT`` reads both kinds and tells them apart by suffix."""

    name: str
    suffixes: tuple[str, ...]

    def open(self, path: Path, options: FormatOptions) -> SubtitleDocument:
        """Open ``path``; only its first bytes are read (to find its encoding).

        Args:
            path: The ``.srt`` or ``.vtt`` file.
            options: Unused; subtitles have no options.

        Raises:
            DocumentError: If the file cannot be read.
        """
        path = Path(path)
        vtt = self.name == "vtt" or (self.name != "srt" and path.suffix.lower() == ".vtt")
        return SubtitleDocument(path, textio.sniff(path), _VTT if vtt else _SRT)


SRT = SubtitleFormat("srt", (".srt",))
VTT = SubtitleFormat("vtt", (".vtt",))
FORMAT = SubtitleFormat("subtitles", (".srt", ".vtt"))
