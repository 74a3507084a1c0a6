"""Documents over HTTP: LibreTranslate's /translate_file, DeepL's /v2/document (with the real
deepl client), our /v1/documents; keys, limits, expiry, restarts, and text staying fast."""

from __future__ import annotations

import dataclasses
import io
import json
import statistics
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from .test_daemon import Client, _parts, _translator, running
from .conftest import run_node
from .test_daemon import DEMO
from .waiting import wait_until

pytest.importorskip("waitress")  # the serve extra; CI installs it
docx = pytest.importorskip("docx")  # the docs extra

from edge_translator.daemon.documents import DocumentStore, FileLimits, _usage  # noqa: E402

KEY, OTHER = "doc-key-0001", "doc-key-0002"
SENTENCES = ["Where is the train station?", "I like green tea.", "The weather is nice today.",
             "We will meet tomorrow morning.", "Please close the door."]


def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def make_docx(paragraphs=SENTENCES) -> bytes:
    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def docx_text(data: bytes) -> str:
    return "\n".join(p.text for p in docx.Document(io.BytesIO(data)).paragraphs)


def multipart(fields: dict, files: dict) -> tuple[bytes, str]:
    """A multipart/form-data body as browsers send it: ``files`` maps a field to ``(filename, bytes)``."""
    boundary = "----edgeTranslatorFormBoundary7MA4YWxkTrZu0gW"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    for name, (filename, data) in files.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     "Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def upload(client: Client, path: str, filename: str, data: bytes, headers=None, **fields):
    body, content_type = multipart(fields, {"file": (filename, data)})
    status, response_headers, answer = client.call("POST", path, body, content_type=content_type,
                                                   headers=headers)
    return status, response_headers, answer


def bearer(key: str) -> dict:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(scope="module")
def demo_parts():
    return _parts(DEMO)


@pytest.fixture(scope="module")
def served(demo_parts, tmp_path_factory):
    """A daemon with two keys and a small size limit, its documents in a temporary state folder."""
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY} 100000\n{OTHER} 100000\n", encoding="utf-8")
    state = tmp_path_factory.mktemp("state")
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=str(keys), state_dir=str(state), max_file_size=300_000,
                 max_queued_documents=50) as (daemon, client):
        yield daemon, client, state


def wait_done(client: Client, doc_id: str, key: str = KEY, timeout: float = 60) -> dict:
    answer: dict = {}

    def finished() -> bool:
        nonlocal answer
        status, answer = client.json("GET", f"/v1/documents/{doc_id}", headers=bearer(key))
        assert status == 200, answer
        return answer["status"] in ("done", "error")

    wait_until(finished, timeout, f"document {doc_id} to finish")
    return answer


# -- our API -------------------------------------------------------------------------------------
def test_native_api_reports_progress_and_serves_the_result_once_done(served):
    _, client, state = served
    text = "\n\n".join(SENTENCES).encode()
    status, headers, data = upload(client, "/v1/documents", "notes.txt", text, bearer(KEY), target="zh-Hans")
    assert status == 202, data
    doc = json.loads(data)
    assert set(doc) == {"id", "name", "status", "sentences_done", "sentences_total", "error", "result_url"}
    assert doc["name"] == "notes.zh-Hans.txt" and doc["status"] in ("queued", "translating", "done")
    assert len(doc["id"]) >= 20 and headers["Location"] == f"/v1/documents/{doc['id']}"
    done = wait_done(client, doc["id"])
    assert done["status"] == "done" and done["error"] is None
    assert done["sentences_done"] == done["sentences_total"] == len(SENTENCES)
    status, headers, data = client.call("GET", done["result_url"], headers=bearer(KEY))
    assert status == 200
    assert headers["Content-Disposition"].startswith('attachment; filename="notes.zh-Hans.txt"')
    out = data.decode("utf-8")
    assert _cjk(out) and out.count("\n\n") == len(SENTENCES) - 1
    status, _, _ = client.call("DELETE", f"/v1/documents/{doc['id']}", headers=bearer(KEY))
    assert status == 204
    assert client.call("GET", f"/v1/documents/{doc['id']}", headers=bearer(KEY))[0] == 404
    assert not (state / "files" / doc["id"]).exists()


