"""CSV/TSV documents: the scanner against the csv module, identity byte for byte, chosen
columns translated with quoting kept, errors."""

from __future__ import annotations

import codecs
import csv
import io
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_translator.documents import table
from edge_translator.documents.base import DocumentError, FormatOptions, Translated



def _settings(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


def _fake(text: str) -> str:
    """A fake translator: every ASCII word becomes a Chinese-looking string."""
    return re.sub(r"[A-Za-z]+", lambda m: "译" * len(m.group()), text)


def _roundtrip(doc, translate=lambda text: text) -> bytes:
    out = io.BytesIO()
    doc.write((Translated(translate(seg.text)) for seg in doc.segments()), out)
    return out.getvalue()


def _encode(text: str, encoding: str) -> bytes:
    if encoding == "utf-16-le":
        return codecs.BOM_UTF16_LE + text.encode("utf-16-le")
    return text.encode(encoding)


def _open(tmp_path: Path, data: bytes | str, columns: tuple[str, ...], fmt=table.CSV, name="t.csv"):
    path = tmp_path / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return fmt.open(path, FormatOptions(columns=columns))


def test_formats_declare_names_and_suffixes():
    assert (table.CSV.name, table.CSV.suffixes) == ("csv", (".csv",))
    assert (table.TSV.name, table.TSV.suffixes) == ("tsv", (".tsv", ".tab"))
    assert table.FORMATS == (table.CSV, table.TSV)


# --- generated tables -----------------------------------------------------------------

_value_chars = st.sampled_from(list("abc XYZ,\t\"'\n.5") + ["\r\n", "\r", "é", "数"])


@st.composite
def _field(draw, delimiter: str) -> str:
    """One field's source text: quoted (maybe with text after the closing quote) or not."""
    value = "".join(draw(st.lists(_value_chars, max_size=8)))
    needs = any(ch in value for ch in (delimiter, '"', "\r", "\n"))
    if needs or draw(st.integers(0, 3)) == 0:
        raw = '"' + value.replace('"', '""') + '"'
        if draw(st.integers(0, 9)) == 0:  # csv.reader's leniency: "ab"cd is abcd
            raw += draw(st.sampled_from(["x", ' y"z', "1"]))
        return raw
    return value


@st.composite
def _table(draw, delimiter: str) -> str:
    header = delimiter.join(["id", "Name", "Description", "price"])
    rows = [header]
    for _ in range(draw(st.integers(0, 8))):
        width = draw(st.sampled_from([0, 1, 2, 3, 4, 4, 4, 5]))
        rows.append(delimiter.join(draw(_field(delimiter)) for _ in range(width)))
    endings = draw(st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=len(rows), max_size=len(rows)))
    text = "".join(row + ending for row, ending in zip(rows, endings))
    if draw(st.booleans()):
        text = text[:-len(endings[-1])]
    return text


def _scanned(text: str, delimiter: str) -> list[list[str]]:
    records = table.scan(io.StringIO(text, newline=""), delimiter)
    return [[field.value for field in record.fields] for record in records]


@_settings(150)
@given(data=st.data(), delimiter=st.sampled_from([",", "\t"]))
def test_scanner_reads_what_csv_reader_reads(data, delimiter):
    text = data.draw(_table(delimiter))
    oracle = list(csv.reader(io.StringIO(text, newline=""), delimiter=delimiter))
    assert _scanned(text, delimiter) == oracle
    records = list(table.scan(io.StringIO(text, newline=""), delimiter))
    assert "".join(record.raw(delimiter) for record in records) == text


@_settings(100)
@given(data=st.data(), fmt=st.sampled_from([table.CSV, table.TSV]),
       encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16-le"]),
       columns=st.sampled_from([("name",), ("Description", "1"), ("2", "3", "4")]))
def test_identity_is_byte_exact(tmp_path, data, fmt, encoding, columns):
    text = data.draw(_table(fmt.delimiter))
    raw = _encode(text, encoding)
    doc = _open(tmp_path, raw, columns, fmt, "t" + fmt.suffixes[-1])
    assert _roundtrip(doc) == raw


