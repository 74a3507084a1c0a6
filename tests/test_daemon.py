"""The daemon in-process: every API's shapes, every error, limits, cancel, metrics (waitress on a free port)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlencode

import pytest

from edge_translator.core.bundle import load_bundle
from edge_translator.core.decode import Seq2Seq
from edge_translator.core.engine import EngineOptions
from edge_translator.core.tokenizer import Tokenizer
from edge_translator.core.translator import Translator
from edge_translator.toolchain.testmodels import english_sentences

from .conftest import ROOT
from .test_engine import Recording
from .waiting import wait_until

pytest.importorskip("waitress")  # the serve extra; CI installs it

from edge_translator.daemon.server import Daemon, ServeOptions  # noqa: E402

DEMO = ROOT / "models" / "tatoeba-en-zh-small"


def _parts(path: Path):
    bundle = load_bundle(path)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    return bundle, tokenizer, Seq2Seq.load(bundle, threads=1)


@pytest.fixture(scope="module")
def demo_parts():
    return _parts(DEMO)


def _translator(parts, delay=0.0, **engine) -> tuple[Translator, Recording, Recording]:
    bundle, tokenizer, model = parts
    encoder, decoder = Recording(model.encoder), Recording(model.decoder, delay)
    return (Translator(bundle, Seq2Seq(encoder, decoder, bundle), tokenizer, cache=None,
                       engine=EngineOptions(**engine)), encoder, decoder)


class Client:
    """Plain HTTP calls against a running daemon."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port

    def call(self, method: str, path: str, body: bytes | str | dict | None = None, content_type: str | None = None,
             headers: dict | None = None, timeout: float = 30) -> tuple[int, dict, bytes]:
        if isinstance(body, dict):
            body, content_type = json.dumps(body).encode(), content_type or "application/json"
        elif isinstance(body, str):
            body = body.encode()
        all_headers = dict(headers or {})
        if content_type:
            all_headers["Content-Type"] = content_type
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=all_headers)
            response = conn.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            conn.close()

    def json(self, method: str, path: str, body=None, **kwargs) -> tuple[int, object]:
        status, _, data = self.call(method, path, body, **kwargs)
        return status, json.loads(data)

    def form(self, path: str, fields, **kwargs) -> tuple[int, object]:
        return self.json("POST", path, urlencode(fields, doseq=True), content_type="application/x-www-form-urlencoded",
                         **kwargs)


@contextmanager
def running(translator: Translator, **options):
    """A daemon over ``translator`` on a free port, in a thread; stopped (drained) on exit."""
    options.setdefault("timeout", 30.0)
    daemon = Daemon(ServeOptions(port=0, http_threads=16, **options), translator)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        yield daemon, Client(*daemon.address)
    finally:
        daemon.stop()
        thread.join(30)
        translator.close(cancel=True)
        assert not thread.is_alive()


@pytest.fixture(scope="module")
def demo(demo_parts):
    translator, _, _ = _translator(demo_parts)
    with running(translator, char_limit=2000, batch_limit=8, max_body=64 * 1024) as (daemon, client):
        yield daemon, client


def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


# -- LibreTranslate ---------------------------------------------------------------------------
def test_libretranslate_accepts_json_form_repeated_and_multipart(demo):
    _, client = demo
    status, one = client.json("POST", "/translate", {"q": "Where is the station?", "source": "en", "target": "zh"})
    assert status == 200 and set(one) == {"translatedText"} and _cjk(one["translatedText"])
    status, many = client.json("POST", "/translate", {"q": ["Hello.", "I like tea."], "source": "en", "target": "zh"})
    assert status == 200 and len(many["translatedText"]) == 2 and all(_cjk(t) for t in many["translatedText"])
    status, form = client.form("/translate", {"q": "Where is the station?", "source": "en", "target": "zh-Hans"})
    assert status == 200 and form == one
    status, repeated = client.form("/translate", [("q", "Hello."), ("q", "I like tea."), ("source", "en"),
                                                   ("target", "zh")])
    assert status == 200 and repeated == many
    boundary = "xYzBoundary"
    multipart = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                        for k, v in (("q", "Where is the station?"), ("source", "en"), ("target", "zh")))
    status, mp = client.json("POST", "/translate", multipart + f"--{boundary}--\r\n",
                             content_type=f"multipart/form-data; boundary={boundary}")
    assert status == 200 and mp == one


def test_libretranslate_auto_source_and_alternatives(demo):
    _, client = demo
    status, body = client.json("POST", "/translate", {"q": "The weather is nice today.", "source": "auto",
                                                      "target": "zh", "alternatives": 3})
    assert status == 200 and body["alternatives"] == []
    assert body["detectedLanguage"]["language"] == "en" and body["detectedLanguage"]["confidence"] >= 90
    status, body = client.json("POST", "/translate", {"q": ["Good morning.", "See you."], "source": "auto",
                                                      "target": "zh"})
    assert status == 200 and [d["language"] for d in body["detectedLanguage"]] == ["en", "en"]


