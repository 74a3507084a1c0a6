"""The web page at ``/``: its headers and files over HTTP, then the page itself in a real
browser (Debian's ``chromium`` and ``chromium-driver``, driven by selenium).

Nothing is downloaded at run time: selenium is pointed at ``/usr/bin/chromedriver`` and
Selenium Manager is kept offline. Every browser test ends by reading the page's console:
an error there (a failed script, a refused resource, a CSP violation) fails the test.
``EDGE_TRANSLATOR_WEB_SHOTS=DIR`` also writes the screenshots docs/server.md shows.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

from edge_translator.core.translator import Translator

from .conftest import FIXTURES, ROOT
from .test_daemon import DEMO, _cjk, _translator, demo_parts, running  # noqa: F401 - demo_parts is a fixture
from .waiting import wait_until

pytest.importorskip("waitress")  # the serve extra; CI installs it

from edge_translator.daemon import web  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
#: What chromium runs with: no sandbox (containers), nothing fetched in the background, a fresh profile.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--window-size=1280,900")
FIRST_SENTENCE = "edge-translator:first-sentence"
#: Typed text → first translated sentence on screen, with the embedded model (the issue's goal).
FIRST_SENTENCE_GOAL_MS = 400


# -- over HTTP, no browser ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The daemon over the embedded model (the one users get), with the page on."""
    translator = Translator.load(DEMO, 2, cache=None)
    state = tmp_path_factory.mktemp("state")
    with running(translator, char_limit=5000, state_dir=str(state)) as (daemon, client):
        yield daemon, client


def _url(daemon) -> str:
    return daemon.url + "/"


def _get(client, path: str, method: str = "GET", **kwargs) -> tuple[int, dict, bytes]:
    """A call whose headers are keyed in lower case (waitress writes ``Etag``)."""
    status, headers, body = client.call(method, path, **kwargs)
    return status, {name.lower(): value for name, value in headers.items()}, body


def test_the_page_carries_a_strict_policy_and_no_inline_script(site):
    _, client = site
    status, headers, body = _get(client, "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    policy = headers["content-security-policy"]
    for directive in ("default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
                      "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"):
        assert directive in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer"
    html = body.decode("utf-8")
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.S | re.I)
    assert scripts and all('src="static/' in attrs and not inner.strip() for attrs, inner in scripts)
    assert not re.search(r"\son[a-z]+\s*=", html, re.I), "an inline event handler"
    assert not re.search(r"\sstyle\s*=", html, re.I) and "<style" not in html.lower()
    assert not re.search(r"(src|href)=\"(https?:)?//", html), "something from elsewhere"
    # the other files: their types, the same headers, and the whole page well under 200 KB
    total = len(body)
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css")):
        status, headers, body = _get(client, f"/static/{name}")
        assert status == 200 and headers["content-type"].startswith(kind) and "content-security-policy" in headers
        assert "http://" not in body.decode() and "https://" not in body.decode() and "@import" not in body.decode()
        total += len(body)
    assert total < 200_000
    assert ".innerHTML" not in (web.assets()["app.js"].body.decode()), "translations are only ever text"


def test_files_revalidate_with_their_etag(site):
    _, client = site
    status, headers, body = _get(client, "/static/app.js")
    assert status == 200 and headers["cache-control"] == "no-cache" and headers["etag"].startswith('"')
    status, again, body = _get(client, "/static/app.js", headers={"If-None-Match": headers["etag"]})
    assert status == 304 and body == b"" and again["etag"] == headers["etag"]
    status, _, body = _get(client, "/static/app.js", headers={"If-None-Match": '"something-else"'})
    assert status == 200 and body
    status, headers, body = _get(client, "/", "HEAD")
    assert status == 200 and body == b"" and "content-security-policy" in headers


@pytest.mark.parametrize("path", ["/static/../x", "/static/..%2Fweb.py", "/static/%2e%2e/app.py", "/static/web.py",
                                  "/static/index.html", "/static/nothing.js", "/static/", "/static/app.js/x",
                                  "/static/APP.JS", "/index.html"])
def test_only_the_page_s_own_files_are_served(site, path):
    _, client = site
    status, headers, body = client.call("GET", path)
    assert status == 404, body
    assert set(json.loads(body)) == {"error"}


