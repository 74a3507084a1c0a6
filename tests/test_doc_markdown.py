"""Markdown documents: segments, byte-exact identity, structure kept under translation, errors."""

from __future__ import annotations

import bisect
import codecs
import io
import logging
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from edge_translator.documents.base import DocumentError, FormatOptions, Segment, Translated
from edge_translator.documents.markdown import FORMAT

RICH = """\
---
title: Front *matter* stays
tags: [a, b]
---
# The *first* heading #
Setext **heading** that
spans two lines
===============

A paragraph with **bold**, *em*, _under_, ~~struck~~ and ***both*** words,
a [link with *em*](http://example.com/a_b "Title") and `inline *code*`.  
A hard break above, an escaped \\* star, &amp; an entity, <b>html</b>,
an autolink <http://auto.example/x>, an image ![alt text](img.png "pic")\\
and a [reference] link, a [full][reference] one, a [collapsed][] one.

> A quote with a [multi-line](
> /url "title") link and `code
> across lines`
lazy continuation line.
>
> > Nested quote here.

- First item
  continues here
- Second *item*
  1. Nested ordered [reference]
  2. Another one

1) Paren ordered item
2) Second paren item

| Name | Escaped \\| pipe `a\\|b` | Right |
|:-----|:-------:|------:|
| `code` | ~~gone~~ text | **bold** cell |
| | empty first cell | 42 |

    indented code block
    stays as it is

```python
fenced = "code block"  # not translated
```

~~~
tilde fence
~~~

<div class="note">
An HTML block stays.
</div>

[reference]: http://ref.example/path "Ref title"
[collapsed]: <http://collapsed.example>

***
## ## Closing hashes ###
Last line without a newline"""


def _open(tmp_path: Path, data: bytes | str, name: str = "doc.md"):
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path, FORMAT.open(path, FormatOptions())


def _write(doc, translated) -> bytes:
    out = io.BytesIO()
    doc.write(translated, out)
    return out.getvalue()


def _identity(doc) -> bytes:
    return _write(doc, [Translated(s.text, s.marks) for s in doc.segments()])


def fake(segment: Segment, word=lambda w: "译" + w.upper()) -> Translated:
    """Translate each ASCII word, keep kept spans verbatim, and move the marks along."""
    text = segment.text
    cuts = sorted({0, len(text)} | {p for span in (*segment.marks, *segment.keep) for p in span})
    starts = [a for a, _ in segment.keep]
    pieces, where, size = [], {}, 0
    for a, b in zip(cuts, cuts[1:]):
        where[a] = size
        i = bisect.bisect_right(starts, a) - 1
        piece = text[a:b]
        if not (i >= 0 and segment.keep[i][1] >= b):
            piece = re.sub(r"[A-Za-z]+", lambda m: word(m.group()), piece)
        pieces.append(piece)
        size += len(piece)
    where[len(text)] = size
    return Translated("".join(pieces), tuple((where[a], where[b]) for a, b in segment.marks))