def test_html_keeps_the_markup(demo):
    _, client = demo
    page = ('<p class="x" title="A greeting">Good morning, <b>friend</b>!</p>\n'
            '<pre>do not translate</pre><img src="a.png" alt="A red apple"><!-- note -->')
    status, body = client.json("POST", "/translate", {"q": page, "source": "en", "target": "zh", "format": "html"})
    out = body["translatedText"]
    assert status == 200 and out.startswith('<p class="x" title="') and out.count("<b>") == out.count("</b>") == 1
    assert "<pre>do not translate</pre>" in out and '<img src="a.png" alt="' in out and out.endswith("<!-- note -->")
    assert "Good morning" not in out and "A red apple" not in out and _cjk(out)


def test_html_sentences_across_inline_elements_are_translated_whole(demo):
    """The sentence is one translation (the same as the plain text's), and each element's
    tags come back once, byte for byte, around part of it; in both APIs."""
    import html as _html
    import re

    _, client = demo
    sentence = "Please read the manual before you start the machine."
    page = ('<p>Please read the <a href="/docs" title="The manual">manual</a> before you '
            '<em>start</em> the machine.</p>')
    status, plain = client.json("POST", "/translate", {"q": sentence, "source": "en", "target": "zh"})
    assert status == 200
    status, body = client.json("POST", "/translate", {"q": page, "source": "en", "target": "zh", "format": "html"})
    status2, deepl = client.json("POST", "/v2/translate", {"text": [page], "target_lang": "ZH", "tag_handling": "html"})
    assert status == status2 == 200
    for out in (body["translatedText"], deepl["translations"][0]["text"]):
        assert out.startswith("<p>") and out.endswith("</p>")
        assert _html.unescape(re.sub(r"<[^>]*>", "", out)) == plain["translatedText"]
        assert out.count('<a href="/docs" title="') == out.count("</a>") == out.count("<em>") == out.count("</em>") == 1
        assert out.index("<em>") < out.index("</em>") and out.index("<a ") < out.index("</a>")
        assert not out.index("<a ") < out.index("<em>") < out.index("</a>")  # not one inside the other
        assert "The manual" not in out and _cjk(out)


def test_languages_settings_and_detect(demo):
    _, client = demo
    status, languages = client.json("GET", "/languages")
    assert status == 200 and languages[0]["code"] == "en" and "zh" in languages[0]["targets"]
    assert {entry["code"] for entry in languages} >= {"en", "zh", "zh-Hans"}
    # a GET carrying a form body, as libretranslatepy sends it
    status, again = client.json("GET", "/languages", "api_key=", content_type="application/x-www-form-urlencoded")
    assert status == 200 and again == languages
    status, settings = client.json("GET", "/frontend/settings")
    assert status == 200 and settings["charLimit"] == 2000 and settings["keyRequired"] is False
    status, found = client.json("POST", "/detect", {"q": "This is a sentence in English, as you can see."})
    assert status == 200 and found[0] == {"confidence": 100.0, "language": "en"}
    status, found = client.json("POST", "/detect", {"q": "今天天气很好，我们去公园散步吧。"})
    assert status == 200 and found[0]["language"] == "zh" and found[0]["confidence"] > 90


@pytest.mark.parametrize("text,low,high", [
    ("The quick brown fox jumps over the lazy dog, and it was not amused by any of this.", 90, 100),
    ("Hello world", 60, 100),
    ("Contact us", 60, 100),
    ("La Croix sparkling water", 55, 100),  # one foreign function word is not enough
    ("Hola", 55, 65),
    ("Le chat est sur la table et il dort depuis ce matin.", 0, 29),
    ("Der Hund schläft im Garten, weil es heute sehr warm ist.", 0, 29),
    ("Ich bin in Berlin, was machst du an diesem Tag?", 0, 29),  # "in" and "was" are English words too
    ("Dit is een mooi huis in de stad.", 0, 29),
    ("El perro come en la casa con su familia.", 0, 29),
    ("Una pizza con la mozzarella, per favore.", 0, 29),
    ("O livro está na mesa da sala.", 0, 29),
    ("我们明天早上八点在火车站见面。", 0, 5),
    ("Мы встретимся завтра утром на вокзале.", 0, 5),
    ("12345 67.89 %%% ---", 50, 50),
])
def test_english_confidence_classes(text, low, high):
    from edge_translator.daemon.languages import english_confidence

    assert low <= english_confidence(text) <= high


@pytest.mark.parametrize("text,language", [
    ("Le chat est sur la table et il dort depuis ce matin.", "fr"),
    ("Ich bin in Berlin, was machst du an diesem Tag?", "de"),
    ("El perro come en la casa con su familia.", "es"),
    ("Una pizza con la mozzarella, per favore.", "it"),
    ("Dit is een mooi huis in de stad.", "nl"),
    ("今天天气很好，我们去公园散步吧。", "zh"),
    ("Мы встретимся завтра утром на вокзале.", "und"),
    ("Where is the train station?", "en"),
])
def test_detect_names_the_likeliest_language_first(text, language):
    from edge_translator.daemon.languages import detect

    found = detect(text)
    assert found[0]["language"] == language and found[0]["confidence"] >= 50
    assert [entry["confidence"] for entry in found] == sorted((e["confidence"] for e in found), reverse=True)