@_settings(80)
@given(data=st.data(), fmt=st.sampled_from([table.CSV, table.TSV]))
def test_fake_translation_changes_only_the_chosen_columns(tmp_path, data, fmt):
    delimiter = fmt.delimiter
    text = data.draw(_table(delimiter))
    doc = _open(tmp_path, text, ("name", "4"), fmt, "t" + fmt.suffixes[0])
    out = _roundtrip(doc, _fake).decode()
    before = list(table.scan(io.StringIO(text, newline=""), delimiter))
    after = list(table.scan(io.StringIO(out, newline=""), delimiter))
    assert len(after) == len(before)
    assert after[0].raw(delimiter) == before[0].raw(delimiter)
    for old, new in zip(before[1:], after[1:]):
        assert new.ending == old.ending
        assert len(new.fields) == len(old.fields)
        for i, (a, b) in enumerate(zip(old.fields, new.fields)):
            if i not in (1, 3) or not any(ch.isalpha() for ch in a.value):
                assert b.raw == a.raw
            else:
                assert b.value == _fake(a.value)
                assert b.quoted == (a.quoted or b.raw != b.value)


# --- hand-written files -----------------------------------------------------------------

CATALOGUE = (
    'sku,Name,Description,Price,Notes\r\n'
    'A-1,Red mug,"A ""big"" mug, for tea\r\nand coffee",12.50,keep me\r\n'
    'A-2,"Plate",Flat plate,3,"quoted, kept"\r\n'
    'A-3,Bowl\r\n'
    '\r\n'
    'A-4,  Spoon  ,,  ,\r\n'
    'A-5,2024,"",-,x\r\n'
    'A-6,"Tea, green",Leaves,1,"a""b"'
)


def test_catalogue_segments(tmp_path):
    doc = _open(tmp_path, CATALOGUE, (" name ", "DESCRIPTION"))
    assert [(s.line, s.text) for s in doc.segments()] == [
        (2, "Red mug"), (2, 'A "big" mug, for tea\r\nand coffee'),
        (4, "Plate"), (4, "Flat plate"),
        (5, "Bowl"),
        (7, "Spoon"),
        (9, "Tea, green"), (9, "Leaves"),
    ]
    assert _roundtrip(doc) == CATALOGUE.encode()


def test_catalogue_translation_keeps_quoting_and_other_columns(tmp_path):
    doc = _open(tmp_path, CATALOGUE, ("Name", "3"))
    translations = {"Red mug": "红色, 杯子", "Plate": "盘子", "Bowl": 'a "bowl"', "Spoon": "勺子",
                    "Flat plate": "平盘", "Tea, green": "绿茶", "Leaves": "叶\n子",
                    'A "big" mug, for tea\r\nand coffee': '一个"大"杯子'}
    out = _roundtrip(doc, translations.__getitem__).decode()
    assert out == (
        'sku,Name,Description,Price,Notes\r\n'
        'A-1,"红色, 杯子","一个""大""杯子",12.50,keep me\r\n'
        'A-2,"盘子",平盘,3,"quoted, kept"\r\n'
        'A-3,"a ""bowl"""\r\n'
        '\r\n'
        'A-4,  勺子  ,,  ,\r\n'
        'A-5,2024,"",-,x\r\n'
        'A-6,"绿茶","叶\n子",1,"a""b"'
    )


def test_tsv_with_tab_suffix(tmp_path):
    text = 'id\ttitle\tbody\n1\tHello, "world"\tA line\n2\t"Quoted\tcell"\tx\n'
    doc = _open(tmp_path, text, ("title",), table.TSV, "t.tab")
    assert [s.text for s in doc.segments()] == ['Hello, "world"', "Quoted\tcell"]
    assert _roundtrip(doc) == text.encode()
    out = _roundtrip(doc, _fake).decode()
    assert out == ('id\ttitle\tbody\n1\t"译译译译译, ""译译译译译"""\tA line\n'
                   '2\t"译译译译译译\t译译译译"\tx\n')


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16-le"])
def test_bom_and_crlf_round_trip_and_translate(tmp_path, encoding):
    text = "Name,Qty\r\nApple,3\r\nPear,4\r\n"
    doc = _open(tmp_path, _encode(text, encoding), ("name",))
    assert [s.text for s in doc.segments()] == ["Apple", "Pear"]
    assert _roundtrip(doc) == _encode(text, encoding)
    assert _roundtrip(doc, _fake) == _encode("Name,Qty\r\n译译译译译,3\r\n译译译译,4\r\n", encoding)