def test_no_web_turns_the_page_off(demo_parts, tmp_path):
    from edge_translator.cli import build_parser

    assert build_parser().parse_args(["serve"]).web is True
    assert build_parser().parse_args(["serve", "--no-web"]).web is False
    translator, _, _ = _translator(demo_parts)
    with running(translator, web=False, state_dir=str(tmp_path)) as (_, client):
        assert client.call("GET", "/")[0] == 404
        assert client.call("GET", "/static/app.js")[0] == 404
        assert client.call("GET", "/health")[0] == 200


# -- in the browser ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless chromium through Debian's chromedriver; nothing is downloaded."""
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail("needs Debian's chromium and chromium-driver (tests/setup.sh installs them: "
                    "apt-get install chromium chromium-driver)")
    offline = os.environ.get("SE_OFFLINE")
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager, if it were asked, stays off the network
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        options.add_argument(flag)
    downloads = tmp_path_factory.mktemp("downloads")
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    driver.downloads = downloads
    try:
        yield driver
    finally:
        driver.quit()
        if offline is None:
            os.environ.pop("SE_OFFLINE", None)
        else:
            os.environ["SE_OFFLINE"] = offline


def _errors(driver) -> list[dict]:
    return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


@contextmanager
def clean_console(driver, allowed: str | None = None):
    """Fail if the page logs an error meanwhile (other than ones matching ``allowed``)."""
    driver.get_log("browser")  # drop what came before
    yield
    errors = [e for e in _errors(driver) if not (allowed and re.search(allowed, e["message"]))]
    assert errors == [], f"errors in the page's console: {errors}"