def test_auto_source_judges_the_request_whole_and_passes_chinese_through(demo):
    _, client = demo
    # a page of English with one word in Chinese: everything comes back, the Chinese as it was
    status, body = client.json("POST", "/translate", {"q": ["Welcome to our site", "東京", "Contact us"],
                                                      "source": "auto", "target": "zh"})
    assert status == 200 and body["translatedText"][1] == "東京"
    assert _cjk(body["translatedText"][0]) and _cjk(body["translatedText"][2])
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "zh", "en"]
    # a request that is German as a whole is refused, naming the way to force it
    status, body = client.json("POST", "/translate", {"q": "Ich bin in Berlin, was machst du an diesem Tag?",
                                                      "source": "auto", "target": "zh"})
    assert status == 400 and "looks like de" in body["error"] and "set source to en" in body["error"]
    status, body = client.json("POST", "/translate", {"q": "Ich bin in Berlin, was machst du an diesem Tag?",
                                                      "source": "en", "target": "zh"})
    assert status == 200
    # DeepL without source_lang: the same judgement, Chinese reported as ZH and left alone
    auth = {"Authorization": "DeepL-Auth-Key k"}
    status, body = client.json("POST", "/v2/translate", {"text": ["Good morning.", "你好世界"], "target_lang": "ZH"},
                               headers=auth)
    assert status == 200 and [t["detected_source_language"] for t in body["translations"]] == ["EN", "ZH"]
    assert body["translations"][1]["text"] == "你好世界" and body["translations"][1]["billed_characters"] == 4
    status, body = client.json("POST", "/v2/translate", {"text": ["Le chat est sur la table et il dort."],
                                                         "target_lang": "ZH"}, headers=auth)
    assert status == 400 and "looks like fr" in body["message"] and "source_lang" in body["message"]
    status, body = client.json("POST", "/v2/translate", {"text": ["Le chat est sur la table et il dort."],
                                                         "target_lang": "ZH", "source_lang": "EN"}, headers=auth)
    assert status == 200


# -- DeepL ---------------------------------------------------------------------------------------
def test_deepl_translate_json_and_form(demo):
    _, client = demo
    auth = {"Authorization": "DeepL-Auth-Key anything:fx"}
    status, body = client.json("POST", "/v2/translate", {"text": ["Good morning.", "Thank you!"], "target_lang": "ZH"},
                               headers=auth)
    assert status == 200 and len(body["translations"]) == 2
    first = body["translations"][0]
    assert first["detected_source_language"] == "EN" and first["billed_characters"] == len("Good morning.")
    assert _cjk(first["text"])
    status, form = client.form("/v2/translate", [("text", "Good morning."), ("text", "Thank you!"),
                                                 ("target_lang", "ZH-HANS"), ("source_lang", "EN")], headers=auth)
    assert status == 200 and form == body
    status, usage = client.json("GET", "/v2/usage", headers=auth)
    assert status == 200 and usage["character_count"] >= 23 and usage["character_limit"] > usage["character_count"]
    status, source = client.json("GET", "/v2/languages?type=source", headers=auth)
    assert status == 200 and source == [{"language": "EN", "name": "English"}]
    status, target = client.json("GET", "/v2/languages?type=target", headers=auth)
    # the embedded model has both scripts
    assert status == 200 and {t["language"] for t in target} == {"ZH", "ZH-HANS", "ZH-HANT"}


# -- our own API -------------------------------------------------------------------------------
def test_v1_translate_returns_sentences_with_spans_and_scores(demo):
    _, client = demo
    text = "It rains today.  We stay at home.\n\nThe cat sleeps."
    status, body = client.json("POST", "/v1/translate", {"text": text})
    assert status == 200 and body["target"] == "zh-Hans"
    sentences = body["translations"]["sentences"]
    assert [s["source"] for s in sentences] == ["It rains today.", "We stay at home.", "The cat sleeps."]
    for s in sentences:
        start, end = s["span"]
        assert text[start:end] == s["source"] and s["stop"] == "eos" and -10 < s["score"] <= 0 and s["ids"]
    assert "\n\n" in body["translations"]["text"]


