"""The document job's parts without a model: mark placement, the journal, output names, encodings."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_translator.core.cache import CachedTranslation, CacheKey
from edge_translator.documents import FORMATS, format_for, load_format
from edge_translator.documents.base import DocumentError, Translated
from edge_translator.core.inline import place_marks
from edge_translator.documents.plan import JobOptions, discover, output_path
from edge_translator.documents.journal import JobCache, Journal


def test_a_mark_is_placed_where_its_own_translation_is():
    source = "Click Save to keep your work."
    marks = [(6, 10)]
    assert place_marks(source, marks, "点击保存以保留您的工作。", ["保存"]) == ((2, 4),)


def test_names_left_untranslated_are_found_verbatim_and_nearest_wins():
    source = "Acme makes tools and Acme sells them."
    translation = "Acme制造工具，Acme销售它们。"
    spans = place_marks(source, [(0, 4), (21, 25)], translation, [None, None])
    assert spans == ((0, 4), (9, 13))


def test_a_mark_not_found_falls_back_to_its_relative_place_on_whole_words():
    source = "one two three four"
    translation = "alpha beta gamma delta"
    (span,) = place_marks(source, [(8, 13)], translation, ["nothing like it"])
    start, end = span
    assert translation[start:end].strip() == translation[start:end]
    assert (start == 0 or translation[start - 1] == " ") and (end == len(translation) or translation[end] == " ")


def test_a_mark_over_the_whole_text_covers_the_whole_translation():
    assert place_marks("Hello there.", [(0, 12)], "你好。", ["你好。"]) == ((0, 3),)


@given(source=st.text(min_size=1, max_size=40), translation=st.text(max_size=40),
       cuts=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=4),
       alone=st.lists(st.one_of(st.none(), st.text(max_size=6)), min_size=4, max_size=4))
def test_placed_marks_are_always_inside_the_translation(source, translation, cuts, alone):
    marks = [(min(a, b) % (len(source) + 1), max(a, b) % (len(source) + 1)) for a, b in cuts]
    marks = [(a, b) if a <= b else (b, a) for a, b in marks]
    spans = place_marks(source, marks, translation, alone[:len(marks)])
    assert len(spans) == len(marks)
    for span in spans:
        if span is not None:
            assert 0 <= span[0] < span[1] <= len(translation)


def test_journal_resumes_and_forgets_a_changed_input(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    assert journal.begin("out.txt", "in.txt", "sha-1", "s", 3) == set()
    journal.save("out.txt", 0, Translated("甲", ((0, 1),)))
    journal.save("out.txt", 2, Translated("丙", (None,)), warning="term 'X' is missing")
    journal.close()
    journal = Journal(tmp_path / "j.sqlite")
    assert journal.begin("out.txt", "in.txt", "sha-1", "s", 3) == {0, 2}
    assert list(journal.translations("out.txt")) == [Translated("甲", ((0, 1),)), Translated("丙", (None,))]
    assert journal.warnings("out.txt") == ["term 'X' is missing"]
    assert journal.begin("out.txt", "in.txt", "sha-2", "s", 3) == set()
    assert journal.warnings("out.txt") == [] and list(journal.translations("out.txt")) == []
    assert journal.begin("out.txt", "in.txt", "sha-2", "other settings", 3) == set()
    journal.close()


def test_a_file_that_is_not_a_journal_is_one_clear_error(tmp_path):
    path = tmp_path / "j.sqlite"
    path.write_bytes(b"garbage" * 200)
    from edge_translator.core.errors import InputError

    with pytest.raises(InputError, match="cannot use the job journal"):
        Journal(path)


def test_job_cache_counts_one_decode_per_sentence_and_run(tmp_path):
    journal = Journal(tmp_path / "j.sqlite")
    cache = JobCache(None)
    cache.attach(journal)
    k = CacheKey("m", "Hello.", "zh-Hans", 1, None, True)
    v = CachedTranslation("你好。", (1, 2), "eos", -0.5)
    assert cache.get(k) is None
    cache.put(k, v)
    cache.put(k, v)  # the same decode delivered to a second place in one text
    assert cache.get(k).text == "你好。" and cache.decoded == 1 and cache.hits == 1
    again = JobCache(None)  # a second run that decodes it again is counted
    again.attach(journal)
    again.put(k, v)
    assert journal.decode_counts() == {next(iter(journal.decode_counts())): 2}
    hit = again.get(k)
    assert hit.ids == (1, 2) and not math.isnan(hit.score)


def test_output_names():
    assert output_path(Path("a/b/notes.txt"), None, "zh-Hans", None) == Path("a/b/notes.zh-Hans.txt")
    assert output_path(Path("in/x/y.md"), Path("in"), "zh-Hant", Path("out")) == Path("out/x/y.zh-Hant.md")


def test_discover_passes_over_hidden_unknown_and_earlier_outputs(tmp_path):
    for name in ("a.txt", "b.MD", "c.zh-Hans.txt", ".hidden.txt", "d.exe", "sub/e.srt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("Hello.\n", "utf-8")
    flat = discover([tmp_path], JobOptions(), "zh-Hans")
    assert sorted(p.input.name for p in flat) == ["a.txt", "b.MD"]
    deep = discover([tmp_path], JobOptions(recursive=True), "zh-Hans")
    assert sorted(p.input.name for p in deep) == ["a.txt", "b.MD", "e.srt"]
    named = discover([tmp_path / "d.exe"], JobOptions(), "zh-Hans")
    assert named[0].status == "skipped" and "unsupported" in named[0].message
    from edge_translator.core.errors import InputError

    with pytest.raises(InputError, match="does not exist"):
        discover([tmp_path / "missing"], JobOptions(), "zh-Hans")


def test_every_registered_format_loads_and_reads_its_suffixes():
    for info in FORMATS:
        fmt = load_format(info)
        assert fmt.name == info.name and set(info.suffixes) <= set(fmt.suffixes)
        for suffix in info.suffixes:
            assert format_for(Path("x" + suffix.upper())) == info


@pytest.mark.parametrize("data, message", [
    (b"\xff\xfe" + "Hi\n".encode("utf-16-le")[:-1], "UTF-16-LE"),
    (b"ok\n\x00\x00binary\n", "NUL bytes"),
    (b"one\ntwo\nthr\xe9e\n", r"x\.txt:3: .*0xE9"),
])
def test_unsupported_encodings_are_refused_with_the_line(tmp_path, data, message):
    from edge_translator.documents import textio

    path = tmp_path / "x.txt"
    path.write_bytes(data)
    with pytest.raises(DocumentError, match=message):
        list(textio.lines(path))


def test_a_mark_without_punctuation_does_not_take_the_full_stop():
    source = "I live in a house."
    (span,) = place_marks(source, [(12, 17)], "我住在房子里。", ["房子里。"])
    assert "我住在房子里。"[span[0]:span[1]] == "房子里"
    (whole,) = place_marks("Stop. Go now.", [(0, 5)], "停。现在走。", ["停。"])
    assert "停。现在走。"[whole[0]:whole[1]] == "停。"


def _two_segment_file(tmp_path: Path, name: str) -> Path:
    """A small file of each format with two or more segments to translate."""
    samples = {
        "text": "The cat sleeps.\n\nThe dog runs.\n",
        "markdown": "# A title\n\nThe cat sleeps.\n",
        "srt": "1\n00:00:01,000 --> 00:00:02,000\nThe cat sleeps.\n\n2\n00:00:03,000 --> 00:00:04,000\nThe dog runs.\n",
        "vtt": "WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nThe cat sleeps.\n\n00:00:03.000 --> 00:00:04.000\nThe dog runs.\n",
        "html": "<html><body><p>The cat sleeps.</p><p>The dog runs.</p></body></html>\n",
        "csv": "text,id\nThe cat sleeps.,1\nThe dog runs.,2\n",
        "tsv": "text\tid\nThe cat sleeps.\t1\nThe dog runs.\t2\n",
    }
    info = next(i for i in FORMATS if i.name == name)
    path = tmp_path / f"sample{info.suffixes[0]}"
    if name == "docx":
        import docx

        document = docx.Document()
        document.add_paragraph("The cat sleeps.")
        document.add_paragraph("The dog runs.")
        document.save(path)
    elif name == "pptx":
        from pptx import Presentation

        deck = Presentation()
        for title in ("The cat sleeps.", "The dog runs."):
            deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = title
        deck.save(path)
    elif name == "pdf":
        from .test_doc_pdf import _pdf

        _pdf(path, pages=2)
    elif name == "odf":
        from .test_doc_opendoc import _odt

        _odt(path)
    elif name == "epub":
        from .test_doc_epub import _book

        _book(path)
    elif name == "xlsx":
        import openpyxl

        book = openpyxl.Workbook()
        for row in (["text", "id"], ["The cat sleeps.", 1], ["The dog runs.", 2]):
            book.active.append(row)
        book.save(path)
    else:
        path.write_text(samples[name], encoding="utf-8")
    return path


@pytest.mark.parametrize("name", [info.name for info in FORMATS])
@pytest.mark.parametrize("change", ["fewer", "more"])
def test_a_write_with_translations_that_do_not_match_the_file_is_refused(tmp_path, name, change):
    """Every format: when the file changed between reading its segments and writing it back
    (so fewer or more translations come than it has segments), writing fails with one
    DocumentError naming the file, instead of a silently shifted or cut translation."""
    import io

    from edge_translator.documents.base import FormatOptions

    path = _two_segment_file(tmp_path, name)
    doc = load_format(format_for(path)).open(path, FormatOptions(columns=("text",)))
    segments = list(doc.segments())
    assert len(segments) >= 2
    translated = [Translated("译" + s.text) for s in segments]
    translated = translated[:-1] if change == "fewer" else translated + [Translated("多余")]
    with pytest.raises(DocumentError) as caught:
        doc.write(iter(translated), io.BytesIO())
    message = str(caught.value)
    assert str(path) in message and "change" in message and "again" in message and "\n" not in message