def test_a_result_is_409_until_done_and_a_docx_comes_back_translated(served):
    daemon, client, _ = served
    status, _, data = upload(client, "/v1/documents", "report.docx", make_docx(SENTENCES * 20), bearer(KEY))
    doc = json.loads(data)
    assert status == 202
    early, _, answer = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert early in (200, 409), answer  # 200 only if the job already finished
    if early == 409:
        assert "not translated yet" in json.loads(answer)["error"]
    assert wait_done(client, doc["id"])["status"] == "done"
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"].startswith("application/vnd.openxmlformats")
    assert _cjk(docx_text(data))


def test_keys_bind_each_document_to_the_key_that_uploaded_it(served):
    _, client, _ = served
    assert upload(client, "/v1/documents", "a.txt", b"Hello there.", {})[0] == 403
    assert upload(client, "/v1/documents", "a.txt", b"Hello there.", bearer("wrong"))[0] == 403
    status, _, data = upload(client, "/v1/documents", "a.txt", b"Hello there.", bearer(KEY))
    doc = json.loads(data)
    for method, path in (("GET", f"/v1/documents/{doc['id']}"), ("GET", f"/v1/documents/{doc['id']}/result"),
                         ("DELETE", f"/v1/documents/{doc['id']}")):
        assert client.call(method, path, headers=bearer(OTHER))[0] == 404
        assert client.call(method, path)[0] == 403
    assert client.call("GET", "/v1/documents/" + "x" * 24, headers=bearer(KEY))[0] == 404
    assert wait_done(client, doc["id"])["status"] == "done"


# -- DeepL ---------------------------------------------------------------------------------------
def test_the_deepl_client_translates_a_docx_and_a_txt(served, tmp_path):
    import deepl

    _, client, _ = served
    translator = deepl.Translator(KEY, server_url=f"http://{client.host}:{client.port}")
    source, target = tmp_path / "letter.docx", tmp_path / "letter.zh.docx"
    source.write_bytes(make_docx())
    status = translator.translate_document_from_filepath(source, target, target_lang="ZH")
    assert status.done and status.billed_characters == sum(len(s) for s in SENTENCES)
    assert _cjk(docx_text(target.read_bytes()))
    source, target = tmp_path / "notes.txt", tmp_path / "notes.zh.txt"
    source.write_text("\n".join(SENTENCES), encoding="utf-8")
    translator.translate_document_from_filepath(source, target, target_lang="ZH-HANS")
    assert _cjk(target.read_text(encoding="utf-8"))
    glossary = translator.create_glossary("stations", "EN", "ZH", {"train station": "火车总站"})
    source.write_text(SENTENCES[0], encoding="utf-8")
    translator.translate_document_from_filepath(source, target, source_lang="EN", target_lang="ZH",
                                                glossary=glossary)
    assert "火车总站" in target.read_text(encoding="utf-8")
    with pytest.raises(deepl.DeepLException, match="output_format 'pdf'"):
        translator.translate_document_upload(source.read_bytes(), target_lang="ZH", filename="notes.txt",
                                             output_format="pdf")


def test_the_deepl_node_client_translates_a_docx(served, tmp_path):
    _, client, _ = served
    source, target = tmp_path / "letter.docx", tmp_path / "letter.zh.docx"
    source.write_bytes(make_docx())
    result = run_node("deepl_document.mjs", f"http://{client.host}:{client.port}", KEY, str(source), str(target),
                      what="deepl-node")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "done"
    assert _cjk(docx_text(target.read_bytes()))