def test_v1_stream_sends_each_sentence_as_it_is_done(demo_parts):
    translator, _, _ = _translator(demo_parts, delay=0.01, max_batch_size=1)
    with running(translator) as (_, client):
        text = " ".join(english_sentences(6, seed=21))
        conn = http.client.HTTPConnection(client.host, client.port, timeout=30)
        conn.request("POST", "/v1/translate", json.dumps({"text": [text, "Hello."], "stream": True}),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == "application/x-ndjson"
        lines, stamps = [], []
        while line := response.readline():
            lines.append(json.loads(line))
            stamps.append(time.perf_counter())
        conn.close()
    assert lines[-1]["done"] is True and lines[-1]["sentences"] == 7
    assert [line["item"] for line in lines[:-1]] == [0] * 6 + [1]
    assert all(_cjk(line["text"]) for line in lines[:-1])
    # with one sentence per batch and a slow decoder, lines arrive over time, not all at the end
    assert stamps[-2] - stamps[0] > 0.05


def test_health_and_metrics(demo):
    daemon, client = demo
    client.json("POST", "/translate", {"q": "Good night.", "target": "zh"})
    status, health = client.json("GET", "/health")
    assert status == 200 and health["status"] == "ready" and health["model"] == "tatoeba-en-zh-small"
    assert health["checksum"] == daemon.app.translator.model_id and health["quantization"] == "rowwise"
    status, headers, body = client.call("HEAD", "/health")
    assert status == 200 and body == b""
    status, headers, body = client.call("GET", "/metrics")
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'edge_translator_requests_total{route="/translate",status="200"}' in text
    assert 'edge_translator_request_seconds_bucket{le="0.5",route="/translate"}' in text
    for name in ("edge_translator_sentences_total", "edge_translator_output_tokens_total",
                 "edge_translator_batch_size_bucket", "edge_translator_queue_depth", "process_resident_memory_bytes"):
        assert name in text, name
    stats = daemon.app.translator.engine.stats()
    for name, value in (("edge_translator_decoder_steps_total", stats.steps),
                        ("edge_translator_failed_batches_total", stats.failed_batches),
                        ("edge_translator_admitted_rows_total", stats.admitted),
                        ("edge_translator_gathers_total", stats.gathered)):
        assert f"{name} {float(value)}" in text.splitlines(), name
    assert stats.steps > 0


def test_deepl_xml_ignore_tags_and_glossary_listing(demo):
    """What Weblate's DeepL backend sends: tag_handling xml with ignore_tags, and glossary listings."""
    _, client = demo
    auth = {"Authorization": "DeepL-Auth-Key k"}
    xml = '<x id="1" title="Keep me">Good morning</x>, <keep>Bob Smith</keep> and <y/>friends.'
    status, body = client.json("POST", "/v2/translate", {"text": [xml], "source_lang": "EN", "target_lang": "ZH-HANS",
                                                         "tag_handling": "xml", "ignore_tags": ["keep"]}, headers=auth)
    out = body["translations"][0]["text"]
    assert status == 200 and out.startswith('<x id="1" title="Keep me">') and "<keep>Bob Smith</keep>" in out
    assert "<y/>" in out and "Good morning" not in out and _cjk(out)
    # a form gives the ignored tags comma-separated; HTML honours them too
    status, form = client.form("/v2/translate", [("text", "<p>Hello <keep>Bob Smith</keep> there.</p>"),
                                                 ("target_lang", "ZH"), ("tag_handling", "html"),
                                                 ("ignore_tags", "keep,x")], headers=auth)
    assert status == 200 and "<keep>Bob Smith</keep>" in form["translations"][0]["text"]
    for formality in ("default", "prefer_more", "PREFER_LESS"):  # ignored where a language has none, as DeepL does
        status, _ = client.json("POST", "/v2/translate", {"text": ["Hi"], "target_lang": "ZH", "source_lang": "EN",
                                                          "formality": formality}, headers=auth)
        assert status == 200, formality
    status, listing = client.json("GET", "/v2/glossaries", headers=auth)
    assert status == 200 and isinstance(listing["glossaries"], list)  # tests/test_daemon_glossaries.py: the rest
    status, listing = client.json("GET", "/v2/glossary-language-pairs", headers=auth)
    assert status == 200 and listing == {"supported_languages": [{"source_lang": "en", "target_lang": "zh"}]}


def test_unused_file_parts_and_a_negative_alternatives_count_do_no_harm(demo):
    _, client = demo
    boundary = "xyz"
    fields = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
                     for k, v in (("q", "Where is the station?"), ("source", "en"), ("target", "zh")))
    empty_file = (f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename=""\r\n'
                  "Content-Type: application/octet-stream\r\n\r\n\r\n")
    status, body = client.json("POST", "/translate", fields + empty_file + f"--{boundary}--\r\n",
                               content_type=f"multipart/form-data; boundary={boundary}")
    assert status == 200 and _cjk(body["translatedText"])
    status, body = client.json("POST", "/translate", {"q": "Hi", "target": "zh", "alternatives": -1})
    assert status == 200 and "alternatives" not in body


