"""Paragraphs → sentences → chunks the model accepts, with every character accounted for.

:func:`split_sentences` splits English into sentences; joining its output gives the input
back exactly (each sentence keeps the whitespace that follows it). :func:`segment` also
keeps line breaks as structure and cuts sentences that are too long for the model at
clause boundaries, then into windows of words, never dropping text.

How a candidate end mark (``.`` ``?`` ``!`` ``...`` ``…`` ``. . .``) is decided:

- A lowercase word after it continues the sentence; so does no space at all, except
  between two plain words ("ended.Next"). Closing quotes and brackets, and citation
  markers ("[1]", "[a]", "[note 2]", "[citation needed]"), stay with the sentence.
- Abbreviations by class: titles and Latin connectives never end one ("Mr.", "e.g.");
  "No.", "p.", "Jan." do unless a number follows; "Inc.", "etc.", "p.m." do before a
  capital; dotted initialisms ("U.S.") and "Jr.", "St." only before a common sentence
  starter ("How", "The", "It"). A single letter is an initial after a name ("Albert I.
  Jones"), the pronoun after a lowercase word ("you and I. Did").
- ". . ." after a space is an omission, four dots end the sentence before a capital,
  "word. . . . Next" ends after "word."; "[...]" and "(…)" never end one, nor does a mark
  inside brackets that close soon after.
- List items ("1.", "a)", "(b)", "ii.", "• 10.") begin a segment when two or more follow
  in sequence after a line start, a colon or a sentence end; their dots end nothing.
- A line break always ends a sentence, and a piece without a letter or digit joins its
  neighbour unless the whole input has none. :func:`segment` first joins the lines that
  only wrap a paragraph (:mod:`.unwrap` decides which), so they are read as spaces.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a lone copy of this module splits sentences for the LibreTranslate peer (bench/ltlauncher.py)
    from .unwrap import Edit

#: Abbreviations that never end a sentence: titles before a name, Latin connectives.
NEVER_FINAL = frozenset("""
mr mrs ms messrs mme mlle dr prof rev fr gen col lt maj sgt cpl pvt capt cmdr adm gov sen rep hon
pres supt insp mt ft e.g i.e cf viz vs v a.k.a
""".split())
#: Abbreviations usually followed by a number ("No. 5", "p. 55", "Jan. 3").
BEFORE_NUMBER = frozenset("""
no nos vol vols p pp fig figs eq eqs ch chap sec sect art op ed tab para pt pts ex ref refs nr n° ca c
approx est apt ste bldg rm tel ext jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
#: Abbreviations that often end a sentence too: a boundary before any capital.
FINAL_BEFORE_CAPITAL = frozenset("etc inc ltd co corp bros llc plc a.m p.m".split())
#: Abbreviations (and every dotted initialism, "U.S.", "M.D.") that end a sentence only
#: before a word in :data:`STARTERS`: "the U.S. How about you?" but "the U.S. Army".
FINAL_BEFORE_STARTER = frozenset("st jr sr esq al ave blvd rd dept univ ph.d".split())
#: Capitalised words that commonly start a sentence.
STARTERS = frozenset("""
I He She It We They You This That These Those There Here Then The A An My Our Your His Her Its Their
What When Where Why Who Whom Whose Which How And But Or So Yet If In On At As By For From To With
After Before During Since While Although Though Because However Meanwhile Moreover Furthermore Also
Nevertheless Still Thus Hence Therefore Instead Now Today Yesterday Tomorrow Is Are Was Were Do Does
Did Can Could Will Would Should Shall Might Must Have Has Had Let Please Yes No Not One Some Many Most
All Each Every Both Such Other Another Any Several Few Once Only Even Just Never Nothing Everyone
Millions Thousands Hundreds Dozens Officials Experts Critics Analysts Researchers Scientists
""".split())
#: Capitalised words that continue after "p.m.", "Co." and the like: "3 p.m. EST", "& Co. KG".
TAILS = frozenset("""UTC GMT BST IST CET CEST EET EST EDT CST CDT MST MDT PST PDT AST ADT HST AKST JST ET PT CT MT
KG KGaA AG GmbH LLC LLP LP Ltd Inc PLC SA NV BV""".split())
#: Words that open a time phrase before the subject ("At 5 a.m. Mr. Smith went...").
_TIME_OPENERS = frozenset("at by until till from before after around about since".split())

