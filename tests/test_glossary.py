"""The glossary: its file format, what it matches, and masking terms through a translation."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_translator.documents.base import DocumentError
from edge_translator.documents.glossary import Glossary, PlaceholderForm, tolerant
from edge_translator.bench import placeholders

#: A form with a number and a word, so the unmasking tests see both kinds damaged.
PERCENT = PlaceholderForm("percent", "{}%", names=("30%", "Tatoeba"), start=31)
#: The same, the word first.
STYLE_0 = PlaceholderForm("tatoeba", "{}%", names=("Tatoeba",), start=30)

GLOSSARY = "router\t路由器\nAcme\nAcme Cloud\t=\nre:\\b[A-Z]{2,}-\\d+\\b\nre:\\bSKU (\\d+)\\b\t货号\\1\n"


def write(tmp_path, text: str | bytes):
    path = tmp_path / "terms.tsv"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


def spans(glossary: Glossary, text: str, keep=()) -> list[tuple[str, str, str]]:
    """(matched text, restore_to, kind) of each match."""
    return [(text[a:b], restore, kind) for (a, b), restore, kind in glossary.matches(text, keep)]


# --- loading ---------------------------------------------------------------------------------


def test_load_reads_every_kind_of_line(tmp_path):
    text = "\ufeff# terms for the manual\n\nrouter\t路由器\n  # indented comment\nAcme\nAcme Cloud\t=\n" \
           "Widget\t\nre:\\b[A-Z]{2,}-\\d+\\b\nre:\\bSKU (\\d+)\\b\t货号\\1\r\n"
    glossary = Glossary.load(write(tmp_path, text))
    found = [(e.source, e.target, e.regex, e.line) for e in glossary.entries]
    assert found == [("router", "路由器", False, 3), ("Acme", None, False, 5), ("Acme Cloud", None, False, 6),
                     ("Widget", None, False, 7), (r"\b[A-Z]{2,}-\d+\b", None, True, 8),
                     (r"\bSKU (\d+)\b", "货号\\1", True, 9)]


def test_empty_glossary_has_only_the_built_ins():
    assert Glossary.empty().entries == ()
    assert spans(Glossary.empty(), "Mail a@b.io or see http://x.org now.") == [
        ("a@b.io", "a@b.io", "verbatim"), ("http://x.org", "http://x.org", "verbatim")]


@pytest.mark.parametrize("text, line, message", [
    ("ok\t好\nre:[unclosed\n", 2, "bad regular expression '[unclosed'"),
    ("a\tb\tc\n", 1, "3 columns"),
    ("\t中文\n", 1, "the term (first column) is empty"),
    ("x\ny\nre:\n", 3, "the regular expression after 're:' is empty"),
    ("re:a*\n", 1, "matches empty text"),
    ("re:(a)b\t\\2\n", 1, "bad replacement '\\\\2'"),
    ("re:(?P<n>a)b\t\\g<m>\n", 1, "bad replacement"),
    ("router\t路由器\n# c\nRouter\tx\nrouter\t路由\n", 4, "already in the glossary on line 1"),
])
def test_bad_lines_name_the_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(DocumentError) as caught:
        Glossary.load(path)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert message in str(caught.value)


def test_a_repeated_identical_line_is_fine(tmp_path):
    assert len(Glossary.load(write(tmp_path, "router\t路由器\nrouter\t路由器\n")).entries) == 1


def test_a_file_that_is_not_utf8_is_refused_with_its_line(tmp_path):
    path = write(tmp_path, "router\t路由器\n".encode() + "Café\n".encode("latin-1"))
    with pytest.raises(DocumentError, match=r"terms\.tsv:2: the glossary is not UTF-8"):
        Glossary.load(path)


def test_a_missing_file_is_a_document_error(tmp_path):
    with pytest.raises(DocumentError, match="cannot read the glossary"):
        Glossary.load(tmp_path / "nope.tsv")


# --- matching --------------------------------------------------------------------------------


def test_terms_match_whole_words_only():
    glossary = Glossary.parse("router\t路由器\n")
    assert spans(glossary, "routers and subrouter, router_x, router.") == [("router", "路由器", "term")]
    assert spans(glossary, "用router连接") == [("router", "路由器", "term")]  # CJK is not part of a word


def test_lowercase_terms_ignore_case_capitalised_terms_do_not():
    glossary = Glossary.parse("router\t路由器\nAcme\n")
    found = spans(glossary, "Router ROUTER router Acme acme ACME")
    assert found == [("Router", "路由器", "term"), ("ROUTER", "路由器", "term"), ("router", "路由器", "term"),
                     ("Acme", "Acme", "verbatim")]


def test_a_lowercase_term_is_kept_as_written_in_the_text():
    assert spans(Glossary.parse("python\n"), "Python rocks") == [("Python", "Python", "verbatim")]


def test_the_longest_term_wins():
    glossary = Glossary.parse("York\t约克\nNew York\t纽约\nNew York City\t纽约市\n")
    assert spans(glossary, "New York City, New York and York.") == [
        ("New York City", "纽约市", "term"), ("New York", "纽约", "term"), ("York", "约克", "term")]


def test_a_capitalised_term_beats_a_lowercase_one_of_the_same_length():
    glossary = Glossary.parse("apple\t苹果\nApple\n")
    assert spans(glossary, "Apple sells apple juice") == [("Apple", "Apple", "verbatim"),
                                                            ("apple", "苹果", "term")]


def test_regexes_keep_or_translate_their_matches():
    glossary = Glossary.parse(GLOSSARY)
    assert spans(glossary, "Order XR-2040 or SKU 17 today") == [("XR-2040", "XR-2040", "verbatim"),
                                                               ("SKU 17", "货号17", "term")]


def test_urls_and_addresses_lose_sentence_punctuation():
    text = "See https://en.wikipedia.org/wiki/Rust_(language), www.acme.com. Mail ann.lee+x@mail.acme.co.uk."
    assert [s[0] for s in spans(Glossary.empty(), text)] == [
        "https://en.wikipedia.org/wiki/Rust_(language)", "www.acme.com", "ann.lee+x@mail.acme.co.uk"]
    assert [s[0] for s in spans(Glossary.empty(), "(see ftp://files.acme.com/a.zip)")] == [
        "ftp://files.acme.com/a.zip"]


def test_overlaps_go_to_the_earliest_then_the_longest():
    glossary = Glossary.parse("big data\t大数据\ndata center\t数据中心\nre:\\bcenter of \\w+\n")
    assert spans(glossary, "a big data center of gravity") == [("big data", "大数据", "term"),
                                                              ("center of gravity", "center of gravity", "verbatim")]
    # a glossary term that holds a URL wins over the built-in pattern of the same span
    glossary = Glossary.parse("www.acme.com\t官网\n")
    assert spans(glossary, "go to www.acme.com now") == [("www.acme.com", "官网", "term")]


def test_matches_touching_kept_spans_are_dropped():
    glossary = Glossary.parse("router\t路由器\n")
    text = "run `router --help` on the router"
    keep = [(4, 19)]
    assert spans(glossary, text, keep) == [("`router --help`", "`router --help`", "keep"),
                                           ("router", "路由器", "term")]
    assert spans(glossary, "routerx", [(6, 7)]) == [("x", "x", "keep")]


# --- masking and restoring -------------------------------------------------------------------


def test_mask_then_unmask_gives_the_terms_back():
    glossary = Glossary.parse(GLOSSARY)
    text = "Buy the Acme router XR-2040 at https://acme.com/shop or mail sales@acme.com."
    masked = glossary.mask(text)
    assert [(s.source, s.kind) for s in masked.slots] == [
        ("Acme", "verbatim"), ("router", "term"), ("XR-2040", "verbatim"), ("https://acme.com/shop", "verbatim"),
        ("sales@acme.com", "verbatim")]
    for slot in masked.slots:
        assert slot.source not in masked.text
        assert masked.text.count(slot.placeholder) == 1
    restored = glossary.unmask(masked.text, masked)
    assert restored.text == text.replace("router", "路由器")
    assert restored.missing == () and not restored.mangled


def test_text_without_terms_is_left_alone():
    masked = Glossary.parse(GLOSSARY).mask("Nothing to see here.")
    assert masked.text == "Nothing to see here." and masked.slots == ()
    assert Glossary.empty().unmask("没什么。", masked).text == "没什么。"


def test_the_two_styles_differ_and_others_are_refused():
    glossary = Glossary.parse("Acme\n")
    first, second = glossary.mask("Acme and Acme", style=0), glossary.mask("Acme and Acme", style=1)
    assert first.text != second.text
    assert {s.placeholder for s in first.slots} == {s.placeholder for s in second.slots}
    with pytest.raises(ValueError, match="style must be 0 to 1"):
        glossary.mask("Acme", style=2)


def test_placeholders_the_text_already_holds_are_skipped():
    glossary = Glossary.parse("Acme\n")
    for style in (0, 1):
        masked = glossary.mask("Tatoeba says 30% of Acme and 31 % of CD users like tatoeba and Linux.", style=style)
        used = [s.placeholder for s in masked.slots]
        assert used and not {"Tatoeba", "CD", "Linux", "30%", "31%"} & set(used)
        assert glossary.unmask(masked.text, masked).text.count("Acme") == 1


def test_a_kept_span_touching_a_word_is_spaced_off():
    glossary = Glossary.empty()
    masked = glossary.mask("call`fn`now", keep=[(4, 8)])
    restored = glossary.unmask(masked.text, masked)
    assert restored.missing == () and "`fn`" in restored.text


def test_what_models_do_to_placeholders_is_tolerated():
    glossary = Glossary.parse("router\t路由器\n")
    masked = glossary.mask("The router and the router at www.acme.com.", style=PERCENT)
    names = [s.placeholder for s in masked.slots]
    assert names == ["30%", "Tatoeba", "31%"]
    damaged = "在 ＴＡＴＯ ebа 上的 ３ ０ ％和31％ 。"  # noqa: RUF001 - full-width on purpose
    restored = glossary.unmask(damaged.replace("ebа", "eba"), masked)
    assert restored.missing == () and restored.mangled
    assert restored.text == "在路由器上的路由器和www.acme.com 。"


@pytest.mark.parametrize("translation, lost", [
    ("路由器在 Tatoeba。", ["30%"]),  # deleted
    ("30%和30%，Tatoeba。", ["30%"]),  # duplicated
    ("三十和 Tatoeba。", ["30%"]),  # translated
    ("300%和 Tatoeba。", ["30%"]),  # part of a longer number
    ("30%和 Tatoebas。", ["Tatoeba"]),  # part of a longer word
    ("3 0%和 Tato-eba。", ["Tatoeba"]),  # beyond blanks
    ("没有了。", ["30%", "Tatoeba"]),
])
def test_damaged_placeholders_are_reported_never_guessed(translation, lost):
    glossary = Glossary.parse("router\t路由器\nAcme\n")
    masked = glossary.mask("The router by Acme.", style=PERCENT)
    restored = glossary.unmask(translation, masked)
    assert [s.placeholder for s in restored.missing] == lost
    for slot in masked.slots:
        if slot not in restored.missing:
            assert restored.text.count(slot.restore_to) == 1


def test_a_duplicated_placeholder_is_restored_at_each_place_but_reported():
    glossary = Glossary.parse("Acme\n")
    masked = glossary.mask("Acme is here.")
    restored = glossary.unmask("Tatoeba和Tatoeba。", masked)
    assert restored.text == "Acme和Acme。" and restored.missing == masked.slots


@pytest.mark.parametrize("translation, expected", [
    ("我 Tatoeba 你", "我路由器你"),  # CJK on both sides of both gaps
    ("我 Tatoeba。", "我路由器。"),
    ("Tatoeba 30%。", "路由器 Acme。"),  # a Chinese term before a kept English one: spaces stay
    ("我 30% 你", "我 Acme 你"),  # a kept English term keeps the model's spaces
    ("我 30%Tatoeba 你", "我 Acme路由器你"),
    ("Tom Tatoeba 你", "Tom 路由器你"),
    ("我\nTatoeba 你", "我\n路由器你"),  # a line break is never removed
])
def test_spaces_around_a_restored_term_go_only_between_cjk(translation, expected):
    glossary = Glossary.parse("router\t路由器\nAcme\n")
    masked = glossary.mask("router Acme", style=STYLE_0)
    assert glossary.unmask(translation, masked).text == expected


WORDS = ["the", "router", "Router", "Acme", "Acme Cloud", "XR-2040", "SKU 12", "http://a.io/x?y=1",
         "www.b.org", "c.d@e.com", "is", "de", "good", "30", "%", "Tatoeba", "31%", "8", "中文", "。"]


@st.composite
def documents(draw):
    """A text of glossary words with some tokens marked as kept spans."""
    tokens = draw(st.lists(st.sampled_from(WORDS + ["`code`", "`x y`"]), min_size=1, max_size=14))
    text, keep = "", []
    for token in tokens:
        if text:
            text += draw(st.sampled_from([" ", " ", ", ", "\n"]))
        if token.startswith("`"):
            keep.append((len(text), len(text) + len(token)))
        text += token
    return text, keep


def damage(text: str, masked, rng: random.Random) -> str:
    """A "translation": the placeholders shuffled into Chinese, some of them spaced,
    full-width or in another case."""
    names = [s.placeholder for s in masked.slots]
    rng.shuffle(names)
    out = []
    for name in names:
        form = rng.randrange(4)
        if form == 1:
            name = " ".join(name)
        elif form == 2:
            name = "".join(chr(ord(c) + 0xFEE0) for c in name)
        elif form == 3:
            name = name.swapcase()
        out.append(name)
    return "这是" + "，".join(out) + "。"


@settings(max_examples=300, deadline=None)
@given(documents(), st.sampled_from([0, 1]), st.randoms(use_true_random=False))
def test_every_term_comes_back_through_a_translation(document, style, rng):
    glossary = Glossary.parse(GLOSSARY)
    text, keep = document
    masked = glossary.mask(text, keep, style)
    for slot in masked.slots:
        assert len(tolerant(slot.placeholder).findall(masked.text)) == 1
    itself = glossary.unmask(masked.text, masked)
    assert itself.missing == ()
    for slot in masked.slots:
        assert slot.restore_to in itself.text
    if all(s.kind != "term" for s in masked.slots):
        assert itself.text == text
    moved = glossary.unmask(damage(text, masked, rng), masked)
    assert moved.missing == ()
    for slot in masked.slots:
        assert slot.restore_to in moved.text
    if masked.slots:
        lost = rng.choice(masked.slots)
        broken = masked.text.replace(lost.placeholder, "", 1)
        assert lost in glossary.unmask(broken, masked).missing
        doubled = masked.text.replace(lost.placeholder, lost.placeholder + " " + lost.placeholder, 1)
        assert lost in glossary.unmask(doubled, masked).missing


def test_a_form_hands_out_its_names_then_numbers():
    form = PlaceholderForm("x", "[{}]", names=("A", "B"), start=5)
    assert [n for n, _ in zip(form.candidates(), range(4))] == ["A", "B", "[5]", "[6]"]
    masked = Glossary.parse("Acme\n").mask("Acme [5] Acme Acme", style=form)
    assert [s.placeholder for s in masked.slots] == ["A", "B", "[6]"]


# --- the demo model --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo():
    from edge_translator import Translator
    from edge_translator.core.translator import DEFAULT_MODEL, models_dir

    with Translator.load(models_dir() / DEFAULT_MODEL, threads=1) as translator:
        yield translator


def test_a_url_and_a_brand_survive_the_demo_model(demo):
    glossary = Glossary.parse("Acme\n")
    text = "Acme is a good company. Visit https://acme.example.com for details."
    for style in (0, 1):  # what the job does: style 0, then one retry
        masked = glossary.mask(text, style=style)
        restored = glossary.unmask(demo.translate(masked.text), masked)
        if not restored.missing:
            break
    assert restored.missing == ()
    assert "Acme" in restored.text and "https://acme.example.com" in restored.text
    assert re.search("[\u4e00-\u9fff]", restored.text)


def test_the_demo_model_never_loses_a_term_in_silence(demo):
    glossary = Glossary.parse("Acme\nrouter\t路由器\n")
    sentences = placeholders.load_sentences(limit=12)
    rng = random.Random(3)
    texts = [placeholders.insert_terms(s, ["Acme", "router"], rng) for s in sentences]
    for style in (0, 1):
        masks = [glossary.mask(t, style=style) for t in texts]
        for masked, out in zip(masks, demo.translate_batch([m.text for m in masks])):
            restored = glossary.unmask(out, masked)
            kept = all(restored.text.count(s.restore_to) == 1 for s in masked.slots)
            assert kept or restored.missing


# --- the measurement tool --------------------------------------------------------------------


class Copier:
    """A fake translator that keeps the placeholders it can read, and drops '%' ones."""

    def translate_batch(self, texts):
        return [re.sub(r"\d+%", "", t) for t in texts]


def test_measure_counts_survivors_per_kind_and_pair():
    sentences = ["one two three four", "five six seven eight nine"]
    forms = [STYLE_0, PlaceholderForm("percent only", "{}%", start=30)]
    result = placeholders.measure(Copier(), sentences, forms)
    first, second = result["styles"]["tatoeba"], result["styles"]["percent only"]
    assert first["brand"] == 1.0 and first["brand+url"] == 0.0
    assert second["all"] == 0.0
    assert result["pairs"]["tatoeba + percent only"]["brand"] == 1.0
    assert "tatoeba" in placeholders.report(result)


def test_load_sentences_reads_the_committed_test_set():
    sentences = placeholders.load_sentences(limit=5, min_words=4)
    assert len(sentences) == 5 and all(len(s.split()) >= 4 for s in sentences)


def test_overlapping_keep_spans_are_refused():
    with pytest.raises(ValueError, match="not overlap"):
        Glossary.empty().mask("abcdef", keep=[(0, 3), (2, 4)])
    with pytest.raises(ValueError, match="lie in the text"):
        Glossary.empty().mask("abc", keep=[(2, 9)])
