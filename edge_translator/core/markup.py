"""Translate the human-readable text of HTML and give every byte of markup back.

:func:`extract` finds the translatable pieces (:class:`Piece`) of a document or fragment:
text nodes, and the values of the ``alt``, ``title``, ``placeholder`` and ``aria-label``
attributes. :func:`rebuild` writes translations into those spans and copies everything
else from the source; :func:`translate_html` does both around one batched call.

- Text inside ``script``, ``style``, ``code``, ``pre``, ``textarea``, ``kbd``, ``samp`` and
  ``var`` is left alone at any depth (their own attributes are translated:
  ``<textarea placeholder="...">``). An element with ``translate="no"`` or the class
  ``notranslate`` is left alone whole, its own attributes included.
- Leading and trailing whitespace (space, tab, newline, form feed, carriage return) stays
  around a piece, outside it; whitespace written as a reference (``&nbsp;``) is text. A
  piece holds more than whitespace.
- A piece whose translation equals its text keeps its source bytes, references and all,
  so ``translate_html(html, lambda texts: texts) == html`` for every input. A changed
  piece is escaped for its place: ``& < >`` in text, and the attribute's quote character
  too in a value; an unquoted value that needs quotes gets double quotes.
- A tag, comment or declaration the parser cannot close is markup, never text; one still
  open at the end of the input hides the rest, as it does in HTML.

:class:`Markup` changes what is skipped and what is translated: :data:`XML` translates
text nodes only (no element is skipped, no attribute translated), and
:meth:`Markup.ignoring` adds elements whose content is left alone (DeepL's
``ignore_tags``).

Limitations: inline elements split a sentence, so ``<p>Hello <b>world</b>!</p>`` gives
"Hello", "world" and "!" to translate separately. Implied end tags are not inferred: a
skipped element runs to its own end tag or the end of the input. ``translate="yes"``
inside a skipped subtree is not honoured, and ``<code/>`` is read as an empty element.
Spans come from :class:`html.parser.HTMLParser`; text it reports at a position that does
not match the source, or a tag whose attributes it reads differently from this module,
is left untranslated, and where the parser gives up the rest of the input is left as is.
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from html.parser import HTMLParser

#: Elements whose content is never translated.
SKIPPED_ELEMENTS = frozenset("script style code pre textarea kbd samp var".split())
#: Attributes whose values are translated, on any element.
TRANSLATED_ATTRIBUTES = frozenset("alt title placeholder aria-label".split())
#: Elements that have no content and no end tag.
VOID_ELEMENTS = frozenset("""area base basefont bgsound br col command embed frame hr image img input
keygen link meta param source track wbr""".split())

_WHITESPACE = " \t\n\r\f"
#: Tag name, then attributes as HTML reads them: name, optional ``=`` and value.
_TAG_NAME = re.compile(r"<[^\s/>]*")
_ATTRIBUTE = re.compile(r"""
    [\s/]* (?P<name>[^\s/>][^\s/>=]*)
    (?: \s*=\s* (?: "(?P<double>[^"]*)" | '(?P<single>[^']*)' | (?P<bare>[^\s>]*) ) )?
""", re.VERBOSE)
#: The start of a tag, comment or declaration. The parser hands one it cannot close over
#: as data (all of it, or just the "<"); that is markup, never text.
_UNCLOSED_MARKUP = re.compile(r"<[!?/a-zA-Z]")
#: What makes an unquoted attribute value need quotes.
_NEEDS_QUOTES = re.compile(r"""[\s"'=`]|^$""")


@dataclass(frozen=True)
class Markup:
    """What :func:`extract` leaves alone and what it translates."""

    skipped: frozenset[str] = SKIPPED_ELEMENTS
    """Elements whose content is never translated (lower-case names)."""
    attributes: frozenset[str] = TRANSLATED_ATTRIBUTES
    """Attributes whose values are translated."""
    void: frozenset[str] = VOID_ELEMENTS
    """Elements that have no content and no end tag."""

    def ignoring(self, tags) -> Markup:
        """These options with the content of ``tags`` (names, any case) left alone too."""
        return replace(self, skipped=self.skipped | {tag.strip().lower() for tag in tags if tag.strip()})


#: HTML: :data:`SKIPPED_ELEMENTS` left alone, :data:`TRANSLATED_ATTRIBUTES` translated.
HTML = Markup()
#: XML: every text node translated, every element and attribute kept as it is.
XML = Markup(skipped=frozenset(), attributes=frozenset(), void=frozenset())


@dataclass(frozen=True)
class Piece:
    """One translatable run of text found in the markup."""

    text: str   #: the decoded text ("Fish &amp; chips" -> "Fish & chips")
    start: int  #: offset of the raw text in the source string
    end: int
    kind: str   #: "text" (a text node) or "attribute" (a translated attribute's value)


