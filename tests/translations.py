"""Stand-in translators for the format tests: the identity, and a fake that turns every
English word into Chinese characters while each mark follows its words exactly."""

from __future__ import annotations

import re

from edge_translator.documents.base import Segment, Translated


def identity(seg: Segment) -> Translated:
    """The segment back as it was, marks where they were."""
    return Translated(seg.text, seg.marks)


def zh(word: str) -> str:
    """A word as CJK characters (as many as its letters; the same word, the same characters)."""
    return "".join(chr(0x4E00 + (ord(c) * 7 + i) % 500) for i, c in enumerate(word))


def fake(seg: Segment) -> Translated:
    """Every ASCII word outside kept spans becomes Chinese; marks follow their words."""
    out, where = [], {}
    pos = 0
    cuts = sorted({0, len(seg.text)} | {x for span in seg.marks + seg.keep for x in span})
    kept = set(seg.keep)
    for a, b in zip(cuts, cuts[1:]):
        where[a] = pos
        piece = seg.text[a:b]
        if not any(a >= x and b <= y for x, y in kept):
            piece = re.sub(r"[A-Za-z]+", lambda m: zh(m.group()), piece)
        out.append(piece)
        pos += len(piece)
    where[len(seg.text)] = pos
    return Translated("".join(out), tuple((where[a], where[b]) for a, b in seg.marks))
