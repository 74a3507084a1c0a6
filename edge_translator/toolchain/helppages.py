"""Software help as English–Chinese text: GNOME's Mallard help pages (``/usr/share/help/C/``
and ``/usr/share/help/zh_CN/``), whose translations keep the original's element tree
(itstool translates them block by block), paired block by block in document order.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

MALLARD = "{http://projectmallard.org/1.0/}"
#: Blocks whose text is one translation unit.
BLOCKS = frozenset(MALLARD + name for name in ("title", "subtitle", "desc", "p"))
#: Subtrees that are no prose (names, licences, code, media) or only in the page's metadata.
SKIPPED = frozenset(MALLARD + name for name in ("credit", "license", "revision", "code", "screen", "media",
                                                "comment", "link", "example"))


def page_blocks(data: bytes) -> list[tuple[str, str]] | None:
    """``(tag, text)`` of a Mallard page's prose blocks in document order, or None if it does not parse.

    A block's text joins its inline elements' (``<gui>``, ``<key>``, ``<em>``) with runs of
    whitespace made one space; ``<desc>`` counts only inside ``<info>``, where the page's
    other metadata is skipped.
    """
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return None
    blocks: list[tuple[str, str]] = []

    def walk(element: ET.Element, in_info: bool) -> None:
        for child in element:
            if not isinstance(child.tag, str) or child.tag in SKIPPED:
                continue
            info = in_info or child.tag == MALLARD + "info"
            if child.tag in BLOCKS and (not in_info or child.tag == MALLARD + "desc"):
                if child.tag == MALLARD + "p" and any(c.tag == MALLARD + "p" for c in child):
                    walk(child, info)
                    continue
                text = re.sub(r"\s+", " ", "".join(child.itertext())).strip()
                blocks.append((child.tag[len(MALLARD):], text))
            else:
                walk(child, info)

    walk(root, False)
    return blocks


def page_pairs(original: bytes, translated: bytes) -> list[tuple[str, str]] | None:
    """``(en, zh)`` of each block of a page and its translation, or None when their block
    sequences differ (a page translated from another version) or one does not parse."""
    en, zh = page_blocks(original), page_blocks(translated)
    if en is None or zh is None or [t for t, _ in en] != [t for t, _ in zh]:
        return None
    return [(e, z) for (_, e), (_, z) in zip(en, zh) if e and z]