def test_deepl_document_needs_its_key_and_its_result_is_deleted_once_served(served):
    _, client, _ = served
    auth = {"Authorization": f"DeepL-Auth-Key {KEY}"}
    status, _, data = upload(client, "/v2/document", "a.txt", b"Good morning.", auth, target_lang="ZH")
    handle = json.loads(data)
    assert status == 200 and set(handle) == {"document_id", "document_key"}
    path = f"/v2/document/{handle['document_id']}"
    status, answer = client.json("POST", path, {"document_key": "wrong"}, headers=auth)
    assert status == 404 and "message" in answer
    other = {"Authorization": f"DeepL-Auth-Key {OTHER}"}
    assert client.json("POST", path, {"document_key": handle["document_key"]}, headers=other)[0] == 404

    def done() -> bool:
        status, answer = client.json("POST", path, {"document_key": handle["document_key"]}, headers=auth)
        assert status == 200 and answer["status"] in ("queued", "translating", "done"), answer
        return answer["status"] == "done"

    wait_until(done, 60, "the DeepL document")
    status, _, data = client.call("POST", path + "/result", {"document_key": handle["document_key"]}, headers=auth)
    assert status == 200 and _cjk(data.decode())
    assert client.call("POST", path + "/result", {"document_key": handle["document_key"]}, headers=auth)[0] == 404
    status, _, data = upload(client, "/v2/document", "a.txt", b"Hi.", auth, target_lang="ZH", glossary_id="g1")
    assert status in (400, 404) and "message" in json.loads(data)


# -- LibreTranslate ------------------------------------------------------------------------------
def test_libretranslate_frontend_file_upload_and_download(served):
    _, client, _ = served
    status, settings = client.json("GET", "/frontend/settings")
    assert settings["filesTranslation"] is True
    assert {".txt", ".docx", ".md", ".srt", ".html", ".csv"} <= set(settings["supportedFilesFormat"])
    # what LibreTranslate's page sends (static/js/app.js translateFile): a FormData of file, source, target, api_key
    status, _, data = upload(client, "/translate_file", "memo.docx", make_docx(), source="en", target="zh",
                             api_key=KEY)
    assert status == 200, data
    url = json.loads(data)["translatedFileUrl"]
    parts = urlsplit(url)
    assert parts.scheme == "http" and parts.path.startswith("/download_file/")
    status, headers, data = client.call("GET", parts.path)  # the page opens the link without a key
    assert status == 200 and 'filename="memo.zh-Hans.docx"' in headers["Content-Disposition"]
    assert _cjk(docx_text(data))
    assert client.call("GET", parts.path + f"?api_key={OTHER}")[0] == 404
    assert client.call("GET", "/download_file/unknown-id/memo.docx")[0] == 404
    status, _, data = upload(client, "/translate_file", "memo.docx", make_docx(), source="en", target="zh",
                             api_key="wrong")
    assert status == 403 and "invalid API key" in json.loads(data)["error"]


# -- PowerPoint, through each API -----------------------------------------------------------------
def make_pptx(titles=SENTENCES) -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for title in titles:
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = title
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def pptx_titles(data: bytes) -> list[str]:
    from pptx import Presentation

    return [slide.shapes.title.text for slide in Presentation(io.BytesIO(data)).slides]


