"""The daemon as users run it (``edge-translator serve``), with real clients of its APIs.

libretranslatepy and deepl (the dev extra) and the npm ``libretranslate`` package talk to a
daemon started by the test on a free port, with the embedded model and an API key file.
Then the process's own behaviour: SIGTERM drains and exits 0, and start-up errors are one
line with an exit code.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from edge_translator.toolchain.testmodels import english_sentences

from .conftest import ROOT, run_node
from .waiting import wait_until

pytest.importorskip("waitress")  # the serve extra; CI installs it

KEY = "test-key-0123"


def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


class Served:
    """An ``edge-translator serve`` process on a free port."""

    def __init__(self, *args: str):
        env = dict(os.environ)
        env.pop("EDGE_TRANSLATOR_MODEL", None)
        self.process = subprocess.Popen([sys.executable, "-m", "edge_translator.cli", "serve", "--port", "0",
                                         "--threads", "1", *args], cwd=ROOT, env=env, stderr=subprocess.PIPE,
                                        stdout=subprocess.DEVNULL, text=True)
        self.log: list[str] = []
        deadline = time.monotonic() + 60
        self.url = None
        while self.url is None:
            line = self.process.stderr.readline()
            if not line:
                raise AssertionError(f"serve exited ({self.process.wait()}): {''.join(self.log)}")
            self.log.append(line)
            match = re.search(r"serving \S+ on (http://\S+)", line)
            if match:
                self.url = match.group(1)
            assert time.monotonic() < deadline, "serve did not start in 60 s"
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.log.append(line)

    def stop(self, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY} 1000\n", encoding="utf-8")
    daemon = Served("--api-keys", str(keys))
    yield daemon
    assert daemon.stop() == 0
    assert not any("Traceback" in line for line in daemon.log), "".join(daemon.log)


def test_libretranslatepy(served):
    from libretranslatepy import LibreTranslateAPI

    api = LibreTranslateAPI(served.url, api_key=KEY)
    assert _cjk(api.translate("Where is the train station?", "en", "zh"))
    assert _cjk(api.translate("I like green tea.", "auto", "zh-Hans"))
    codes = {language["code"] for language in api.languages()}
    assert {"en", "zh"} <= codes
    assert api.detect("This is plainly written in English.")[0]["language"] == "en"
    with pytest.raises(urllib.error.HTTPError) as error:
        LibreTranslateAPI(served.url, api_key="wrong").translate("Hello.", "en", "zh")
    assert error.value.code == 403


def test_deepl_client(served):
    import deepl

    translator = deepl.Translator(KEY, server_url=served.url)
    result = translator.translate_text("Good morning, how are you?", target_lang="ZH")
    assert _cjk(result.text) and result.detected_source_lang == "EN"
    assert result.billed_characters == len("Good morning, how are you?")
    results = translator.translate_text(["Thank you.", "See you tomorrow."], source_lang="EN", target_lang="ZH-HANS")
    assert len(results) == 2 and all(_cjk(r.text) for r in results)
    html = translator.translate_text("<p>Hello <b>there</b>.</p>", target_lang="ZH", tag_handling="html")
    assert html.text.startswith("<p>") and "<b>" in html.text and html.text.endswith("</p>")
    usage = translator.get_usage()
    assert usage.character.count >= 40 and not usage.any_limit_reached
    assert [lang.code for lang in translator.get_source_languages()] == ["EN"]
    assert "ZH" in [lang.code for lang in translator.get_target_languages()]
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong-key", server_url=served.url).translate_text("Hi.", target_lang="ZH")


def test_npm_libretranslate_client(served):
    result = run_node("client.mjs", served.url, KEY, what="libretranslate")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert _cjk(out["one"]) and _cjk(out["auto"])


def test_sigterm_finishes_requests_in_flight_then_exits_0():
    daemon = Served()
    text = " ".join(english_sentences(40, seed=17))
    answer: dict = {}

    def call():
        request = urllib.request.Request(daemon.url + "/translate", json.dumps({"q": text, "target": "zh"}).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            answer["status"], answer["body"] = response.status, json.loads(response.read())

    worker = threading.Thread(target=call)
    worker.start()
    wait_until(lambda: json.loads(urllib.request.urlopen(daemon.url + "/health", timeout=5).read())["in_flight"] > 0,
               what="the request to be in flight")
    daemon.process.send_signal(signal.SIGTERM)
    worker.join(120)
    assert daemon.process.wait(60) == 0
    assert answer["status"] == 200 and _cjk(answer["body"]["translatedText"])
    assert any("SIGTERM" in line for line in daemon.log)
    with pytest.raises(OSError):
        urllib.request.urlopen(daemon.url + "/health", timeout=5)


def test_binding_beyond_localhost_without_keys_warns():
    daemon = Served("--host", "0.0.0.0")
    try:
        assert any("without API keys" in line for line in daemon.log)
    finally:
        assert daemon.stop() == 0


@pytest.mark.parametrize("args,code,message", [
    (["--api-keys", "/nonexistent/keys.txt"], 4, "API key file /nonexistent/keys.txt does not exist"),
    (["--model", "/nonexistent/bundle"], 3, "/nonexistent/bundle"),
    (["--char-limit", "-1"], 2, "char_limit must not be negative"),
    (["--port", "70000"], 2, "port must be between 0 and 65535"),
])
def test_startup_errors_are_one_line(args, code, message):
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "serve", *args], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == code, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_port_in_use_is_one_line(served):
    port = served.url.rsplit(":", 1)[1]
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "serve", "--port", port], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 4 and f"cannot listen on 127.0.0.1:{port}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_bench_serve_smoke_writes_its_section(tmp_path):
    """The load test's harness end to end, briefly (it asserts no speed)."""
    out = tmp_path / "docs"
    (out).mkdir()
    (out / "benchmarks.md").write_text("# Benchmarks\n\n## Batch 1\n\nkept\n", encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "edge_translator.cli", "bench-serve", "--smoke", "--clients", "3",
                             "--seconds", "2", "--sequential-seconds", "1", "--threads", "1", "--out", str(out)],
                            cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    run = json.loads((out / "benchmarks.json").read_text())["serve"]["tatoeba-en-zh-small"]
    assert run["concurrent"]["clients"] == 3 and run["concurrent"]["requests"] > 0 and run["sequential"]["requests"] > 0
    assert run["concurrent"]["errors"] == {} and run["exit_code"] == 0 and run["rss_end_mb"] > 10
    assert run["ratio"] > 0 and run["concurrent"]["p50_ms"] <= run["concurrent"]["p99_ms"]
    assert run["rss_samples"] >= 3 and 10 < run["rss_peak_first_half_mb"] and 10 < run["rss_peak_second_half_mb"]
    assert run["rss_peak_growth"] == round(run["rss_peak_second_half_mb"] / run["rss_peak_first_half_mb"] - 1, 3)
    report = (out / "benchmarks.md").read_text()
    assert "## Batch 1\n\nkept" in report and "## Daemon under load" in report and "| tatoeba-en-zh-small" in report


def test_the_daemon_reuses_and_fills_a_translation_memory(tmp_path):
    """A memory filled by `docs` (here: by hand) answers the daemon; what it decodes is added."""
    from libretranslatepy import LibreTranslateAPI

    from edge_translator.core.memory import TranslationMemory

    path = tmp_path / "memory.sqlite"
    with TranslationMemory(path) as memory:
        memory.add("The red lamp is broken.", "红灯坏了（来自记忆库）。", "zh-Hans")
    daemon = Served("--tm", str(path), "--cache", "16")
    try:
        api = LibreTranslateAPI(daemon.url)
        assert api.translate("The red lamp is broken.", "en", "zh") == "红灯坏了（来自记忆库）。"
        fresh = api.translate("Where is the train station?", "en", "zh")
        assert _cjk(fresh)
    finally:
        assert daemon.stop() == 0
    with TranslationMemory(path) as memory:
        decoded = {(e.source, e.text) for e in memory.entries() if e.origin == "decoded"}
    assert ("Where is the train station?", fresh) in decoded
