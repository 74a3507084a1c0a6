"""Plain-text documents: identity byte for byte, how lines become segments, streaming, errors."""

from __future__ import annotations

import codecs
import io
import re
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_translator.documents import plaintext
from edge_translator.documents.base import DocumentError, FormatOptions, Translated

FORMAT = plaintext.FORMAT


def _open(path: Path):
    return FORMAT.open(path, FormatOptions())


def _roundtrip(path: Path, translate=lambda text: text) -> bytes:
    doc = _open(path)
    out = io.BytesIO()
    doc.write((Translated(translate(seg.text)) for seg in doc.segments()), out)
    return out.getvalue()


def _fake(text: str) -> str:
    """A fake translator: every ASCII word becomes a Chinese-looking string."""
    return re.sub(r"[A-Za-z]+", lambda m: "译" * len(m.group()), text)


def _encode(text: str, encoding: str) -> bytes:
    if encoding == "utf-16-le":
        return codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    if encoding == "utf-16-be":
        return codecs.BOM_UTF16_BE + text.encode("utf-16-be")
    return text.encode(encoding)


def test_format_declares_name_and_suffixes():
    assert FORMAT.name == "text"
    assert FORMAT.suffixes == (".txt",)


# --- identity ------------------------------------------------------------------------

_words = st.lists(st.sampled_from(["the", "Cat", "sat", "on", "a", "mat", "naïve", "数据", "42", "x-ray",
                                   "“quoted”", "(see", "it)", "well-", "known"]), min_size=1, max_size=14)
_line = st.builds(
    lambda indent, marker, words, punct, trail: indent + marker + " ".join(words) + punct + trail,
    st.sampled_from(["", "", "  ", "    ", "\t", " \t"]),
    st.sampled_from(["", "", "", "- ", "* ", "1. ", "12) ", "(3) ", "a) ", "• "]),
    _words,
    st.sampled_from(["", "", ",", ".", "!", "?", ":", ";", "…", ".”", "---"]),
    st.sampled_from(["", "", " ", "\t", "  "]),
)
_any_line = st.one_of(_line, _line, _line, st.sampled_from(["", "   ", "\t", "-----", "* * *", "2024", "\u3000"]))


@st.composite
def _documents(draw) -> str:
    lines = draw(st.lists(_any_line, max_size=30))
    endings = draw(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + ending for line, ending in zip(lines, endings))
    if text and draw(st.booleans()):
        text = text.rstrip("\r\n")
    return text


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_documents(), encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16-le", "utf-16-be"]))
def test_identity_is_byte_exact(tmp_path, text, encoding):
    path = tmp_path / "doc.txt"
    data = _encode(text, encoding)
    path.write_bytes(data)
    assert _roundtrip(path) == data
    for seg in _open(path).segments():
        assert seg.text and seg.text == seg.text.strip()
        assert "\n" not in seg.text and "\r" not in seg.text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=_documents())
def test_fake_translation_keeps_line_structure(tmp_path, text):
    path = tmp_path / "doc.txt"
    path.write_bytes(text.encode())
    out = _roundtrip(path, _fake).decode()
    item = re.compile(r"^[ \t]*[a-z]\)[ \t]+")  # a list marker, kept as it is
    assert not any(re.search(r"[A-Za-z]", item.sub("", line)) for line in out.splitlines())
    # Every blank or letterless line comes back; translated lines keep indent and marker.
    kept = [line for line in text.splitlines(keepends=True) if not any(ch.isalpha() for ch in item.sub("", line))]
    got = [line for line in out.splitlines(keepends=True)
           if not any(ch.isalpha() or ch == "译" for ch in item.sub("", line))]
    assert got == kept


SAMPLE = """\
Getting Started
===============

  Edge Translator runs entirely on your own machine and never sends a
  word of your text to a server, which makes it suitable for documents
  that must stay private.

Features:
- Fast translation on a Raspberry Pi, even for long documents that are
  wrapped across several lines of the file.
- Works offline.
1. Install the package.
2. Download a model bundle.

Jane Doe
12 Main Street
Springfield

Roses are red,
Violets are blue.
"""


def test_sample_segments(tmp_path):
    path = tmp_path / "readme.txt"
    path.write_text(SAMPLE, encoding="utf-8", newline="")
    segs = list(_open(path).segments())
    assert [(s.line, s.text) for s in segs] == [
        (1, "Getting Started"),
        (4, "Edge Translator runs entirely on your own machine and never sends a word of your text to a "
            "server, which makes it suitable for documents that must stay private."),
        (8, "Features:"),
        (9, "Fast translation on a Raspberry Pi, even for long documents that are wrapped across several "
            "lines of the file."),
        (11, "Works offline."),
        (12, "Install the package."),
        (13, "Download a model bundle."),
        (15, "Jane Doe"),
        (16, "12 Main Street"),
        (17, "Springfield"),
        (19, "Roses are red,"),
        (20, "Violets are blue."),
    ]
    assert _roundtrip(path) == SAMPLE.encode()


