"""TMX 1.4, the exchange format of translation memories: export and import.

Export streams every pair of a :class:`~edge_translator.core.memory.TranslationMemory`
as ``<tu>`` elements with an English and a Chinese ``<tuv>``. Import reads any TMX whose
units hold English and Chinese variants (``zh``, ``zh-CN``, ``zh-Hans``, ``zh-TW``,
``zh-Hant``, ...), element by element, so a large file never sits in memory; inline
markup inside ``<seg>`` (``<ph>``, ``<bpt>``, ...) is dropped and its text kept.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO
from xml.etree import ElementTree
from xml.sax.saxutils import escape, quoteattr

from .. import __version__
from ..core.errors import InputError
from ..core.memory import TranslationMemory

_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
#: How TMX language codes map to this program's targets.
_TARGETS = {"zh": "zh-Hans", "zh-cn": "zh-Hans", "zh-sg": "zh-Hans", "zh-hans": "zh-Hans", "zh-hans-cn": "zh-Hans",
            "cmn-hans": "zh-Hans", "zh-tw": "zh-Hant", "zh-hk": "zh-Hant", "zh-mo": "zh-Hant",
            "zh-hant": "zh-Hant", "zh-hant-tw": "zh-Hant", "cmn-hant": "zh-Hant"}


def export_tmx(memory: TranslationMemory, out: TextIO, target: str | None = None) -> int:
    """Write the memory's pairs (of one target, or all) to ``out`` as TMX; returns the count."""
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4">\n')
    out.write(f'  <header creationtool="edge-translator" creationtoolversion={quoteattr(__version__)} '
              'datatype="plaintext" segtype="sentence" adminlang="en" srclang="en" o-tmf="edge-translator" '
              f'creationdate="{time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())}"/>\n  <body>\n')
    count = 0
    for entry in memory.entries(target):
        origin = "imported" if entry.origin == "imported" else f"decoded by {entry.model}"
        out.write(f'    <tu creationdate="{time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(entry.created))}">'
                  f'<prop type="x-origin">{escape(origin)}</prop>'
                  f'<tuv xml:lang="en"><seg>{escape(entry.source)}</seg></tuv>'
                  f'<tuv xml:lang={quoteattr(entry.target)}><seg>{escape(entry.text)}</seg></tuv></tu>\n')
        count += 1
    out.write("  </body>\n</tmx>\n")
    return count


def read_tmx(path: Path) -> Iterator[tuple[str, str, str]]:
    """The English→Chinese pairs of a TMX file: ``(source, translation, target)``.

    Raises:
        InputError: If the file is not well-formed XML or not TMX.
    """
    try:
        events = ElementTree.iterparse(path, events=("start", "end"))
        _, root = next(events)
        if root.tag != "tmx":
            raise InputError(f"{path} is not a TMX file (its root element is <{root.tag}>, not <tmx>)")
        for event, element in events:
            if event != "end" or element.tag != "tu":
                continue
            english, chinese = None, None
            for tuv in element.iter("tuv"):
                lang = (tuv.get(_XML_LANG) or tuv.get("lang") or "").lower()
                seg = tuv.find("seg")
                text = "".join(seg.itertext()).strip() if seg is not None else ""
                if not text:
                    continue
                if lang == "en" or lang.startswith("en-"):
                    english = text
                elif lang in _TARGETS:
                    chinese = (text, _TARGETS[lang])
            if english and chinese:
                yield english, chinese[0], chinese[1]
            root.clear()
    except ElementTree.ParseError as exc:
        line = exc.position[0] if exc.position else "?"
        raise InputError(f"{path}:{line}: not well-formed TMX ({exc}); check the file") from None
    except StopIteration:
        raise InputError(f"{path} is empty; it is not a TMX file") from None
    except OSError as exc:
        raise InputError(f"cannot read {path} ({exc.strerror})") from None


def import_tmx(memory: TranslationMemory, path: Path) -> int:
    """Add the English→Chinese pairs of ``path`` to ``memory``; returns how many."""
    return memory.add_many(read_tmx(path))