def extract(html: str, markup: Markup = HTML) -> list[Piece]:
    """The translatable pieces of ``html`` (or XML, with :data:`XML`), in document order."""
    scanner = _Scanner(html, markup)
    try:
        scanner.feed(html)
        scanner.close()
    except AssertionError:  # the stdlib parser's way of giving up on some input
        pass
    scanner.flush()
    return scanner.pieces


def visible_text(html: str, markup: Markup = HTML) -> str:
    """The text of ``html`` that would be translated, its pieces joined by spaces (what
    language detection should look at)."""
    return " ".join(piece.text for piece in extract(html, markup))


def rebuild(html: str, pieces: list[Piece], translations: list[str]) -> str:
    """``html`` with each piece's raw text replaced by its translation.

    A translation equal to the piece's text keeps the source bytes; any other is escaped
    for its context (text: ``& < >``; attribute values: those and the value's quote
    character). Everything outside the pieces is the input byte for byte.
    """
    if len(pieces) != len(translations):
        raise ValueError(f"{len(translations)} translations for {len(pieces)} pieces")
    out, cursor = [], 0
    for piece, translation in sorted(zip(pieces, translations), key=lambda pair: pair[0].start):
        if not cursor <= piece.start <= piece.end <= len(html):
            raise ValueError(f"piece at {piece.start}:{piece.end} overlaps another or lies outside the input")
        out.append(html[cursor:piece.start])
        if translation == piece.text:
            out.append(html[piece.start:piece.end])
        elif piece.kind == "attribute":
            out.append(_attribute_value(translation, _quote_before(html, piece.start)))
        else:
            out.append(_escape(translation))
        cursor = piece.end
    out.append(html[cursor:])
    return "".join(out)


def translate_html(html: str, translate: Callable[[list[str]], list[str]], markup: Markup = HTML) -> str:
    """Translate the text of ``html``, calling ``translate`` once with every piece's text.

    ``translate`` is not called when there is nothing to translate. Raises
    :class:`ValueError` when it returns a different number of strings than it was given.
    """
    pieces = extract(html, markup)
    if not pieces:
        return html
    translations = list(translate([piece.text for piece in pieces]))
    if len(translations) != len(pieces):
        raise ValueError(f"translate returned {len(translations)} strings for {len(pieces)} texts")
    return rebuild(html, pieces, translations)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute_value(text: str, quote: str) -> str:
    """``text`` escaped as an attribute value in ``quote`` s, "" meaning unquoted."""
    value = _escape(text)
    if quote == "'":
        return value.replace("'", "&#39;")
    if quote == '"' or _NEEDS_QUOTES.search(value):
        value = value.replace('"', "&quot;")
        return value if quote else f'"{value}"'
    return value


def _quote_before(html: str, start: int) -> str:
    """The quote character of the attribute value whose (trimmed) text starts at ``start``."""
    i = start - 1
    while i >= 0 and html[i] in _WHITESPACE:
        i -= 1
    return html[i] if i >= 0 and html[i] in "\"'" else ""


def _no_translate(attrs: list[tuple[str, str | None]]) -> bool:
    """Whether ``attrs`` hold ``translate="no"`` or the class ``notranslate``."""
    return any(name == "translate" and (value or "").strip().lower() == "no"
               or name == "class" and "notranslate" in (value or "").split() for name, value in attrs)


class _Scanner(HTMLParser):
    """Collects pieces while the parser walks the source, tracking skipped subtrees."""

    def __init__(self, source: str, markup: Markup = HTML) -> None:
        super().__init__(convert_charrefs=False)
        self.source = source
        self.markup = markup
        self.pieces: list[Piece] = []
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", source)]
        self._skipped: list[str] = []  # open elements of the skipped subtree, innermost last
        self._unclosed = False  # past a tag, comment or declaration open to the end
        self._run: tuple[int, int] | None = None  # span of the text run being collected

    def _offset(self) -> int:
        line, column = self.getpos()
        return self._line_starts[line - 1] + column

    def _add(self, start: int, end: int, kind: str) -> None:
        raw = self.source[start:end]
        core = raw.strip(_WHITESPACE)
        text = _html.unescape(core)
        if text.strip():
            start += len(raw) - len(raw.lstrip(_WHITESPACE))
            self.pieces.append(Piece(text, start, start + len(core), kind))

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

    def handle_endtag(self, tag: str) -> None:
        self.flush()
        if tag in self._skipped:  # close it and whatever was left open inside it
            while self._skipped.pop() != tag:
                pass

    def handle_comment(self, data: str) -> None:
        self.flush()

    handle_decl = handle_pi = unknown_decl = handle_comment

    def close(self) -> None:
        # What the parser could not finish starts here: if that is a tag, comment or
        # declaration, HTML reads it to the end of the input, so no text follows it.
        if _UNCLOSED_MARKUP.match(self.rawdata):
            self.flush()
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
