"""Translate the human-readable text of HTML and give every byte of markup back.

:func:`extract` finds the translatable pieces (:class:`.htmlscan.Piece`) of a document or fragment:
text nodes, and the values of the ``alt``, ``title``, ``placeholder`` and ``aria-label``
attributes. :func:`rebuild` writes translations into those spans and copies everything
else from the source. :func:`plan` groups the pieces of sentences across inline elements
into blocks (below), and :func:`render` writes those back; :func:`translate_html` does
both around one batched call.

- Text inside ``script``, ``style``, ``code``, ``pre``, ``textarea``, ``kbd``, ``samp`` and
  ``var`` is left alone at any depth (their own attributes are translated:
  ``<textarea placeholder="...">``). An element with ``translate="no"`` or the class
  ``notranslate`` is left alone whole, its own attributes included.
- Leading and trailing whitespace (space, tab, newline, form feed, carriage return) stays
  around a piece, outside it; whitespace written as a reference (``&nbsp;``) is text. A
  piece holds more than whitespace.
- A piece (or block) whose translation equals its text keeps its source bytes, references
  and all, so ``translate_html(html, lambda texts: texts) == html`` for every input. A changed
  piece is escaped for its place: ``& < >`` in text, and the attribute's quote character
  too in a value; an unquoted value that needs quotes gets double quotes.
- A tag, comment or declaration the parser cannot close is markup, never text; one still
  open at the end of the input hides the rest, as it does in HTML.

:class:`Markup` changes what is skipped and what is translated: :data:`XML` translates
text nodes only (no element is skipped, no attribute translated), and
:meth:`Markup.ignoring` adds elements whose content is left alone (DeepL's
``ignore_tags``).

A sentence across inline elements (``<p>Read the <a href="/d">docs</a> first.</p>``) is
one :class:`Block` (:func:`plan`): its text is translated whole ("Read the docs first."),
each element's text on its own too, and :func:`render` puts the element's tags around
where that landed in the whole translation (:func:`.inline.place_marks`): ``<p>先阅读<a
href="/d">文档</a>。</p>``. Every tag comes back once, byte for byte, and well nested; only
its place in the text is the model's. A block is a run of text joined by the start and
end tags of :data:`INLINE_ELEMENTS` (``Markup.inline``), each element closed inside the
run; one inside another (up to :data:`MAX_INLINE_DEPTH` deep) is placed inside the span
found for that one. A run that is not (``Hello <b>world</p>``, ``Stray</b> end``) is
translated piece by piece, as :func:`extract` splits it. Whitespace runs inside a block's
text are read as one space, as HTML shows them.

Limitations: a block's element is placed where the model's translation of its text alone
appears in the whole one, else on the same share of it; a weak model (one that
translates "cat" alone as "猫猫。") then puts the tags on nearby words. Implied end
tags are not inferred: a skipped element runs to its own end tag or the end of the input. ``translate="yes"``
inside a skipped subtree is not honoured, and ``<code/>`` is read as an empty element.
Spans come from :class:`html.parser.HTMLParser`; text it reports at a position that does
not match the source, or a tag whose attributes it reads differently from this module,
is left untranslated, and where the parser gives up the rest of the input is left as is.
"""

from __future__ import annotations

import html as _html
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from .htmlscan import WHITESPACE, Piece, scan
from .inline import Span, place_marks

#: Elements whose content is never translated.
SKIPPED_ELEMENTS = frozenset("script style code pre textarea kbd samp var".split())
#: Attributes whose values are translated, on any element.
TRANSLATED_ATTRIBUTES = frozenset("alt title placeholder aria-label".split())
#: Elements that have no content and no end tag.
VOID_ELEMENTS = frozenset("""area base basefont bgsound br col command embed frame hr image img input
keygen link meta param source track wbr""".split())
#: Elements that sit inside a sentence: a run of text joined by their tags is one
#: :class:`Block`, translated whole.
INLINE_ELEMENTS = frozenset("""a abbr b bdi bdo big cite data del dfn em font i ins label mark q s small span
strike strong sub sup time tt u""".split())
#: Inline elements a block holds one inside another at most; a deeper run is split.
MAX_INLINE_DEPTH = 8

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
    inline: frozenset[str] = INLINE_ELEMENTS
    """Elements whose tags join the text around them into one :class:`Block`."""

    def ignoring(self, tags) -> Markup:
        """These options with the content of ``tags`` (names, any case) left alone too."""
        return replace(self, skipped=self.skipped | {tag.strip().lower() for tag in tags if tag.strip()})