def test_a_pptx_comes_back_translated_through_each_api_and_a_broken_one_is_400(served, tmp_path):
    import deepl

    _, client, _ = served
    status, _, data = upload(client, "/v1/documents", "deck.pptx", make_pptx(), bearer(KEY))
    assert status == 202, data
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "done" and doc["sentences_total"] == len(SENTENCES)
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"].endswith("presentationml.presentation")
    titles = pptx_titles(data)
    assert len(titles) == len(SENTENCES) and all(_cjk(t) for t in titles)

    translator = deepl.Translator(KEY, server_url=f"http://{client.host}:{client.port}")
    source, target = tmp_path / "deck.pptx", tmp_path / "deck.zh.pptx"
    source.write_bytes(make_pptx())
    assert translator.translate_document_from_filepath(source, target, target_lang="ZH").done
    assert all(_cjk(t) for t in pptx_titles(target.read_bytes()))

    status, _, data = upload(client, "/translate_file", "deck.pptx", make_pptx(), source="en", target="zh",
                             api_key=KEY)
    assert status == 200, data
    status, _, data = client.call("GET", urlsplit(json.loads(data)["translatedFileUrl"]).path)
    assert status == 200 and all(_cjk(t) for t in pptx_titles(data))

    for name, body, words in (("locked.pptx", bytes.fromhex("d0cf11e0a1b11ae1") + bytes(600), "password-protected"),
                              ("broken.pptx", make_pptx()[:2000], "not a zip archive"),
                              ("other.pptx", make_docx(), "no ppt/presentation.xml part")):
        status, _, data = upload(client, "/v1/documents", name, body, bearer(KEY))
        error = json.loads(data)["error"]
        assert status == 400 and words in error and name in error and "\n" not in error, error


# -- the store itself: limits, expiry, restarts --------------------------------------------------
def _store(demo_parts, folder: Path, **limits) -> tuple[DocumentStore, object, object]:
    translator, _, decoder = _translator(demo_parts)
    store = DocumentStore(translator, folder, FileLimits(**limits))
    store.start()
    return store, translator, decoder


def test_finished_documents_expire_and_are_deleted(demo_parts, tmp_path):
    store, translator, _ = _store(demo_parts, tmp_path / "files", ttl=0.5)
    try:
        doc = store.submit("me", "a.txt", b"Hello.", "zh-Hans")
        assert store.wait(doc, 60) and doc.status == "done"
        assert (tmp_path / "files" / doc.id).is_dir()
        wait_until(lambda: not (tmp_path / "files" / doc.id).exists(), 10, "the expired document's folder to go")
        with pytest.raises(Exception, match="no such document"):
            store.get("me", doc.id)
    finally:
        store.close()
        translator.close(cancel=True)


def test_quota_and_per_key_cap(demo_parts, tmp_path):
    from edge_translator.daemon.http import HTTPError

    store, translator, decoder = _store(demo_parts, tmp_path / "files", max_queued=2)
    decoder.gate.clear()  # nothing finishes while the limits are tried
    try:
        store.submit("me", "a.txt", b"Hello." * 100, "zh-Hans")
        store.submit("me", "b.txt", b"Hello." * 100, "zh-Hans")
        with pytest.raises(HTTPError) as error:
            store.submit("me", "c.txt", b"Hello.", "zh-Hans")
        assert error.value.status == 429 and "the limit is 2" in error.value.message
        # The first job's journal counts against the quota once it is open: wait for it, then
        # leave room for 3,000 bytes more (d needs twice its 1,800, e twice its 6).
        wait_until(decoder.entered.is_set, 30, "the first job to reach the decoder")
        store.limits = dataclasses.replace(store.limits, quota=_usage(tmp_path / "files") + 3000)
        with pytest.raises(HTTPError) as error:
            store.submit("you", "d.txt", b"Hello." * 300, "zh-Hans")
        assert error.value.status == 507
        store.submit("you", "e.txt", b"Hello.", "zh-Hans")  # another key, and room left
    finally:
        decoder.gate.set()
        store.close()
        translator.close(cancel=True)