# -- errors ----------------------------------------------------------------------------------------
TRANSLATE = "/translate"
ERRORS = [
    ("invalid JSON", "POST", TRANSLATE, b'{"q": "Hello', "application/json", {}, 400, "invalid JSON"),
    ("JSON array body", "POST", TRANSLATE, b'["Hello"]', "application/json", {}, 400, "must be an object"),
    ("q is a number", "POST", TRANSLATE, b'{"q": 5, "target": "zh"}', "application/json", {}, 400, "must hold strings"),
    ("q is an empty list", "POST", TRANSLATE, b'{"q": [], "target": "zh"}', "application/json", {}, 400, "empty list"),
    ("q is missing", "POST", TRANSLATE, b'{"target": "zh"}', "application/json", {}, 400, "missing field 'q'"),
    ("invalid UTF-8", "POST", TRANSLATE, b"q=caf\xe9&target=zh", "application/x-www-form-urlencoded", {}, 400,
     "not valid UTF-8"),
    ("a lone surrogate", "POST", TRANSLATE, b'{"q": "a\\ud800b", "target": "zh"}', "application/json", {}, 400,
     "not valid Unicode"),
    ("XML body", "POST", TRANSLATE, b"<q>Hello</q>", "application/xml", {}, 415, "cannot read"),
    ("source fr", "POST", TRANSLATE, b'{"q": "Bonjour", "source": "fr", "target": "zh"}', "application/json", {}, 400,
     "from English (en) only"),
    ("target de", "POST", TRANSLATE, b'{"q": "Hello", "target": "de"}', "application/json", {}, 400,
     "use one of zh, zh-Hans"),
    ("format pdf", "POST", TRANSLATE, b'{"q": "Hello", "target": "zh", "format": "pdf"}', "application/json", {}, 400,
     "format 'pdf'"),
    ("over the character limit", "POST", TRANSLATE, json.dumps({"q": "word " * 500, "target": "zh"}).encode(),
     "application/json", {}, 400, "limit of 2000 characters"),
    ("over the item limit", "POST", TRANSLATE, json.dumps({"q": ["Hi."] * 9, "target": "zh"}).encode(),
     "application/json", {}, 400, "the limit is 8"),
    ("body over max-body", "POST", TRANSLATE, b"q=" + b"a" * 70_000, "application/x-www-form-urlencoded", {}, 413,
     "over the limit of 65536 bytes"),
    ("not English, auto", "POST", TRANSLATE,
     json.dumps({"q": "我们明天见。", "source": "auto", "target": "zh"}).encode(), "application/json", {}, 400,
     "does not look like English"),
    ("unknown path", "GET", "/spec", None, None, {}, 404, "no such endpoint"),
    ("file translation without a file", "POST", "/translate_file", b"", None, {}, 400, "missing field 'file'"),
    ("suggestions, as LibreTranslate with them off", "POST", "/suggest", b'{"q": "Hi", "s": "x"}',
     "application/json", {}, 403, "suggestions are disabled"),
    ("gzip body", "POST", TRANSLATE, b"\x1f\x8b\x08\x00", "application/json", {"Content-Encoding": "gzip"}, 415,
     "Content-Encoding 'gzip'"),
    ("q sent as a file", "POST", TRANSLATE,
     b'--b\r\nContent-Disposition: form-data; name="q"; filename="a.txt"\r\n\r\nHi\r\n--b--\r\n',
     "multipart/form-data; boundary=b", {}, 400, "field 'q' is a file upload"),
    ("wrong method", "GET", TRANSLATE, None, None, {}, 405, "not allowed"),
    ("DeepL target FR", "POST", "/v2/translate", b'{"text": ["Hi"], "target_lang": "FR"}', "application/json", {}, 400,
     "target_lang 'FR'"),
    ("DeepL without target", "POST", "/v2/translate", b'{"text": ["Hi"]}', "application/json", {}, 400,
     "missing field 'target_lang'"),
    ("null q", "POST", TRANSLATE, b'{"q": null, "target": "zh"}', "application/json", {}, 400, "missing field 'q'"),
    ("deeply nested JSON", "POST", TRANSLATE, b'{"q": ' + b"[" * 30_000 + b"]" * 30_000 + b"}", "application/json",
     {}, 400, "unreadable JSON"),
    ("a 5000-digit number", "POST", TRANSLATE, b'{"q": "Hi", "alternatives": ' + b"9" * 5000 + b"}",
     "application/json", {}, 400, "unreadable JSON"),
    ("an infinite number", "POST", TRANSLATE, b'{"q": "Hi", "target": "zh", "alternatives": 1e400}',
     "application/json", {}, 400, "must be an integer"),
    ("a fraction", "POST", TRANSLATE, b'{"q": "Hi", "target": "zh", "alternatives": 2.5}', "application/json", {},
     400, "must be an integer"),
    ("target as a list", "POST", TRANSLATE, b'{"q": "Hi", "target": ["zh", "de"]}', "application/json", {}, 400,
     "must be a single value"),
    ("DeepL unknown tag handling", "POST", "/v2/translate",
     b'{"text": ["<a>Hi</a>"], "target_lang": "ZH", "tag_handling": "markdown"}', "application/json", {}, 400,
     "tag_handling 'markdown'"),
    ("DeepL formality more for Chinese", "POST", "/v2/translate",
     b'{"text": ["Hi"], "target_lang": "ZH", "formality": "more"}', "application/json", {}, 400, "prefer_more"),
    ("DeepL formality unknown", "POST", "/v2/translate", b'{"text": ["Hi"], "target_lang": "ZH", "formality": "x"}',
     "application/json", {}, 400, "must be one of"),
    ("DeepL glossary", "POST", "/v2/translate", b'{"text": ["Hi"], "target_lang": "ZH", "glossary_id": "g1"}',
     "application/json", {}, 400, "source_lang is required"),
    ("DeepL ignore_tags not names", "POST", "/v2/translate",
     b'{"text": ["Hi"], "target_lang": "ZH", "tag_handling": "xml", "ignore_tags": [5]}', "application/json", {},
     400, "ignore_tags"),
    ("DeepL v3 path answers in DeepL's shape", "GET", "/v3/nothing", None, None, {}, 404, "no such endpoint"),
    ("v1 stream not boolean", "POST", "/v1/translate", b'{"text": "Hi", "stream": "maybe"}', "application/json", {},
     400, "true or false"),
]


@pytest.mark.parametrize("case", ERRORS, ids=[c[0] for c in ERRORS])
def test_every_bad_request_gets_a_one_line_json_error(demo, case):
    _, client = demo
    _, method, path, body, content_type, headers, status, fragment = case
    got, response_headers, data = client.call(method, path, body, content_type=content_type, headers=headers)
    assert got == status, data
    answer = json.loads(data)
    message = answer["message" if path.startswith(("/v2/", "/v3/")) else "error"]
    assert fragment in message and "\n" not in message and "Traceback" not in data.decode()
    assert response_headers["Content-Type"] == "application/json"
    if status == 405:
        assert response_headers["Allow"] == "POST"