#: HTML: :data:`SKIPPED_ELEMENTS` left alone, :data:`TRANSLATED_ATTRIBUTES` translated.
HTML = Markup()
#: XML: every text node translated on its own, every element and attribute kept as it is.
XML = Markup(skipped=frozenset(), attributes=frozenset(), void=frozenset(), inline=frozenset())


@dataclass(frozen=True)
class Block:
    """A sentence run across inline elements, translated whole (see the module's doc)."""

    text: str
    """The run's text, tags left out, references decoded, whitespace runs read as one space."""
    marks: tuple[Span, ...]
    """Each inline element's span of :attr:`text`, in the order of their start tags."""
    tags: tuple[tuple[Span, Span], ...]
    """Each element's start tag and end tag, as spans of the source."""
    start: int  #: where the run starts in the source (its first tag or text)
    end: int
    parents: tuple[int | None, ...] = ()
    """Each element's parent: the index of the element it is inside, or ``None``."""

    def children(self) -> dict[int | None, list[int]]:
        """The elements directly inside each element (``None``: at the top), in order."""
        tree: dict[int | None, list[int]] = {}
        for k in range(len(self.marks)):
            tree.setdefault(self.parents[k] if k < len(self.parents) else None, []).append(k)
        return tree

    def mark_texts(self) -> tuple[str | None, ...]:
        """Each element's own text, to translate on its own (``None``: no letter or digit)."""
        return tuple(t if any(ch.isalnum() for ch in t) else None
                     for t in (self.text[a:b].strip() for a, b in self.marks))


#: What :func:`plan` finds: a text or attribute piece translated on its own, or a block.
Unit = Piece | Block


def extract(html: str, markup: Markup = HTML) -> list[Piece]:
    """The translatable pieces of ``html`` (or XML, with :data:`XML`), in document order:
    every text node apart, as the parser splits them (see :func:`plan` for sentences)."""
    return scan(html, markup).pieces


def plan(html: str, markup: Markup = HTML) -> list[Unit]:
    """What to translate in ``html``: :class:`Block` s for sentences across inline elements,
    and the other pieces (attribute values, text nodes outside any block), in document order."""
    scanner = scan(html, markup)
    units: list[Unit] = []
    run: list = []
    for item in scanner.items:
        if item is None or item == "break":
            units.extend(_block(html, run, scanner.pieces))
            run = []
        elif isinstance(item, int) and scanner.pieces[item].kind == "attribute":
            units.append(scanner.pieces[item])
        else:
            run.append(item)
    return sorted(units, key=lambda unit: unit.start)


def _block(html: str, run: list, pieces: list[Piece]) -> list[Unit]:
    """A run of text pieces and inline tags: one :class:`Block`, or its pieces apart."""
    texts = [pieces[item] for item in run if isinstance(item, int)]
    tags = [item for item in run if not isinstance(item, int)]
    if len(texts) < 2 or not tags:
        return texts
    opened: list[tuple[int, str]] = []  # (mark, name) of the elements open, innermost last
    starts, ends, parents = [], [], []
    for kind, span, name in tags:
        if kind == "open" and len(opened) < MAX_INLINE_DEPTH:
            parents.append(opened[-1][0] if opened else None)
            opened.append((len(starts), name))
            starts.append(span)
            ends.append(None)
        elif kind == "close" and opened and opened[-1][1] == name:
            ends[opened.pop()[0]] = span
        else:  # an end tag of an element opened outside the run, or too deep
            return texts
    if opened:
        return texts
    pairs = list(zip(starts, ends))
    start = min(texts[0].start, starts[0][0])
    end = max(texts[-1].end, max(b for _, (_, b) in pairs))
    text, cursor, size = [], start, 0
    bounds = [[0, 0] for _ in pairs]
    cuts = sorted([(a, b, k, 0) for k, ((a, b), _) in enumerate(pairs)]
                  + [(a, b, k, 1) for k, (_, (a, b)) in enumerate(pairs)])
    for a, b, k, side in cuts:
        text.append(_html.unescape(html[cursor:a]))
        size += len(text[-1])
        bounds[k][side] = size
        cursor = b
    text.append(_html.unescape(html[cursor:end]))
    joined, marks = _collapse("".join(text), [tuple(b) for b in bounds])
    if not all(a < b for a, b in marks):  # an empty element: nowhere to place it
        return texts
    return [Block(joined, tuple(marks), tuple(pairs), start, end, tuple(parents))]


