"""Subtitles (.srt, .vtt): identity byte for byte, cue groups, splitting back, streaming, errors."""

from __future__ import annotations

import codecs
import inspect
import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_translator.documents import format_for, load_format, subtitles, textio
from edge_translator.documents.base import DocumentError, FormatOptions, Translated

SRT, VTT = subtitles.SRT, subtitles.VTT
_TIMING_LINE = re.compile(r"^.*-->.*$", re.M)


def _write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_bytes(_encode(text, encoding))
    return path


def _encode(text: str, encoding: str) -> bytes:
    if encoding in ("utf-16-le", "utf-16-be"):
        bom = codecs.BOM_UTF16_LE if encoding == "utf-16-le" else codecs.BOM_UTF16_BE
        return bom + text.encode(encoding)
    return text.encode(encoding)


def _fake(text: str) -> str:
    """A fake translator: each ASCII word becomes as many 译; references are kept."""
    return re.sub(r"&[a-z]+;|[A-Za-z]+", lambda m: m.group() if m.group()[0] == "&" else "译" * len(m.group()),
                  text)


def _run(path: Path, translate=None, fmt=None) -> str:
    """Translate ``path`` (identity by default), keeping every mark where it was."""
    doc = (fmt or (VTT if path.suffix == ".vtt" else SRT)).open(path, FormatOptions())
    out = io.BytesIO()
    items = (Translated(seg.text, seg.marks) if translate is None else Translated(translate(seg.text), seg.marks)
             for seg in doc.segments())
    doc.write(items, out)
    encoding = textio.sniff(path)
    return out.getvalue()[len(encoding.bom):].decode(encoding.codec)


def _segments(path: Path) -> list:
    return list((VTT if path.suffix == ".vtt" else SRT).open(path, FormatOptions()).segments())


def _cues(text: str) -> list[list[str]]:
    """The text lines of each cue (after its timing line)."""
    blocks = [b.splitlines() for b in re.split(r"(?:\r?\n){2,}", text.strip("\r\n"))]
    return [b[next(i for i, line in enumerate(b) if "-->" in line) + 1:] for b in blocks
            if any("-->" in line for line in b)]


# --- the format objects ---------------------------------------------------------------

def test_formats_declare_names_and_suffixes(tmp_path):
    assert (SRT.name, SRT.suffixes) == ("srt", (".srt",))
    assert (VTT.name, VTT.suffixes) == ("vtt", (".vtt",))
    assert load_format(format_for("a.SRT")) is SRT
    assert load_format(format_for("b.vtt")) is VTT
    path = _write(tmp_path, "c.vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\nHi there.\n")
    assert [s.text for s in subtitles.FORMAT.open(path, FormatOptions()).segments()] == ["Hi there."]


def test_segments_is_a_lazy_generator(tmp_path):
    path = _write(tmp_path, "a.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi.\n")
    doc = SRT.open(path, FormatOptions())
    assert inspect.isgenerator(doc.segments())


# --- identity ------------------------------------------------------------------------

_TEXT_LINES = st.sampled_from([
    "Hello there.", "how are you", "<i>in italics</i>", "<i>opened here", "closed here</i>",
    "- Who's that?", "-Me!", "a <b>big</b> dog,", "<font color=\"#ff0\">Yellow</font> text",
    "{\\an8}Up top", "Tom &amp; Jerry", "It's 3.14, isn't it", "♪ la la ♪", "♪",
    "<i>- Both</i> sides", "double  spaces  here", "trailing space ", " leading", "<u></u>",
    "word<00:00:01.500><c> karaoke</c>", "<v Bob>Voice</v> and more", "数据 and 中文。", "-5 degrees",
    "x < 3 and y > 2", "naïve café…", "<c.yellow>Sing</c> now", "<i>a <b>nested</b> one</i> end",
    "a<i><00:00:01.000>b</i> c", "stray</b> close <i>and open", "<b>bold</b> start", "– En dash",
    "a <i></i>empty pair", "A&amp;B &#233;t&#xE9;", "{\\i1}ass{\\i0} tags", "<i>x</i><b>y</b> z",
])
_TIMES = st.integers(0, 3_600_000)


