"""DeepL glossaries on the daemon: the real ``deepl`` client (v2 through ``Translator``, v3
through ``DeepLClient``), the store behind them, and ``glossary_id`` on ``/v2/translate``.

A term the demo model would never write (老司机 for "teacher") shows the glossary at work:
it comes out exactly as given with the glossary, and not without it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading

import pytest

from edge_translator.daemon import service as service_module
from edge_translator.daemon.glossaries import FILE_NAME, Dictionary, GlossaryStore, parse_entries
from edge_translator.daemon.http import HTTPError
from edge_translator.daemon.service import Service
from edge_translator.documents.glossary import Entry, Glossary

from .test_daemon import DEMO, _parts, _translator, running

deepl = pytest.importorskip("deepl")
from deepl.api_data import MultilingualGlossaryDictionaryEntries as DictionaryEntries  # noqa: E402
import deepl.util  # noqa: E402

KEY, OTHER = "glossary-key-1", "glossary-key-2"
TERM, AS_GIVEN = "teacher", "老司机"
SENTENCE = "The teacher is here."


@pytest.fixture(scope="module")
def demo_parts():
    return _parts(DEMO)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(f"{KEY} 10000\n{OTHER} 10000\n", encoding="utf-8")
    return str(path)


@pytest.fixture(scope="module")
def served(demo_parts, keys, tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=keys, state_dir=str(state), max_body=256 * 1024) as (daemon, client):
        yield daemon, client, state


def _url(daemon) -> str:
    host, port = daemon.address
    return f"http://{host}:{port}"


def _auth(key: str = KEY) -> dict:
    return {"Authorization": f"DeepL-Auth-Key {key}"}


def _translate(client, text: str, glossary_id: str | None = None, key: str = KEY, **fields):
    body = {"text": [text], "source_lang": "EN", "target_lang": "ZH", **fields}
    if glossary_id is not None:
        body["glossary_id"] = glossary_id
    return client.json("POST", "/v2/translate", body, headers=_auth(key))


def _create_v2(client, entries: str = f"{TERM}\t{AS_GIVEN}", key: str = KEY, **fields) -> tuple[int, dict]:
    body = {"name": "terms", "source_lang": "EN", "target_lang": "ZH", "entries": entries, "entries_format": "tsv",
            **fields}
    return client.json("POST", "/v2/glossaries", body, headers=_auth(key))


# -- the real clients --------------------------------------------------------------------------
def test_the_model_alone_does_not_write_the_term(served):
    _, client, _ = served
    status, body = _translate(client, SENTENCE)
    assert status == 200 and AS_GIVEN not in body["translations"][0]["text"]


def test_deepl_translator_v2_glossaries(served):
    daemon, _, _ = served
    translator = deepl.Translator(KEY, server_url=_url(daemon))
    pairs = [(p.source_lang, p.target_lang) for p in translator.get_glossary_languages()]
    assert pairs == [("en", "zh")]
    info = translator.create_glossary("Team terms", "EN", "ZH", {TERM: AS_GIVEN, "Acme Cloud": "极云"})
    assert info.ready and info.entry_count == 2 and (info.source_lang, info.target_lang) == ("EN", "ZH")
    assert len(info.glossary_id) == 36 and info.name == "Team terms"
    result = translator.translate_text(SENTENCE, source_lang="EN", target_lang="ZH", glossary=info)
    assert AS_GIVEN in result.text, result.text
    by_id = translator.translate_text(["Acme Cloud is fast.", SENTENCE], source_lang="EN", target_lang="ZH-HANS",
                                      glossary=info.glossary_id)
    assert "极云" in by_id[0].text and AS_GIVEN in by_id[1].text
    assert info.glossary_id in [g.glossary_id for g in translator.list_glossaries()]
    assert translator.get_glossary(info.glossary_id).entry_count == 2
    assert translator.get_glossary_entries(info) == {TERM: AS_GIVEN, "Acme Cloud": "极云"}
    csv_text = '"Smith, Jones",史密斯琼斯\nbook,书,en,zh\n'
    from_csv = translator.create_glossary_from_csv("csv", "EN", "ZH", csv_text)
    assert translator.get_glossary_entries(from_csv) == {"Smith, Jones": "史密斯琼斯", "book": "书"}
    translator.delete_glossary(info)
    translator.delete_glossary(from_csv)
    with pytest.raises(deepl.GlossaryNotFoundException):
        translator.get_glossary(info.glossary_id)
    with pytest.raises(deepl.DeepLException, match="not found"):
        translator.translate_text(SENTENCE, source_lang="EN", target_lang="ZH", glossary=info.glossary_id)
    assert info.glossary_id not in [g.glossary_id for g in translator.list_glossaries()]


def test_deepl_client_v3_multilingual_glossaries(served):
    daemon, _, _ = served
    client = deepl.DeepLClient(KEY, server_url=_url(daemon))
    entries = DictionaryEntries("EN", "ZH", {TERM: AS_GIVEN})
    info = client.create_multilingual_glossary("multi", [entries])
    assert [(d.source_lang, d.target_lang, d.entry_count) for d in info.dictionaries] == [("EN", "ZH", 1)]
    assert client.get_multilingual_glossary(info.glossary_id).name == "multi"
    assert info.glossary_id in [g.glossary_id for g in client.list_multilingual_glossaries()]
    got = client.get_multilingual_glossary_entries(info, "EN", "ZH").dictionaries
    assert len(got) == 1 and deepl.util.convert_tsv_to_dict(got[0].entries) == {TERM: AS_GIVEN}
    result = client.translate_text(SENTENCE, source_lang="EN", target_lang="ZH-HANS", glossary=info)
    assert AS_GIVEN in result.text, result.text

    renamed = client.update_multilingual_glossary_name(info, "renamed")
    assert renamed.name == "renamed" and client.get_multilingual_glossary(info.glossary_id).name == "renamed"
    merged = client.update_multilingual_glossary_dictionary(
        info, DictionaryEntries("EN", "ZH", {"book": "书"}))
    assert merged.dictionaries[0].entry_count == 2  # merged: the teacher stays
    replaced = client.replace_multilingual_glossary_dictionary(
        info, DictionaryEntries("EN", "ZH", {"student": "学生"}))
    assert (replaced.source_lang, replaced.target_lang, replaced.entry_count) == ("EN", "ZH", 1)
    got = client.get_multilingual_glossary_entries(info, "EN", "ZH").dictionaries[0]
    assert deepl.util.convert_tsv_to_dict(got.entries) == {"student": "学生"}
    assert AS_GIVEN not in client.translate_text(SENTENCE, source_lang="EN", target_lang="ZH", glossary=info).text

    client.delete_multilingual_glossary_dictionary(info, source_lang="EN", target_lang="ZH")
    assert client.get_multilingual_glossary(info.glossary_id).dictionaries == []
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary_entries(info, "EN", "ZH")
    with pytest.raises(deepl.DeepLException, match="no EN to ZH dictionary"):
        client.translate_text(SENTENCE, source_lang="EN", target_lang="ZH", glossary=info.glossary_id)
    client.delete_multilingual_glossary(info)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_multilingual_glossary(info.glossary_id)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.delete_multilingual_glossary(info)


def test_deepl_client_refuses_a_pair_other_than_en_zh(served):
    daemon, _, _ = served
    client = deepl.DeepLClient(KEY, server_url=_url(daemon))
    with pytest.raises(deepl.DeepLException, match="EN to DE are not supported") as error:
        client.create_multilingual_glossary("de", [DictionaryEntries("EN", "DE", {"a": "b"})])
    assert error.value.http_status_code == 400
    with pytest.raises(deepl.DeepLException, match="DE to EN are not supported"):
        deepl.Translator(KEY, server_url=_url(daemon)).create_glossary("x", "DE", "EN", {"a": "b"})


# -- raw requests ------------------------------------------------------------------------------
@pytest.mark.parametrize("entries, fmt, line, words", [
    (f"{TERM}\t{AS_GIVEN}\nbook\n", "tsv", 2, "found 1 column"),
    ("a\tb\n\nc\td\te\n", "tsv", 3, "found 3 columns"),
    ("a\tb\nb\tc\na\tz\n", "tsv", 3, "already on line 1"),
    ("a\tb\nc\t\n", "tsv", 2, "target term is empty"),
    ("a\tb\nc\x07d\te\n", "tsv", 2, "control character"),
    ("a,b\nc,d,e\n", "csv", 2, "found 3 columns"),
    ("a,b\nc,d,en,de\n", "csv", 2, "differ from the dictionary's EN to ZH"),
    ('a,b\n"c,d\n', "csv", 2, "malformed CSV"),
])
def test_a_bad_entry_is_a_400_naming_its_line(served, entries, fmt, line, words):
    _, client, _ = served
    status, body = _create_v2(client, entries, entries_format=fmt)
    assert status == 400 and f"line {line}:" in body["message"] and words in body["message"], body
    status, body = client.json("POST", "/v3/glossaries", {"name": "n", "dictionaries": [
        {"source_lang": "EN", "target_lang": "ZH", "entries": entries, "entries_format": fmt}]}, headers=_auth())
    assert status == 400 and f"dictionaries[0].entries line {line}:" in body["message"], body


@pytest.mark.parametrize("fields, words", [
    ({"entries_format": "xml"}, "must be tsv or csv"),
    ({"entries": ""}, "holds no entries"),
    ({"name": ""}, "needs a name"),
    ({"target_lang": "JA"}, "EN to JA are not supported"),
    ({"source_lang": None}, "missing field 'source_lang'"),
])
def test_a_bad_glossary_is_a_400(served, fields, words):
    _, client, _ = served
    status, body = _create_v2(client, **fields)
    assert status == 400 and words in body["message"], body


def test_unknown_ids_and_other_keys_glossaries_are_404(served):
    _, client, _ = served
    status, made = _create_v2(client)
    assert status == 201
    mine = made["glossary_id"]
    for glossary_id, key in (("00000000-0000-4000-8000-000000000000", KEY), ("nonsense", KEY), (mine, OTHER)):
        for method, path in (("GET", "/v2/glossaries/{}"), ("GET", "/v2/glossaries/{}/entries"),
                             ("GET", "/v3/glossaries/{}"), ("GET", "/v3/glossaries/{}/entries?source_lang=EN&"
                                                                   "target_lang=ZH"),
                             ("DELETE", "/v2/glossaries/{}"), ("DELETE", "/v3/glossaries/{}")):
            status, body = client.json(method, path.format(glossary_id), headers=_auth(key))
            assert status == 404 and "not found" in body["message"], (method, path, key, body)
        status, body = client.json("PATCH", f"/v3/glossaries/{glossary_id}", {"name": "x"}, headers=_auth(key))
        assert status == 404, body
        status, body = _translate(client, SENTENCE, glossary_id, key=key)
        assert status == 404 and "not found" in body["message"], body
    for version in ("v2", "v3"):
        status, listing = client.json("GET", f"/{version}/glossaries", headers=_auth(OTHER))
        assert status == 200 and mine not in [g["glossary_id"] for g in listing["glossaries"]]
    status, body = _translate(client, SENTENCE, mine)  # the owner still has it
    assert status == 200 and AS_GIVEN in body["translations"][0]["text"]
    assert client.call("DELETE", f"/v2/glossaries/{mine}", headers=_auth())[0] == 204


def test_translate_with_a_glossary_needs_source_lang_and_a_key(served):
    _, client, _ = served
    _, made = _create_v2(client)
    status, body = client.json("POST", "/v2/translate", {"text": [SENTENCE], "target_lang": "ZH",
                                                         "glossary_id": made["glossary_id"]}, headers=_auth())
    assert status == 400 and "source_lang is required" in body["message"]
    status, body = client.json("GET", "/v2/glossaries")
    assert status == 403 and "DeepL-Auth-Key" in body["message"]


def test_glossary_in_html_and_several_glossaries(served):
    _, client, _ = served
    _, first = _create_v2(client)
    _, second = _create_v2(client, f"{TERM}\t别的\nbook\t书本\n")
    html = f'<p title="{TERM}">The <b>{TERM}</b> reads a book.</p>'
    status, body = _translate(client, html, first["glossary_id"], tag_handling="html")
    out = body["translations"][0]["text"]
    assert status == 200 and f'<p title="{AS_GIVEN}">' in out and f"<b>{AS_GIVEN}</b>" in out, out
    status, body = client.json("POST", "/v2/translate", {
        "text": ["The teacher has a book."], "source_lang": "EN", "target_lang": "ZH",
        "glossary_ids": [first["glossary_id"], second["glossary_id"]]}, headers=_auth())
    out = body["translations"][0]["text"]
    assert status == 200 and AS_GIVEN in out and "书本" in out and "别的" not in out, out


def test_v2_entries_come_as_tsv_only_and_v3_patch_needs_a_change(served):
    _, client, _ = served
    _, made = _create_v2(client)
    path = f"/v2/glossaries/{made['glossary_id']}/entries"
    status, headers, data = client.call("GET", path, headers={**_auth(), "Accept": "text/tab-separated-values"})
    assert status == 200 and headers["Content-Type"].startswith("text/tab-separated-values")
    assert data.decode() == f"{TERM}\t{AS_GIVEN}"
    status, _, data = client.call("GET", path, headers={**_auth(), "Accept": "application/xml, text/*;q=0.5"})
    assert status == 200 and data.decode() == f"{TERM}\t{AS_GIVEN}"
    status, _, data = client.call("GET", path, headers={**_auth(), "Accept": "application/json"})
    assert status == 415 and "text/tab-separated-values" in json.loads(data)["message"]
    status, body = client.json("PATCH", f"/v3/glossaries/{made['glossary_id']}", {}, headers=_auth())
    assert status == 400 and "nothing to change" in body["message"]
    status, body = client.json("PUT", f"/v3/glossaries/{made['glossary_id']}/dictionaries",
                               {"source_lang": "EN", "target_lang": "FR", "entries": "a\tb"}, headers=_auth())
    assert status == 400 and "EN to FR are not supported" in body["message"]
    status, body = client.json("DELETE", f"/v3/glossaries/{made['glossary_id']}/dictionaries?source_lang=EN",
                               headers=_auth())
    assert status == 400 and "target_lang" in body["message"]


def test_keys_are_not_written_to_the_store(served):
    _, client, state = served
    assert _create_v2(client)[0] == 201
    data = b"".join(p.read_bytes() for p in state.iterdir() if p.name.startswith(FILE_NAME))
    assert KEY.encode() not in data


# -- persistence and the store -----------------------------------------------------------------
def test_glossaries_persist_across_a_restart(demo_parts, keys, tmp_path):
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=keys, state_dir=str(tmp_path)) as (_, client):
        assert client.json("GET", "/v2/glossaries", headers=_auth()) == (200, {"glossaries": []})
        assert not (tmp_path / FILE_NAME).exists(), "listing must not create the store"
        status, made = _create_v2(client)
        assert status == 201 and (tmp_path / FILE_NAME).exists()
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=keys, state_dir=str(tmp_path)) as (_, client):
        status, listing = client.json("GET", "/v3/glossaries", headers=_auth())
        assert status == 200 and [g["glossary_id"] for g in listing["glossaries"]] == [made["glossary_id"]]
        status, body = _translate(client, SENTENCE, made["glossary_id"])
        assert status == 200 and AS_GIVEN in body["translations"][0]["text"]
        assert client.json("GET", f"/v2/glossaries/{made['glossary_id']}", headers=_auth(OTHER))[0] == 404


def test_the_store_without_keys_is_shared_and_with_keys_is_not(tmp_path):
    entries = parse_entries(f"{TERM}\t{AS_GIVEN}")
    shared = GlossaryStore(tmp_path / "a", shared=True)
    made = shared.create("10.0.0.1", "n", [Dictionary("en", "zh", entries)])
    glossary, digest = shared.lookup("10.0.0.2", made.glossary_id)
    assert glossary.entries == (Entry(TERM, AS_GIVEN, False, 1),) and len(digest) == 16
    owned = GlossaryStore(tmp_path / "b")
    made = owned.create("key-a", "n", [Dictionary("en", "zh", entries)])
    assert owned.lookup("key-a", made.glossary_id)[1] == digest
    with pytest.raises(HTTPError) as error:
        owned.lookup("key-b", made.glossary_id)
    assert error.value.status == 404
    shared.close()
    owned.close()


def test_the_store_is_safe_across_threads_and_without_a_state_folder(tmp_path):
    store = GlossaryStore(tmp_path)
    entries = (("a", "b"),)
    errors: list[BaseException] = []

    def make(k: int) -> None:
        try:
            for n in range(10):
                store.create(f"owner{k}", f"g{n}", [Dictionary("en", "zh", entries)])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=make, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and all(len(store.list(f"owner{k}")) == 10 for k in range(6))
    store.close()
    with sqlite3.connect(tmp_path / FILE_NAME) as db:
        assert db.execute("SELECT COUNT(*) FROM glossaries").fetchone() == (60,)
    nowhere = GlossaryStore(None)
    assert nowhere.list("x") == []
    with pytest.raises(HTTPError) as error:
        nowhere.create("x", "n", [Dictionary("en", "zh", entries)])
    assert error.value.status == 503 and "--state-dir" in error.value.message


# -- a lost placeholder ------------------------------------------------------------------------
class _Model(Service):
    """A service whose "model" writes router as 路由器 after ``damage`` (what it does to
    placeholders), and records what it was sent."""

    def __init__(self, damage):
        super().__init__(translator=None)
        self.damage = damage
        self.sent: list[list[str]] = []

    def submit(self, texts, target, deadline):
        self.sent.append(list(texts))
        return texts

    def _collect(self, submissions, gone, deadline):
        return [[self.damage(text).replace("router", "路由器")] for text in submissions]


@pytest.fixture
def joined(monkeypatch):
    monkeypatch.setattr(service_module, "join_results", lambda results: results[0])


def test_a_lost_placeholder_is_retried_with_the_other_style(joined):
    glossary = Glossary((Entry("router", "XR-路由", False, 1),))
    model = _Model(lambda text: text.replace("Tatoeba", ""))
    assert model.translate(["My router broke."], "zh-Hans", glossary=glossary) == ["My XR-路由 broke."]
    assert len(model.sent) == 2 and "Tatoeba" in model.sent[0][0] and "CD" in model.sent[1][0]


def test_a_placeholder_lost_in_both_styles_leaves_that_term_unmasked(joined):
    glossary = Glossary((Entry("router", "XR-路由", False, 1), Entry("Acme", "极", False, 2)))
    model = _Model(lambda text: re.sub(r"(?<=The )(Tatoeba|CD) ", "", text))  # loses the first term's
    out = model.translate(["The router of Acme.", "Acme is here."], "zh-Hans", glossary=glossary)
    assert model.sent == [["The Tatoeba of CD.", "Tatoeba is here."], ["The CD of Tatoeba."],
                          ["The router of Tatoeba."]]
    assert out == ["The 路由器 of 极.", "极 is here."]  # the lost term translated its own way, the rest as given


def test_a_lost_url_falls_back_to_plain_translation(joined):
    glossary = Glossary((Entry("Acme", "极", False, 1),))
    model = _Model(lambda text: text.replace("Tatoeba", "").replace("CD", ""))
    out = model.translate(["See https://example.com/router now."], "zh-Hans", glossary=glossary)
    assert len(model.sent) == 3 and model.sent[2] == ["See https://example.com/router now."]
    assert out == ["See https://example.com/路由器 now."]


def test_a_form_creates_a_glossary_as_deepls_curl_examples_do(served):
    _, client, _ = served
    status, made = client.form("/v2/glossaries", [("name", "form"), ("source_lang", "en"), ("target_lang", "zh"),
                                                  ("entries_format", "csv"), ("entries", f"{TERM},{AS_GIVEN}\n")],
                               headers=_auth())
    assert status == 201 and made["entry_count"] == 1, made
    status, body = client.form("/v2/translate", [("text", SENTENCE), ("source_lang", "EN"), ("target_lang", "ZH"),
                                                 ("glossary_id", made["glossary_id"])], headers=_auth())
    assert status == 200 and AS_GIVEN in body["translations"][0]["text"]


def test_a_damaged_store_is_a_503_and_the_server_goes_on(demo_parts, keys, tmp_path):
    (tmp_path / FILE_NAME).write_bytes(b"this is not a database" * 100)
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=keys, state_dir=str(tmp_path)) as (_, client):
        status, body = client.json("GET", "/v2/glossaries", headers=_auth())
        assert status == 503 and "glossary store" in body["message"] and "\n" not in body["message"]
        status, body = _create_v2(client)
        assert status == 503
        status, body = _translate(client, SENTENCE)
        assert status == 200 and AS_GIVEN not in body["translations"][0]["text"]


def test_a_glossary_of_the_most_entries_applies_its_terms(tmp_path):
    from edge_translator.daemon.glossaries import MAX_ENTRIES

    lines = [f"term{n}\t词{n}" for n in range(MAX_ENTRIES - 1)] + [f"{TERM}\t{AS_GIVEN}"]
    store = GlossaryStore(tmp_path)
    made = store.create("k", "big", [Dictionary("en", "zh", parse_entries("\n".join(lines)))])
    assert made.v2()["entry_count"] == MAX_ENTRIES
    glossary, _ = store.lookup("k", made.glossary_id)
    masked = glossary.mask("The teacher met term7 and term12345 and term1234567.")
    assert [(s.source, s.restore_to) for s in masked.slots] == [(TERM, AS_GIVEN), ("term7", "词7"),
                                                               ("term12345", "词12345")]
    with pytest.raises(HTTPError, match="at most"):
        parse_entries("\n".join(lines + ["one\tmore"]))
    store.close()
