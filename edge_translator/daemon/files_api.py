"""Documents over HTTP, in each API's shape: LibreTranslate's ``/translate_file``, DeepL's
``/v2/document`` and our own ``/v1/documents``.

All three put the upload in the :class:`~.documents.DocumentStore`, which checks it,
translates it as bulk work and keeps the result until it expires. LibreTranslate's
endpoint answers once the file is translated, as LibreTranslate does; DeepL's and ours
answer at once with an id to poll. Every endpoint takes the API key; an id is bound to
the key that uploaded it. LibreTranslate's download link carries an unguessable id and
works without the key (its web page opens the link as it is), but a key that is given
must be the owner's.
"""

from __future__ import annotations

from urllib.parse import quote

from .context import Context
from .http import HTTPError, Request, Response, json_response, one
from .keys import admit_deepl, admit_libre, admit_native, libre_key
from .languages import check_source

#: Most seconds ``/translate_file`` waits for its translation (LibreTranslate answers when done).
SYNC_WAIT = 1800.0

_TYPES = {".txt": "text/plain; charset=utf-8", ".md": "text/markdown; charset=utf-8",
          ".markdown": "text/markdown; charset=utf-8", ".srt": "application/x-subrip; charset=utf-8",
          ".vtt": "text/vtt; charset=utf-8", ".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8",
          ".xhtml": "application/xhtml+xml", ".csv": "text/csv; charset=utf-8",
          ".tsv": "text/tab-separated-values; charset=utf-8", ".tab": "text/tab-separated-values; charset=utf-8",
          ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
          ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
          ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
          ".epub": "application/epub+zip", ".pdf": "application/pdf", ".odt": "application/vnd.oasis.opendocument.text",
          ".odp": "application/vnd.oasis.opendocument.presentation",
          ".ods": "application/vnd.oasis.opendocument.spreadsheet"}


# -- shared ------------------------------------------------------------------------------------
def _upload(app: Context, request: Request, owner: str, target: str, glossary_id: str | None):
    """Check the form's ``file`` and queue it (the body limit is the upload's, not text's)."""
    upload = request.params.uploads.get("file")
    if upload is None:
        raise HTTPError(400, "missing field 'file': send the document as a multipart/form-data file upload")
    glossary, digest = None, ""
    if glossary_id:
        glossaries = getattr(app, "glossaries", None)
        if glossaries is None:
            raise HTTPError(400, "glossaries are not available on this server; leave glossary_id out")
        glossary, digest = glossaries.lookup(owner, glossary_id)
    return app.documents.submit(owner, upload.filename, upload.data, target, glossary, digest)


def _open_uploads(app: Context, request: Request) -> None:
    """Let this request's body be as large as an upload, and refuse it when there is nowhere to keep it."""
    if not app.documents.enabled:
        raise HTTPError(503, "this server keeps no documents: start it with --state-dir DIR or --files-dir DIR")
    request.max_body = max(request.max_body, app.documents.max_body)


def _file(app: Context, doc, data: bytes) -> Response:
    """The translated file as a download."""
    return Response(data, 200, _TYPES.get(doc.suffix, "application/octet-stream"),
                    (("Content-Disposition", _disposition(doc.name)), ("X-Content-Type-Options", "nosniff"),
                     ("Cache-Control", "no-store")))


def _disposition(name: str) -> str:
    """``attachment`` with an ASCII fallback name and the real one (RFC 6266)."""
    fallback = "".join(ch if 32 <= ord(ch) < 127 and ch not in '"\\%' else "_" for ch in name)
    return f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{quote(name, safe='')}"


def _base_url(request: Request) -> str:
    env = request.environ
    host = env.get("HTTP_HOST") or f"{env.get('SERVER_NAME', 'localhost')}:{env.get('SERVER_PORT', '80')}"
    return f"{env.get('wsgi.url_scheme', 'http')}://{host}{env.get('SCRIPT_NAME', '')}"


# -- LibreTranslate ----------------------------------------------------------------------------
def translate_file(app: Context, request: Request) -> Response:
    """``POST /translate_file``: multipart ``file``, ``source``, ``target``, ``api_key``;
    answers ``{"translatedFileUrl": ...}`` when the translation is done."""
    _open_uploads(app, request)
    params = request.params
    owner = admit_libre(app, request)
    check_source(one(params, "source", "auto"))
    target = app.targets.resolve(one(params, "target", "zh"))
    doc = _upload(app, request, owner, target, None)
    if not app.documents.wait(doc, SYNC_WAIT, request.gone):
        if request.gone():
            app.documents.delete(doc)
            raise HTTPError(499, "client disconnected")
        raise HTTPError(503, "the document is still being translated; it was too large to wait for")
    if doc.status == "error":
        app.documents.delete(doc)
        if doc.no_space:
            raise HTTPError(507, doc.error)
        raise HTTPError(400, f"the file could not be translated: {doc.error}")
    return json_response({"translatedFileUrl": f"{_base_url(request)}/download_file/{doc.id}/{quote(doc.name)}"})


