"""The dictionary on every face: ``translate()`` of a lone word or short term gives its
best headword (unknown ones, sentences and longer text go to the model, as does
``dictionary=False``); ``lookup`` in Python, on the command line, at ``/v1/lookup``, as
LibreTranslate's ``alternatives``, and under the translation in the desktop window and the
web page (test_gui_window.py, test_web_page.py)."""

from __future__ import annotations

import json

import pytest

from edge_translator.core.dictionary import Dictionary
from edge_translator.core.translator import TranslateOptions, Translator, is_term

from .conftest import run_cli

#: Lone words and terms the dictionary knows, in every form people paste them.
KNOWN = ["station", "Station", "STATION", "  cats  ", "shopping mall", "shopping malls", "computer", "the bank",
         "walked", "apple\n", "Apple", "\tcredit card"]
#: Not lone terms: sentences, four words and more, sentence punctuation, lines, nothing to look up.
NOT_TERMS = ["Where is the station?", "station.", "The station is near.", "four words are here", "cat, dog",
             "cat\ndog", "  ", "123", "station!"]


@pytest.fixture(scope="module")
def translator():
    with Translator.load(threads=1, cache=None) as made:
        yield made


@pytest.fixture(scope="module")
def dictionary():
    return Dictionary.load()


@pytest.mark.parametrize("term", KNOWN)
def test_a_lone_word_or_term_is_answered_by_the_dictionary(translator, dictionary, term):
    best = dictionary.best(term)
    assert best is not None, f"the dictionary should know {term!r}"
    assert translator.translate(term) == term[:len(term) - len(term.lstrip())] + best + term[len(term.rstrip()):]
    [result] = [r for r in translator.translate_iter(term) if r.stop != "empty"]
    assert result.stop == "dictionary" and result.ids == () and result.source == term.strip()
    assert term[result.span[0]:result.span[1]] == result.source
    assert translator.translate(term, TranslateOptions(target="zh-Hant")).strip() == dictionary.best(term, "zh-Hant")
    model = [r for r in translator.translate_iter(term, TranslateOptions(dictionary=False)) if r.stop != "empty"]
    assert model[0].stop != "dictionary" and model[0].ids


@pytest.mark.parametrize("text", NOT_TERMS)
def test_sentences_and_longer_text_go_to_the_model(translator, text):
    assert not is_term(text)
    assert all(r.stop != "dictionary" for r in translator.translate_iter(text))


def test_an_unknown_word_goes_to_the_model(translator, dictionary):
    assert dictionary.best("xqzt blorf") is None
    [result] = list(translator.translate_iter("xqzt blorf"))
    assert result.stop != "dictionary" and result.ids


def test_lookup_gives_entries_best_first(translator, dictionary):
    entries = translator.lookup("station")
    assert entries and entries == dictionary.lookup("station")
    assert entries[0].headword("zh-Hans") == dictionary.best("station")
    assert all(e.pinyin and e.glosses for e in entries)
    assert translator.lookup("xqzt") == []
    with pytest.raises(TypeError):
        translator.lookup(None)


def test_the_lookup_command():
    done = run_cli("lookup", "station")
    assert done.returncode == 0, done.stderr.decode()
    first = done.stdout.decode().splitlines()[0].split("\t")
    assert first[0] == Dictionary.load().best("station") and first[1] and "station" in first[2]
    as_json = json.loads(run_cli("lookup", "shopping", "mall", "--json", "--target", "zh-Hant").stdout)
    assert as_json["term"] == "shopping mall" and as_json["entries"][0]["headword"] == \
        Dictionary.load().best("shopping mall", "zh-Hant")
    missing = run_cli("lookup", "xqzt")
    assert missing.returncode == 8 and not missing.stdout
    assert len(missing.stderr.decode().strip().splitlines()) == 1 and "xqzt" in missing.stderr.decode()
    empty = run_cli("lookup", " ")
    assert empty.returncode == 4 and "nothing to look up" in empty.stderr.decode()


@pytest.fixture(scope="module")
def served():
    pytest.importorskip("waitress")  # the serve extra; CI installs it
    from .test_daemon import running

    with running(Translator.load(threads=1, cache=None)) as (_, client):
        yield client


def test_the_lookup_endpoint(served, dictionary):
    status, got = served.json("GET", "/v1/lookup?term=shopping%20mall")
    assert status == 200 and got["entries"][0]["headword"] == dictionary.best("shopping mall")
    assert {"simplified", "traditional", "pinyin", "glosses"} <= set(got["entries"][0])
    status, got = served.json("POST", "/v1/lookup", {"term": "station", "target": "zh-Hant"})
    assert status == 200 and got["entries"][0]["headword"] == dictionary.best("station", "zh-Hant")
    status, got = served.json("POST", "/v1/lookup", {"term": "xqzt"})
    assert status == 200 and got["entries"] == []
    status, got = served.json("POST", "/v1/lookup", {})
    assert status == 400 and "term" in got["error"]


def test_libretranslate_alternatives_come_from_the_dictionary(served, dictionary):
    """The request LibreTranslate's own API example sends (JSON, ``alternatives: 3``)."""
    status, got = served.json("POST", "/translate", {"q": "station", "source": "en", "target": "zh",
                                                     "format": "text", "alternatives": 3, "api_key": ""})
    headwords = [e.simplified for e in dictionary.lookup("station")]
    assert status == 200 and got["translatedText"] == headwords[0]
    assert got["alternatives"] == [h for h in dict.fromkeys(headwords) if h != headwords[0]][:3]
    status, got = served.json("POST", "/translate", {"q": ["station", "Where is the station?"], "source": "en",
                                                     "target": "zh", "alternatives": 2})
    assert status == 200 and len(got["alternatives"][0]) == 2 and got["alternatives"][1] == []
    status, got = served.json("POST", "/translate", {"q": "station", "source": "en", "target": "zh"})
    assert status == 200 and "alternatives" not in got