def test_translation_writes_a_wrapped_paragraph_as_one_line(tmp_path):
    path = tmp_path / "readme.txt"
    path.write_text(SAMPLE.replace("\n", "\r\n"), encoding="utf-8", newline="")
    out = _roundtrip(path, _fake).decode()
    lines = out.split("\r\n")
    assert "\n" not in out.replace("\r\n", "")
    assert lines[:5] == ["译译译译译译译 译译译译译译译", "===============", "",
                         "  " + _fake("Edge Translator runs entirely on your own machine and never sends a word of "
                                      "your text to a server, which makes it suitable for documents that must "
                                      "stay private."),
                         ""]
    assert lines[6] == "- " + _fake("Fast translation on a Raspberry Pi, even for long documents that are wrapped "
                                    "across several lines of the file.")
    assert lines[7:10] == ["- " + _fake("Works offline."), "1. " + _fake("Install the package."),
                           "2. " + _fake("Download a model bundle.")]
    assert lines[11:14] == [_fake("Jane Doe"), _fake("12 Main Street"), _fake("Springfield")]
    assert out.endswith("译译译译译译译 译译译 译译译译.\r\n")


def test_trailing_spaces_and_last_line_without_ending(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"\t* Item one  \r\n    indented line\t")
    assert [s.text for s in _open(path).segments()] == ["Item one", "indented line"]
    assert _roundtrip(path, lambda t: t.upper()) == b"\t* ITEM ONE  \r\n    INDENTED LINE\t"


def test_translation_with_line_breaks_keeps_the_file_endings(tmp_path):
    path = tmp_path / "a.txt"
    path.write_bytes(b"- first\r\nnext\r\n")
    out = _roundtrip(path, lambda t: "A\nB" if t == "first" else t)
    assert out == b"- A\r\n  B\r\nnext\r\n"


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16-le", "utf-16-be"])
def test_bom_encodings_round_trip_and_translate(tmp_path, encoding):
    text = "Hello world.\r\n\r\n  Second paragraph.\r\n"
    path = tmp_path / "a.txt"
    path.write_bytes(_encode(text, encoding))
    assert _roundtrip(path) == path.read_bytes()
    assert _roundtrip(path, _fake) == _encode(_fake(text), encoding)


def test_a_huge_paragraph_is_capped(tmp_path):
    line = "this line of prose keeps going and it never ends a sentence at all"
    path = tmp_path / "big.txt"
    path.write_text((line + "\n") * 500, encoding="utf-8")
    segs = list(_open(path).segments())
    assert len(segs) == 10
    assert [s.line for s in segs] == list(range(1, 501, plaintext.MAX_LINES))
    assert all(len(s.text) <= plaintext.MAX_CHARS for s in segs)
    assert _roundtrip(path) == path.read_bytes()
    long_line = "word " * 200 + "more"
    path.write_text((long_line + "\n") * 30, encoding="utf-8")
    segs = list(_open(path).segments())
    assert max(len(s.text) for s in segs) <= plaintext.MAX_CHARS and len(segs) == 10


def test_memory_does_not_grow_with_file_size(tmp_path):
    path = tmp_path / "big.txt"
    para = "A paragraph of hard-wrapped prose that continues on the next\nline and ends here.\n\n"
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(8000):
            f.write(para)
    assert path.stat().st_size > 600_000
    doc = _open(path)
    tracemalloc.start()
    try:
        count = sum(1 for _ in doc.segments())
        out = io.BytesIO()
        doc.write((Translated("译") for _ in doc.segments()), out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 8000
    assert out.getvalue().count("译\n\n".encode()) == 8000
    assert peak - len(out.getvalue()) * 2 < 300_000


def test_segments_can_be_read_again(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text(SAMPLE, encoding="utf-8")
    doc = _open(path)
    assert list(doc.segments()) == list(doc.segments())


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"fine\nstill fine\ncaf\xe9\n")
    doc = _open(path)
    with pytest.raises(DocumentError, match=r"bad\.txt:3: is not UTF-8 .*save it as UTF-8") as err:
        list(doc.segments())
    assert err.value.line == 3
    with pytest.raises(DocumentError, match="is not UTF-8"):
        doc.write([Translated("好")] * 3, io.BytesIO())


def test_binary_file_is_refused(tmp_path):
    path = tmp_path / "bin.txt"
    path.write_bytes(b"ok\nab\x00cd\n")
    with pytest.raises(DocumentError, match=r":2: holds NUL bytes"):
        list(_open(path).segments())


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(DocumentError, match="cannot read the file"):
        _open(tmp_path / "absent.txt")


def test_wrong_number_of_translations_is_refused(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("One.\n\nTwo.\n", encoding="utf-8")
    doc = _open(path)
    with pytest.raises(DocumentError, match=r"a\.txt:3: the translations do not match"):
        doc.write([Translated("一")], io.BytesIO())
    with pytest.raises(DocumentError, match="the translations do not match"):
        doc.write([Translated("一"), Translated("二"), Translated("三")], io.BytesIO())
