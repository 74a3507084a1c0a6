"""HTTP as the API handlers see it: the request, the response, errors, and the parameter readers.

Parameters come as real clients send them: query string, JSON, urlencoded or multipart
forms. Every reader returns ``{name: [values]}``: a form may repeat a field (``q=a&q=b``),
and a JSON array becomes the list itself, so the API modules ask for "one string" or "one
or more strings" and get the same answer whatever the client's encoding. The handlers
import only this module (and :mod:`.context` for what they are given), never the app.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from urllib.parse import parse_qs

JSON_TYPES = ("application/json", "text/json")
#: Types whose bodies are read as JSON when they look like it (browsers send a string body as text/plain).
SNIFFED_TYPES = ("text/plain", "")
FORM_TYPE = "application/x-www-form-urlencoded"
MULTIPART_TYPE = "multipart/form-data"


class Params(dict):
    """``{name: [values]}``, remembering which names came as a JSON array, and which
    multipart fields were file uploads (kept out of the values: only a field an API reads
    is refused for being one, so a form's unused empty file input does no harm)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.arrays: set[str] = set()
        self.files: set[str] = set()
        self.uploads: dict[str, Upload] = {}
        """The file uploads by field name (the last one where a field repeats)."""

    def merge(self, other: Params) -> None:
        """Take ``other``'s fields (they win on a clash), its arrays and its file fields."""
        self.update(other)
        self.arrays = (self.arrays - set(other)) | other.arrays
        self.files |= other.files
        self.uploads.update(other.uploads)

    def missing(self, name: str) -> HTTPError:
        """The 400 for a field that is not there (or came as a file upload)."""
        if name in self.files:
            return HTTPError(400, f"field {name!r} is a file upload; send the text itself")
        return HTTPError(400, f"missing field {name!r}")


@dataclass(frozen=True)
class Upload:
    """A file sent in a multipart form."""

    filename: str
    """The name the client gave it: a label, never a path to use."""
    data: bytes


class HTTPError(Exception):
    """An answer other than 200: the status, a one-line message, and extra headers."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers


@dataclass
class Request:
    """One HTTP request, as the handlers see it."""

    environ: dict
    method: str
    path: str
    max_body: int
    args: dict[str, str] = field(default_factory=dict)
    """The path's ``{name}`` segments, by name (see :mod:`.routes`)."""
    _params: Params | None = None

    @property
    def params(self) -> Params:
        """Query string and body fields (parsed on first use)."""
        if self._params is None:
            self._params = parse(self.environ, self.max_body)
        return self._params

    @property
    def address(self) -> str:
        """The client's address (behind a trusted proxy, the one it forwarded: :mod:`.forwarded`)."""
        return self.environ.get("REMOTE_ADDR", "?")

    def header(self, name: str) -> str:
        return self.environ.get("HTTP_" + name.upper().replace("-", "_"), "")

    def gone(self) -> bool:
        """Whether the client has disconnected (waitress tells, with request lookahead on)."""
        probe = self.environ.get("waitress.client_disconnected")
        return bool(probe and probe())


@dataclass
class Response:
    """What a handler returns."""

    body: bytes | Iterable[bytes]
    status: int = 200
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()


def json_response(value, status: int = 200, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    """A JSON answer, UTF-8, non-ASCII characters as they are."""
    return Response(json.dumps(value, ensure_ascii=False).encode("utf-8"), status, "application/json", headers)


def read_body(environ: dict, max_body: int) -> bytes:
    """The request body, refused with 413 when it is (or claims to be) over ``max_body`` bytes.

    A body without ``Content-Length`` (chunked) is read to its end when the server says
    the input is terminated (``wsgi.input_terminated``); waitress also fills the length in.
    """
    too_big = HTTPError(413, f"request body is over the limit of {max_body} bytes")
    raw = environ.get("CONTENT_LENGTH")
    if not raw:
        if not environ.get("wsgi.input_terminated"):
            return b""
        body = environ["wsgi.input"].read(max_body + 1)
        if len(body) > max_body:
            raise too_big
        return body
    try:
        length = int(raw)
    except ValueError:
        raise HTTPError(400, "Content-Length is not a number") from None
    if length > max_body:
        raise HTTPError(413, f"request body of {length} bytes is over the limit of {max_body} bytes")
    if length <= 0:
        return b""
    body = environ["wsgi.input"].read(length)
    if len(body) < length:
        raise HTTPError(400, f"request body ended after {len(body)} of {length} bytes")
    return body


def parse(environ: dict, max_body: int) -> Params:
    """All parameters of a request: the query string, then the body's (which win on a clash).

    Raises:
        HTTPError: 400 for malformed JSON, form data or text that is not UTF-8; 413 for
            a body over ``max_body``; 415 for a body of another type.
    """
    params = Params()
    encoding = environ.get("HTTP_CONTENT_ENCODING", "").strip().lower()
    if encoding not in ("", "identity"):
        raise HTTPError(415, f"Content-Encoding {encoding!r} is not supported; send the body uncompressed")
    query = environ.get("QUERY_STRING", "")
    if query:
        params.merge(_form(query.encode("latin-1"), "query string"))
    body = read_body(environ, max_body)
    if not body.strip():
        return params
    content_type = environ.get("CONTENT_TYPE", "").split(";")[0].strip().lower()
    looks_json = body.lstrip(b"\xef\xbb\xbf \t\r\n")[:1] == b"{"
    if content_type in JSON_TYPES or content_type.endswith("+json") or (looks_json and content_type in
                                                                        (*SNIFFED_TYPES, FORM_TYPE)):
        params.merge(_json(body))
    elif content_type == MULTIPART_TYPE:
        params.merge(_multipart(body, environ.get("CONTENT_TYPE", "")))
    elif content_type in (FORM_TYPE, *SNIFFED_TYPES):
        params.merge(_form(body, "form body"))
    else:
        raise HTTPError(415, f"cannot read a {content_type} body; send JSON ({JSON_TYPES[0]}) or a form "
                             f"({FORM_TYPE} or {MULTIPART_TYPE})")
    return params


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"the {where} is not valid UTF-8 (byte {exc.start}); send UTF-8 text") from None


def _json(body: bytes) -> Params:
    try:
        value = json.loads(_decode(body, "JSON body"))
    except json.JSONDecodeError as exc:
        raise HTTPError(400, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # too many digits, too deeply nested
        raise HTTPError(400, f"unreadable JSON: {str(exc).splitlines()[0] or type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise HTTPError(400, f"the JSON body must be an object, not {type(value).__name__}")
    params = Params({key: (item if isinstance(item, list) else [item]) for key, item in value.items()})
    params.arrays = {key for key, item in value.items() if isinstance(item, list)}
    return params


def _form(data: bytes, where: str) -> Params:
    text = _decode(data, where)
    try:
        return Params(parse_qs(text, keep_blank_values=True, errors="strict", max_num_fields=10_000))
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPError(400, f"malformed {where}: {exc}") from None


def _multipart(body: bytes, content_type: str) -> Params:
    if "boundary=" not in content_type:
        raise HTTPError(400, "multipart/form-data without a boundary")
    message = BytesParser(policy=HTTP).parsebytes(b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
                                                  + body)
    if not message.is_multipart():
        raise HTTPError(400, "malformed multipart/form-data body")
    params = Params()
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not name:
            continue
        if part.get_filename() is not None:
            params.files.add(str(name))
            params.uploads[str(name)] = Upload(str(part.get_filename()), part.get_payload(decode=True) or b"")
            continue
        payload = part.get_payload(decode=True) or b""
        params.setdefault(str(name), []).append(_decode(payload, f"form field {name!r}"))
    return params


def strings(params: Params, *names: str) -> tuple[list[str], bool]:
    """One or more strings under the first of ``names`` present: ``(values, as_list)``.

    ``as_list`` is true for a JSON array or a repeated form field, so the answer can mirror
    the request's shape. A JSON ``null`` counts as missing.

    Raises:
        HTTPError: 400 if the field is missing, an empty list, or holds a non-string.
    """
    name = next((n for n in names if params.get(n) not in (None, [None])), None)
    if name is None:
        raise params.missing(next((n for n in names if n in params.files), names[0]))
    values = params[name]
    if not values:
        raise HTTPError(400, f"field {name!r} is an empty list")
    for value in values:
        if not isinstance(value, str):
            raise HTTPError(400, f"field {name!r} must hold strings, not {type(value).__name__}")
    return list(values), name in params.arrays or len(values) > 1


def one(params: Params, name: str, default=None, kind: type = str):
    """A single value (a form may repeat a field: the last one counts), checked against ``kind``.

    A JSON ``null`` counts as missing. Without a default, a missing field is an error.

    Raises:
        HTTPError: 400 if the value has the wrong type, is a JSON array, or is missing
            and has no default.
    """
    values = params.get(name)
    if not values or values[-1] is None:
        if default is None:
            raise params.missing(name)
        return default
    if name in params.arrays:
        raise HTTPError(400, f"field {name!r} must be a single value, not a list")
    value = values[-1]
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
            return value.lower() in ("1", "true", "yes", "on")
        raise HTTPError(400, f"field {name!r} must be true or false, not {value!r}")
    if kind is int:
        if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lstrip("+-").isdigit() and len(value) < 20:
            return int(value)
        raise HTTPError(400, f"field {name!r} must be an integer, not {str(value)[:40]!r}")
    if not isinstance(value, str):
        raise HTTPError(400, f"field {name!r} must be a string, not {type(value).__name__}")
    return value