def test_unusual_but_legal_requests_are_understood(demo):
    """null for optional fields, JSON sent as text/plain or with a BOM, +json types, chunked bodies."""
    _, client = demo
    body = {"q": "Good morning.", "source": None, "target": "zh", "api_key": None, "format": None,
            "alternatives": None}
    status, answer = client.json("POST", "/translate", body)
    assert status == 200 and _cjk(answer["translatedText"]) and "detectedLanguage" in answer  # null source: auto
    expected = answer["translatedText"]
    raw = json.dumps({"q": "Good morning.", "source": "en", "target": "zh"}).encode()
    for content_type, data in (("text/plain;charset=UTF-8", raw), ("application/vnd.api+json", raw),
                               ("application/json", b"\xef\xbb\xbf" + raw),
                               ("application/x-www-form-urlencoded", raw)):
        status, _, got = client.call("POST", "/translate", data, content_type=content_type)
        assert status == 200 and json.loads(got)["translatedText"] == expected, (content_type, got)
    status, _, got = client.call("POST", "/v1/translate", json.dumps({"text": "Good morning.", "stream": 1}).encode(),
                                 content_type="application/json")
    assert status == 200 and json.loads(got.splitlines()[-1])["done"] is True
    conn = http.client.HTTPConnection(client.host, client.port, timeout=30)
    conn.putrequest("POST", "/translate")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    for piece in (raw[:10], raw[10:]):
        conn.send(b"%x\r\n%s\r\n" % (len(piece), piece))
    conn.send(b"0\r\n\r\n")
    response = conn.getresponse()
    assert response.status == 200 and json.loads(response.read())["translatedText"] == expected
    conn.close()


def test_cors_is_off_by_default_and_answers_preflight_when_on(demo_parts, demo):
    _, client = demo
    status, headers, _ = client.call("OPTIONS", "/translate")
    assert status == 204 and "POST" in headers["Allow"] and "Access-Control-Allow-Origin" not in headers
    translator, _, _ = _translator(demo_parts)
    with running(translator, cors_origin="*") as (_, cors):
        status, headers, _ = cors.call("OPTIONS", "/translate", headers={"Origin": "https://example.org",
                                                                        "Access-Control-Request-Method": "POST"})
        assert status == 204 and headers["Access-Control-Allow-Origin"] == "*"
        assert "POST" in headers["Access-Control-Allow-Methods"]
        status, headers, _ = cors.call("POST", "/translate", {"q": "Hi.", "target": "zh"})
        assert status == 200 and headers["Access-Control-Allow-Origin"] == "*"


def test_keys_and_rate_limit(demo_parts, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# team keys\nk-slow 2\nk-fast\n", encoding="utf-8")
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=str(keys), req_limit=100) as (_, client):
        body = {"q": "Hello.", "target": "zh"}
        status, error = client.json("POST", "/translate", body)
        assert status == 403 and "pass api_key" in error["error"]
        status, error = client.json("POST", "/translate", {**body, "api_key": "wrong"})
        assert status == 403 and error["error"] == "invalid API key"
        assert client.json("POST", "/translate", {**body, "apiKey": "k-slow"})[0] == 200
        assert client.form("/translate", {**body, "api_key": "k-slow"})[0] == 200
        status, headers, data = client.call("POST", "/translate", {**body, "api_key": "k-slow"})
        assert status == 429 and "2 a minute" in json.loads(data)["error"] and int(headers["Retry-After"]) >= 1
        assert client.json("POST", "/translate", {**body, "api_key": "k-fast"})[0] == 200  # its own bucket
        status, _ = client.json("POST", "/v2/translate", {"text": ["Hi."], "target_lang": "ZH"},
                                headers={"Authorization": "DeepL-Auth-Key k-fast"})
        assert status == 200
        status, error = client.json("GET", "/v2/usage")
        assert status == 403 and "DeepL-Auth-Key" in error["message"]
        status, error = client.json("POST", "/v2/translate", {"text": ["Hi."], "target_lang": "ZH"},
                                    headers={"Authorization": "Bearer k-fast"})
        assert status == 403 and "DeepL-Auth-Key" in error["message"]
        status, _ = client.json("POST", "/v1/translate", {"text": "Hi."}, headers={"Authorization": "Bearer k-fast"})
        assert status == 200
        assert client.json("GET", "/frontend/settings")[1]["keyRequired"] is True


def test_a_runtime_failure_is_a_500_and_the_server_goes_on(demo_parts):
    translator, encoder, _ = _translator(demo_parts)
    encoder.fail_when = lambda feed: True
    with running(translator) as (_, client):
        status, error = client.json("POST", "/translate", {"q": "Hello there.", "target": "zh"})
        assert status == 500 and "translation failed: ONNX Runtime failed" in error["error"]
        encoder.fail_when = None
        assert client.json("POST", "/translate", {"q": "Hello there.", "target": "zh"})[0] == 200
        metrics = client.call("GET", "/metrics")[2].decode().splitlines()
        assert "edge_translator_failed_batches_total 1.0" in metrics  # what an alert would watch