#: The class of each known abbreviation (written without its last period, lowercase).
_KIND = {**dict.fromkeys(NEVER_FINAL, "never"), **dict.fromkeys(BEFORE_NUMBER, "number"),
         **dict.fromkeys(FINAL_BEFORE_CAPITAL, "capital"), **dict.fromkeys(FINAL_BEFORE_STARTER, "starter")}
_OPENERS = "\"'“‘«([{¿¡`"
_CLOSERS = "\"'”’»)]}`」』"
#: A candidate end mark (a run of . ? ! …, or dots with single spaces) and its closing quotes.
_END = re.compile(r"""([.!?…。．！？](?:[.!?…。．！？]|[ \u00a0](?=\.))*)(["'”’»)\]}`」』]*)""")
#: Citation markers after an end mark: "[1]", "[2–4]", "[a]", "[note 3]", "[citation needed]".
_CITES = re.compile(r"""(?:[ \u00a0]?\[(?:\d{1,4}(?:\s?[-–,:]\s?\d{1,4})*|[a-z]{1,2}|[A-Za-z]{1,5}\.?\ ?\d{1,4}
    |[a-z][a-z ,?'–-]{2,40})\])+""", re.X)
_WORD = re.compile(r"\S*")
_DOTTED = re.compile(r"(?:[a-z]{1,2}\.)+[a-z]{1,2}")
_URLISH = re.compile(r"(?:://|www\.|@|\.(?:com|org|net|edu|gov|io|cn|html?)\b)", re.I)
_ALNUM = re.compile(r"[^\W_]")
_WORDLIKE = re.compile(r"[^\W\d_]{2}")
#: A list item marker: optional bullet, then "1." "1.)" "1)" "(1)" with a number, letter or roman numeral.
_ITEM = re.compile(r"([•◦▪‣⁃·*–-] ?)?(\()?(\d{1,3}|[A-Za-z]|[ivxlc]{2,6}|[IVXLC]{2,6})(\.\)|\.|\))(?=\s)")
_BULLETS = "•◦▪‣⁃·*–-"
_ITEM_BEFORE = _BULLETS + " \t\xa0("  # what may stand before a one-letter marker
_ROMAN_CHARS = "ivxlcIVXLC"
_ROMAN = {r: n for n, r in enumerate("i ii iii iv v vi vii viii ix x xi xii xiii xiv xv xvi xvii xviii xix xx".split(), 1)}


@dataclass(frozen=True)
class Segment:
    """A piece of input to translate, and the whitespace that followed it."""

    text: str
    """What the model reads: the sentence, its wrapped lines joined (see :mod:`.unwrap`)."""
    separator: str
    """The whitespace after it as the output keeps it: a line break that only wrapped the
    paragraph reads as the space it stands for."""
    span: tuple[int, int] = (0, 0)
    """Where the sentence stands in the input, ``input[start:end]`` (with its wrapped lines)."""


def _word_start(line: str, end: int, limit: int = 64) -> int:
    """Where the run of non-space characters that ends at ``end`` starts (looking back ``limit``)."""
    low = max(0, end - limit)
    start = line.rfind(" ", low, end) + 1 or low
    if not line[start:end].isprintable():  # a tab or another space: look character by character
        start = end
        while start > low and not line[start - 1].isspace():
            start -= 1
    return start


def _word_end(line: str, start: int, limit: int = 64) -> int:
    """Where the run of non-space characters that starts at ``start`` ends (looking ``limit`` on)."""
    return _WORD.match(line, start, start + limit).end()


def _skip_back(line: str, end: int, chars: str | None = None, limit: int = 64) -> int:
    """Step back from ``end`` over whitespace (or over ``chars``), at most ``limit`` characters."""
    stop = max(0, end - limit)
    while end > stop and (line[end - 1] in chars if chars else line[end - 1].isspace()):
        end -= 1
    return end


def _bracketed(line: str, at: int, close: str) -> bool:
    """Whether the ellipsis at ``line[at]`` is wrapped in brackets: "[...]", "(…)"."""
    return at > 0 and line[at - 1] in "[(" and close[:1] in ")]"


def _item_values(value: str) -> list[tuple[str, int]]:
    """The readings of a list marker's value: ("n", 2), ("a", 2) for "b", ("r", 4) for "iv"."""
    if value.isdigit():
        return [("n", int(value))]
    readings = [("a" if value.islower() else "A", ord(value.lower()) - 96)] if len(value) == 1 else []
    if value.lower() in _ROMAN:
        readings.append(("r" if value.islower() else "R", _ROMAN[value.lower()]))
    return readings


