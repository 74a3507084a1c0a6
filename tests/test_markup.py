"""HTML translation: only text and four attributes change, every other byte comes back.

By class: exact identity round trips over a varied corpus and fuzzed input, marker
translations that must reach every visible text and nothing else, escaping per context
(read back by the stdlib parser), skipped subtrees, whitespace, and the batch contract.
"""

import html as _html
import random
import re
from html.parser import HTMLParser

import pytest

from edge_translator.core.markup import INLINE_ELEMENTS, Block, Piece, extract, plan, rebuild, translate_html

#: Named members of the corpus, checked piece by piece below.
DOCUMENT = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="description" content="A page about fish">
  <title>Fish &amp; chips</title>
  <link rel="stylesheet" href="/s.css">
  <style>body > p { color: red; } /* <p>not text</p> */</style>
  <script type="text/javascript">if (a < b && c > d) { document.write("<p>Hi</p>"); }</script>
</head>
<body class="home">
  <h1 id="top">Welcome to the shop</h1>
  <p>Open daily&nbsp;&mdash; except Sundays &#8212; and holidays &#x2014; really.</p>
</body>
</html>
"""
LINKS = "<p>Hello <b>world</b>, this is <a href='/x?a=1&amp;b=2' title='Go there'>a <i>nested</i> link</a>!</p>"
FORM = (
    '<form action="/search" method=get><label for=q>Search</label>'
    '<input id=q name=q placeholder="Type a word" aria-label=\'Search box\'>'
    '<textarea name=t placeholder=Comments>Leave this alone</textarea>'
    '<button type="submit">Go</button><select><option value="1">One</option></select></form>'
)
IMAGES = (
    '<img src="cat.png" alt="A sleeping cat" title=\'Cat\' width=100><img src=dog.png alt=Dog>'
    '<img alt="" src="x.gif"><img alt>'
)
QUOTING = (
    "<a title = \"double\" href='x'>one</a><a title= 'single'>two</a><a title =bare>three</a>"
    '<a title="first" title="second">four</a><a data-title="no" title="">five</a>'
)

CORPUS = [
    # Full documents.
    DOCUMENT,
    "<!doctype html><HTML><HEAD><TITLE>Upper case</TITLE></HEAD><BODY><P ALIGN=center>Loud text</P></BODY></HTML>",
    '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
    '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n<html xmlns="http://www.w3.org/1999/xhtml">'
    "<body><p>XHTML body<br />next line</p></body></html>",
    # Fragments with inline markup, tables, lists, forms, images.
    LINKS,
    "<table border=1><thead><tr><th>Name</th><th>Price</th></tr></thead>"
    "<tbody><tr><td>Tea</td><td>$3.50</td></tr><tr><td>Coffee &amp; cake</td><td>$7</td></tr></tbody></table>",
    "<ul>\n  <li>First item</li>\n  <li>Second <em>important</em> item\n  <li>Unclosed third\n</ul>\n"
    "<ol start=3><li>Three<li>Four</ol>",
    FORM,
    IMAGES,
    "<p>Entities: &amp; &lt; &gt; &quot; &apos; &nbsp; &copy; &#169; &#xA9; &#x2014; &unknown; &amp</p>",
    "<p>Text with \"quotes\" and 'apostrophes' and a > sign</p>",
    # Comments, CDATA, processing instructions, conditional comments.
    "<div><!-- a comment with <b>markup</b> --><p>After the comment</p><!----></div>",
    "<!--[if IE]><p>Old browser</p><![endif]--><p>Modern</p>",
    "<svg><![CDATA[ x < y ]]><text>Label</text></svg><?php echo 1; ?>",
    "<![if !IE]><p>Conditional</p><![endif]>",
    # Skipped content.
    "<pre>  keep   this\n  <b>too</b></pre><p>Translate <code>this_not()</code> only</p>",
    '<p translate="no">Brand</p><p class="x notranslate y">Also brand</p><p>Normal</p>',
    "<p>Press <kbd>Ctrl</kbd>+<kbd>C</kbd>, see <samp>output</samp> and <var>x</var>.</p>",
    # Whitespace.
    "<p>\n    Indented paragraph text.\n</p>\n\n<div>   </div>\r\n<p>\tTabbed\t</p>",
    # Attributes in every quoting style, with odd spacing and duplicates.
    QUOTING,
    # Malformed.
    "<p>Unclosed paragraph<div>stray</div></div></span>trailing",
    "<p>a < b and c > d & e</p>",
    "<b>bold <i>both</b> italic</i>",
    "<!-- unterminated comment <p>Hidden?</p>",
    "<p title=\"unterminated>Text</p>",
    "<p>Text then <a href=",
    "<",
    "&",
    "",
    "plain text, no markup at all",
    "</pre>stray end<pre>x</pre>y",
    "<![ bogus ]> then text <!> <! notadecl > end",
    "<p>Ends with an ampersand &",
    "<p>Ends with a reference &amp",
    "<p>Ends inside a tag <img src='x",
    "<div>\u00a0Non\u2011breaking and emoji \U0001F600 text\u00a0</div>",
    "<p>Windows\r\nline endings\r\n</p>\r\n",
]

WORD = re.compile(r"[A-Za-z]")


def identity(texts):
    return texts


def bracket(texts):
    return [f"[[{text}]]" for text in texts]


def outside(source, pieces):
    """The parts of ``source`` between the pieces."""
    parts, cursor = [], 0
    for piece in pieces:
        parts.append(source[cursor:piece.start])
        cursor = piece.end
    return parts + [source[cursor:]]


class Reader(HTMLParser):
    """The stdlib parser's view of a document: text runs and start tags' attributes."""

    def __init__(self, source):
        super().__init__(convert_charrefs=True)
        self.texts, self.attrs, self._text = [], [], []
        self.feed(source)
        self.close()
        self._flush()

    def _flush(self):
        if self._text:
            self.texts.append("".join(self._text))
            self._text = []

    def handle_data(self, data):
        self._text.append(data)

    def handle_starttag(self, tag, attrs):
        self._flush()
        self.attrs.append(attrs)

    def handle_endtag(self, tag):
        self._flush()


def texts(source):
    return [piece.text for piece in extract(source)]


@pytest.mark.parametrize("source", CORPUS)
def test_identity_round_trip_is_exact(source):
    assert translate_html(source, identity) == source
    pieces = extract(source)
    assert rebuild(source, pieces, [piece.text for piece in pieces]) == source


@pytest.mark.parametrize("source", CORPUS)
def test_pieces_are_decoded_trimmed_spans_in_order(source):
    cursor = 0
    for piece in extract(source):
        raw = source[piece.start:piece.end]
        assert cursor <= piece.start < piece.end
        assert piece.kind in ("text", "attribute")
        assert _html.unescape(raw) == piece.text and piece.text.strip()
        assert raw == raw.strip(" \t\n\r\f")
        cursor = piece.end


@pytest.mark.parametrize("source", CORPUS)
def test_marker_translation_changes_only_the_pieces(source):
    pieces = extract(source)
    out = rebuild(source, pieces, bracket([piece.text for piece in pieces]))
    assert texts(out) == [f"[[{piece.text}]]" for piece in pieces]
    assert outside(out, extract(out)) == outside(source, pieces)


@pytest.mark.parametrize("source", CORPUS)
def test_plan_covers_every_piece_once(source):
    """Each text piece is a unit or lies in exactly one block, whose text holds it; each
    attribute piece is a unit of its own."""
    units = plan(source)
    blocks = [u for u in units if isinstance(u, Block)]
    for piece in extract(source):
        holders = [b for b in blocks if b.start <= piece.start < b.end]
        if piece.kind == "attribute" or not holders:
            assert piece in units
        else:
            assert len(holders) == 1 and " ".join(piece.text.split()) in holders[0].text
            assert piece not in units
    assert [u.start for u in units] == sorted(u.start for u in units)


def test_examples_of_what_is_and_is_not_a_piece():
    assert texts(DOCUMENT) == [
        "Fish & chips", "Welcome to the shop",
        "Open daily\u00a0\u2014 except Sundays \u2014 and holidays \u2014 really."]
    assert [(p.text, p.kind) for p in extract(FORM)] == [
        ("Search", "text"), ("Type a word", "attribute"), ("Search box", "attribute"),
        ("Comments", "attribute"), ("Go", "text"), ("One", "text")]
    assert texts(LINKS) == ["Hello", "world", ", this is", "Go there", "a", "nested", "link", "!"]
    assert texts(IMAGES) == ["A sleeping cat", "Cat", "Dog"]
    assert texts(QUOTING) == ["double", "one", "single", "two", "bare", "three", "first", "second",
                                 "four", "five"]


# A document whose translatable text all says "visible" and whose other text says "hidden".
VISIBLE_HIDDEN = """<!DOCTYPE html>
<html><head><title>visible title</title>
<meta name="hidden" content="hidden description">
<script>var hidden = "<b>hidden</b>";</script><style>.hidden { color: red }</style></head>
<body class="hidden">
<!-- hidden comment -->
<h1 title="visible heading">visible heading</h1>
<p>visible <b>visible bold</b> <a href="/hidden" class='hidden' title='visible link'>visible link</a>.</p>
<pre>hidden <b>hidden bold</b> <img src=hidden.png alt="hidden in pre"> hidden</pre>
<p>visible <code>hidden <span>hidden</span></code> visible</p>
<div translate="no">hidden <img alt="hidden alt"> <div>hidden inner</div> hidden after inner</div>
<div class="box notranslate">hidden <p title="hidden">hidden</p></div>
<p><kbd>hidden</kbd> <samp>hidden</samp> <var>hidden</var> visible</p>
<textarea placeholder="visible placeholder">hidden <b>content</b></textarea>
<img src="hidden.png" alt=visible-bare data-alt="hidden" aria-label='visible label'>
<input placeholder="visible input" value="hidden" name=hidden>
</body></html>
"""


def test_marker_reaches_every_visible_text_and_nothing_hidden():
    out = translate_html(VISIBLE_HIDDEN, lambda xs: [x.upper() for x in xs])
    assert "visible" not in out
    assert out.count("VISIBLE") == VISIBLE_HIDDEN.count("visible")
    assert out.count("hidden") == VISIBLE_HIDDEN.count("hidden") and "HIDDEN" not in out
    tag = re.compile(r"<[^>]*>")
    before, after = tag.findall(VISIBLE_HIDDEN), tag.findall(out)
    assert [t.lower() for t in after] == [t.lower() for t in before]
    translated = re.compile(r"\b(alt|title|placeholder|aria-label)=")
    assert [t for t in after if not translated.search(t)] == [t for t in before if not translated.search(t)]


TRICKY = "a < b & \"c\" 'd' > e &amp;"


@pytest.mark.parametrize("source, expected_texts, expected_attrs", [
    ("<p>x</p>", [TRICKY], [[]]),
    ("<p>\n x </p>", [f"\n {TRICKY} "], [[]]),
    ('<i title="x" id=a>', [], [[("title", TRICKY), ("id", "a")]]),
    ("<i title='x' id=a>", [], [[("title", TRICKY), ("id", "a")]]),
    ("<i title=x id=a>", [], [[("title", TRICKY), ("id", "a")]]),
    ("<i id=a title=x>", [], [[("id", "a"), ("title", TRICKY)]]),
    ("<i id=a title=x/>", [], [[("id", "a"), ("title", TRICKY)]]),
    ('<i title="  x  ">', [], [[("title", f"  {TRICKY}  ")]]),
])
def test_escaping_reads_back_exactly(source, expected_texts, expected_attrs):
    reader = Reader(translate_html(source, lambda xs: [TRICKY] * len(xs)))
    assert (reader.texts, reader.attrs) == (expected_texts, expected_attrs)


def test_escaping_per_context():
    assert translate_html("<p>x</p>", lambda xs: [TRICKY]) == "<p>a &lt; b &amp; \"c\" 'd' &gt; e &amp;amp;</p>"
    assert translate_html("<i title=\"x\">", lambda xs: ['"q" \'s\' &']) == "<i title=\"&quot;q&quot; 's' &amp;\">"
    assert translate_html("<i title='x'>", lambda xs: ['"q" \'s\' &']) == "<i title='\"q\" &#39;s&#39; &amp;'>"
    assert translate_html("<i title=x>", lambda xs: ["two words"]) == '<i title="two words">'
    assert translate_html("<i title=x>", lambda xs: ['a"b']) == '<i title="a&quot;b">'
    assert translate_html("<i title=x>", lambda xs: ["one-word"]) == "<i title=one-word>"
    assert translate_html("<i title=x id=y>", lambda xs: [""]) == '<i title="" id=y>'
    assert translate_html("<p>x</p>", lambda xs: [""]) == "<p></p>"


def test_unchanged_pieces_keep_their_references_and_changed_ones_are_re_encoded():
    source = "<p>&nbsp;Fish&#32;&amp;&#x20;chips</p><p>&copy; cod</p>"
    out = translate_html(source, lambda xs: [xs[0], xs[1].upper()])
    assert out == "<p>&nbsp;Fish&#32;&amp;&#x20;chips</p><p>\u00a9 COD</p>"


@pytest.mark.parametrize("source, expected", [
    ("<pre><code>a</code> b <span>c</span></pre>d", ["d"]),
    ("<div><p><code>x<b>y<i>z</i></b>w</code>v</p></div>", ["v"]),
    ("<SCRIPT>document.write('<p>no</p>')</SCRIPT><STYLE>p{}</STYLE>yes", ["yes"]),
    ("<code>a<br>b<br/>c<img alt=no>d</code>e", ["e"]),
    ("<code>a<hr/>b<input>c</code>d", ["d"]),
    ("<textarea placeholder='Hint'>no <b>no</b></textarea>yes", ["Hint", "yes"]),
    ("<pre title=Tip>no</pre><code title='Tip 2'>no</code>yes", ["Tip", "Tip 2", "yes"]),
    ("<p>a <code>unclosed <p>still code <div>and more", ["a"]),
    ("<p>a <code>b</code> c</code> d</pre> e <pre>f</pre> g", ["a", "c", "d", "e", "g"]),
    ("</code></code></pre><p>a</p><code>b</code><p>c</p>", ["a", "c"]),
    ("<div translate=no>a<div>b</div>c<img alt=d></div>e", ["e"]),
    ("<div TRANSLATE='No' title=t>a</div><div translate=yes>b</div>", ["b"]),
    ("<img alt=a translate=no><img alt=b class=notranslate><img alt=c>", ["c"]),
    ("<span class='a notranslate b'>x<br>y</span>z<span class=notranslateish>w</span>", ["z", "w"]),
    ("<div class=notranslate><p>a<p>b</div>c", ["c"]),
    ("<code/>a<span translate=no />b", ["a", "b"]),
    ("<code>a<!-- </code> -->b</code>c", ["c"]),
    ("<pre>a</PRE>b<Kbd>c</kBD>d", ["b", "d"]),
])
def test_skipped_subtrees(source, expected):
    assert texts(source) == expected
    assert translate_html(source, identity) == source


@pytest.mark.parametrize("source, expected", [
    ("<p>a < b &amp; c > d</p>", ["a < b & c > d"]),
    ("<p>one<div>two</div></div></span>three", ["one", "two", "three"]),
    ("<b>bold <i>both</b> italic</i>", ["bold", "both", "italic"]),
    ("<!-- open comment <p>hidden</p>", []),
    ("<p>shown <a href=", ["shown"]),
    ("<p>shown</p><p title=\"open>hidden</p>", ["shown"]),
    ("<![ bogus ]>shown<!>too<! x >end", ["shown", "too", "end"]),
    ("x <", ["x <"]),
    ("a &amp", ["a &"]),
])
def test_malformed_input(source, expected):
    assert texts(source) == expected
    assert translate_html(source, identity) == source


def test_whitespace_around_a_piece_is_kept():
    source = "<p>\n   Hello world \n</p><i title=\"  Hi\t\">\r\n\tx\t</i>  <b> </b>\n<b>&nbsp;</b>"
    assert texts(source) == ["Hello world", "Hi", "x"]
    out = translate_html(source, lambda xs: ["T" for _ in xs])
    assert out == "<p>\n   T \n</p><i title=\"  T\t\">\r\n\tT\t</i>  <b> </b>\n<b>&nbsp;</b>"


def test_translate_is_called_once_with_every_text():
    calls = []

    def translate(batch):
        calls.append(list(batch))
        return [text.upper() for text in batch]

    assert translate_html(LINKS, translate) == translate_html(LINKS, lambda xs: [x.upper() for x in xs])
    # the sentence whole, then each element's own text, then the attribute, each once
    assert calls == [["Hello world, this is a nested link!", "world", "a nested link", "nested", "Go there"]]
    calls.clear()
    assert translate_html("<p> </p><script>x</script>", translate) == "<p> </p><script>x</script>"
    assert calls == []


def test_a_wrong_number_of_translations_is_an_error():
    with pytest.raises(ValueError, match="translate returned 1 strings for 3 texts"):
        translate_html("<p>a</p><p>b</p><p>c</p>", lambda xs: ["only one"])
    with pytest.raises(ValueError, match="4 strings for 3"):
        translate_html("<p>a</p><p>b</p><p>c</p>", lambda xs: xs + ["extra"])
    with pytest.raises(ValueError, match="2 translations for 3 pieces"):
        rebuild("<p>a</p><p>b</p><p>c</p>", extract("<p>a</p><p>b</p><p>c</p>"), ["x", "y"])
    with pytest.raises(ValueError, match="overlaps"):
        rebuild("abcdef", [Piece("abc", 0, 3, "text"), Piece("cd", 2, 4, "text")], ["x", "y"])


def test_rebuild_accepts_pieces_in_any_order():
    source = "<p>one</p><p>two</p>"
    pieces = extract(source)
    assert rebuild(source, pieces[::-1], ["2", "1"]) == "<p>1</p><p>2</p>"


FRAGMENTS = [
    "<p>", "</p>", "<b>", "</b>", "<code>", "</code>", "<pre>", "</pre>", "<br>", "<br/>", "<img alt='a b' src=x>",
    '<a title="t &amp; u" href=\'h\'>', "<i title=bare>", "<div translate=no>", "<p class=notranslate>",
    "<script>", "</script>", "<style>", "<textarea>", "<!-- c -->", "<!--", "-->", "<![CDATA[", "]]>",
    "<!DOCTYPE html>", "<?pi x?>", "<![if x]>", "<![ bogus", "<!x>", "</", "<", ">", "&", "&amp;", "&#169;",
    "&#x2014;", "&nbsp;", "&bogus;", "&#", '"', "'", "=", "/", "Hello", "world", "fish & chips", " ", "  ",
    "\n", "\t", "\r\n", "\u00e9t\u00e9", "x<y", "a=b",
]


def _fuzz_cases():
    rng = random.Random(20240611)
    cases = ["".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 14))) for _ in range(200)]
    alphabet = "<>/!-?&#;\"'= abpcode\n[]"
    cases += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))) for _ in range(100)]
    return cases


def skeleton(parts):
    """Markup with a NUL for each piece; a value quoted only after translation reads the same."""
    return "\0".join(parts).replace('"\0"', "\0")


@pytest.mark.parametrize("source", _fuzz_cases())
def test_fuzzed_input_never_raises_and_round_trips(source):
    pieces = extract(source)
    assert translate_html(source, identity) == source
    for piece in pieces:
        assert _html.unescape(source[piece.start:piece.end]) == piece.text
    # Marked translations land exactly on the pieces, escaped so they decode back; the
    # markup around them is untouched (the fuzz alphabet has no U+27E6/U+27E7).
    out = translate_html(source, lambda xs: [f"\u27e6{x}\u27e7" for x in xs])
    marked = re.compile("\u27e6(.*?)\u27e7", re.S)
    assert [_html.unescape(raw) for raw in marked.findall(out)] == [piece.text for piece in pieces]
    assert skeleton(marked.split(out)[::2]) == skeleton(outside(source, pieces))


def test_xml_translates_text_nodes_only_and_ignoring_adds_skipped_elements():
    from edge_translator.core.markup import HTML, XML

    source = '<doc title="T"><code>a b</code><p alt="A">Hello</p><keep>Bob</keep><br>Tail</br></doc>'
    assert [p.text for p in extract(source, XML)] == ["a b", "Hello", "Bob", "Tail"]
    assert [p.text for p in extract(source, XML.ignoring(["KEEP", " "]))] == ["a b", "Hello", "Tail"]
    assert [p.text for p in extract(source)] == ["T", "A", "Hello", "Bob", "Tail"]
    # a skipped element keeps its own translated attributes, as <textarea placeholder> does
    assert [p.text for p in extract(source, HTML.ignoring(["keep", "p"]))] == ["T", "A", "Tail"]
    upper = translate_html(source, lambda texts: [t.upper() for t in texts], XML.ignoring(["keep"]))
    assert upper == '<doc title="T"><code>A B</code><p alt="A">HELLO</p><keep>Bob</keep><br>TAIL</br></doc>'


# -- sentences across inline elements ------------------------------------------------------

def fake_translator(table):
    """Looks each text up in ``table``; anything else comes back upper-cased."""
    calls = []

    def translate(batch):
        calls.append(list(batch))
        return [table.get(text, text.upper()) for text in batch]
    return translate, calls


@pytest.mark.parametrize("source, table, expected", [
    ('<p>Read the <a href="/d" title="Docs">docs</a> first.</p>',
     {"Read the docs first.": "先读文档。", "docs": "文档", "Docs": "文档页"},
     '<p>先读<a href="/d" title="文档页">文档</a>。</p>'),
    ("<p>Click <b>Save</b> or <i>Cancel</i>.</p>",
     {"Click Save or Cancel.": "点击保存或取消。", "Save": "保存", "Cancel": "取消"},
     "<p>点击<b>保存</b>或<i>取消</i>。</p>"),
    # the model put the elements the other way round: the tags follow their text
    ("<p>The <em>red</em> and the <strong>blue</strong> one</p>",
     {"The red and the blue one": "蓝色的和红色的", "red": "红色", "blue": "蓝色"},
     "<p><strong>蓝色</strong>的和<em>红色</em>的</p>"),
    # an element inside another is placed inside the span found for it
    ("<p>Please <strong>read <a href=/m>the manual</a></strong> first.</p>",
     {"Please read the manual first.": "请先阅读手册。", "read the manual": "阅读手册", "the manual": "手册"},
     "<p>请先<strong>阅读<a href=/m>手册</a></strong>。</p>"),
    # whitespace runs (a line break in the source) are one space in the sentence
    ("<li>Fish &amp;\n   <b>chips</b> today</li>", {"Fish & chips today": "今天有炸鱼&薯条", "chips": "薯条"},
     "<li>今天有炸鱼&amp;<b>薯条</b></li>"),
])
def test_a_sentence_across_inline_elements_is_translated_whole(source, table, expected):
    translate, calls = fake_translator(table)
    assert translate_html(source, translate) == expected
    (batch,) = calls
    whole = next(text for text in table if len(text) > 10)
    assert batch[0] == whole  # the whole sentence first, then each element's own text


@pytest.mark.parametrize("source", [
    "<p>Hello <b>world</p>",  # closed outside the run
    "<p>Crossed <b>bold <i>both</b> italic</i> end.</p>",  # not nested, crossed
    "<p>Stray</b> end tag and <i>more</i></p>",
    "<p>An <span></span> empty element.</p>",  # nothing to put it around
    "<p>Run <code>make</code> now.</p>",  # a skipped element is not inline
])
def test_runs_that_are_not_simple_sentences_are_translated_piece_by_piece(source):
    translate, calls = fake_translator({})
    assert not any(isinstance(u, Block) for u in plan(source))
    pieces = extract(source)
    assert translate_html(source, translate) == rebuild(source, pieces, [p.text.upper() for p in pieces])


def test_a_block_left_as_it_is_keeps_its_source_bytes():
    source = "<p>Fish &amp; <b title='x &amp; y'>chips</b>&nbsp;to&#32;go</p>"
    (block, attribute) = plan(source)
    assert isinstance(block, Block) and block.text == "Fish & chips\u00a0to go" and attribute.text == "x & y"
    assert translate_html(source, identity) == source


def test_xml_joins_no_runs():
    from edge_translator.core.markup import XML

    assert all(isinstance(u, Piece) for u in plan("<p>Hello <b>world</b> again</p>", XML))


def _tags(html):
    return re.findall(r"<[^>]*>", html)


def _well_nested(html):
    stack = []
    for tag in _tags(html):
        name = re.match(r"</?([a-z]+)", tag).group(1)
        if tag.startswith("</"):
            if not stack or stack.pop() != name:
                return False
        else:
            stack.append(name)
    return not stack


def _sentences(seed):
    """Sentences of words with inline elements around some of them, up to three deep, the
    elements with attributes that are and are not translated."""
    rng = random.Random(seed)
    words = "the quick brown fox jumps over a lazy dog & cat <with> seven 'quoted' words".split()
    names = sorted(INLINE_ELEMENTS)

    def phrase(n, depth):
        parts, i = [], 0
        while i < n:
            if rng.random() < 0.3 and depth < 3:
                k = rng.randint(1, min(4, n - i))
                name = rng.choice(names)
                attrs = rng.choice(["", ' href="/x"', " title='Tip &amp; trick'", ' class="c" title=t'])
                parts.append(f"<{name}{attrs}>{phrase(k, depth + 1)}</{name}>")
                i += k
            else:
                parts.append(_html.escape(rng.choice(words), quote=False))
                i += 1
        return rng.choice([" ", "\n  "]).join(parts)

    for _ in range(60):
        yield "<p>" + phrase(rng.randint(2, 12), 0) + rng.choice([".", "!", ""]) + "</p>"


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("style", ["reversed", "unrelated"])
def test_every_tag_comes_back_once_well_nested_around_the_translation(seed, style):
    """By class: inline elements in random sentences, translated by a fake whose output
    holds the elements' own translations (words reversed) or nothing of them."""
    def translate(batch):
        if style == "reversed":
            return [" ".join(reversed(text.upper().split())) for text in batch]
        return ["完全不同的译文" if len(text) > 12 else text[::-1] for text in batch]

    for source in _sentences(seed):
        out = translate_html(source, translate)
        units = plan(source)
        before = [t for t in _tags(source)]
        after = [t for t in _tags(out)]
        assert sorted(t for t in after if "title" not in t) == sorted(t for t in before if "title" not in t)
        assert len(after) == len(before) and _well_nested(out), (source, out)
        assert translate_html(source, identity) == source
        for unit in units:
            if isinstance(unit, Block):  # the block's text, tags removed, is its translation
                region = out[3:-4]
                assert _html.unescape(re.sub(r"<[^>]*>", "", region)) == translate([unit.text])[0], (source, out)