def _time(ms: int, vtt: bool) -> str:
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    sep = "." if vtt else ","
    return f"{m:02d}:{s:02d}.{ms:03d}" if vtt and h == 0 and ms % 2 else f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"


@st.composite
def _cue(draw, vtt: bool) -> list[str]:
    start, length = draw(_TIMES), draw(st.integers(0, 4000))
    timing = f"{_time(start, vtt)} --> {_time(start + length, vtt)}"
    timing += draw(st.sampled_from(["", "", " X1:100 X2:200 Y1:1 Y2:2" if not vtt else " align:start line:0"]))
    lead = [draw(st.sampled_from(["", str(draw(st.integers(1, 99999))), "intro"] if vtt else
                                 ["", str(draw(st.integers(1, 99999))), str(draw(st.integers(1, 9)))]))]
    return [x for x in lead if x] + [timing] + draw(st.lists(_TEXT_LINES, min_size=0, max_size=3))


@st.composite
def _documents(draw, vtt: bool) -> str:
    blocks = []
    if vtt:
        blocks.append([draw(st.sampled_from(["WEBVTT", "WEBVTT - a title", "WEBVTT\tx"]))]
                      + draw(st.sampled_from([[], ["Kind: captions", "Language: en"]])))
    for _ in range(draw(st.integers(0, 8))):
        extra = [["NOTE a comment", "over two lines"], ["STYLE", "::cue { color: red }"], ["NOTE"]]
        blocks.append(draw(st.sampled_from(extra)) if vtt and draw(st.integers(0, 5)) == 0 else draw(_cue(vtt)))
    lines: list[str] = [] if not draw(st.booleans()) or vtt else [""]
    for block in blocks:
        lines += block + draw(st.sampled_from([[""], [""], ["", ""], ["   "], ["", "\t", ""]]))
    if lines and draw(st.booleans()):
        lines.pop()
    endings = draw(st.lists(st.sampled_from(["\n", "\r\n", "\n"]), min_size=len(lines), max_size=len(lines)))
    text = "".join(line + end for line, end in zip(lines, endings))
    return text.rstrip("\r\n") if draw(st.booleans()) else text


_ENCODINGS = st.sampled_from(["utf-8", "utf-8-sig", "utf-16-le", "utf-16-be"])
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check_identity_and_structure(tmp_path: Path, name: str, text: str, encoding: str) -> None:
    path = _write(tmp_path, name, text, encoding)
    doc = (VTT if name.endswith(".vtt") else SRT).open(path, FormatOptions())
    out = io.BytesIO()
    doc.write((Translated(s.text, s.marks) for s in doc.segments()), out)
    assert out.getvalue() == path.read_bytes()
    translated = _run(path, _fake)
    assert _TIMING_LINE.findall(translated) == _TIMING_LINE.findall(text)
    source_lines = set(text.splitlines())
    for line in translated.splitlines():
        assert line in source_lines or not re.search(r"[A-Za-z]{2}", re.sub(r"<[^>]*>|\{[^}]*\}|&[a-z]+;", "", line))


@_SETTINGS
@given(text=_documents(vtt=False), encoding=_ENCODINGS)
def test_srt_identity_is_byte_exact_and_translation_keeps_timings(tmp_path, text, encoding):
    _check_identity_and_structure(tmp_path, "gen.srt", text, encoding)


@_SETTINGS
@given(text=_documents(vtt=True), encoding=_ENCODINGS)
def test_vtt_identity_is_byte_exact_and_translation_keeps_timings(tmp_path, text, encoding):
    _check_identity_and_structure(tmp_path, "gen.vtt", text, encoding)


_TRANSLATIONS = st.lists(st.sampled_from([*"我们的字，。！？、；：“”（）", " ", "\n", "A", "b", "1", ".", ",", "-", "<",
                                           "&amp;", "é"]), max_size=60).map("".join)


