"""DeepL's glossary endpoints: v2 (one language pair, what ``deepl.Translator`` uses) and v3
(dictionaries, what ``deepl.DeepLClient``'s multilingual glossaries use).

Both views share one store (:mod:`.glossaries`): a glossary made through v2 is a v3
glossary with one dictionary. Only EN→ZH dictionaries are accepted, since that is the
model's pair. Keys, errors (``{"message": ...}``) and status codes are DeepL's: 201 for a
new glossary, 204 for a deletion, 404 for an id the key does not own.
"""

from __future__ import annotations

from .context import Context
from .glossaries import PAIR, Dictionary, check_name, language_pair, parse_entries
from .http import HTTPError, Request, Response, json_response, one
from .keys import admit_deepl

TSV_TYPE = "text/tab-separated-values"


def _owner(app: Context, request: Request) -> str:
    return admit_deepl(app, request)


def _dictionary(fields: dict, where: str = "entries") -> Dictionary:
    """A dictionary from ``source_lang``, ``target_lang``, ``entries`` and ``entries_format``."""
    pair = language_pair(fields.get("source_lang"), fields.get("target_lang"))
    if fields.get("entries") is None:
        raise HTTPError(400, f"missing field {where!r}: give the terms as 'source<TAB>target' lines")
    entries = parse_entries(fields.get("entries"), fields.get("entries_format") or "tsv", pair, where)
    return Dictionary(*pair, entries)


def _fields(params, *names: str) -> dict:
    return {name: one(params, name, "") for name in names}


def _dictionaries(params, required: bool) -> list[Dictionary]:
    """v3's ``dictionaries``: a JSON array of objects, one language pair each."""
    values = params.get("dictionaries")
    if values in (None, [None], []):
        if required:
            raise HTTPError(400, "missing field 'dictionaries': give a JSON array of {source_lang, target_lang, "
                                 "entries, entries_format}")
        return []
    out: list[Dictionary] = []
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            raise HTTPError(400, "field 'dictionaries' must hold JSON objects {source_lang, target_lang, entries, "
                                 "entries_format}; send the body as JSON")
        dictionary = _dictionary(value, f"dictionaries[{index}].entries")
        if any((d.source_lang, d.target_lang) == (dictionary.source_lang, dictionary.target_lang) for d in out):
            raise HTTPError(400, f"dictionaries[{index}] repeats the pair {dictionary.source_lang.upper()} to "
                                 f"{dictionary.target_lang.upper()}")
        out.append(dictionary)
    return out


def _pair_from_query(params) -> tuple[str, str]:
    for name in ("source_lang", "target_lang"):
        if not one(params, name, ""):
            raise HTTPError(400, f"missing parameter {name!r}: name the dictionary (source_lang=EN&target_lang=ZH)")
    return language_pair(one(params, "source_lang"), one(params, "target_lang"))


def _deleted() -> Response:
    return Response(b"", 204, "text/plain")


# -- v2 ----------------------------------------------------------------------------------------
def language_pairs(app: Context, request: Request) -> Response:
    """``GET /v2/glossary-language-pairs``: EN→ZH, the model's pair."""
    _owner(app, request)
    return json_response({"supported_languages": [{"source_lang": PAIR[0], "target_lang": PAIR[1]}]})


def v2_create(app: Context, request: Request) -> Response:
    """``POST /v2/glossaries``: ``name``, ``source_lang``, ``target_lang``, ``entries``, ``entries_format``."""
    owner = _owner(app, request)
    params = request.params
    name = check_name(one(params, "name", ""))
    dictionary = _dictionary(_fields(params, "source_lang", "target_lang", "entries", "entries_format"))
    return json_response(app.glossaries.create(owner, name, [dictionary]).v2(), 201)


def v2_list(app: Context, request: Request) -> Response:
    """``GET /v2/glossaries``."""
    return json_response({"glossaries": [g.v2() for g in app.glossaries.list(_owner(app, request))]})


def v2_get(app: Context, request: Request) -> Response:
    """``GET /v2/glossaries/{glossary_id}``."""
    return json_response(app.glossaries.get(_owner(app, request), request.args["glossary_id"]).v2())


def v2_entries(app: Context, request: Request) -> Response:
    """``GET /v2/glossaries/{glossary_id}/entries``: TSV (the one type DeepL offers)."""
    owner = _owner(app, request)
    accepted = {part.split(";")[0].strip().lower() for part in request.header("Accept").split(",")}
    if not accepted & {"", "*/*", "text/*", TSV_TYPE}:
        raise HTTPError(415, f"entries come as {TSV_TYPE} only; ask for that type in the Accept header")
    glossary_id = request.args["glossary_id"]
    text = app.glossaries.dictionary(owner, glossary_id, PAIR).tsv() \
        if app.glossaries.get(owner, glossary_id).dictionaries else ""
    return Response(text.encode("utf-8"), 200, f"{TSV_TYPE}; charset=utf-8")