def _structure(data: str, strict: bool = True) -> list[tuple]:
    """The parsed document without its text: block and inline token types, URLs, code.
    Not ``strict``: without emphasis and hard breaks (a segment can lose them)."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    loose = () if strict else ("em_open", "em_close", "strong_open", "strong_close", "s_open",
                                "s_close", "hardbreak")
    shape = []
    for token in md.parse(data):
        if token.type in ("fence", "code_block", "html_block"):
            shape.append((token.type, token.content))
        elif token.type != "inline":
            shape.append((token.type, token.markup, token.level))
        for child in token.children or ():
            if child.type in ("code_inline", "html_inline", "image"):  # a line break is a space
                shape.append((child.type, re.sub(r"\s+", " ", child.content), child.attrs.get("src")))
            elif child.type == "link_open":
                shape.append((child.type, child.attrs.get("href"), child.attrs.get("title")))
            elif child.type not in ("text", "text_special", "softbreak", *loose):
                shape.append((child.type,))
    return shape


# --- reading ---------------------------------------------------------------------------


def test_rich_document_segments(tmp_path):
    _, doc = _open(tmp_path, RICH)
    segments = list(doc.segments())
    texts = [s.text for s in segments]
    assert texts[0] == "The first heading"
    assert texts[1] == "Setext heading that spans two lines"
    paragraph = segments[2]
    assert paragraph.line == 10
    plain = "".join(paragraph.text[a:b] for a, b in zip((0, *(e for _, e in paragraph.keep)),
                                                        (*(s for s, _ in paragraph.keep), None)))
    assert "bold" in plain and not re.search(r"\*\*|\]\(|`|<", plain)
    assert paragraph.text.count("\n") == 2  # the two hard breaks; soft breaks are spaces
    assert "escaped * star, & an entity" in paragraph.text
    kept = [paragraph.text[a:b] for a, b in paragraph.keep]
    assert kept == ["`inline *code*`", "<b>", "</b>", "<http://auto.example/x>",
                    '![alt text](img.png "pic")']
    marked = [paragraph.text[a:b] for a, b in paragraph.marks]
    assert marked[:6] == ["bold", "em", "under", "struck", "both", "both"]
    assert "link with em" in marked and "reference" in marked and "full" in marked
    quote = next(s for s in segments if s.text.startswith("A quote"))
    assert [quote.text[a:b] for a, b in quote.keep] == ["`code across lines`"]
    assert quote.text.endswith("lazy continuation line.")
    assert "Escaped | pipe `a\\|b`" in texts
    assert "code" not in texts and "42" not in texts  # no words: left as it is
    assert "## Closing hashes" in texts
    assert texts[-1] == "Last line without a newline"
    joined = "\n".join(texts)
    for literal in ("Front", "indented code", "fenced", "tilde fence", "HTML block", "Ref title"):
        assert literal not in joined


def test_every_inline_is_aligned(tmp_path, caplog):
    _, doc = _open(tmp_path, RICH)
    with caplog.at_level(logging.DEBUG, logger="edge_translator.documents.markdown_parse"):
        count = len(list(doc.segments()))
    assert count == 19
    assert not caplog.records


# --- identity --------------------------------------------------------------------------


def test_identity_rich(tmp_path):
    path, doc = _open(tmp_path, RICH)
    assert _identity(doc) == path.read_bytes()
    assert _identity(doc) == path.read_bytes()  # segments() and write() can run again


@pytest.mark.parametrize("encoding, newline", [
    ("utf-8-sig", "\n"), ("utf-16", "\r\n"), ("utf-8", "\r\n"), ("utf-8", "\r"),
])
def test_identity_encodings_and_line_endings(tmp_path, encoding, newline):
    data = RICH.replace("\n", newline).encode(encoding)
    path, doc = _open(tmp_path, data)
    assert data[:2] != codecs.BOM_UTF16_BE
    assert len(list(doc.segments())) == 19
    assert _identity(doc) == data
    out = _write(doc, [fake(s) for s in doc.segments()])
    _, plain = _open(tmp_path, RICH, "plain.md")
    expected = _write(plain, [fake(s) for s in plain.segments()]).decode()
    assert out == expected.replace("\n", newline).encode(encoding)


_WORDS = st.sampled_from(["alpha", "Beta", "gamma", "snake_case", "x2", "don't", "e.g.", "1.5", "(note)"])
_INLINE = st.one_of(
    _WORDS, _WORDS.map("*{}*".format), _WORDS.map("_{}_".format), _WORDS.map("**{}**".format),
    _WORDS.map("__{} word__".format), _WORDS.map("~~{}~~".format), _WORDS.map("***{}***".format),
    _WORDS.map('[{} link](http://example.com/a_b "T")'.format), _WORDS.map("[{}](<a b>)".format),
    _WORDS.map("[**{}** x](u)".format), _WORDS.map("[{}][ref]".format), st.just("[ref]"),
    st.just("[ref][]"), _WORDS.map("`code {}`".format), st.just("`` a ` b ``"),
    st.just("<http://a.example/c>"), st.just("<b>"), st.just("</b>"), st.just("<!-- c -->"),
    _WORDS.map('![{}](img.png "t")'.format), st.just("\\*"), st.just("\\["), st.just("&amp;"),
    st.just("&copy;"), st.just("&#35;"), st.just("*unclosed"), st.just("a|b"), st.just("\\|"),
    _WORDS.map("*a **{}** c*".format), _WORDS.map("**[{}](u)**".format), _WORDS.map('"*{}*"'.format),
    _WORDS.map("**{}**s".format), st.just("中文*强调*文字"),
)
_GAP = st.sampled_from([" ", " ", " ", "\n", "  \n", "\\\n", "\n   ", " \t"])


@st.composite
def _line(draw, pipes: bool = True) -> str:
    parts = draw(st.lists(_INLINE, min_size=1, max_size=6))
    text = " ".join(parts)
    return text if pipes else text.replace("|", "\\|")


@st.composite
def _paragraph(draw) -> str:
    parts = draw(st.lists(_INLINE, min_size=1, max_size=10))
    out = parts[0]
    for part in parts[1:]:
        out += draw(_GAP) + part
    return out


@st.composite
def _block(draw, depth: int = 0) -> str:
    kinds = ["para", "atx", "setext", "fence", "indented", "table", "hr", "html", "refdef"]
    if depth < 2:
        kinds += ["list", "ordered", "quote"]
    kind = draw(st.sampled_from(kinds))
    if kind == "para":
        return draw(_paragraph())
    if kind == "atx":
        return "#" * draw(st.integers(1, 6)) + " " + draw(_line()) + draw(st.sampled_from(["", " #", " ###"]))
    if kind == "setext":
        return draw(_paragraph()) + "\n" + draw(st.sampled_from(["===", "---", "=========="]))
    if kind == "fence":
        return "```js\nlet *a* = [b](c);\n\n```"
    if kind == "indented":
        return "    code *a*\n    more [b](c)"
    if kind == "table":
        columns = draw(st.integers(1, 3))
        rows = [" | ".join(draw(_line(pipes=False)) for _ in range(columns))
                for _ in range(draw(st.integers(1, 3)))]
        edge = draw(st.sampled_from(["|", ""]))
        lines = [edge + " " + rows[0] + " " + edge, edge + "|".join([":---"] * columns) + edge]
        lines += [edge + row + edge for row in rows[1:]]
        return "\n".join(lines)
    if kind == "hr":
        return draw(st.sampled_from(["***", "- - -", "___"]))
    if kind == "html":
        return "<div>\n*not* translated\n</div>"
    if kind == "refdef":
        return '[ref]: http://ref.example "T"'
    inner = draw(st.lists(_block(depth + 1), min_size=1, max_size=3))
    if kind == "quote":
        return "\n".join(("> " + line).rstrip() for block in inner for line in (block + "\n").split("\n"))
    marker = "- " if kind == "list" else "1. "
    items = []
    for block in inner:
        lines = block.split("\n")
        items.append(marker + lines[0] + "".join("\n" + " " * len(marker) + line for line in lines[1:]))
    return "\n".join(items)


@st.composite
def documents(draw) -> str:
    blocks = draw(st.lists(_block(), min_size=1, max_size=6))
    head = draw(st.sampled_from(["", "---\ntitle: *x*\n---\n"]))
    body = head + "".join(block + draw(st.sampled_from(["\n\n", "\n\n\n"])) for block in blocks)
    body += '\n[ref]: http://ref.example "T"\n'
    return body if draw(st.booleans()) else body.rstrip("\n")


_SETTINGS = settings(max_examples=40, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(documents(), st.sampled_from(["\n", "\r\n"]))
def test_identity_generated(tmp_path, caplog, text, newline):
    data = text.replace("\n", newline).encode()
    path, doc = _open(tmp_path, data)
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="edge_translator.documents.markdown_parse"):
        assert _identity(doc) == data
    assert not caplog.records, caplog.records[0].getMessage()


_PIECES = ["[a](http://x \"t\")", "**", "~~", "![i](s)", "<b>", "``", "\n\n", "  \n", "\\\n", "[r]",
           "\n[r]: /u\n", "中文", "1) ", "# ", "\n===\n", "```\n", "http://", "&amp;", "\r\n", "alpha ",
           "    ", "- ", "1. ", "> ", "---", "\n|-|-|\n", *"ab *_`[]()<>!#-+=|\\~&;:.1\n\t>\"'/h"]


def _breaks(text: str) -> str:
    return re.sub(r"[ \t]+\n", "\n", text)  # spaces before a hard break do not come back


@_SETTINGS
@given(st.lists(st.sampled_from(_PIECES), max_size=60).map("".join))
def test_any_text(tmp_path, text):
    """Any text comes back byte for byte; its translation reads back with the same blocks,
    links, code and HTML (emphasis may be dropped where its delimiters would not pair up)."""
    data = text.encode()
    path, doc = _open(tmp_path, data)
    assert _identity(doc) == data
    segments = list(doc.segments())
    translated = [fake(s) for s in segments]
    out = _write(doc, translated)
    again = list(_open(tmp_path, out, "out.md")[1].segments())
    assert [_breaks(s.text) for s in again] == [
        _breaks(t.text if t.text == s.text else t.text.strip()) for t, s in zip(translated, segments)]
    assert _structure(out.decode(), False) == _structure(text, False)


# --- translation -----------------------------------------------------------------------


def test_fake_translation_keeps_structure(tmp_path):
    path, doc = _open(tmp_path, RICH)
    out = _write(doc, [fake(s) for s in doc.segments()]).decode()
    assert _structure(out) == _structure(RICH)
    assert out.startswith("---\ntitle: Front *matter* stays\ntags: [a, b]\n---\n"
                          "# 译THE *译FIRST* 译HEADING #\n")
    assert '[译LINK 译WITH *译EM*](http://example.com/a_b "Title")' in out
    assert "`inline *code*`.  \n译A 译HARD" in out
    assert "![alt text](img.png \"pic\")\\\n译AND" in out
    assert "[译REFERENCE][reference]" in out and "[译FULL][reference]" in out
    assert "[译COLLAPSED][collapsed]" in out
    assert ("> 译A 译QUOTE 译WITH 译A [译MULTI-译LINE]( /url \"title\") 译LINK 译AND `code across lines` "
            "译LAZY 译CONTINUATION 译LINE.\n>\n> > 译NESTED") in out
    assert "| 译NAME | 译ESCAPED \\| 译PIPE `a\\|b` | 译RIGHT |\n|:-----|:-------:|------:|\n" in out
    assert "  1. 译NESTED 译ORDERED [译REFERENCE][reference]\n" in out
    assert "## ## 译CLOSING 译HASHES ###\n" in out  # the same first word as the source
    for literal in ("    indented code block\n    stays as it is\n", 'fenced = "code block"',
                    "An HTML block stays.", '[reference]: http://ref.example/path "Ref title"'):
        assert literal in out
    words = re.findall(r"\b[a-z]{4,}\b", re.sub(r"`[^`]*`|\(http[^)]*\)|<[^>]*>", "", out))
    assert set(words) <= {"matter", "stays", "tags", "title", "code", "block", "indented", "fenced",
                          "tilde", "fence", "class", "note", "html", "path", "reference", "collapsed",
                          "http", "example", "text"}  # URLs, the image's alt text


@_SETTINGS
@given(documents(), st.lists(st.sampled_from(list("*_[]`<>&#;|~!\\-+=.1()中") + ["&amp;", "1."]),
                             max_size=4).map("".join))
def test_translation_reads_back(tmp_path, text, junk):
    """Writing a translation and reading the output gives the translation back, whatever
    markup characters it holds, and the structure of the document does not change."""
    path, doc = _open(tmp_path, text)
    translated = [fake(s, lambda w: junk + "文" + w.upper()) for s in doc.segments()]
    out = _write(doc, translated)
    again = list(_open(tmp_path, out, "out.md")[1].segments())
    assert [s.text for s in again] == [t.text.strip() for t in translated]
    # markup characters in the text can make delimiters pair up differently: emphasis is
    # then dropped from the segment, links are kept
    assert _structure(out.decode(), not junk) == _structure(text, not junk)
    if not junk:
        assert [s.marks for s in again] == [t.marks for t in translated]


def test_unchanged_segments_keep_their_bytes(tmp_path):
    source = "Keep  *this*\nas it\\\nis.\n\nChange *this*.\n"
    path, doc = _open(tmp_path, source)
    first, second = doc.segments()
    out = _write(doc, [Translated(first.text, first.marks), Translated("改变这个。", ((2, 4),))])
    assert out.decode() == "Keep  *this*\nas it\\\nis.\n\n改变*这个*。\n"


def test_marks_are_clamped_dropped_and_fitted(tmp_path):
    _, doc = _open(tmp_path, "A **b [c](u) d** e _f_ g\n")
    (segment,) = doc.segments()
    assert segment.text == "A b c d e f g"
    # the link lies outside its bold parent: it is clamped into it; the emphasis is lost
    out = _write(doc, [Translated("甲乙丙。丁戊", ((0, 3), (1, 4), None))])
    assert out.decode() == "**甲[乙丙](u)**。丁戊\n"
    # the same where the closing "**" cannot close (")" before, a letter after): dropped
    out = _write(doc, [Translated("甲乙丙丁戊己", ((1, 3), (2, 5), None))])
    assert out.decode() == "甲乙[丙](u)丁戊己\n"
    # crossing siblings: the later one is dropped
    out = _write(doc, [Translated("甲乙丙丁戊己", ((0, 3), (1, 2), (2, 4)))])
    assert out.decode() == "**甲[乙](u)丙**丁戊己\n"
    # "_" between CJK letters cannot open or close: it becomes "*"
    out = _write(doc, [Translated("甲乙丙丁戊己", (None, None, (2, 4)))])
    assert out.decode() == "甲乙*丙丁*戊己 [c](u)\n"
    # punctuation at the edge of a strong span moves outside it so that it still closes
    out = _write(doc, [Translated("甲“乙丙”丁", ((1, 5), (2, 3), None))])
    assert out.decode() == "甲“**[乙](u)丙**”丁\n"
    # a delimiter that cannot open next to a link after a CJK letter is dropped
    out = _write(doc, [Translated("甲乙丙丁", ((1, 2), (1, 2), None))])
    assert out.decode() == "甲[乙](u)丙丁\n"


def test_link_that_cannot_be_placed_keeps_its_url(tmp_path):
    _, doc = _open(tmp_path, "[Whole link](http://w.example)\n\nSee [the docs](http://d.example 'D') now.\n")
    whole, inner = doc.segments()
    assert whole.marks == ((0, 10),) and inner.marks == ((4, 12),)
    out = _write(doc, [Translated("整个链接", (None,)), Translated("现在看文档。", (None,))])
    assert out.decode() == ("[整个链接](http://w.example)\n\n"
                            "现在看文档。 [the docs](http://d.example 'D')\n")


def test_kept_spans_come_back_verbatim_and_text_is_escaped(tmp_path):
    source = "# Title\n\nUse `a_b*c` and <kbd>x</kbd> here.\n\n| Cell |\n|---|\n| one |\n"
    _, doc = _open(tmp_path, source)
    title, body, header, cell = doc.segments()
    assert [body.text[a:b] for a, b in body.keep] == ["`a_b*c`", "<kbd>", "</kbd>"]
    out = _write(doc, [Translated("标题 #", ()), Translated("- 在 <kbd>x</kbd> 用 `a_b*c` 和 *星* [括] _下_", ()),
                       Translated("格", ()), Translated("一|二\\", ())]).decode()
    assert out == ("# 标题 \\#\n\n\\- 在 <kbd>x</kbd> 用 `a_b*c` 和 \\*星\\* \\[括\\] \\_下\\_\n\n"
                   "| 格 |\n|---|\n| 一\\|二\\\\  |\n")


def test_hard_breaks_come_back_with_the_source_syntax(tmp_path):
    _, doc = _open(tmp_path, "> One  \r\n> two\\\r\n> three\r\n")
    (segment,) = doc.segments()
    assert segment.text == "One\ntwo\nthree"
    out = _write(doc, [Translated("一\n二\n三\n四", ())])
    assert out == "> 一  \r\n> 二\\\r\n> 三\\\r\n> 四\r\n".encode()
    # two breaks in a row: the second one cannot be spaces on an empty line
    _, doc = _open(tmp_path, "One  \ntwo  \nthree\n")
    assert _write(doc, [Translated("一\n\n三", ())]) == "一  \n\\\n三\n".encode()
    _, doc = _open(tmp_path, "# Head\n\nsoft\nbreak\n")
    out = _write(doc, [Translated("头\n部", ()), Translated("软\n换行", ())])
    assert out == "# 头 部\n\n软 换行\n".encode()


def test_blank_translation_keeps_the_source(tmp_path):
    _, doc = _open(tmp_path, "Some *text*\n")
    assert _write(doc, [Translated("  ", (None,))]) == b"Some *text*\n"


def test_large_document_is_linear(tmp_path):
    block = "A *paragraph* with a [link](http://x) and `code`.\n\n| a | b |\n|---|---|\n| c | d |\n\n"
    _, doc = _open(tmp_path, block * 400 + "A long paragraph *with* [many](u) `marks`. " * 2000)
    segments = list(doc.segments())
    assert len(segments) == 400 * 5 + 1 and len(segments[-1].marks) == 4000
    out = _write(doc, [fake(s) for s in segments]).decode()
    assert out.count("[译LINK](http://x)") == 400 and out.count("[译MANY](u)") == 2000


def test_pathological_nesting_is_left_as_it_is(tmp_path, caplog):
    source = "Deep " + "*" * 2000 + "x" + "*" * 2000 + "\n\n" + "> " * 500 + "quoted\n\nfine *text*\n"
    path, doc = _open(tmp_path, source)
    with caplog.at_level(logging.DEBUG, logger="edge_translator.documents.markdown_parse"):
        segments = list(doc.segments())
    assert [s.text for s in segments] == ["fine text"]
    assert "doc.md:1: cannot follow the text through its source" in caplog.text
    assert _identity(doc) == path.read_bytes()
    assert _write(doc, [Translated("好文本", ((1, 3),))]).decode().endswith("\n\n好*文本*\n")


# --- errors ----------------------------------------------------------------------------


def test_invalid_utf8_names_the_line(tmp_path):
    path, doc = _open(tmp_path, b"# Title\n\nfine\nbad \xff byte\n")
    with pytest.raises(DocumentError) as caught:
        list(doc.segments())
    assert caught.value.line == 4
    assert "is not UTF-8" in str(caught.value) and "save it as UTF-8" in str(caught.value)
    with pytest.raises(DocumentError, match="is not UTF-8"):
        _write(doc, [])


def test_binary_file_is_refused(tmp_path):
    _, doc = _open(tmp_path, b"text\n\x00\x01\x02\n")
    with pytest.raises(DocumentError, match="NUL bytes") as caught:
        list(doc.segments())
    assert caught.value.line == 2


def test_missing_file(tmp_path):
    doc = FORMAT.open(tmp_path / "nope.md", FormatOptions())
    with pytest.raises(DocumentError, match="cannot read the file"):
        list(doc.segments())


def test_wrong_number_of_translations(tmp_path):
    _, doc = _open(tmp_path, "One.\n\nTwo.\n")
    with pytest.raises(DocumentError, match="do not match the file's segments") as fewer:
        _write(doc, [Translated("一。")])
    assert fewer.value.line == 3  # the segment that had no translation
    with pytest.raises(DocumentError, match="do not match the file's segments"):
        _write(doc, [Translated("一。"), Translated("二。"), Translated("三。")])


def test_format_entry():
    assert FORMAT.name == "markdown"
    assert FORMAT.suffixes == (".md", ".markdown")