@_SETTINGS
@given(text=_documents(vtt=True), encoding=_ENCODINGS, data=st.data())
def test_any_translation_keeps_the_structure(tmp_path, text, encoding, data):
    path = _write(tmp_path, "any.vtt", text, encoding)
    doc = VTT.open(path, FormatOptions())
    items = []
    for seg in doc.segments():
        translation = data.draw(_TRANSLATIONS)
        spans = st.tuples(st.integers(0, len(translation)), st.integers(0, len(translation))).map(sorted).map(tuple)
        items.append(Translated(translation, tuple(data.draw(st.none() | spans) for _ in seg.marks)))
    out = io.BytesIO()
    doc.write(items, out)
    written = out.getvalue()[len(doc.encoding.bom):].decode(doc.encoding.codec)
    assert _TIMING_LINE.findall(written) == _TIMING_LINE.findall(text)
    _segments(_write(tmp_path, "out.vtt", written, encoding))  # still a valid file


NETFLIX_SRT = """\
1
00:00:01,200 --> 00:00:03,400
<i>Previously on the show...</i>

2
00:00:04,000 --> 00:00:06,000
- Did you see him?
- No. He left

3
00:00:06,100 --> 00:00:08,000
before I arrived, and nobody

4
00:00:08,050 --> 00:00:10,000
knows where he went.

7
00:00:10,500 --> 00:00:11,000
{\\an8}[DOOR SLAMS]

8
00:00:12,000 --> 00:00:13,000
♪ ♪
"""

YOUTUBE_VTT = """\
WEBVTT
Kind: captions
Language: en

NOTE generated by a machine

STYLE
::cue(.yellow) { color: yellow; }

intro
00:00:00.000 --> 00:00:02.500 align:start position:0%
so<00:00:00.500><c> today</c><00:00:01.000><c> we</c>

00:00:02.500 --> 00:00:04.000 align:start position:0%
<v Roger Bingham>are going to look &amp; see</v>

00:04.000 --> 00:05.000
<c.yellow>what happens.</c>
"""


@pytest.mark.parametrize("name, text", [("n.srt", NETFLIX_SRT), ("y.vtt", YOUTUBE_VTT)])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16-le"])
def test_real_world_samples_round_trip(tmp_path, name, text, newline, encoding):
    path = _write(tmp_path, name, text.replace("\n", newline), encoding)
    doc = (VTT if name.endswith(".vtt") else SRT).open(path, FormatOptions())
    out = io.BytesIO()
    doc.write((Translated(s.text, s.marks) for s in doc.segments()), out)
    assert out.getvalue() == path.read_bytes()


def test_real_world_segments(tmp_path):
    srt = [s.text for s in _segments(_write(tmp_path, "n.srt", NETFLIX_SRT))]
    assert srt == ["Previously on the show...", "Did you see him? No. He left before I arrived, and nobody "
                   "knows where he went.", "[DOOR SLAMS]"]
    vtt = _segments(_write(tmp_path, "y.vtt", YOUTUBE_VTT))
    assert [s.text for s in vtt] == ["so today we are going to look &amp; see what happens."]
    (a, b), = vtt[0].keep
    assert vtt[0].text[a:b] == "&amp;" and vtt[0].line == 12


# --- translation ----------------------------------------------------------------------

SPANNING = """\
1
00:00:01,000 --> 00:00:02,000
<i>When I was young, my father</i>
<i>told me a story</i>

2
00:00:02,100 --> 00:00:03,000
about a man who lived

3
00:00:03,200 --> 00:00:05,000
in a house by the sea.

4
00:00:05,500 --> 00:00:06,000
The end.
"""


def test_sentence_spanning_cues_is_one_segment(tmp_path):
    segs = _segments(_write(tmp_path, "s.srt", SPANNING))
    assert [s.text for s in segs] == ["When I was young, my father told me a story about a man who lived in a "
                                      "house by the sea.", "The end."]
    assert [s.line for s in segs] == [3, 16]


def test_translation_is_split_back_over_the_cues(tmp_path):
    path = _write(tmp_path, "s.srt", SPANNING)
    out = _run(path, lambda t: "当我年轻的时候，我父亲给我讲了一个故事，关于一个住在海边房子里的人。"
               if t.startswith("When") else "结束。")
    assert _TIMING_LINE.findall(out) == _TIMING_LINE.findall(SPANNING)
    cues = _cues(out)
    assert [len(c) for c in cues] == [2, 1, 1, 1]
    assert cues[0][0].startswith("<i>") and cues[0][0].endswith("</i>")
    assert cues[0][1].startswith("<i>") and cues[0][1].endswith("</i>")
    assert "".join(re.sub(r"</?i>", "", line) for cue in cues[:3] for line in cue) == \
        "当我年轻的时候，我父亲给我讲了一个故事，关于一个住在海边房子里的人。"
    # cuts after the commas near the proportional points; elsewhere at the point itself
    assert cues == [["<i>当我年轻的时候，</i>", "<i>我父亲给我讲了一个故事，</i>"], ["关于一个住"], ["在海边房子里的人。"],
                    ["结束。"]]