def _list_items(line: str, marks: list[re.Match]) -> tuple[set[int], list[int]]:
    """Find list item markers: (positions of their dots, where each inline item starts).

    A marker at the start of the line always counts. Elsewhere markers count when two or
    more of one style follow in sequence (1, 2; a, b; ii, iii) with words between them, the
    later not after "and"/"or"/a comma, and the first after a line start, a colon, a
    sentence end or a bullet.
    """
    indent = len(line) - len(line.lstrip()) if line[:1].isspace() else 0
    first = _ITEM.match(line, indent)
    ends = [m.start() for m in marks if m.group(1) == "."]
    at = line.find(")")
    while at != -1:
        ends.append(at)
        at = line.find(")", at + 1)
    found = [first] if first else []
    for at in sorted(ends):
        last = line[at - 1: at]
        if not (last.isdigit() or last in _ROMAN_CHARS or line[at - 2: at - 1] in _ITEM_BEFORE):
            continue  # the end of an ordinary word
        start = line.rfind(" ", at - 8 if at > 8 else 0, at) + 1
        if not start or start <= indent:
            continue
        m = _ITEM.match(line, start)
        if m and m.start(4) == at:
            if not m.group(1) and start >= 2 and line[start - 2] in _BULLETS and line[start - 1] == " ":
                m = _ITEM.match(line, start - 2)  # "• 9."
            found.append(m)
    if not found:
        return set(), []
    dots, starts = set(), []
    if first:
        dots.add(first.start(4))
    if len(found) < 2:
        return dots, starts
    style = [(m.group(1) is not None, m.group(2) or "", m.group(4)) for m in found]
    links = {}
    for i, m in enumerate(found):
        if m.group(2) and m.group(4) != ")":
            continue
        j = next((k for k in range(i + 1, min(i + 20, len(found))) if style[k] == style[i]), None)
        if j is None:
            continue
        later = found[j]
        between = line[m.end(): later.start()]
        before = between.rstrip()
        if (not _WORDLIKE.search(between) or before.endswith(",")
                or before.rsplit(None, 1)[-1:] in (["and"], ["or"], ["&"])):
            continue
        ahead = {kind: v for kind, v in _item_values(later.group(3))}
        if any(ahead.get(kind) == v + 1 for kind, v in _item_values(m.group(3))):
            links[i] = j
    linked_to = set(links.values())
    for i in links:
        if i in linked_to:
            continue
        m = found[i]
        end = _skip_back(line, _skip_back(line, m.start()), _CLOSERS)
        if not (m.group(1) or end <= indent or line[end - 1] in ":.!?;"):
            continue
        chain = [i]
        while chain[-1] in links:
            chain.append(links[chain[-1]])
        for k in chain:
            dots.add(found[k].start(4))
            if found[k] is not first:
                starts.append(found[k].start())
    return dots, sorted(starts)


def _inside_brackets(line: str, start: int, at: int, close: str) -> bool:
    """Whether ``line[at]`` lies inside (...) or [...] opened since ``start`` and near, and closed soon after."""
    start = max(start, at - 400)
    for left, right in ("()", "[]"):
        if line.find(left, start, at) == -1:
            continue
        depth = line.count(left, start, at) - line.count(right, start, at) - close.count(right)
        if depth > 0 and line.find(right, at, at + 400) != -1:
            return True
    return False


