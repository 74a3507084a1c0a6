"""The parser pass behind :mod:`.markup`: where the translatable text of HTML lies, byte for byte.

:func:`scan` walks a document or fragment with :class:`html.parser.HTMLParser` and
records each :class:`Piece` (a text run, or a translated attribute's value) at its offsets
in the source, with the inline elements' tags and everything else that ends a sentence
run between them, so that :mod:`.markup` can plan blocks and write translations back
around every byte of markup.
"""

from __future__ import annotations

import html as _html
import re
from dataclasses import dataclass
from html.parser import HTMLParser

#: What HTML reads as whitespace around a piece (a reference such as ``&nbsp;`` is text).
WHITESPACE = " \t\n\r\f"
#: Tag name, then attributes as HTML reads them: name, optional ``=`` and value.
_TAG_NAME = re.compile(r"<[^\s/>]*")
_ATTRIBUTE = re.compile(r"""
    [\s/]* (?P<name>[^\s/>][^\s/>=]*)
    (?: \s*=\s* (?: "(?P<double>[^"]*)" | '(?P<single>[^']*)' | (?P<bare>[^\s>]*) ) )?
""", re.VERBOSE)
#: The start of a tag, comment or declaration. The parser hands one it cannot close over
#: as data (all of it, or just the "<"); that is markup, never text.
_UNCLOSED_MARKUP = re.compile(r"<[!?/a-zA-Z]")


@dataclass(frozen=True)
class Piece:
    """One translatable run of text found in the markup."""

    text: str   #: the decoded text ("Fish &amp; chips" -> "Fish & chips")
    start: int  #: offset of the raw text in the source string
    end: int
    kind: str   #: "text" (a text node) or "attribute" (a translated attribute's value)


def scan(html: str, markup) -> Scanner:
    """Walk ``html`` once; the scanner returned holds its :attr:`~Scanner.pieces` and
    :attr:`~Scanner.items`.

    Args:
        html: The document or fragment.
        markup: What is skipped and what is translated (a :class:`.markup.Markup`).
    """
    scanner = Scanner(html, markup)
    try:
        scanner.feed(html)
        scanner.close()
    except AssertionError:  # the stdlib parser's way of giving up on some input
        pass
    scanner.flush()
    scanner.items.append(None)
    return scanner


def _no_translate(attrs: list[tuple[str, str | None]]) -> bool:
    """Whether ``attrs`` hold ``translate="no"`` or the class ``notranslate``."""
    return any(name == "translate" and (value or "").strip().lower() == "no"
               or name == "class" and "notranslate" in (value or "").split() for name, value in attrs)


class Scanner(HTMLParser):
    """Collects pieces while the parser walks the source, tracking skipped subtrees."""

    def __init__(self, source: str, markup) -> None:
        super().__init__(convert_charrefs=False)
        self.source = source
        self.markup = markup
        self.pieces: list[Piece] = []
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self._skipped: list[str] = []  # open elements of the skipped subtree, innermost last
        self._unclosed = False  # past a tag, comment or declaration open to the end
        self._run: tuple[int, int] | None = None  # span of the text run being collected
        self.items: list = []
        """In document order: a text or attribute piece (its index in :attr:`pieces`), an
        inline element's tag (``("open" | "close", span, name)``), or ``"break"``: anything
        else that ends a sentence run (:func:`.markup.plan`); ``None`` ends the list."""

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def _add(self, start: int, end: int, kind: str) -> None:
        raw = self.source[start:end]
        core = raw.strip(WHITESPACE)
        text = _html.unescape(core)
        if text.strip():
            start += len(raw) - len(raw.lstrip(WHITESPACE))
            self.pieces.append(Piece(text, start, start + len(core), kind))
            self.items.append(len(self.pieces) - 1)

    def flush(self) -> None:
        """End the current text run, adding it as a piece."""
        if self._run:
            self._add(*self._run, "text")
            self._run = None

    def _text(self, raw: str, reference: bool = False) -> None:
        start = self._offset()
        if (self._skipped or self._unclosed or _UNCLOSED_MARKUP.match(self.source, start)
                or not self.source.startswith(raw, start)):
            self.flush()
            self.items.append("break")
            return
        end = start + len(raw)
        if reference and self.source.startswith(";", end):
            end += 1
        if self._run and self._run[1] == start:
            self._run = (self._run[0], end)
        else:
            self.flush()
            self._run = (start, end)

    def handle_data(self, data: str) -> None:
        self._text(data)

    def handle_entityref(self, name: str) -> None:
        self._text("&" + name, reference=True)

    def handle_charref(self, name: str) -> None:
        self._text("&#" + name, reference=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=tag in self.markup.void)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=True)

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], closed: bool) -> None:
        self.flush()
        skip = bool(self._skipped) or self._unclosed or _no_translate(attrs)
        if not skip:
            self._attributes(attrs)
            skip = tag in self.markup.skipped
        if skip and not closed:
            self._skipped.append(tag)
        raw, start = self.get_starttag_text() or "", self._offset()
        if not skip and not closed and tag in self.markup.inline and raw and self.source.startswith(raw, start):
            self.items.append(("open", (start, start + len(raw)), tag))
        else:
            self.items.append("break")

    def handle_endtag(self, tag: str) -> None:
        self.flush()
        if tag in self._skipped:  # close it and whatever was left open inside it
            while self._skipped.pop() != tag:
                pass
            self.items.append("break")
            return
        start = self._offset()
        end = self.source.find(">", start) + 1
        if (tag in self.markup.inline and not self._skipped and not self._unclosed and end
                and self.source.startswith("</", start)):
            self.items.append(("close", (start, end), tag))
        else:
            self.items.append("break")

    def handle_comment(self, data: str) -> None:
        self.flush()
        self.items.append("break")

    handle_decl = handle_pi = unknown_decl = handle_comment

    def close(self) -> None:
        # What the parser could not finish starts here: if that is a tag, comment or
        # declaration, HTML reads it to the end of the input, so no text follows it.
        if _UNCLOSED_MARKUP.match(self.rawdata):
            self.flush()
            self.items.append("break")
            self._unclosed = True
        super().close()

    def parse_html_declaration(self, i: int) -> int:
        # _markupbase raises AssertionError on "<![" not followed by a known keyword, after
        # moving the position; read such a declaration as a bogus comment, as HTML does.
        position = self.lineno, self.offset
        try:
            return super().parse_html_declaration(i)
        except AssertionError:
            self.lineno, self.offset = position
            return self.parse_bogus_comment(i)

    def _attributes(self, attrs: list[tuple[str, str | None]]) -> None:
        """Add the translated attributes' values, if this tag reads as the parser read it."""
        translated = self.markup.attributes
        if not any(name in translated for name, _ in attrs):
            return
        raw, start = self.get_starttag_text(), self._offset()
        if not raw or not self.source.startswith(raw, start):
            return
        found, spans = [], []
        position = _TAG_NAME.match(raw).end()
        while match := _ATTRIBUTE.match(raw, position):
            position = match.end()
            group = next((g for g in ("double", "single", "bare") if match.group(g) is not None), None)
            value = None if group is None else _html.unescape(match.group(group))
            found.append((match.group("name").lower(), value))
            if group and found[-1][0] in translated:
                spans.append(match.span(group))
        if found == attrs:
            for value_start, value_end in spans:
                self._add(start + value_start, start + value_end, "attribute")
