"""Bad uploads get a clear 4xx (or their document a clear error status), never a 5xx, and the
daemon keeps serving: corrupt and bomb .docx files, empty, mislabelled, undecodable and
oversized files, and hostile file names; then 200 of them in a row."""

from __future__ import annotations

import io
import json
import struct
import zipfile

import pytest

from .test_daemon import DEMO, _parts, _translator, running
from .test_daemon_documents import KEY, bearer, make_docx, upload, wait_done

pytest.importorskip("waitress")
pytest.importorskip("docx")

from edge_translator.daemon.documents import check_zip, safe_name  # noqa: E402
from edge_translator.daemon.http import HTTPError  # noqa: E402
from edge_translator.documents import format_for  # noqa: E402

LIMIT = 300_000


def _zip(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def _declare(data: bytes, member: str, size: int) -> bytes:
    """The zip with ``member``'s uncompressed size changed to ``size`` in both of its headers."""
    raw = bytearray(data)
    name = member.encode()
    local = raw.find(b"PK\x03\x04")
    while local != -1:
        if raw[local + 30: local + 30 + len(name)] == name:
            struct.pack_into("<I", raw, local + 22, size)
        local = raw.find(b"PK\x03\x04", local + 4)
    central = raw.find(b"PK\x01\x02")
    while central != -1:
        length = struct.unpack_from("<H", raw, central + 28)[0]
        if raw[central + 46: central + 46 + length] == name:
            struct.pack_into("<I", raw, central + 24, size)
        central = raw.find(b"PK\x01\x02", central + 4)
    return bytes(raw)


GOOD = make_docx(["Hello there."])
BOMB = _declare(_zip({"word/document.xml": b"<w/>", "word/huge.bin": b"\0" * 100_000}), "word/huge.bin",
                3_000_000_000)
LIAR = _declare(_zip({"word/document.xml": b"<w/>", "word/huge.bin": b"\0" * 200_000}), "word/huge.bin", 100)
BROKEN_XML = _zip({"[Content_Types].xml": b"<nope", "word/document.xml": b"<<<"})

#: (what, file name, content, status, words of the message)
BAD = [
    ("corrupt docx", "a.docx", b"PK\x03\x04" + bytes(range(256)) * 4, 400, "not a zip archive"),
    ("truncated docx", "a.docx", GOOD[: len(GOOD) // 2], 400, "not a zip archive"),
    ("text named docx", "a.docx", b"Hello, I am plain text.", 400, "not a zip archive"),
    ("zip without a document", "a.docx", _zip({"x.txt": b"hi"}), 400, "no word/document.xml"),
    ("zip bomb by its headers", "a.docx", BOMB, 400, "unpacks to 3000 MB"),
    ("zip that lies about its sizes", "a.docx", LIAR, 400, "damaged"),
    ("empty file", "a.txt", b"", 400, "is empty"),
    ("empty docx", "a.docx", b"", 400, "is empty"),
    ("unsupported type", "a.exe", b"MZ\x90\x00", 415, "'.exe' is not supported"),
    ("text named pdf", "a.pdf", b"Hello, I am plain text.", 400, "a.pdf is not a PDF file"),
    ("no extension", "README", b"Hello.", 415, "'(none)' is not supported"),
    ("latin-1 text", "a.txt", "Caf\u00e9 au lait.".encode("latin-1"), 400, "not UTF-8 text (line 1)"),
    ("binary as text", "a.md", b"# Title\n\nok\n\x00\x01\x02", 400, "binary data (line 4)"),
    ("docx named txt", "a.txt", GOOD, 400, "not UTF-8"),
    ("over the size limit", "a.txt", b"Hello. " * (LIMIT // 7 + 1), 413, f"the limit is {LIMIT} bytes"),
]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY} 1000000\n", encoding="utf-8")
    state = tmp_path_factory.mktemp("state")
    translator, _, _ = _translator(_parts(DEMO))
    with running(translator, api_keys=str(keys), state_dir=str(state), max_file_size=LIMIT,
                 max_queued_documents=1000) as (daemon, client):
        yield daemon, client, state


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_a_bad_upload_is_a_clear_4xx(served, case):
    _, client, state = served
    _, name, data, status, words = case
    got, headers, answer = upload(client, "/v1/documents", name, data, bearer(KEY))
    message = json.loads(answer)["error"]
    assert got == status and words in message and "\n" not in message, (got, message)
    got, _, answer = upload(client, "/v2/document", name, data, {"Authorization": f"DeepL-Auth-Key {KEY}"},
                            target_lang="ZH")
    assert got == status and words in json.loads(answer)["message"]
    got, _, answer = upload(client, "/translate_file", name, data, source="en", target="zh", api_key=KEY)
    assert got == status and words in json.loads(answer)["error"]


def test_a_document_that_fails_in_the_job_gets_an_error_status(served):
    _, client, _ = served
    status, _, answer = upload(client, "/v1/documents", "broken.docx", BROKEN_XML, bearer(KEY))
    assert status == 202, answer
    done = wait_done(client, json.loads(answer)["id"])
    assert done["status"] == "error" and "not a Word .docx file" in done["error"]
    assert client.call("GET", done["result_url"], headers=bearer(KEY))[0] == 409
    status, _, answer = upload(client, "/translate_file", "broken.docx", BROKEN_XML, source="en", target="zh",
                               api_key=KEY)
    assert status == 400 and "could not be translated" in json.loads(answer)["error"]


@pytest.mark.parametrize("name", ["../../etc/x.docx", "..\\..\\windows\\x.docx", "/etc/passwd.docx",
                                  ".hidden.docx", "a<b>|c:d*?.docx"])
def test_a_hostile_file_name_is_only_a_label(served, name):
    _, client, state = served
    status, _, answer = upload(client, "/v1/documents", name, GOOD, bearer(KEY))
    assert status == 202, answer
    doc = json.loads(answer)
    assert "/" not in doc["name"] and "\\" not in doc["name"] and '"' not in doc["name"]
    assert not doc["name"].startswith(".") and doc["name"].endswith(".zh-Hans.docx")
    assert (state / "files" / doc["id"] / "input.docx").is_file()
    assert not [p for p in state.parent.rglob("*") if p.name in ("x.docx", "passwd.docx", "d.docx")]
    assert not (state.parent / "etc").exists() and not (state / "etc").exists()
    assert wait_done(client, doc["id"])["status"] == "done"
    status, headers, _ = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and "\r" not in headers["Content-Disposition"]


def test_safe_names():
    assert safe_name("../../etc/x.docx") == "x.docx"
    assert safe_name("a\r\nb.txt") == "ab.txt"
    assert safe_name("...") == "document" and safe_name(None) == "document"
    assert len(safe_name("a" * 500 + ".docx")) <= 120 and safe_name("a" * 500 + ".docx").endswith(".docx")


def test_a_real_zip_bomb_is_refused_by_what_it_unpacks_to():
    bomb = _zip({"word/document.xml": b"<w/>", "word/zeros.bin": b"\0" * 5_000_000})
    assert len(bomb) < 20_000
    with pytest.raises(HTTPError, match="unpacks to 5 MB, over the limit of 1 MB"):
        check_zip(bomb, "a.docx", format_for("a.docx"), 1_000_000)
    check_zip(bomb, "a.docx", format_for("a.docx"), 10_000_000)


def test_two_hundred_bad_uploads_and_the_server_still_answers(served):
    _, client, _ = served
    statuses = []
    paths = [("/v1/documents", bearer(KEY), {}),
             ("/v2/document", {"Authorization": f"DeepL-Auth-Key {KEY}"}, {"target_lang": "ZH"}),
             ("/translate_file", {}, {"source": "en", "target": "zh", "api_key": KEY})]
    for i in range(200):
        _, name, data, _, _ = BAD[i % len(BAD)]
        path, headers, fields = paths[i % len(paths)]
        statuses.append(upload(client, path, name, data, headers, **fields)[0])
        if i % 50 == 0:
            assert client.call("GET", "/health")[0] == 200
    assert all(400 <= s < 500 for s in statuses), statuses
    assert client.call("GET", "/health")[0] == 200
    status, answer = client.json("POST", "/translate", {"q": "Good night.", "target": "zh", "api_key": KEY})
    assert status == 200 and answer["translatedText"]
