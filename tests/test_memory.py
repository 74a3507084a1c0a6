"""The translation memory: a persistent cache, shared by threads and processes, in and out as TMX."""

from __future__ import annotations

import io
import math
import multiprocessing
import threading
import xml.etree.ElementTree as ET

import pytest

from edge_translator.core.cache import CachedTranslation, CacheKey, ChainedCache, LRUCache
from edge_translator.core.errors import InputError
from edge_translator.core.memory import TranslationMemory, default_path
from edge_translator.documents.tmx import export_tmx, import_tmx, read_tmx


def key(sentence: str, model: str = "m1", target: str = "zh-Hans", beam: int = 1) -> CacheKey:
    return CacheKey(model, sentence, target, beam, None, True)


def value(text: str) -> CachedTranslation:
    return CachedTranslation(text, (5, 6, 7), "eos", -0.25)


def test_put_get_and_every_part_of_the_key_matters(tmp_path):
    with TranslationMemory(tmp_path / "m.sqlite") as memory:
        memory.put(key("Hello."), value("你好。"))
        hit = memory.get(key("Hello."))
        assert hit == value("你好。")
        for other in (key("Hello!"), key("Hello.", model="m2"), key("Hello.", target="zh-Hant"),
                      key("Hello.", beam=4)):
            assert memory.get(other) is None
        assert memory.hits == 1 and memory.misses == 4


def test_it_persists_and_imported_pairs_win_for_any_model(tmp_path):
    path = tmp_path / "m.sqlite"
    with TranslationMemory(path) as memory:
        memory.put(key("Open the door."), value("把门打开。"))
    with TranslationMemory(path) as memory:
        assert memory.get(key("Open the door.")).text == "把门打开。"
        memory.add("Open  the door.", "请开门。", "zh-Hans")
        assert memory.get(key("Open the door.")).text == "请开门。"
        assert memory.get(key("Open the door.", model="other", beam=3)).text == "请开门。"
        imported = memory.get(key("Open the door.", model="other"))
        assert imported.ids == () and math.isnan(imported.score)
        stats = memory.stats()
        assert stats.entries == 2 and stats.imported == 1 and stats.models == 1 and stats.targets == {"zh-Hans": 2}
        assert memory.clear() == 2 and memory.get(key("Open the door.")) is None


def _writer(path, worker, count):
    with TranslationMemory(path) as memory:
        for i in range(count):
            memory.put(key(f"sentence {worker} {i}"), value(f"句子 {worker} {i}"))
            memory.get(key(f"sentence {(worker + 1) % 4} {i}"))