def test_a_restart_resumes_an_unfinished_document_or_marks_it_failed(demo_parts, tmp_path):
    folder = tmp_path / "files"
    store, translator, decoder = _store(demo_parts, folder)
    decoder.gate.clear()
    doc = store.submit("me", "long.txt", "\n\n".join(SENTENCES * 4).encode(), "zh-Hans")
    lost = store.submit("me", "lost.txt", b"Hello.", "zh-Hans")
    wait_until(lambda: doc.status == "translating" and decoder.entered.is_set(), 10, "the job to start")
    store.close()  # the job is cancelled; the document stays queued for the next start
    decoder.gate.set()
    translator.close(cancel=True)
    saved = json.loads((folder / doc.id / "state.json").read_text())
    assert saved["status"] == "queued"
    (folder / lost.id / lost.input).unlink()
    (folder / "half-made").mkdir()  # an upload that never got its state file
    store, translator, _ = _store(demo_parts, folder)
    try:
        again = store.get("me", doc.id)
        assert store.wait(again, 60) and again.status == "done", again.error
        assert _cjk(store.result(again).decode())
        failed = store.get("me", lost.id)
        assert failed.status == "error" and "lost" in failed.error
        assert not (folder / "half-made").exists()
    finally:
        store.close()
        translator.close(cancel=True)


def test_text_requests_stay_fast_during_a_document_job(served):
    _, client, _ = served

    def one_sentence() -> float:
        started = time.perf_counter()
        status, _ = client.json("POST", "/v1/translate", {"text": "Where is my umbrella?", "api_key": KEY})
        assert status == 200
        return time.perf_counter() - started

    for _ in range(3):
        one_sentence()  # warm
    unloaded = statistics.median(one_sentence() for _ in range(15))
    text = "\n\n".join(f"Paragraph {i} talks about trains, tea, rivers and the weather in the hills." for i in
                       range(400)).encode()
    status, _, data = upload(client, "/v1/documents", "long.txt", text, bearer(KEY))
    doc = json.loads(data)
    wait_until(lambda: client.json("GET", f"/v1/documents/{doc['id']}", headers=bearer(KEY))[1]["status"]
               == "translating", 30, "the job to start")
    loaded, queued = [], []
    for _ in range(15):
        loaded.append(one_sentence())
        queued.append(client.json("GET", "/health")[1]["queued"])
    still = client.json("GET", f"/v1/documents/{doc['id']}", headers=bearer(KEY))[1]
    assert client.call("DELETE", f"/v1/documents/{doc['id']}", headers=bearer(KEY))[0] == 204
    assert still["status"] == "translating", "the job ended before the text requests were measured"
    assert max(queued) > 0, "the engine had no document work while the text requests were measured"
    assert statistics.median(loaded) <= 2 * unloaded + 0.02, (unloaded, loaded)


# -- Excel, through each API ----------------------------------------------------------------------
def make_xlsx(texts=SENTENCES) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    for number, text in enumerate(texts, 1):
        wb.active.append([number, text])
    out = io.BytesIO()
    wb.save(out)
    return out.getvalue()


def xlsx_cells(data: bytes) -> list:
    import openpyxl

    return [[c.value for c in row] for row in openpyxl.load_workbook(io.BytesIO(data)).active.iter_rows()]


def test_an_xlsx_comes_back_translated_through_each_api_and_a_broken_one_is_400(served, tmp_path):
    import deepl

    _, client, _ = served
    status, _, data = upload(client, "/v1/documents", "prices.xlsx", make_xlsx(), bearer(KEY))
    assert status == 202, data
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "done" and doc["sentences_total"] == len(SENTENCES)
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"].endswith("spreadsheetml.sheet")
    rows = xlsx_cells(data)
    assert [r[0] for r in rows] == list(range(1, len(SENTENCES) + 1)) and all(_cjk(r[1]) for r in rows)

    translator = deepl.Translator(KEY, server_url=f"http://{client.host}:{client.port}")
    source, target = tmp_path / "prices.xlsx", tmp_path / "prices.zh.xlsx"
    source.write_bytes(make_xlsx())
    assert translator.translate_document_from_filepath(source, target, target_lang="ZH").done
    assert all(_cjk(r[1]) for r in xlsx_cells(target.read_bytes()))

    status, _, data = upload(client, "/translate_file", "prices.xlsx", make_xlsx(), source="en", target="zh",
                             api_key=KEY)
    assert status == 200, data
    status, _, data = client.call("GET", urlsplit(json.loads(data)["translatedFileUrl"]).path)
    assert status == 200 and all(_cjk(r[1]) for r in xlsx_cells(data))

    for name, body, words in (("locked.xlsx", bytes.fromhex("d0cf11e0a1b11ae1") + bytes(600), "password-protected"),
                              ("broken.xlsx", make_xlsx()[:2000], "not a zip archive"),
                              ("other.xlsx", make_pptx(), "no xl/workbook.xml part")):
        status, _, data = upload(client, "/v1/documents", name, body, bearer(KEY))
        error = json.loads(data)["error"]
        assert status == 400 and words in error and name in error and "\n" not in error, error
    status, _, data = upload(client, "/v1/documents", "macros.xlsm", make_xlsx(), bearer(KEY))
    assert status == 202, data  # a valid package: the job reads it and refuses it, in one line
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "error" and "macro-enabled" in doc["error"] and "\n" not in doc["error"], doc