def test_bare_cr_line_endings_at_the_end_of_the_file(tmp_path):
    doc = _open(tmp_path, b"Name\r\nab\r\r", ("name",))
    assert [(s.line, s.text) for s in doc.segments()] == [(2, "ab")]
    assert _roundtrip(doc, str.upper) == b"Name\r\nAB\r\r"
    doc = _open(tmp_path, b"Name\n\rb", ("name",))
    assert [(s.line, s.text) for s in doc.segments()] == [(3, "b")]
    assert _roundtrip(doc, str.upper) == b"Name\n\rB"


def test_header_is_never_translated_and_duplicates_all_match(tmp_path):
    doc = _open(tmp_path, "Text,text,Other\nOne,Two,Three\n", ("TEXT", "1"))
    assert [s.text for s in doc.segments()] == ["One", "Two"]
    assert _roundtrip(doc, _fake) == "Text,text,Other\n译译译,译译译,Three\n".encode()


def test_segments_can_be_read_again(tmp_path):
    doc = _open(tmp_path, CATALOGUE, ("name",))
    assert list(doc.segments()) == list(doc.segments())


# --- errors ---------------------------------------------------------------------------------


def test_no_columns_chosen(tmp_path):
    with pytest.raises(DocumentError, match=r"t\.csv: no columns chosen: pass --columns NAME\[,NAME\.\.\.\]"):
        _open(tmp_path, CATALOGUE, ())


def test_unknown_column_lists_the_header(tmp_path):
    with pytest.raises(DocumentError) as err:
        _open(tmp_path, CATALOGUE, ("Name", "Title"))
    assert err.value.line == 1
    assert err.value.reason == ("has no column 'Title'; its header has 'sku', 'Name', 'Description', 'Price', "
                                "'Notes' (columns 1-5); pass --columns with these names or numbers")


@pytest.mark.parametrize("spec", ["0", "6", "-1"])
def test_column_number_out_of_range(tmp_path, spec):
    with pytest.raises(DocumentError, match=f"has no column '{spec}'.*columns 1-5"):
        _open(tmp_path, CATALOGUE, (spec,))


def test_missing_header(tmp_path):
    with pytest.raises(DocumentError, match=r"t\.csv:1: has no header row"):
        _open(tmp_path, "\n\n", ("name",))


def test_an_empty_file_has_nothing_to_translate_and_stays_empty(tmp_path):
    doc = _open(tmp_path, "", ("name",))
    assert list(doc.segments()) == []
    out = io.BytesIO()
    doc.write([], out)
    assert out.getvalue() == b""


def test_unterminated_quote_names_the_line_where_it_started(tmp_path):
    doc = _open(tmp_path, 'Name,Notes\nok,fine\n"broken,cell\nmore\n', ("name",))
    with pytest.raises(DocumentError, match=r"t\.csv:3: a quoted field starting on this line is never closed"):
        list(doc.segments())
    with pytest.raises(DocumentError, match="never closed"):
        doc.write([Translated("好")] * 5, io.BytesIO())


def test_invalid_utf8_names_the_line(tmp_path):
    doc = _open(tmp_path, b"Name,Notes\nok,fine\ncaf\xe9,x\n", ("name",))
    with pytest.raises(DocumentError, match=r"t\.csv:3: is not UTF-8 .*save it as UTF-8") as err:
        list(doc.segments())
    assert err.value.line == 3


def test_missing_file(tmp_path):
    with pytest.raises(DocumentError, match="cannot read the file"):
        table.CSV.open(tmp_path / "absent.csv", FormatOptions(columns=("a",)))


def test_wrong_number_of_translations(tmp_path):
    doc = _open(tmp_path, "Name\nOne\nTwo\n", ("name",))
    with pytest.raises(DocumentError, match=r"t\.csv:3: the translations do not match"):
        doc.write([Translated("一")], io.BytesIO())
    with pytest.raises(DocumentError, match="the translations do not match"):
        doc.write([Translated("一")] * 3, io.BytesIO())