def download_file(app: Context, request: Request) -> Response:
    """``GET /download_file/{id}/{name}``: the translated file (the id is the secret; a key
    that is given must be the owner's)."""
    owner = admit_libre(app, request) if libre_key(request) else None
    doc = app.documents.get(owner, request.args["id"])
    return _file(app, doc, app.documents.result(doc))


# -- DeepL -------------------------------------------------------------------------------------
def deepl_upload(app: Context, request: Request) -> Response:
    """``POST /v2/document``: multipart ``file``, ``target_lang``, ``source_lang``,
    ``glossary_id``, ``output_format``; answers ``{document_id, document_key}``."""
    _open_uploads(app, request)
    params = request.params
    owner = admit_deepl(app, request)
    source = one(params, "source_lang", "")
    if source:
        check_source(source, "source_lang")
    target = app.targets.resolve(one(params, "target_lang"), "target_lang", deepl=True)
    formality = (one(params, "formality", "default") or "default").lower()
    if formality in ("more", "less"):
        raise HTTPError(400, f"formality {formality!r} is not supported for Chinese; use prefer_{formality} or "
                             "leave it out")
    upload = params.uploads.get("file")
    wanted = (one(params, "output_format", "") or "").lower().lstrip(".")
    if wanted and upload is not None:
        own = upload.filename.rsplit(".", 1)[-1].lower() if "." in upload.filename else ""
        if wanted != own:
            raise HTTPError(400, f"output_format {wanted!r} is not supported: a document comes back in its own "
                                 f"format ({own or 'none'})")
    glossary_id = one(params, "glossary_id", "") or None
    doc = _upload(app, request, owner, target, glossary_id)
    return json_response({"document_id": doc.id, "document_key": doc.key})


def _deepl_doc(app: Context, request: Request):
    owner = admit_deepl(app, request)
    key = one(request.params, "document_key", "")
    if not key:
        raise HTTPError(400, "missing field 'document_key'")
    return app.documents.get(owner, request.args["id"], key)


def deepl_status(app: Context, request: Request) -> Response:
    """``POST /v2/document/{id}`` with ``document_key``: its status."""
    doc = _deepl_doc(app, request)
    body: dict = {"document_id": doc.id, "status": doc.status}
    remaining = doc.seconds_remaining()
    if remaining is not None:
        body["seconds_remaining"] = remaining
    if doc.status == "done":
        body["billed_characters"] = doc.characters
    if doc.status == "error":
        body["error_message"] = doc.error
    return json_response(body)


def deepl_result(app: Context, request: Request) -> Response:
    """``POST /v2/document/{id}/result`` with ``document_key``: the file, which is then deleted."""
    doc = _deepl_doc(app, request)
    if doc.status in ("queued", "translating"):
        raise HTTPError(503, "the document is not translated yet", (("Retry-After", "2"),))
    data = app.documents.result(doc)
    app.documents.delete(doc)
    return _file(app, doc, data)


# -- ours --------------------------------------------------------------------------------------
def _describe(doc) -> dict:
    return {"id": doc.id, "name": doc.name, "status": doc.status, "sentences_done": doc.sentences_done,
            "sentences_total": doc.sentences_total, "error": doc.error or None,
            "result_url": f"/v1/documents/{doc.id}/result"}


def native_upload(app: Context, request: Request) -> Response:
    """``POST /v1/documents``: multipart ``file``, ``target``, ``glossary_id``; 202 and the document."""
    _open_uploads(app, request)
    params = request.params
    owner = admit_native(app, request)
    target = app.targets.resolve(one(params, "target", "zh"))
    doc = _upload(app, request, owner, target, one(params, "glossary_id", "") or None)
    return json_response(_describe(doc), 202, (("Location", f"/v1/documents/{doc.id}"),))


def native_status(app: Context, request: Request) -> Response:
    """``GET /v1/documents/{id}``: status and progress."""
    return json_response(_describe(app.documents.get(admit_native(app, request), request.args["id"])))


def native_result(app: Context, request: Request) -> Response:
    """``GET /v1/documents/{id}/result``: the translated file (409 until it is done)."""
    doc = app.documents.get(admit_native(app, request), request.args["id"])
    return _file(app, doc, app.documents.result(doc))


def native_delete(app: Context, request: Request) -> Response:
    """``DELETE /v1/documents/{id}``: cancel or forget it, and delete its files."""
    doc = app.documents.get(admit_native(app, request), request.args["id"])
    app.documents.delete(doc)
    return Response(b"", 204, "text/plain")


#: LibreTranslate's and ours (errors as ``{"error": ...}``).
ROUTES = {
    ("POST", "/translate_file"): translate_file,
    ("GET", "/download_file/{id}/{name}"): download_file,
    ("POST", "/v1/documents"): native_upload,
    ("GET", "/v1/documents/{id}"): native_status,
    ("GET", "/v1/documents/{id}/result"): native_result,
    ("DELETE", "/v1/documents/{id}"): native_delete,
}

#: DeepL's (errors as ``{"message": ...}``, which its clients read).
DEEPL_ROUTES = {
    ("POST", "/v2/document"): deepl_upload,
    ("POST", "/v2/document/{id}"): deepl_status,
    ("POST", "/v2/document/{id}/result"): deepl_result,
}