@contextmanager
def full_queue(demo_parts):
    """A daemon whose engine queue is full: its worker is stuck on a first request's first step.

    Yields the client; on exit the worker goes on and that first request must succeed.
    """
    translator, _, decoder = _translator(demo_parts, max_batch_size=1, max_queued=2)
    decoder.gate.clear()  # the worker blocks on its first step
    with running(translator) as (_, client):
        first: dict = {}
        worker = threading.Thread(target=lambda: first.update(
            answer=client.json("POST", "/translate", {"q": "One. Two. Three. Four.", "target": "zh"})))
        worker.start()
        wait_until(lambda: translator.engine.queued >= 3, 10, "the first request's sentences to fill the queue")
        yield client
        decoder.gate.set()
        worker.join(30)
        assert first["answer"][0] == 200


@pytest.mark.parametrize("path,body", [
    ("/translate", {"q": "Hello.", "target": "zh"}),
    ("/v1/translate", {"text": "Hello.", "stream": True}),  # streamed: still a 503, not a 200 with an error line
    ("/v2/translate", {"text": ["Hello."], "target_lang": "ZH"}),
])
def test_a_full_queue_answers_503_with_retry_after(demo_parts, path, body):
    with full_queue(demo_parts) as client:
        status, headers, data = client.call("POST", path, body)
        answer = json.loads(data)
        assert status == 503 and headers["Retry-After"] == "2"
        assert "queue is full" in answer["message" if path.startswith("/v2/") else "error"]


def test_a_translation_past_the_timeout_is_cancelled_with_503(demo_parts):
    translator, _, _ = _translator(demo_parts, delay=0.05, max_batch_size=1)
    with running(translator, timeout=0.5) as (_, client):
        started = time.monotonic()
        status, headers, data = client.call("POST", "/translate", {"q": " ".join(english_sentences(20, seed=5)),
                                                                   "target": "zh"})
        assert status == 503 and "0.5 s limit" in json.loads(data)["error"] and headers["Retry-After"]
        assert time.monotonic() - started < 5
        wait_until(lambda: translator.engine.stats().queued == 0, what="the rest to be withdrawn")


def test_a_client_that_disconnects_cancels_its_work(demo_parts):
    translator, _, decoder = _translator(demo_parts, delay=0.03, max_batch_size=1)
    with running(translator) as (daemon, client):
        body = json.dumps({"q": " ".join(english_sentences(40, seed=8)), "target": "zh"}).encode()
        with socket.create_connection((client.host, client.port)) as sock:
            sock.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            wait_until(lambda: translator.engine.stats().rows_done > 0, what="the first sentence")

        def idle() -> bool:
            stats = translator.engine.stats()
            return daemon.app.service.in_flight == 0 and stats.queued == 0 and stats.decoding == 0

        wait_until(idle, what="the request and its work to end")
        stats = translator.engine.stats()
        assert stats.rows_done < 40  # it stopped, well before the end
        assert client.json("POST", "/translate", {"q": "Still here.", "target": "zh"})[0] == 200


def test_slow_clients_time_out_and_connections_are_bounded(demo_parts):
    translator, _, _ = _translator(demo_parts)
    with running(translator, timeout=1.0, connections=2) as (_, client):
        slow = socket.create_connection((client.host, client.port))
        slow.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nq=Hel")
        idle = socket.create_connection((client.host, client.port))
        # both connections are held: a third client is not served...
        with pytest.raises((TimeoutError, socket.timeout)):
            client.call("GET", "/health", timeout=0.5)
        # ...until the server drops the slow and idle ones after the 1 s timeout
        slow.settimeout(5)
        try:
            assert slow.recv(100) == b""  # closed by the server, nothing answered
        except ConnectionResetError:
            pass
        deadline = time.monotonic() + 5
        while True:
            try:
                assert client.call("GET", "/health", timeout=1)[0] == 200
                break
            except (TimeoutError, socket.timeout):
                assert time.monotonic() < deadline
        slow.close()
        idle.close()


def test_stop_drains_requests_in_flight(demo_parts):
    translator, _, _ = _translator(demo_parts, delay=0.02, max_batch_size=2)
    daemon = Daemon(ServeOptions(port=0, timeout=30), translator)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    client = Client(*daemon.address)
    answer: dict = {}
    text = " ".join(english_sentences(8, seed=12))
    worker = threading.Thread(target=lambda: answer.update(got=client.json("POST", "/translate",
                                                                           {"q": text, "target": "zh"})))
    worker.start()
    wait_until(lambda: daemon.app.service.in_flight > 0, what="the request to be in flight")
    daemon.stop()
    worker.join(30)
    thread.join(30)
    assert answer["got"][0] == 200 and _cjk(answer["got"][1]["translatedText"])
    assert not thread.is_alive()
    with pytest.raises(OSError):
        client.call("GET", "/health", timeout=2)
    translator.close()


def test_a_stream_with_bad_text_is_a_400_before_any_line(demo):
    _, client = demo
    status, _, data = client.call("POST", "/v1/translate", {"text": "bad \ud800 text", "stream": True})
    assert status == 400 and "not valid Unicode" in json.loads(data)["error"]