def _open(driver, url: str, width: int = 1280, dark: bool = False) -> None:
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {
        "features": [{"name": "prefers-color-scheme", "value": "dark" if dark else "light"}]})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 900 if width > 600 else 760, "deviceScaleFactor": 1, "mobile": width < 600})
    origin = url.rstrip("/")
    driver.execute_cdp_cmd("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "local_storage"})
    driver.get(url)
    wait_until(lambda: driver.execute_script("return document.readyState") == "complete", 10, "the page to load")


def _type(driver, text: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "source")
    box.send_keys(text)


def _sentences(driver, where: str = "output") -> list[str]:
    return driver.execute_script(f"return [...document.querySelectorAll('#{where} .sentence')].map(s => s.textContent)")


def _wait_translated(driver, count: int, timeout: float = 20.0) -> list[str]:
    wait_until(lambda: len(_sentences(driver)) >= count and not driver.execute_script(
        "return document.getElementById('output').getAttribute('aria-busy') === 'true'"), timeout,
        f"{count} translated sentences on the page")
    return _sentences(driver)


def test_the_console_check_sees_an_error(browser, site):
    daemon, _ = site
    _open(browser, _url(daemon))
    with pytest.raises(AssertionError, match="errors in the page's console"):
        with clean_console(browser):
            browser.execute_script("console.error('something broke')")


def test_typing_shows_the_translation_sentence_by_sentence(browser, site):
    daemon, _ = site
    with clean_console(browser):
        _open(browser, _url(daemon))
        wait_until(lambda: "5,000" in browser.find_element("id", "count").text, 10, "the server's limit")
        text = "Hello. Where is the station? Xkcd qwrtp zzzv blorf."
        _type(browser, text)
        out = _wait_translated(browser, 3)
        assert len(out) == 3 and all(_cjk(s) for s in out[:2]), out
        output = browser.find_element("id", "output")
        assert output.get_attribute("lang") == "zh-Hans" and output.get_attribute("aria-live") == "polite"
        assert browser.find_element("id", "source").get_attribute("lang") == "en"
        assert browser.find_element("id", "count").text == f"{len(text)} / 5,000 characters"
        # the backdrop holds the source sentences, where their spans say
        assert _sentences(browser, "backdrop") == ["Hello.", "Where is the station?", "Xkcd qwrtp zzzv blorf."]
        # the gibberish is doubtful (score below -1.0, as in the desktop app), the greeting not
        doubtful = browser.execute_script(
            "return [...document.querySelectorAll('#output .sentence')].map(s => s.classList.contains('doubtful'))")
        assert doubtful == [False, False, True]
        # the caret in a sentence highlights its translation
        browser.execute_script("const s = document.getElementById('source'); s.focus(); s.setSelectionRange(10, 10)")
        active = "return [...document.querySelectorAll('#output .sentence.active')].map(s => s.dataset.i)"
        wait_until(lambda: browser.execute_script(active) == ["1"], 5, "the second sentence highlighted")
        # and so does the pointer, over a translation
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(browser).move_to_element(browser.find_elements("css selector", "#output .sentence")[0]).perform()
        wait_until(lambda: browser.execute_script(active) == ["0"], 5, "the first sentence highlighted")
        # and over a source sentence (under the text box, found from the pointer's position)
        ActionChains(browser).move_to_element(browser.find_elements("css selector", "#backdrop .sentence")[2]).perform()
        wait_until(lambda: browser.execute_script(active) == ["2"], 5, "the third sentence highlighted")
        assert browser.execute_script("return document.querySelector('#backdrop .sentence.active').dataset.i") == "2"
        assert browser.find_element("id", "copy").is_enabled()


def test_a_wrapped_paragraph_comes_back_as_one_and_its_sentences_span_the_lines(browser, site):
    daemon, _ = site
    text = ("Before you install the update, save your work and close all\nother programs. The installation "
            "takes about ten minutes.")
    with clean_console(browser):
        _open(browser, _url(daemon))
        _type(browser, text)
        out = _wait_translated(browser, 2)
        assert len(out) == 2 and all(_cjk(s) for s in out), out
        assert _sentences(browser, "backdrop") == [text[:text.index("programs.") + 9], "The installation takes about ten minutes."]
        assert "\n" not in browser.execute_script("return document.getElementById('output').textContent").strip()
        # the caret on the second line of the first sentence highlights its translation
        at = text.index("other") + 2
        browser.execute_script(f"const s = document.getElementById('source'); s.focus(); s.setSelectionRange({at}, {at})")
        active = "return [...document.querySelectorAll('#output .sentence.active')].map(s => s.dataset.i)"
        wait_until(lambda: browser.execute_script(active) == ["0"], 5, "the first sentence highlighted")


def test_a_lone_word_shows_its_dictionary_entries(browser, site):
    from edge_translator.core.dictionary import Dictionary

    daemon, _ = site
    expected = Dictionary.load().lookup("shopping mall")
    with clean_console(browser):
        _open(browser, _url(daemon))
        _type(browser, "shopping mall")
        assert _wait_translated(browser, 1) == [expected[0].simplified]
        wait_until(lambda: browser.execute_script("return !document.getElementById('entries').hidden"), 10,
                   "the dictionary's entries")
        heads = browser.execute_script("return [...document.querySelectorAll('#entries .headword')].map(h => h.textContent)")
        assert heads == [e.simplified for e in expected][:8]
        _type(browser, " and more words here.")  # no longer a lone term: the entries go
        wait_until(lambda: browser.execute_script("return document.getElementById('entries').hidden"), 10,
                   "the entries to go")


def test_new_input_cancels_the_request_before(browser, demo_parts, tmp_path):
    # one sentence at a time, each step slowed: the first answer is still streaming when the text changes
    translator, _, _ = _translator(demo_parts, delay=0.01, max_batch_size=1)
    with running(translator, state_dir=str(tmp_path)) as (daemon, _), clean_console(browser):
        _open(browser, _url(daemon))
        browser.execute_script("""
            window.signals = [];
            const original = window.fetch;
            window.fetch = (url, init) => {
                if (init && init.signal) signals.push(init.signal);
                return original(url, init);
            };
        """)
        long = " ".join(f"This is sentence number {n} of a long text about the weather." for n in range(20))
        browser.execute_script("const s = document.getElementById('source'); s.value = arguments[0];"
                               "s.dispatchEvent(new Event('input'))", long)
        wait_until(lambda: browser.execute_script("return signals.length") == 1 and _sentences(browser), 20,
                   "the first request to stream")
        _type(browser, " More.")
        wait_until(lambda: browser.execute_script("return signals[0].aborted"), 5, "the first request aborted")
        out = _wait_translated(browser, 21, timeout=120)
        assert browser.execute_script("return signals.filter(s => !s.aborted).length") == 1
        assert len(out) == 21 and all(_cjk(s) for s in out)


def test_the_key_form_asks_once_and_the_key_is_kept(browser, demo_parts, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("right-key\n")
    translator, _, _ = _translator(demo_parts)
    with running(translator, api_keys=str(keys), state_dir=str(tmp_path / "state")) as (daemon, _):
        # a wrong key: the server's 403 is the one error the console may show
        with clean_console(browser, allowed=r"status of 403"):
            _open(browser, _url(daemon))
            form = browser.find_element("id", "key-form")
            wait_until(form.is_displayed, 10, "the key form")
            assert browser.switch_to.active_element.get_attribute("id") == "key-input"
            browser.find_element("id", "key-input").send_keys("wrong-key\n")
            _type(browser, "Good morning.")
            wait_until(form.is_displayed, 10, "the key form again")
            assert "Invalid API key" in browser.find_element("id", "key-message").text
        with clean_console(browser):
            box = browser.find_element("id", "key-input")
            box.clear()
            box.send_keys("right-key\n")
            assert _cjk("".join(_wait_translated(browser, 1)))
            assert not form.is_displayed()
            assert browser.execute_script("return localStorage.getItem('edge-translator.api-key')") == "right-key"
            browser.refresh()  # kept: no form, and the key goes with every request
            wait_until(lambda: browser.find_element("id", "key-button").is_displayed(), 10, "the key button")
            assert not browser.find_element("id", "key-form").is_displayed()
            _type(browser, "Thank you.")
            assert _cjk("".join(_wait_translated(browser, 1)))
            if _has_documents_api(daemon):  # documents carry the key too: upload, progress, download
                note = tmp_path / "note.txt"
                note.write_text("See you tomorrow.\n", encoding="utf-8")
                browser.find_element("id", "files").send_keys(str(note))
                wait_until(lambda: browser.find_elements("css selector", "#jobs .job.done a"), 60, "the note done")


def test_both_scripts_and_the_character_limit(browser, tmp_path):
    """The fixture model offers Simplified and Traditional: the page lets one choose, and sends it."""
    translator = Translator.load(FIXTURES / "tiny-int8", 1, cache=None)
    with running(translator, char_limit=40, state_dir=str(tmp_path)) as (daemon, _):
        with clean_console(browser):
            _open(browser, _url(daemon))
            select = browser.find_element("id", "target")
            wait_until(select.is_displayed, 10, "the script selector")
            browser.execute_script("""
                window.bodies = [];
                const original = window.fetch;
                window.fetch = (url, init) => {
                    if (init && typeof init.body === 'string') bodies.push(JSON.parse(init.body));
                    return original(url, init);
                };
            """)
            from selenium.webdriver.support.ui import Select

            Select(select).select_by_value("zh-Hant")
            _type(browser, "Hello there.")
            _wait_translated(browser, 1)
            assert browser.find_element("id", "output").get_attribute("lang") == "zh-Hant"
            assert browser.execute_script("return bodies.map(b => b.target)")[-1] == "zh-Hant"
            assert browser.execute_script("return localStorage.getItem('edge-translator.target')") == "zh-Hant"
            sent = browser.execute_script("return bodies.length")
            _type(browser, " This makes the text longer than forty.")
            count = browser.find_element("id", "count")
            wait_until(lambda: "over" in count.get_attribute("class"), 5, "the count marked over the limit")
            wait_until(lambda: "limit of 40" in browser.find_element("id", "status").text, 5, "the limit message")
            assert browser.execute_script("return bodies.length") == sent  # nothing sent over the limit


def _luminance(css: str) -> float:
    r, g, b = (int(v) for v in re.findall(r"\d+", css)[:3])
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@pytest.mark.parametrize("dark", [False, True], ids=["light", "dark"])
def test_narrow_and_dark_render(browser, site, tmp_path, dark):
    daemon, _ = site
    with clean_console(browser):
        _open(browser, _url(daemon), width=360, dark=dark)
        # keyboard only: the text box takes the focus first and shows it; then the copy button,
        # the translation, the file picker
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.keys import Keys

        wait_until(lambda: "5,000" in browser.find_element("id", "count").text, 10, "the page started")
        ActionChains(browser).send_keys(Keys.TAB).perform()
        focused = browser.switch_to.active_element
        assert focused.get_attribute("id") == "source"
        assert browser.execute_script("return getComputedStyle(arguments[0]).outlineStyle", focused) != "none"
        text = "Where is the station? It is a long way from here, past the old bridge."
        ActionChains(browser).send_keys(text).perform()
        _wait_translated(browser, 2)
        order = []
        for _ in range(4):
            ActionChains(browser).send_keys(Keys.TAB).perform()
            order.append(browser.switch_to.active_element.get_attribute("id"))
        assert order == ["target", "copy", "output", "files"]  # the embedded model offers two scripts
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 360
        for name in ("source", "output", "copy", "files"):
            right = browser.execute_script(f"return document.getElementById('{name}').getBoundingClientRect().right")
            assert right <= 360, name
        background = browser.execute_script("return getComputedStyle(document.body).backgroundColor")
        text = browser.execute_script("return getComputedStyle(document.body).color")
        assert (_luminance(background) < 0.2 and _luminance(text) > 0.7) if dark else \
            (_luminance(background) > 0.8 and _luminance(text) < 0.3), (background, text)
        shot = tmp_path / ("narrow-dark.png" if dark else "narrow-light.png")
        browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 1000


def _docx(path: Path, paragraphs: list[str]) -> Path:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(path)
    return path


def _has_documents_api(daemon) -> bool:
    route, _ = daemon.app.router.match("POST", "/v1/documents")
    return route is not None


def test_documents_upload_and_download(browser, site, tmp_path):
    pytest.importorskip("docx")
    daemon, _ = site
    if not _has_documents_api(daemon):
        pytest.xfail("the native documents API (POST /v1/documents, GET /v1/documents/{id}, .../result) is "
                     "not in this daemon yet")
    good = _docx(tmp_path / "letter.docx", ["Dear friend.", "The weather is fine today. We went to the park."])
    bad = tmp_path / "broken.docx"
    bad.write_bytes(b"this is not a zip archive")
    for old in browser.downloads.iterdir():
        old.unlink()
    with clean_console(browser, allowed=r"v1/documents .*status of (400|415)"):
        _open(browser, _url(daemon))
        wait_until(lambda: browser.find_element("id", "files").is_displayed(), 10, "the file picker")
        browser.find_element("id", "files").send_keys(f"{good}\n{bad}")
        jobs = "return [...document.querySelectorAll('#jobs .job')].map(j => [j.className, j.textContent])"
        wait_until(lambda: len(browser.execute_script(jobs)) == 2 and all(
            "done" in c or "error" in c for c, _ in browser.execute_script(jobs)), 60, "both documents finished")
        (good_class, good_text), (bad_class, bad_text) = browser.execute_script(jobs)
        assert "done" in good_class and "Download" in good_text
        assert "error" in bad_class and "broken.docx" in bad_text
        link = browser.find_element("css selector", "#jobs .job.done a")
        name = link.get_attribute("download")
        assert name.endswith(".docx")
        link.click()
        target = browser.downloads / name
        wait_until(lambda: target.exists() and target.stat().st_size > 0, 20, f"{name} downloaded")
    import docx

    text = "\n".join(p.text for p in docx.Document(io.BytesIO(target.read_bytes())).paragraphs)
    assert _cjk(text), text


def test_a_dropped_file_is_uploaded_too(browser, site):
    daemon, _ = site
    if not _has_documents_api(daemon):
        pytest.xfail("the native documents API (POST /v1/documents) is not in this daemon yet")
    with clean_console(browser):
        _open(browser, _url(daemon))
        wait_until(lambda: browser.find_element("id", "drop").is_displayed(), 10, "the drop zone")
        browser.execute_script("""
            const files = new DataTransfer();
            files.items.add(new File(['Good night. See you tomorrow.\\n'], 'note.txt', {type: 'text/plain'}));
            document.getElementById('drop').dispatchEvent(
                new DragEvent('drop', {dataTransfer: files, bubbles: true, cancelable: true}));
        """)
        wait_until(lambda: browser.find_elements("css selector", "#jobs .job.done a"), 60, "the dropped file done")
        link = browser.find_element("css selector", "#jobs .job.done a")
        target = browser.downloads / link.get_attribute("download")
        target.unlink(missing_ok=True)
        link.click()
        wait_until(lambda: target.exists() and target.stat().st_size > 0, 20, f"{target.name} downloaded")
    assert _cjk(target.read_text(encoding="utf-8")), target.read_text(encoding="utf-8")


def _first_sentence_ms(driver) -> float:
    entries = driver.execute_script(f"return performance.getEntriesByName('{FIRST_SENTENCE}').map(e => e.duration)")
    return entries[-1] if entries else float("nan")


@pytest.mark.perf
def test_typed_text_reaches_the_screen_within_400_ms(browser, site):
    """From the last input event to the first translated sentence painted (measured in the page),
    with the embedded model, the 250 ms debounce included. Fresh sentences: no cache."""
    daemon, _ = site
    figures = []
    with clean_console(browser):
        _open(browser, _url(daemon))
        for k, sentence in enumerate(("My sister plays the piano every evening.", "The train to the airport is late.",
                                      "Please close the window before you leave.", "I bought three apples today.",
                                      "Our teacher speaks English slowly.")):
            browser.execute_script("performance.clearMeasures(); const s = document.getElementById('source');"
                                   "s.value = ''; s.dispatchEvent(new Event('input'))")
            wait_until(lambda: not _sentences(browser), 5, "the output cleared")
            _type(browser, sentence)
            wait_until(lambda: _first_sentence_ms(browser) == _first_sentence_ms(browser) and _sentences(browser),
                       10, "the first sentence measured")
            figures.append(_first_sentence_ms(browser))
    figures.sort()
    median = figures[len(figures) // 2]
    print(f"\ntyped text -> first translated sentence on screen: median {median:.0f} ms "
          f"(all: {', '.join(f'{f:.0f}' for f in figures)}; goal {FIRST_SENTENCE_GOAL_MS} ms, debounce included)")
    assert median <= FIRST_SENTENCE_GOAL_MS


# -- screenshots for docs/server.md --------------------------------------------------------------
def test_screenshots_for_the_docs(browser, site, tmp_path):
    """web-wide.png (light, 1100 px) and web-narrow.png (360 px, light and dark side by side),
    small enough for the docs; written to $EDGE_TRANSLATOR_WEB_SHOTS (``docs`` renews the
    published ones), else to a temporary folder."""
    from PIL import Image

    daemon, _ = site
    folder = Path(os.environ.get("EDGE_TRANSLATOR_WEB_SHOTS") or tmp_path)
    text = ("Where is the station? It is a long way from here, past the old bridge. "
            "My sister plays the piano every evening. Xkcd qwrtp zzzv blorf.")
    shots = []
    letter = _docx(Path(browser.downloads) / "letter.docx", ["Dear friend.", "The weather is fine today."])
    for width, dark in ((1100, False), (360, False), (360, True)):
        _open(browser, _url(daemon), width=width, dark=dark)
        _type(browser, text)
        _wait_translated(browser, 4)
        if width > 600 and _has_documents_api(daemon):
            browser.find_element("id", "files").send_keys(str(letter))
            wait_until(lambda: browser.find_elements("css selector", "#jobs .job.done a"), 60, "the letter done")
        browser.execute_script("const s = document.getElementById('source'); s.focus(); s.setSelectionRange(30, 30)")
        height = int(browser.execute_script("return document.querySelector('main').getBoundingClientRect().bottom"))
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": min(height, 1000), "deviceScaleFactor": 1, "mobile": width < 600})
        shots.append(Image.open(io.BytesIO(base64.b64decode(browser.get_screenshot_as_base64()))).convert("RGB"))
    wide, light, dark = shots
    narrow = Image.new("RGB", (light.width + dark.width + 16, max(light.height, dark.height)), "#888888")
    narrow.paste(light, (0, 0))
    narrow.paste(dark, (light.width + 16, 0))
    for image, name in ((wide, "web-wide.png"), (narrow, "web-narrow.png")):
        image.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(folder / name, optimize=True)
        assert (folder / name).stat().st_size < 150_000


def test_the_page_is_package_data():
    """Every file the page needs is in the folder, the folder holds nothing else, and pyproject ships it
    (tests/test_build_specs.py checks that the one-file app carries it)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11

    files = sorted(p.name for p in (ROOT / "edge_translator" / "daemon" / "web").iterdir())
    assert files == sorted(web.FILES)
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "web/*" in data["edge_translator.daemon"]