def test_an_epub_comes_back_translated_and_a_broken_one_fails_alone(served, tmp_path):
    import zipfile

    from .test_doc_epub import _book

    _, client, _ = served
    book = _book(tmp_path / "book.epub").read_bytes()
    status, _, data = upload(client, "/v1/documents", "book.epub", book, bearer(KEY))
    assert status == 202, data
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "done", doc
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"] == "application/epub+zip"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist()[0] == "mimetype" and _cjk(archive.read("OEBPS/Text/chapter2.xhtml").decode())
    status, _, data = upload(client, "/v1/documents", "broken.epub", book[:900], bearer(KEY))
    error = json.loads(data)["error"]
    assert status == 400 and "not a zip archive" in error and "broken.epub" in error, error
    missing = _book(tmp_path / "missing.epub", lambda n, d: None if n.endswith("chapter2.xhtml") else d)
    status, _, data = upload(client, "/v1/documents", "missing.epub", missing.read_bytes(), bearer(KEY))
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "error" and "chapter 2 of its spine" in doc["error"], doc


def test_an_odt_comes_back_translated_and_a_locked_one_fails_alone(served, tmp_path):
    import zipfile

    from .test_doc_opendoc import LOCKED_MANIFEST, _odt

    _, client, _ = served
    status, _, data = upload(client, "/v1/documents", "guide.odt", _odt(tmp_path / "guide.odt").read_bytes(),
                             bearer(KEY))
    assert status == 202, data
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "done", doc
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"] == "application/vnd.oasis.opendocument.text"
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        assert archive.namelist()[0] == "mimetype" and _cjk(archive.read("content.xml").decode())
    locked = _odt(tmp_path / "locked.odt", extra={"META-INF/manifest.xml": LOCKED_MANIFEST.encode()})
    status, _, data = upload(client, "/v1/documents", "locked.odt", locked.read_bytes(), bearer(KEY))
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "error" and "password-protected" in doc["error"], doc


def test_a_pdf_comes_back_translated_and_a_fake_one_is_400(served, tmp_path):
    from .test_doc_pdf import _page_texts, _pdf

    _, client, _ = served
    status, _, data = upload(client, "/v1/documents", "report.pdf", _pdf(tmp_path / "r.pdf", pages=2).read_bytes(),
                             bearer(KEY))
    assert status == 202, data
    doc = wait_done(client, json.loads(data)["id"])
    assert doc["status"] == "done", doc
    status, headers, data = client.call("GET", doc["result_url"], headers=bearer(KEY))
    assert status == 200 and headers["Content-Type"] == "application/pdf"
    pages = _page_texts(data)
    assert len(pages) == 2 and all(_cjk(p) and "garden" not in p for p in pages)
    status, _, data = upload(client, "/v1/documents", "fake.pdf", b"Annual report\n", bearer(KEY))
    error = json.loads(data)["error"]
    assert status == 400 and "fake.pdf is not a PDF file" in error, error