def _collapse(text: str, marks: list[Span]) -> tuple[str, list[Span]]:
    """``text`` with each run of whitespace as one space and the ends trimmed; the marks
    moved with it (and trimmed of whitespace at their ends)."""
    out, where = [], []  # where[i]: position in the output of input position i
    for ch in text:
        where.append(len(out))
        if ch in WHITESPACE:
            if out and out[-1] != " ":
                out.append(" ")
        else:
            out.append(ch)
    where.append(len(out))
    collapsed = "".join(out)
    trimmed = collapsed.rstrip(" ")
    moved = []
    for a, b in marks:
        a, b = min(where[a], len(trimmed)), min(where[b], len(trimmed))
        while a < b and trimmed[a] == " ":
            a += 1
        while b > a and trimmed[b - 1] == " ":
            b -= 1
        moved.append((a, b))
    return trimmed, moved


def texts_to_translate(units: Sequence[Unit]) -> list[str]:
    """Every string :func:`render` needs the translation of: each unit's text and each
    block's elements' own texts, each once, in order."""
    out = []
    for unit in units:
        out.append(unit.text)
        if isinstance(unit, Block):
            out.extend(t for t in unit.mark_texts() if t is not None)
    return list(dict.fromkeys(out))


def render(html: str, units: Sequence[Unit], table: Mapping[str, str]) -> str:
    """``html`` with every unit translated, from ``table`` (text → translation, holding
    every string of :func:`texts_to_translate`); each block's elements are placed with
    :func:`.inline.place_marks`."""
    translations, placed = [], []
    for unit in units:
        translation = table[unit.text]
        translations.append(translation)
        if isinstance(unit, Block):
            alone = [table[t] if t is not None else None for t in unit.mark_texts()]
            placed.append(_place(unit, translation, alone))
        else:
            placed.append(None)
    return rebuild_units(html, units, translations, placed)


def _place(block: Block, translation: str, alone: list[str | None]) -> list[Span | None]:
    """Where each element of ``block`` lies in ``translation``: those at the top in the
    whole of it, each element's children inside the span found for it."""
    placed: list[Span | None] = [None] * len(block.marks)
    tree = block.children()

    def level(parent: int | None, lo: int, hi: int) -> None:
        kids = tree.get(parent, [])
        if not kids:
            return
        base = 0 if parent is None else block.marks[parent][0]
        source = block.text if parent is None else block.text[base:block.marks[parent][1]]
        spans = place_marks(source, [(block.marks[k][0] - base, block.marks[k][1] - base) for k in kids],
                            translation[lo:hi], [alone[k] for k in kids])
        for k, span in zip(kids, spans):
            if span is not None:
                placed[k] = (span[0] + lo, span[1] + lo)
                level(k, *placed[k])

    level(None, 0, len(translation))
    return placed


def rebuild_units(html: str, units: Sequence[Unit], translations: Sequence[str],
                  placed: Sequence[Sequence[Span | None] | None]) -> str:
    """``html`` with each unit's translation written in: a piece's as :func:`rebuild` does,
    a block's with its elements' tags around the spans ``placed`` for it (one per mark;
    ``None``: not placed, the element is left empty where it would be). A block whose
    translation equals its text keeps its source bytes."""
    if not len(units) == len(translations) == len(placed):
        raise ValueError(f"{len(translations)} translations and {len(placed)} placements for {len(units)} units")
    attributes = [(u, t) for u, t in zip(units, translations) if isinstance(u, Piece) and u.kind == "attribute"]
    out, cursor = [], 0
    for unit, translation, spans in sorted(zip(units, translations, placed), key=lambda row: row[0].start):
        if isinstance(unit, Piece) and unit.kind == "attribute" and unit.start < cursor:
            continue  # inside a block's tag: written with the block
        if not cursor <= unit.start <= unit.end <= len(html):
            raise ValueError(f"unit at {unit.start}:{unit.end} overlaps another or lies outside the input")
        out.append(html[cursor:unit.start])
        if isinstance(unit, Block):
            inside = [(p, t) for p, t in attributes if unit.start <= p.start < unit.end]
            if translation == unit.text:
                out.append(_written(html, unit.start, unit.end, inside))
            else:
                out.append(_block_written(html, unit, translation, spans, inside))
        else:
            out.append(_written(html, unit.start, unit.end, [(unit, translation)]))
        cursor = unit.end
    out.append(html[cursor:])
    return "".join(out)


