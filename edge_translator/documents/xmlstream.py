"""Large XML parts read and rewritten as a stream of tokens, one small element at a time.

A worksheet of a million cells is one XML part; parsing it into a tree costs memory in
proportion to the sheet. Here a part is split, block by block, into tokens (a tag, a run of
text, a comment, a CDATA section, a processing instruction), each token's source text
kept exactly, so a writer passes through what it does not change byte for byte. The few
elements that are changed (a cell, a shared string) are gathered into a list of tokens and
parsed on their own by lxml, with the root's namespace declarations around them.
"""

from __future__ import annotations

import codecs
import html
import re
from collections.abc import Iterator
from typing import Any, BinaryIO

_TOKEN = re.compile(r"<!--.*?-->|<!\[CDATA\[.*?\]\]>|<\?.*?\?>|<(?:[^>\"']|\"[^\"]*\"|'[^']*')*>|[^<]+", re.S)
_NAME = re.compile(r"</?(?:[\w.-]+:)?([\w.-]+)")
_ATTR = re.compile(r"([\w.:-]+)\s*=\s*(\"[^\"]*\"|'[^']*')")
_DECL = re.compile(r"\s(xmlns(?::[\w.-]+)?)\s*=\s*(\"[^\"]*\"|'[^']*')")


class MarkupError(ValueError):
    """The part is not well-formed where the stream needed it to be."""


def tokens(stream: BinaryIO, block: int = 1 << 20) -> Iterator[str]:
    """The tokens of a UTF-8 XML part, read ``block`` bytes at a time.

    Raises:
        MarkupError: If the part is not UTF-8 or ends inside a tag.
    """
    decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
    buffer = ""
    done = False
    while not done:
        data = stream.read(block)
        done = not data
        try:
            buffer += decoder.decode(data, final=done)
        except UnicodeDecodeError as exc:
            raise MarkupError(f"it is not UTF-8 ({exc.reason})") from None
        pos = 0
        while (found := _TOKEN.match(buffer, pos)) is not None:
            token = found.group()
            if not done and (found.end() == len(buffer) or _unfinished(token)):
                break  # the token may go on in the next block
            yield token
            pos = found.end()
        buffer = buffer[pos:]
    if buffer:
        raise MarkupError(f"it ends inside markup ({buffer[:40]!r})")


def _unfinished(token: str) -> bool:
    return (token.startswith("<!--") and not token.endswith("-->")) or \
        (token.startswith("<![CDATA[") and not token.endswith("]]>"))


def name(token: str) -> str | None:
    """The local name of a start, end or empty tag; ``None`` for text and the rest."""
    if not token.startswith("<") or token.startswith(("<!", "<?")):
        return None
    found = _NAME.match(token)
    return found.group(1) if found else None


def is_start(token: str) -> bool:
    """A start tag that has content to follow (not ``<x/>``, not ``</x>``)."""
    return name(token) is not None and not token.startswith("</") and not token.endswith("/>")


def is_end(token: str) -> bool:
    return token.startswith("</")


def attributes(token: str) -> dict[str, str]:
    """A tag's attributes by their qualified names, their entities resolved."""
    return {key: html.unescape(value[1:-1]) for key, value in _ATTR.findall(token)}


def with_attribute(token: str, key: str, value: str) -> str:
    """The tag with attribute ``key`` set to ``value`` (replaced in place, or added)."""
    quoted = '"' + html.escape(value, quote=True) + '"'
    pattern = re.compile(r"(\s" + re.escape(key) + r"\s*=\s*)(\"[^\"]*\"|'[^']*')")
    if pattern.search(token):
        return pattern.sub(lambda m: m.group(1) + quoted, token, count=1)
    end = -2 if token.endswith("/>") else -1
    return f"{token[:end]} {key}={quoted}{token[end:]}"


def element_tokens(first: str, stream: Iterator[str]) -> list[str]:
    """``first`` (a start tag) and the tokens up to and including its end tag.

    Raises:
        MarkupError: If the part ends before the element does.
    """
    out = [first]
    depth = 1
    for token in stream:
        out.append(token)
        if is_end(token):
            depth -= 1
            if depth == 0:
                return out
        elif is_start(token):
            depth += 1
    raise MarkupError(f"it ends inside <{name(first)}>")


def declarations(root: str) -> dict[str, str]:
    """The namespace declarations of a root start tag: ``{"xmlns": uri, "xmlns:r": uri}``."""
    return {key: html.unescape(value[1:-1]) for key, value in _DECL.findall(root)}


def parse(parts: list[str], decls: dict[str, str]) -> Any:
    """The element the tokens ``parts`` spell, parsed by lxml inside the root's namespaces.

    Raises:
        MarkupError: If they are not a well-formed element.
    """
    from lxml import etree

    scope = "".join(f' {key}="{html.escape(uri, quote=True)}"' for key, uri in decls.items())
    text = f"<scope{scope}>{''.join(parts)}</scope>"
    try:
        wrapper = etree.fromstring(text.encode("utf-8"), etree.XMLParser(resolve_entities=False, no_network=True,
                                                                         huge_tree=True))
    except etree.XMLSyntaxError as exc:
        raise MarkupError(f"it is not well-formed XML ({exc})") from None
    if len(wrapper) != 1:
        raise MarkupError("an element was expected")
    return wrapper[0]


def serialize(element: Any, decls: dict[str, str]) -> str:
    """``element`` as source text, without the declarations the root already makes."""
    from lxml import etree

    text = etree.tostring(element, encoding="unicode")
    end = text.index(">")
    head = _DECL.sub(lambda m: "" if decls.get(m.group(1)) == html.unescape(m.group(2)[1:-1]) else m.group(0),
                     text[:end])
    return head + text[end:]