def _period_ends(line: str, start: int, dot: int, after: int, gap: int, close: str) -> bool:
    """Decide a single period at ``line[dot]``; the next word starts at ``after``, ``gap`` spaces on."""
    low = dot - 64 if dot > 64 else 0
    word_at = line.rfind(" ", low, dot) + 1 or low
    if not line[word_at:dot].isprintable():
        word_at = _word_start(line, dot)  # a tab or another space in the word
    word = line[word_at:dot].lstrip(_OPENERS)
    core = word.lower()
    kind = _KIND.get(core)
    if gap == 0:
        # "end.Next" with no space: only between plain words, never inside URLs, e-mail
        # addresses, decimals or abbreviations.
        return (len(core) >= 2 and (core.isalpha() or core.replace(",", "").isdigit()) and kind in (None, "capital")
                and line[after: after + 1].isupper() and line[after + 1: after + 2].islower()
                and not _URLISH.search(line, word_at, _word_end(line, after)))
    if len(core) == 1 and (kind is None or word.isupper()) and core.isalpha():
        kind = "letter"  # "p. 55" and "c. 1900" stay numbered; "Stanley C. Wilson" is an initial
    elif kind is None:
        if "." not in core or not _DOTTED.fullmatch(core):
            return True
        kind = "starter"  # a dotted initialism: "U.S.", "M.B.A."
    if close.strip("'’`"):
        return True  # '"Apple Inc." The firm...'
    if kind == "never":
        return False
    nxt = line[after: _word_end(line, after)]
    first = nxt.lstrip(_OPENERS)[:1]
    if kind == "number":
        return not first.isdigit()
    if kind == "capital":
        if not first.isupper() or nxt.rstrip(".,;:") in TAILS:
            return False  # "3 p.m. EST", "GmbH & Co. KG"
        if core in ("a.m", "p.m"):
            head = line[start: min(dot, start + 60)].split()
            return not (head[0].lower() in _TIME_OPENERS and len(head) <= 4)  # "At 5 a.m. Mr. Smith went..."
        return True
    bare = nxt.lstrip(_OPENERS).rstrip(".,;:!?\"'”’)")
    if kind == "starter":
        return bare in STARTERS
    if len(nxt) == 2 and nxt[0].isupper() and nxt[1] == ".":
        return False  # initials in a row: "Keel, R. A. (1936)"
    end = _skip_back(line, word_at)  # a single letter: an initial, the pronoun "I" or a label
    if end <= start:
        return False  # it opens the sentence: "J. R. R. Tolkien", "A. His name is..."
    before = line[_word_start(line, end): end].lstrip(_OPENERS)
    if word == "I" and before[:1].islower():
        return first.isupper()  # the pronoun: "you and I. Did you..."
    return bare in STARTERS and not (before[:1].isupper() and word.isupper() and bare == "I")


def _decide(line: str, start: int, m: re.Match) -> int | None:
    """Where the sentence ends for end mark ``m`` (an index into ``line``), or None."""
    mark, close = m.groups()
    end = m.end()
    if line[end: end + 1].isalnum() and not line[end].isupper() and mark[-1] not in "。．！？":
        return None  # "3.14", "e.g", "what...see": a digit or lowercase letter right after
    cite = line.startswith(("[", " [", "\xa0["), end) and _CITES.match(line, end)
    if cite:
        end = cite.end()
    after = end
    while line[after: after + 1].isspace():
        after += 1
    first = line[after: after + 1]
    if not first:
        return None  # the line's end decides
    if first in _OPENERS:
        first = line[after: after + 4].lstrip(_OPENERS)[:1]
    if first.islower():
        return None
    gap = after - end or (1 if cite else 0)
    if not gap and not first.isupper() and mark[-1] not in "。．！？":
        return None  # "3.14", "e.g.,", "U.S.-led": nothing ends without a space before a capital
    at = m.start()
    if mark[-1] in "。．！？":
        pass  # full-width marks end a sentence with or without a space
    elif mark == ".":
        if not _period_ends(line, start, at, after, gap, close):
            return None
    elif "?" in mark or "!" in mark:
        if not gap:
            return None
    elif " " not in mark and "\xa0" not in mark:  # "...", "…", "...."
        if not gap or _bracketed(line, at, close):
            return None  # "what I mean...see", "[...]", "(…)"
    else:  # a spaced ellipsis: ". . .", ". . . .", "word. . . ."
        dots = mark.count(".")
        spaced_before = at == 0 or line[at - 1].isspace()
        if (spaced_before and dots == 3 and not close.strip("'’")) or _bracketed(line, at, close):
            return None  # an omission inside the sentence
        if not first.isupper() or not gap:
            return None
        if not spaced_before and dots >= 4:
            return at + 1  # "word. . . . Next": the period ends it, the dots open the next one
    if _inside_brackets(line, start, at, close):
        return None
    return after


def _sentence_spans(line: str) -> list[int]:
    """Cut positions in ``line`` (a line without its line break), in order."""
    marks = list(_END.finditer(line))
    if not marks and ")" not in line:
        return []
    dots, starts = _list_items(line, marks)
    cuts, start, pending = [], 0, 0
    last = len(line)
    for m in marks:
        at = m.start()
        if m.end() == last:
            break  # the line's end decides
        while pending < len(starts) and starts[pending] <= at:
            if starts[pending] > start:
                start = starts[pending]
                cuts.append(start)
            pending += 1
        if at in dots:
            continue
        cut = _decide(line, start, m)
        if cut is not None and cut > start:
            cuts.append(cut)
            start = cut
    cuts.extend(s for s in starts[pending:] if s > start)
    return cuts