@pytest.mark.parametrize("placed", [None, (), ((0, 1),), (None, None), ((2, 9), (0, 4))])
def test_a_block_written_with_missing_or_overlapping_placements_keeps_every_tag(placed):
    """A document job's placements may be missing (an old journal) or overlap; every
    element still comes back once, well nested, around part of the translation."""
    from edge_translator.core.markup import rebuild_units

    source = "<p>A <b class=k>big</b> cat <i>sat</i> down</p>"
    units = plan(source)
    out = rebuild_units(source, units, ["一只大猫坐下了"], [placed])
    assert sorted(_tags(out)) == sorted(_tags(source)) and _well_nested(out)
    assert re.sub(r"<[^>]*>", "", out) == "一只大猫坐下了"


@pytest.mark.parametrize("placed", [None, ((0, 3), (5, 7)), ((4, 7), (0, 2)), ((0, 7), None), ((2, 3), (2, 3))])
def test_a_child_placed_outside_its_parent_is_cut_into_it(placed):
    """A document job places marks flat, with no parents; the child's tags still end up
    inside the parent's."""
    from edge_translator.core.markup import rebuild_units

    source = "<p>The <a href=/x>big <b>red</b> bus</a> left</p>"
    units = plan(source)
    assert units[0].parents == (None, 0)
    out = rebuild_units(source, units, ["那辆红色大巴士走了"], [placed])
    assert sorted(_tags(out)) == sorted(_tags(source)) and _well_nested(out), out
    assert out.index("<a") < out.index("<b>") < out.index("</b>") < out.index("</a>")
    assert re.sub(r"<[^>]*>", "", out[3:-4]) == "那辆红色大巴士走了"
