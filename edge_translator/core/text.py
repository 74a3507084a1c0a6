"""Paragraphs → sentences → chunks the model accepts, with every character accounted for.

:func:`split_sentences` splits English into sentences; joining its output gives the input
back exactly (each sentence keeps the whitespace that follows it). :func:`segment` also
keeps line breaks as structure and cuts sentences that are too long for the model at
clause boundaries, then into windows of words, never dropping text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: Words that end with a period but do not end a sentence (titles, Latin, initials).
TITLES = frozenset("""
mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt cmdr gov sen rep hon pres supt messrs
vs v cf al e.g i.e a.k.a viz u.s u.k u.n e.u d.c u.s.a
""".split())
#: Abbreviations usually followed by a number ("No. 5", "Jan. 3"): a boundary otherwise.
BEFORE_NUMBER = frozenset("""
no nos vol vols p pp fig figs ch sec art op ed jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
#: Abbreviations that often end a sentence too: a boundary only before a capital.
SOMETIMES_FINAL = frozenset("etc a.m p.m am pm inc ltd co corp bros est approx dept ph.d b.a m.a".split())
#: A list marker at the start of a line: "1.", "a.", "iv.".
_LIST_MARKER = re.compile(r"\s*(?:\d{1,3}|[a-z]|[ivxlc]{1,5})\.", re.I)

_END = re.compile(r"""(?:\.{3}|…|[.!?])[.!?…]*["'”’)\]}»]*""")
_URLISH = re.compile(r"(?:://|www\.|@|\.(?:com|org|net|edu|gov|io|cn|html?)\b)", re.I)


@dataclass(frozen=True)
class Segment:
    """A piece of input to translate, and the whitespace that followed it."""

    text: str
    separator: str


def _word_before(text: str, end: int) -> str:
    start = end
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    return text[start:end]


def _is_boundary(text: str, mark_start: int, mark_end: int) -> bool:
    """Decide whether the end mark text[mark_start:mark_end] ends a sentence."""
    rest = text[mark_end:]
    stripped = rest.lstrip()
    if not stripped:
        return True
    gap = len(rest) - len(stripped)
    nxt = stripped[0]
    mark = text[mark_start:mark_end]
    word = _word_before(text, mark_start + 1).strip("\"'“‘([{").lower()
    if mark.startswith(".") and not mark.startswith("..."):
        core = word.rstrip(".")
        if gap == 0:
            # "end.Next" with no space: only between plain words, never inside URLs,
            # e-mail addresses, numbers or dotted abbreviations.
            token = _word_before(text, mark_end) + stripped.split(None, 1)[0]
            return (len(core) >= 2 and core.isalpha() and nxt.isupper() and len(stripped) > 1
                    and stripped[1].islower() and not _URLISH.search(token))
        if _LIST_MARKER.fullmatch(text[: mark_start + 1]):
            return False
        if core in SOMETIMES_FINAL:
            return nxt.isupper()
        if core in BEFORE_NUMBER:
            return not nxt.isdigit()
        if core in TITLES or (len(core) == 1 and core.isalpha()):
            return False
        if re.fullmatch(r"(?:[a-z]\.)+[a-z]", core):  # dotted initials such as u.s.a
            return False
    if gap == 0:
        return False
    # A lowercase continuation after "..." or "?" is the same sentence.
    return not nxt.islower()


def _sentence_spans(line: str) -> list[tuple[int, int]]:
    spans, start = [], 0
    for match in _END.finditer(line):
        if _is_boundary(line, match.start(), match.end()):
            end = match.end()
            while end < len(line) and line[end].isspace():
                end += 1
            if end > start:
                spans.append((start, end))
                start = end
    if start < len(line):
        spans.append((start, len(line)))
    return spans


def split_sentences(text: str) -> list[str]:
    """Split English text into sentences.

    Each sentence keeps the whitespace (line breaks included) that follows it, so
    ``"".join(split_sentences(text)) == text``. A line break always ends a sentence:
    lines of a list or of a poem are translated one by one.

    Args:
        text: Any text.

    Returns:
        The sentences, in order; ``[]`` for an empty string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, not {type(text).__name__}")
    out = []
    for line in re.split(r"(?<=\n)", text):
        if not line:
            continue
        body = line.rstrip("\r\n")
        spans = _sentence_spans(body) or [(0, 0)]
        pieces = [body[a:b] for a, b in spans]
        pieces[-1] += line[len(body):]
        for piece in pieces:
            if out and (not piece.strip() or not out[-1].strip()):
                out[-1] += piece  # blank lines stay with the sentence before them
            elif piece:
                out.append(piece)
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


def segment(text: str, tokenizer, max_tokens: int) -> list[Segment]:
    """Split text into :class:`Segment` s that each fit the model, keeping all characters.

    Args:
        text: The input.
        tokenizer: Anything with ``pieces_of(text) -> list``.
        max_tokens: Most pieces per segment (the model's positions less special tokens).
    """
    def fits(chunk: str) -> bool:
        return len(tokenizer.pieces_of(chunk)) <= max_tokens

    segments = []
    for sentence in split_sentences(text):
        stripped = sentence.rstrip()
        trailing = sentence[len(stripped):]
        leading_len = len(stripped) - len(stripped.lstrip())
        if leading_len:
            segments.append(Segment("", stripped[:leading_len]))
            stripped = stripped[leading_len:]
        if not stripped:
            segments.append(Segment("", trailing))
            continue
        parts = _split_long(stripped, fits)
        for k, part in enumerate(parts):
            body = part.rstrip()
            sep = part[len(body):] + (trailing if k == len(parts) - 1 else "")
            segments.append(Segment(body, sep))
    return segments