def split_sentences(text: str) -> list[str]:
    """Split English text into sentences.

    Each sentence keeps the whitespace (line breaks included) that follows it, so
    ``"".join(split_sentences(text)) == text``. A line break always ends a sentence:
    lines of a list or of a poem are translated one by one. No sentence is without a
    letter or digit (of any script) unless the whole text is.

    Args:
        text: Any text.

    Returns:
        The sentences, in order; ``[]`` for an empty string.

    Raises:
        TypeError: If ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    out: list[str] = []
    current: list[str] = []  # the pieces of the sentence being built
    has_alnum = False
    for line in re.split(r"(?<=\n)", text):
        if not line:
            continue
        body = line.rstrip("\r\n")
        bounds = [0, *_sentence_spans(body), len(line)] if body.strip() else [0, len(line)]
        for a, b in zip(bounds, bounds[1:]):
            piece = line[a:b]
            alnum = _ALNUM.search(piece) is not None
            if current and alnum and has_alnum:
                out.append("".join(current))
                current = []
            current.append(piece)  # a fragment without letters or digits joins its neighbour
            has_alnum = has_alnum or alnum
    if current:
        out.append("".join(current))
    return out


def _split_long(text: str, fits, clause=re.compile(r"(?<=[,;:—–])\s+|\s+(?=—|–)")) -> list[str]:
    """Cut a sentence that ``fits`` rejects: at clauses, then words, then characters."""
    if fits(text):
        return [text]
    for pattern in (clause, re.compile(r"\s+")):
        parts = [m.end() for m in pattern.finditer(text)]
        if not parts:
            continue
        chunks, start, last_ok = [], 0, None
        for cut in parts + [len(text)]:
            if fits(text[start:cut]):
                last_ok = cut
                continue
            if last_ok is None or last_ok == start:
                break
            chunks.append(text[start:last_ok])
            start = last_ok
            last_ok = cut if fits(text[start:cut]) else None
            if last_ok is None:
                break
        else:
            if start < len(text):
                chunks.append(text[start:])
            return [c for piece in chunks for c in _split_long(piece, fits)]
    # No usable boundary: fixed windows of characters, halving until each fits.
    half = max(1, len(text) // 2)
    return _split_long(text[:half], fits) + _split_long(text[half:], fits)


def _join_fragments(parts: list[str], fits) -> list[str]:
    """Join parts without a letter or digit to a neighbour where the result still fits."""
    out: list[str] = []
    for part in parts:
        if out and (not _ALNUM.search(part) or not _ALNUM.search(out[-1])) and fits(out[-1] + part):
            out[-1] += part
        else:
            out.append(part)
    return out


def segment(text: str, tokenizer, max_tokens: int, edits: Sequence["Edit"] = ()) -> list[Segment]:
    """Split text into :class:`Segment` s that each fit the model, keeping all characters.

    Args:
        text: The input.
        tokenizer: Anything with ``pieces_of(text) -> list``.
        max_tokens: Most pieces per segment (the model's positions less special tokens).
        edits: What the model reads instead of parts of ``text`` (:func:`.unwrap.unwrap_edits`):
            segments are cut from the text so edited, and their spans point into ``text``.
    """
    from .unwrap import apply_edits

    view, back = apply_edits(text, edits) if edits else (text, None)
    segments, at = [], 0
    for body, separator in _cut(view, tokenizer, max_tokens):
        end = at + len(body)
        span = (back[at], back[end]) if back is not None else (at, end)
        segments.append(Segment(body, separator, span))
        at = end + len(separator)
    return segments


def _cut(text: str, tokenizer, max_tokens: int) -> list[tuple[str, str]]:
    """``(text, separator)`` pieces of ``text`` that each fit the model; joined, they are ``text``."""
    def fits(chunk: str) -> bool:
        return len(tokenizer.pieces_of(chunk)) <= max_tokens

    segments = []
    for sentence in split_sentences(text):
        stripped = sentence.rstrip()
        trailing = sentence[len(stripped):]
        leading_len = len(stripped) - len(stripped.lstrip())
        if leading_len:
            segments.append(("", stripped[:leading_len]))
            stripped = stripped[leading_len:]
        if not stripped:
            segments.append(("", trailing))
            continue
        parts = _join_fragments(_split_long(stripped, fits), fits)
        for k, part in enumerate(parts):
            body = part.rstrip()
            sep = part[len(body):] + (trailing if k == len(parts) - 1 else "")
            segments.append((body, sep))
    return segments