def test_threads_and_processes_share_one_file(tmp_path):
    path = tmp_path / "shared.sqlite"
    TranslationMemory(path).close()
    processes = [multiprocessing.get_context("spawn").Process(target=_writer, args=(path, w, 150)) for w in range(2)]
    for p in processes:
        p.start()
    memory = TranslationMemory(path)
    threads = [threading.Thread(target=lambda w=w: [memory.put(key(f"sentence {w} {i}"), value(f"句子 {w} {i}"))
                                                    for i in range(150)]) for w in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for p in processes:
        p.join(timeout=120)
        assert p.exitcode == 0
    assert memory.stats().entries == 600
    assert all(memory.get(key(f"sentence {w} {i}")) == value(f"句子 {w} {i}") for w in range(4) for i in range(150))
    memory.close()


def test_a_folder_is_not_a_memory_and_is_one_clear_error(tmp_path):
    with pytest.raises(InputError, match="is not a usable translation memory .*pass another path with --tm"):
        TranslationMemory(tmp_path)


def test_default_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert default_path() == tmp_path / "edge-translator" / "memory.sqlite"


def test_chained_cache_fills_the_faster_layer():
    fast, slow = LRUCache(10), LRUCache(10)
    chain = ChainedCache(fast, slow)
    slow.put(key("A."), value("甲。"))
    assert chain.get(key("A.")) == value("甲。") and fast.get(key("A.")) == value("甲。")
    chain.put(key("B."), value("乙。"))
    assert fast.get(key("B.")) and slow.get(key("B."))
    assert chain.get(key("C.")) is None


def test_translator_reuses_the_memory_across_loads(tmp_path, tiny_int8):
    from edge_translator import Translator

    path = tmp_path / "m.sqlite"
    with TranslationMemory(path) as memory, Translator.load(tiny_int8, threads=1, cache=memory) as translator:
        first = list(translator.translate_iter("Hello world. Good night."))
        assert not any(r.cached for r in first)
    with TranslationMemory(path) as memory, Translator.load(tiny_int8, threads=1, cache=memory) as translator:
        again = list(translator.translate_iter("Hello   world. Good night."))
        assert all(r.cached for r in again) and [r.text for r in again] == [r.text for r in first]


def test_tmx_round_trip_keeps_every_character(tmp_path):
    pairs = [("Fish & chips <b>", "炸鱼 & 薯条 <b>", "zh-Hans"), ('He said "hi".', "他说“嗨”。", "zh-Hant"),
             ("Tab\there.", "这里。", "zh-Hans")]
    with TranslationMemory(tmp_path / "a.sqlite") as memory:
        for source, text, target in pairs:
            memory.add(source, text, target)
        out = io.StringIO()
        assert export_tmx(memory, out) == 3
    exported = tmp_path / "a.tmx"
    exported.write_text(out.getvalue(), "utf-8")
    root = ET.parse(exported).getroot()
    assert root.tag == "tmx" and root.get("version") == "1.4" and root.find("header").get("srclang") == "en"
    with TranslationMemory(tmp_path / "b.sqlite") as other:
        assert import_tmx(other, exported) == 3
        got = sorted((e.source, e.text, e.target) for e in other.entries())
    assert got == sorted((" ".join(s.split()), t, g) for s, t, g in pairs)


def test_tmx_from_other_tools(tmp_path):
    path = tmp_path / "other.tmx"
    path.write_text("""<?xml version="1.0" encoding="UTF-8"?>
<tmx version="1.4"><header srclang="en-US" segtype="sentence" o-tmf="x" adminlang="en" datatype="plaintext"
 creationtool="x" creationtoolversion="1"/><body>
<tu><tuv xml:lang="en-US"><seg>Press <bpt i="1">&lt;b&gt;</bpt>Start<ept i="1">&lt;/b&gt;</ept>.</seg></tuv>
<tuv xml:lang="zh-TW"><seg>按開始。</seg></tuv></tu>
<tu><tuv xml:lang="en"><seg>Only English.</seg></tuv><tuv xml:lang="fr"><seg>Seulement.</seg></tuv></tu>
<tu><tuv xml:lang="EN"><seg>Stop.</seg></tuv><tuv xml:lang="zh-CN"><seg>停止。</seg></tuv></tu>
</body></tmx>""", "utf-8")
    assert list(read_tmx(path)) == [("Press <b>Start</b>.", "按開始。", "zh-Hant"), ("Stop.", "停止。", "zh-Hans")]


@pytest.mark.parametrize("content, message", [
    ("<tmx><body><tu>", "not well-formed TMX"),
    ("<xliff/>", "not a TMX file"),
    ("", "not well-formed TMX"),
])
def test_bad_tmx_is_one_clear_error_and_imports_nothing(tmp_path, content, message):
    path = tmp_path / "bad.tmx"
    path.write_text('<tmx><body><tu><tuv xml:lang="en"><seg>A.</seg></tuv><tuv xml:lang="zh"><seg>甲。</seg>'
                    "</tuv></tu>" + content if content.startswith("<tmx") else content, "utf-8")
    with TranslationMemory(tmp_path / "m.sqlite") as memory:
        with pytest.raises(InputError, match=message):
            import_tmx(memory, path)
        assert memory.stats().entries == 0


def test_recent_is_newest_first_searches_both_sides_literally_and_delete_forgets_one(tmp_path):
    with TranslationMemory(tmp_path / "m.sqlite") as memory:
        for i, (source, text) in enumerate([("A 50% discount.", "五折。"), ("snake_case names", "蛇形命名"),
                                            ("Plain words.", "普通的话。")]):
            memory.put(key(source), value(text))
            memory.put(key(source, model="m2"), value(text))
        assert [e.source for e in memory.recent(3)] == ["Plain words.", "Plain words.", "snake_case names"]
        assert {e.source for e in memory.recent(10, "50%")} == {"A 50% discount."}
        assert {e.source for e in memory.recent(10, "e_c")} == {"snake_case names"}
        assert {e.source for e in memory.recent(10, "%")} == {"A 50% discount."}
        assert {e.source for e in memory.recent(10, "命名")} == {"snake_case names"}
        assert len(memory.recent(10, "  ")) == 6
        [one] = [e for e in memory.recent(10, "Plain") if e.model == "m1"]
        assert memory.delete(one) == 1
        assert [e.model for e in memory.recent(10, "Plain")] == ["m2"]