def test_fake_translation_keeps_structure(tmp_path):
    path = _write(tmp_path, "s.srt", SPANNING)
    out = _run(path, _fake)
    assert out.replace("译", "") != SPANNING
    assert _TIMING_LINE.findall(out) == _TIMING_LINE.findall(SPANNING)
    cues = _cues(out)
    assert [len(c) for c in cues] == [2, 1, 1, 1]
    # the comma near the proportional point wins over the original break after "father"
    assert cues[0] == ["<i>译译译译 译 译译译 译译译译译,</i>", "<i>译译 译译译译译译 译译译译 译译 译 译译译译译</i>"]
    assert not re.search("[A-Za-z]", "".join(line for cue in cues for line in cue).replace("<i>", "")
                         .replace("</i>", ""))


def test_marks_wrap_the_translated_words(tmp_path):
    path = _write(tmp_path, "m.srt", "1\n00:00:01,000 --> 00:00:02,000\nThat is a <b>big</b> dog.\n")
    seg = _segments(path)[0]
    assert seg.text == "That is a big dog." and seg.marks == ((10, 13),)
    doc = SRT.open(path, FormatOptions())
    out = io.BytesIO()
    doc.write([Translated("那是一只大狗。", ((4, 5),))], out)
    assert out.getvalue().decode().endswith("\n那是一只<b>大</b>狗。\n")
    out = io.BytesIO()
    doc.write([Translated("那是一只大狗。", (None,))], out)
    assert out.getvalue().decode().endswith("\n那是一只大狗。\n")


def test_speaker_dashes_and_positions_are_kept(tmp_path):
    text = "1\n00:00:01,000 --> 00:00:02,000\n{\\an8}- Did you see him?\n-No, I did not.\n"
    path = _write(tmp_path, "d.srt", text)
    assert _segments(path)[0].text == "Did you see him? No, I did not."
    out = _run(path, lambda t: "你看见他了吗？没有，我没看见。")
    assert _cues(out) == [["{\\an8}- 你看见他了吗？", "-没有，我没看见。"]]
    path = _write(tmp_path, "e.srt", text.replace("-No", "– No"))
    assert _cues(_run(path, lambda t: "你看见他了吗？没有，我没看见。"))[0][1] == "– 没有，我没看见。"


def test_a_mark_cut_by_a_line_break_wraps_both_parts(tmp_path):
    path = _write(tmp_path, "w.srt", "1\n00:00:01,000 --> 00:00:02,000\nI <i>really do</i> love\nthis song.\n")
    seg = _segments(path)[0]
    assert seg.text[slice(*seg.marks[0])] == "really do"
    doc = SRT.open(path, FormatOptions())
    out = io.BytesIO()
    doc.write([Translated("我真的很爱这首歌。", ((1, 7),))], out)
    assert _cues(out.getvalue().decode()) == [["我<i>真的很爱这</i>", "<i>首</i>歌。"]]


def test_marks_meeting_in_a_translation_nest_properly(tmp_path):
    text = "1\n00:00:01,000 --> 00:00:02,000\nA <b>bold</b> and <i>slanted</i> word.\n"
    doc = SRT.open(_write(tmp_path, "x.srt", text), FormatOptions())
    assert next(doc.segments()).marks == ((2, 6), (11, 18))
    out = io.BytesIO()
    doc.write([Translated("一个斜的粗的词。", ((4, 6), (2, 4)))], out)
    assert _cues(out.getvalue().decode()) == [["一个<i>斜的</i><b>粗的</b>词。"]]
    out = io.BytesIO()
    doc.write([Translated("一个又斜又粗的词。", ((1, 8), (3, 5)))], out)
    assert _cues(out.getvalue().decode()) == [["一<b>个又<i>斜又</i>粗的词</b>。"]]


