"""Wrapped text on every face: the Python API, the CLI, ``/translate``, ``/v2/translate``
and ``/v1/translate`` (plain and streamed) translate a hard-wrapped paragraph exactly as
its unwrapped paragraph, with spans that point into the text as sent; ``unwrap=False``
(``--no-unwrap``, ``"unwrap": false``) keeps every line a sentence. The desktop window and
the web page are in their own tests (test_gui_window.py, test_web_page.py).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from edge_translator.core.translator import TranslateOptions, Translator

from .conftest import run_cli
from .test_unwrap import PROSE

ISSUE = ("Before you install the update, save your work and close all\nother programs. The installation takes "
         "about ten minutes. Do\nnot turn off the computer while the update is being installed.")

#: (as pasted, the same unwrapped): a PDF's lines, a hyphenated word, an e-mail, a page break.
CASES = {
    "the issue's paragraph": (ISSUE, ISSUE.replace("\n", " ")),
    "wrapped at 60": (textwrap.fill(PROSE[1], 60), PROSE[1]),
    "hyphenated": ("To reset the router, press and hold the small button on the back of the de-\nvice for ten "
                   "seconds, until the power light starts to blink. Then wait two min-\nutes before you connect "
                   "your computer again.", PROSE[3]),
    "e-mail": ("Hi Tom,\n\n" + textwrap.fill(PROSE[1], 66) + "\n\nBest regards,\nMary",
               "Hi Tom,\n\n" + PROSE[1] + "\n\nBest regards,\nMary"),
    "page break": ("The city council voted on Tuesday to extend the opening hours of\nthe public library, which has "
                   "seen a sharp rise in visitors since\n\n12\n\n\fCity News - Spring Edition\n\nthe new reading room "
                   "opened in the spring.", PROSE[2]),
}


@pytest.fixture(scope="module")
def translator():
    with Translator.load(threads=1, cache=None) as made:
        yield made


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_wrapped_paragraph_translates_as_the_unwrapped_one(translator, name):
    wrapped, unwrapped = CASES[name]
    assert translator.translate(wrapped) == translator.translate(unwrapped)
    results = list(translator.translate_iter(wrapped))
    assert all(wrapped[r.span[0]:r.span[1]] == r.source for r in results)
    assert any("\n" in r.source for r in results), "a sentence's source holds the wrapped lines"
    assert [r.text for r in results if r.text] == [r.text for r in translator.translate_iter(unwrapped) if r.text]


def test_without_unwrap_every_line_is_a_sentence(translator):
    lines = ISSUE.split("\n")
    kept = translator.translate(ISSUE, TranslateOptions(unwrap=False))
    assert kept.count("\n") == len(lines) - 1
    assert kept.split("\n")[1] == translator.translate(lines[1])
    assert kept != translator.translate(ISSUE)


def test_the_cli_joins_wrapped_stdin_and_no_unwrap_keeps_lines():
    wrapped, unwrapped = CASES["wrapped at 60"]
    joined = run_cli("translate", "-", stdin=wrapped.encode())
    reference = run_cli("translate", unwrapped)
    assert joined.returncode == reference.returncode == 0, joined.stderr.decode()
    assert joined.stdout == reference.stdout and joined.stdout.count(b"\n") == 1
    kept = run_cli("translate", "--no-unwrap", "-", stdin=wrapped.encode())
    assert kept.returncode == 0 and kept.stdout.count(b"\n") == wrapped.count("\n") + 1


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("waitress")  # the serve extra; CI installs it
    from .test_daemon import running

    with running(Translator.load(threads=1, cache=None)) as (daemon, client):
        yield client


@pytest.mark.parametrize("name", ["the issue's paragraph", "page break"])
def test_every_http_api_joins_wrapped_lines(served, translator, name):
    wrapped, unwrapped = CASES[name]
    expected = translator.translate(unwrapped)
    status, libre = served.form("/translate", {"q": wrapped, "source": "en", "target": "zh"})
    assert status == 200 and libre["translatedText"] == expected
    status, deepl = served.json("POST", "/v2/translate", {"text": [wrapped], "target_lang": "ZH"})
    assert status == 200 and deepl["translations"][0]["text"] == expected
    status, native = served.json("POST", "/v1/translate", {"text": wrapped})
    assert status == 200 and native["translations"]["text"] == expected
    for sentence in native["translations"]["sentences"]:
        start, end = sentence["span"]
        assert wrapped[start:end] == sentence["source"]


def test_the_stream_carries_spans_across_lines_and_unwrap_false_keeps_lines(served, translator):
    wrapped = ISSUE
    status, _, body = served.call("POST", "/v1/translate", {"text": wrapped, "stream": True})
    lines = [json.loads(line) for line in body.decode().splitlines()]
    sentences = [line for line in lines if "span" in line]
    assert status == 200 and lines[-1]["done"] and len(sentences) == 3
    assert [wrapped[s["span"][0]:s["span"][1]] for s in sentences] == [s["source"] for s in sentences]
    assert "\n" in sentences[2]["source"] and all("\n" not in s["separator"] for s in sentences)
    status, kept = served.json("POST", "/v1/translate", {"text": wrapped, "unwrap": False})
    assert status == 200 and kept["translations"]["text"] == translator.translate(wrapped, TranslateOptions(unwrap=False))
    status, bad = served.json("POST", "/v1/translate", {"text": wrapped, "unwrap": "sometimes"})
    assert status == 400 and "unwrap" in bad["error"]