def v2_delete(app: Context, request: Request) -> Response:
    """``DELETE /v2/glossaries/{glossary_id}``."""
    app.glossaries.delete(_owner(app, request), request.args["glossary_id"])
    return _deleted()


# -- v3 ----------------------------------------------------------------------------------------
def v3_create(app: Context, request: Request) -> Response:
    """``POST /v3/glossaries``: ``name`` and ``dictionaries``."""
    owner = _owner(app, request)
    name = check_name(one(request.params, "name", ""))
    dictionaries = _dictionaries(request.params, required=True)
    return json_response(app.glossaries.create(owner, name, dictionaries).v3(), 201)


def v3_list(app: Context, request: Request) -> Response:
    """``GET /v3/glossaries``."""
    return json_response({"glossaries": [g.v3() for g in app.glossaries.list(_owner(app, request))]})


def v3_get(app: Context, request: Request) -> Response:
    """``GET /v3/glossaries/{glossary_id}``."""
    return json_response(app.glossaries.get(_owner(app, request), request.args["glossary_id"]).v3())


def v3_update(app: Context, request: Request) -> Response:
    """``PATCH /v3/glossaries/{glossary_id}``: a new ``name``, and/or ``dictionaries`` whose
    entries are merged into the stored ones (added, or replacing a source term's target)."""
    owner = _owner(app, request)
    params = request.params
    name = check_name(one(params, "name")) if one(params, "name", "") else None
    dictionaries = _dictionaries(params, required=False)
    if name is None and not dictionaries:
        raise HTTPError(400, "nothing to change: give a new 'name' or 'dictionaries'")
    return json_response(app.glossaries.update(owner, request.args["glossary_id"], name, dictionaries).v3())


def v3_entries(app: Context, request: Request) -> Response:
    """``GET /v3/glossaries/{glossary_id}/entries?source_lang=EN&target_lang=ZH``."""
    owner = _owner(app, request)
    pair = _pair_from_query(request.params)
    d = app.glossaries.dictionary(owner, request.args["glossary_id"], pair)
    return json_response({"dictionaries": [{"source_lang": d.source_lang, "target_lang": d.target_lang,
                                            "entries": d.tsv(), "entries_format": "tsv"}]})


def v3_replace(app: Context, request: Request) -> Response:
    """``PUT /v3/glossaries/{glossary_id}/dictionaries``: one dictionary's entries replace the stored ones."""
    owner = _owner(app, request)
    dictionary = _dictionary(_fields(request.params, "source_lang", "target_lang", "entries", "entries_format"))
    return json_response(app.glossaries.replace(owner, request.args["glossary_id"], dictionary).info())


def v3_delete_dictionary(app: Context, request: Request) -> Response:
    """``DELETE /v3/glossaries/{glossary_id}/dictionaries?source_lang=EN&target_lang=ZH``."""
    owner = _owner(app, request)
    app.glossaries.delete_dictionary(owner, request.args["glossary_id"], _pair_from_query(request.params))
    return _deleted()


def v3_delete(app: Context, request: Request) -> Response:
    """``DELETE /v3/glossaries/{glossary_id}``."""
    app.glossaries.delete(_owner(app, request), request.args["glossary_id"])
    return _deleted()


ROUTES = {
    ("GET", "/v2/glossary-language-pairs"): language_pairs,
    ("POST", "/v2/glossaries"): v2_create,
    ("GET", "/v2/glossaries"): v2_list,
    ("GET", "/v2/glossaries/{glossary_id}"): v2_get,
    ("GET", "/v2/glossaries/{glossary_id}/entries"): v2_entries,
    ("DELETE", "/v2/glossaries/{glossary_id}"): v2_delete,
    ("POST", "/v3/glossaries"): v3_create,
    ("GET", "/v3/glossaries"): v3_list,
    ("GET", "/v3/glossaries/{glossary_id}"): v3_get,
    ("PATCH", "/v3/glossaries/{glossary_id}"): v3_update,
    ("DELETE", "/v3/glossaries/{glossary_id}"): v3_delete,
    ("GET", "/v3/glossaries/{glossary_id}/entries"): v3_entries,
    ("PUT", "/v3/glossaries/{glossary_id}/dictionaries"): v3_replace,
    ("DELETE", "/v3/glossaries/{glossary_id}/dictionaries"): v3_delete_dictionary,
}