def test_loose_tags_go_back_proportionally(tmp_path):
    text = "WEBVTT\n\n00:01.000 --> 00:02.000\n<i>Hello</i> world<00:01.500> again\n"
    path = _write(tmp_path, "k.vtt", text)
    assert _segments(path)[0].text == "Hello world again" and _segments(path)[0].marks == ()
    out = _run(path, lambda t: "你好世界再次见到")
    assert _cues(out) == [["<i>你好</i>世界再<00:01.500>次见到"]]


def test_short_share_gets_fewer_lines_with_its_tags(tmp_path):
    text = "1\n00:00:01,000 --> 00:00:02,000\n<i>Yes, I think so,\nmy friend.</i>\n"
    out = _run(_write(tmp_path, "f.srt", text), lambda t: "是的。")
    assert _cues(out) == [["<i>是的。</i>"]]


def test_translation_shorter_than_the_cues(tmp_path):
    text = ("1\n00:00:01,000 --> 00:00:02,000\nwell\n\n2\n00:00:02,000 --> 00:00:03,000\nyes\n\n"
            "3\n00:00:03,000 --> 00:00:04,000\nokay\n")
    path = _write(tmp_path, "f.srt", text)
    assert len(_segments(path)) == 1
    out = _run(path, lambda t: "Fine")
    assert out == "1\n00:00:01,000 --> 00:00:02,000\nFine\n\n2\n00:00:02,000 --> 00:00:03,000\n\n" \
                  "3\n00:00:03,000 --> 00:00:04,000\n"
    out = _run(path, lambda t: "嗯嗯")
    assert _cues(out) == [["嗯"], ["嗯"], []] and out.endswith("00:00:04,000\n")


def test_line_breaks_in_a_translation_do_not_break_cues(tmp_path):
    path = _write(tmp_path, "b.srt", "1\n00:00:01,000 --> 00:00:02,000\nHello. Bye.\n")
    assert _cues(_run(path, lambda t: "你好。\n\n再见。")) == [["你好。  再见。"]]


def test_words_and_numbers_are_never_cut(tmp_path):
    text = ("1\n00:00:01,000 --> 00:00:02,000\nIt costs\n\n2\n00:00:02,000 --> 00:00:03,000\n"
            "a lot of money now.\n")
    out = _run(_write(tmp_path, "n.srt", text), lambda t: "It costs 3,141.59 dollars in Zürich-Nord today.")
    cues = _cues(out)
    assert " ".join(line for cue in cues for line in cue) == "It costs 3,141.59 dollars in Zürich-Nord today."
    for cue in cues:
        for word in cue[0].split():
            assert word in "It costs 3,141.59 dollars in Zürich-Nord today.".split()


# --- grouping -------------------------------------------------------------------------

def _srt(*cues: tuple[str, str]) -> str:
    return "".join(f"{i}\n{t}\n{text}\n\n" for i, (t, text) in enumerate(cues, 1))


def test_a_long_gap_ends_a_group(tmp_path):
    text = _srt(("00:00:01,000 --> 00:00:02,000", "and then"), ("00:00:04,001 --> 00:00:05,000", "he left"),
                ("00:00:07,000 --> 00:00:08,000", "the house"))
    assert [s.text for s in _segments(_write(tmp_path, "g.srt", text))] == ["and then", "he left the house"]


def test_groups_stop_at_six_cues(tmp_path):
    text = _srt(*[(f"00:00:{i:02d},000 --> 00:00:{i:02d},500", f"word{i}") for i in range(1, 15)])
    assert [len(s.text.split()) for s in _segments(_write(tmp_path, "g.srt", text))] == [6, 6, 2]


def test_a_speaker_dash_a_note_or_a_music_cue_starts_a_new_group(tmp_path):
    text = ("WEBVTT\n\n00:01.000 --> 00:02.000\nso\n\n00:02.000 --> 00:03.000\n<i>- who</i>\n\n"
            "NOTE x\n\n00:03.000 --> 00:04.000\nis\n\n00:04.000 --> 00:05.000\n♪ ♪\n\n"
            "00:05.000 --> 00:06.000\nit\n")
    assert [s.text for s in _segments(_write(tmp_path, "g.vtt", text))] == ["so", "who", "is", "it"]