def _written(html: str, start: int, end: int, pieces: list[tuple[Piece, str]]) -> str:
    """``html[start:end]`` with the pieces inside it replaced by their translations."""
    out, cursor = [], start
    for piece, translation in sorted(pieces, key=lambda pair: pair[0].start):
        if not cursor <= piece.start <= piece.end <= end:
            raise ValueError(f"piece at {piece.start}:{piece.end} overlaps another or lies outside the input")
        out.append(html[cursor:piece.start])
        if translation == piece.text:
            out.append(html[piece.start:piece.end])
        elif piece.kind == "attribute":
            out.append(_attribute_value(translation, _quote_before(html, piece.start)))
        else:
            out.append(_escape(translation))
        cursor = piece.end
    out.append(html[cursor:end])
    return "".join(out)


def _block_written(html: str, block: Block, translation: str, spans, inside) -> str:
    """The block's translation, escaped, with each element's tags around its span. The
    spans are made to nest first: each is cut to its parent's, and one that overlaps a
    sibling placed before it starts after it; an element without a span (``None``, or
    cut to nothing) is written empty at its place."""
    n = len(block.marks)
    spans = (list(spans or ()) + [None] * n)[:n]
    fixed: dict[int, Span] = {}
    tree = block.children()

    def fix(parent: int | None, lo: int, hi: int) -> None:
        kids = tree.get(parent, [])
        base, width = (0, len(block.text)) if parent is None else \
            (block.marks[parent][0], block.marks[parent][1] - block.marks[parent][0])
        wanted = []
        for k in kids:
            span = spans[k]
            if span is None:  # the same share of the parent's span
                a = lo + round((block.marks[k][0] - base) / max(width, 1) * (hi - lo))
                span = (a, a)
            wanted.append((span[0], span[1], k))
        last = lo
        for a, b, k in sorted(wanted):
            a = min(max(a, last), hi)
            b = min(max(b, a), hi)
            fixed[k] = (a, b)
            last = b
            fix(k, a, b)

    fix(None, 0, len(translation))

    def emit(parent: int | None, lo: int, hi: int) -> str:
        out, cursor = [], lo
        for k in sorted(tree.get(parent, []), key=lambda k: (fixed[k], k)):
            a, b = fixed[k]
            (os_, oe), (cs, ce) = block.tags[k]
            out.append(_escape(translation[cursor:a]))
            out.append(_written(html, os_, oe, [(p, t) for p, t in inside if os_ <= p.start < oe]))
            out.append(emit(k, a, b))
            out.append(html[cs:ce])
            cursor = b
        out.append(_escape(translation[cursor:hi]))
        return "".join(out)

    return emit(None, 0, len(translation))


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
    return _written(html, 0, len(html), list(zip(pieces, translations)))


def translate_html(html: str, translate: Callable[[list[str]], list[str]], markup: Markup = HTML) -> str:
    """Translate the text of ``html``, calling ``translate`` once with every string
    :func:`render` needs (:func:`texts_to_translate` of :func:`plan`).

    ``translate`` is not called when there is nothing to translate. Raises
    :class:`ValueError` when it returns a different number of strings than it was given.
    """
    units = plan(html, markup)
    if not units:
        return html
    texts = texts_to_translate(units)
    translations = list(translate(texts))
    if len(translations) != len(texts):
        raise ValueError(f"translate returned {len(translations)} strings for {len(texts)} texts")
    return render(html, units, dict(zip(texts, translations)))


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
    while i >= 0 and html[i] in WHITESPACE:
        i -= 1
    return html[i] if i >= 0 and html[i] in "\"'" else ""