def test_html_documents_share_one_deadline_and_repeated_pieces_are_decoded_once(demo_parts):
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    page = "".join(f"<p>{letters[k % 26]}</p>" for k in range(5000))  # 5,000 pieces, 26 distinct
    translator, _, _ = _translator(demo_parts)
    with running(translator, char_limit=0) as (_, client):
        status, body = client.json("POST", "/translate", {"q": page, "source": "en", "target": "zh",
                                                          "format": "html"})
        assert status == 200 and body["translatedText"].count("<p>") == 5000
        from edge_translator.core.dictionary import Dictionary

        answered = sum(1 for letter in letters if Dictionary.load().best(letter) is not None)  # lone words
        assert translator.engine.stats().rows_done == 26 - answered
    slow, _, _ = _translator(demo_parts, delay=0.05, max_batch_size=1)
    with running(slow, timeout=1.0) as (_, client):
        documents = [f"<p>{' '.join(english_sentences(4, seed=50 + k))}</p>" for k in range(12)]
        started = time.monotonic()
        status, _, data = client.call("POST", "/translate", {"q": documents, "source": "en", "target": "zh",
                                                             "format": "html"})
        assert status == 503 and "1 s limit" in json.loads(data)["error"]
        assert time.monotonic() - started < 4  # one deadline for the request, not one per document


def test_the_watchdog_sleeps_while_nothing_is_in_flight():
    from edge_translator.daemon.service import Watchdog

    class Counting(Watchdog):
        checks = 0

        def _check(self):
            Counting.checks += 1
            super()._check()

    class Slow:
        cancelled = False

        def cancel(self):
            self.cancelled = True

    watchdog = Counting(interval=0.01)
    submission = Slow()
    handle, reason = watchdog.watch([submission], time.monotonic() + 0.1, None)
    wait_until(lambda: submission.cancelled, what="the watchdog to cancel")
    assert reason == ["timeout"] and Counting.checks >= 5
    watchdog.release(handle)
    settled = Counting.checks
    time.sleep(0.3)
    assert Counting.checks <= settled + 1  # idle: no more looking
    gone = {"now": False}
    watchdog.watch([Slow()], time.monotonic() + 60, lambda: gone["now"])
    wait_until(lambda: Counting.checks > settled + 1, what="the watchdog to wake")  # woken by the next request
    watchdog.close()


@pytest.mark.parametrize("code", ["zh", "ZH", "zh-Hans", "ZH-HANS", "zh-hans", "zh-CN", "zh_CN", "zh-SG", "cmn-Hans"])
def test_every_spelling_of_simplified_chinese_resolves(code):
    from edge_translator.daemon.languages import Targets

    assert Targets(("zh-Hans", "zh-Hant"), "zh-Hans").resolve(code) == "zh-Hans"


@pytest.mark.parametrize("code", ["zt", "zh-Hant", "ZH-HANT", "zh-TW", "zh_TW", "zh-HK", "cmn-Hant"])
def test_every_spelling_of_traditional_chinese_resolves(code):
    from edge_translator.daemon.languages import Targets

    assert Targets(("zh-Hans", "zh-Hant"), "zh-Hans").resolve(code) == "zh-Hant"


@pytest.mark.parametrize("code", ["zt", "zh-TW", "ZH-HANT"])
def test_traditional_on_a_model_without_it_is_a_400_naming_what_it_offers(code):
    from edge_translator.daemon.http import HTTPError
    from edge_translator.daemon.languages import Targets

    with pytest.raises(HTTPError) as caught:
        Targets(("zh-Hans",), "zh-Hans").resolve(code)
    assert caught.value.status == 400 and "not offered by this model" in str(caught.value)
    assert "it offers zh" in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(HTTPError) as caught:  # DeepL's clients are told DeepL's codes
        Targets(("zh-Hans",), "zh-Hans").resolve(code, "target_lang", deepl=True)
    assert caught.value.status == 400 and "it offers ZH, ZH-HANS" in str(caught.value)


def test_the_embedded_model_answers_zt_in_traditional(demo):
    _, client = demo
    status, hans = client.json("POST", "/translate", {"q": "I like reading books.", "target": "zh"})
    status_t, hant = client.json("POST", "/translate", {"q": "I like reading books.", "target": "zt"})
    assert status == status_t == 200 and _cjk(hant["translatedText"])
    assert hant["translatedText"] != hans["translatedText"]  # 喜歡看書 against 喜欢看书


@pytest.mark.parametrize("code,auto", [("en", False), ("EN", False), ("en-US", False), ("en_GB", False),
                                       ("auto", True), ("", True)])
def test_english_source_spellings(code, auto):
    from edge_translator.daemon.languages import check_source

    assert check_source(code) is auto


def test_exact_length_decodes_every_sentence_to_its_limit(demo_parts):
    """``serve --exact-length`` (benchmarks of random models): no end of sentence and no
    repetition guard before the limit, 2 x source tokens + 10; without it the same request stops early."""
    from dataclasses import asdict

    from edge_translator.daemon.server import engine_options

    bundle, tokenizer, _ = demo_parts
    text = "Where is the station?"
    limit = 2 * len(tokenizer.encode(text, bundle.targets["zh-Hans"].id)) + 10
    for exact in (False, True):
        translator, _, decoder = _translator(demo_parts, **asdict(engine_options(ServeOptions(exact_length=exact))))
        with running(translator, exact_length=exact) as (_, client):
            status, body = client.form("/translate", {"q": text, "source": "en", "target": "zh"})
            assert status == 200, body
        steps = len(decoder.batches)
        assert steps == limit if exact else steps < limit / 2, (exact, steps, limit)