# --- errors ---------------------------------------------------------------------------

@pytest.mark.parametrize("name, text, line, message", [
    ("a.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\n00:00:03 --> 00:00:04\nThere\n", 6,
     "expected a timing like 00:00:01,000 --> 00:00:02,000, found '00:00:03 --> 00:00:04'"),
    ("b.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi\n\n2\nThere\n", 6,
     "expected a timing like 00:00:01,000 --> 00:00:02,000, found 'There'"),
    ("c.srt", "1\n00:00:01,000 -> 00:00:02,000\nHi\n", 2, "expected a timing like"),
    ("d.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi\n\nstray text\n", 5,
     "expected a cue number, then a timing like 00:00:01,000 --> 00:00:02,000 (found 'stray text'); "
     "a cue's text cannot hold blank lines"),
    ("e.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi\n2\n00:00:03,000 --> 00:00:04,000\nThere\n", 5,
     "a timing inside a cue's text: put a blank line before the next cue"),
    ("f.vtt", "1\n00:01.000 --> 00:02.000\nHi\n", 1, "is not a WebVTT file: its first line must be WEBVTT"),
    ("h.vtt", "WEBVTT\n00:01.000 --> 00:02.000\nHi\n", 2,
     "put a blank line between the WEBVTT header and the first cue"),
    ("g.vtt", "WEBVTT\n\n00:01.000 --> 00:02.000\nHi\n\nid\n00:02.000 --> later\n", 7,
     "expected a timing like 00:01.000 --> 00:02.000, found '00:02.000 --> later'"),
])
def test_malformed_files_name_the_line(tmp_path, name, text, line, message):
    path = _write(tmp_path, name, text)
    with pytest.raises(DocumentError) as err:
        _segments(path)
    assert err.value.line == line and message in err.value.reason
    assert f"{path}:{line}: " in str(err.value)


def test_undecodable_bytes_are_a_document_error(tmp_path):
    path = tmp_path / "x.srt"
    path.write_bytes(b"1\n00:00:01,000 --> 00:00:02,000\nCaf\xe9\n")
    with pytest.raises(DocumentError, match="is not UTF-8") as err:
        _segments(path)
    assert err.value.line == 3


def test_translations_must_match_the_segments(tmp_path):
    path = _write(tmp_path, "a.srt", "1\n00:00:01,000 --> 00:00:02,000\nHi.\n")
    doc = SRT.open(path, FormatOptions())
    with pytest.raises(DocumentError, match="do not match"):
        doc.write([], io.BytesIO())
    with pytest.raises(DocumentError, match="do not match"):
        doc.write([Translated("嗨。"), Translated("多余")], io.BytesIO())


# --- streaming ------------------------------------------------------------------------

def test_fifty_thousand_cues_stream(tmp_path, monkeypatch):
    with open(tmp_path / "big.srt", "w", encoding="utf-8", newline="") as f:
        for i in range(1, 50_001):
            s = i * 2
            t = f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
            f.write(f"{i}\r\n{t},000 --> {t},900"
                    f"\r\nLine {i} of the film{'.' if i % 3 == 0 else ''}\r\n\r\n")
    path = tmp_path / "big.srt"
    read = []
    real = textio.lines

    def counting(*args, **kwargs):
        for line in real(*args, **kwargs):
            read.append(1)
            yield line

    monkeypatch.setattr(textio, "lines", counting)
    doc = SRT.open(path, FormatOptions())
    segments = doc.segments()
    first = next(segments)
    assert first.text == "Line 1 of the film Line 2 of the film Line 3 of the film." and len(read) < 20
    assert sum(1 for _ in segments) == 50_000 // 3
    groups = (range(k, min(k + 3, 50_001)) for k in range(1, 50_001, 3))
    texts = (" ".join(f"Line {i} of the film" for i in g) + "." * (g[-1] % 3 == 0) for g in groups)
    out = io.BytesIO()
    doc.write((Translated(text) for text in texts), out)
    assert out.getvalue() == path.read_bytes()
