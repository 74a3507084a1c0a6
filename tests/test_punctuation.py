"""Chinese punctuation in Chinese output (core/punctuation.py), over generated sentences:
every ASCII mark beside a Han character becomes full-width, and each class that must stay
as it is does: numbers, times, URLs, e-mail addresses, file names, code, runs of Latin
text and ellipses."""

from __future__ import annotations

import random
import re

import pytest

from edge_translator.core.punctuation import FULL_WIDTH, chinese_punctuation

HAN = ["我们", "火车站", "在哪里", "旅馆", "公园附近", "今天", "天气很好", "请", "保存", "文件", "价格", "会议", "开始"]
#: What stays as it is, wherever it stands in a Chinese sentence.
KEPT = {
    "numbers": ["3.5", "1,000", "12,345.67", "0.5", "2.0"],
    "times": ["10:30", "9:05", "23:59:59"],
    "urls": ["https://example.com/a.html?x=1", "http://www.example.org", "www.example.com/path", "ftp://a.b/c.txt"],
    "e-mail": ["a.b@example.org", "support@example.com"],
    "file names and versions": ["config.ini", "report_2024.pdf", "v2.0.1", "edge-translator.exe"],
    "code": ["`a.b(c)`", "`x = y; z`", "main()", "f(x)", "obj.run()"],
    "latin runs": ["Hello, world", "Yes, sir", "A, B and C", "Save, Open"],
    "ellipses": ["...", "....", ". . ."],
}
ASCII_BESIDE_HAN = re.compile(r"[\u4e00-\u9fff][,.?!:;()]|[,.?!:;()][\u4e00-\u9fff]")


def _sentences(seed: int, count: int = 200):
    """``(sentence, [kept pieces])``: Han words, marks between them, and kept pieces inside."""
    rng = random.Random(seed)
    for _ in range(count):
        parts, kept = [], []
        for _ in range(rng.randint(2, 5)):
            parts.append(rng.choice(HAN))
            if rng.random() < 0.5:
                piece = rng.choice(KEPT[rng.choice(sorted(KEPT))])
                kept.append(piece)
                parts.append(piece)
                parts.append(rng.choice(HAN))
            parts.append(rng.choice([",", ", ", ":", ";", "", ""]))
        parts.append(rng.choice([".", "?", "!", "。"]))
        yield "".join(parts), kept


def test_marks_beside_han_become_full_width_and_kept_pieces_stay():
    for sentence, kept in _sentences(1):
        out = chinese_punctuation(sentence)
        for piece in kept:
            assert piece in out, (sentence, out, piece)
        rest = out
        for piece in sorted(kept, key=len, reverse=True):
            rest = rest.replace(piece, "\0")
        assert not ASCII_BESIDE_HAN.search(rest), (sentence, out)
        assert re.sub(r"[，。？！：；（） ,.?!:;() ]", "", out) == re.sub(r"[，。？！：；（） ,.?!:;() ]", "", sentence)


@pytest.mark.parametrize("kind", sorted(KEPT))
def test_each_kind_that_stays(kind):
    for piece in KEPT[kind]:
        for sentence in (f"请看{piece}", f"{piece}很好", f"我们说{piece}然后走"):
            assert piece in chinese_punctuation(sentence), (kind, sentence)


@pytest.mark.parametrize("mark", sorted(FULL_WIDTH))
def test_each_mark_beside_han_before_or_after(mark):
    if mark in "()":
        assert chinese_punctuation(f"苹果{mark}很好") == f"苹果{FULL_WIDTH[mark]}很好"
    else:
        assert chinese_punctuation(f"火车站{mark}旅馆") == f"火车站{FULL_WIDTH[mark]}旅馆"
        assert chinese_punctuation(f"火车站{mark}") == f"火车站{FULL_WIDTH[mark]}"
        assert chinese_punctuation(f"Tom{mark} 旅馆") == f"Tom{FULL_WIDTH[mark]}旅馆"


def test_the_issues_examples_and_pairs_of_parentheses():
    assert chinese_punctuation("火车站在哪里?旅馆在公园附近。") == "火车站在哪里？旅馆在公园附近。"
    assert chinese_punctuation("这里是很长的路,从这里的路上。") == "这里是很长的路，从这里的路上。"
    assert chinese_punctuation("你好, 世界!") == "你好，世界！"
    assert chinese_punctuation("苹果(apple)很好吃.") == "苹果（apple）很好吃。"
    assert chinese_punctuation("请运行 (见下文) 的命令") == "请运行（见下文）的命令"
    assert chinese_punctuation("在main()中调用f(x)。") == "在main()中调用f(x)。"
    assert chinese_punctuation("真的吗?!好吧...") == "真的吗？！好吧..."


def test_text_without_han_or_without_marks_is_the_same_object():
    for text in ("Hello, world. How are you?", "你好世界", "", "3.5, 10:30"):
        assert chinese_punctuation(text) == text


def test_it_is_idempotent_on_generated_sentences():
    for sentence, _ in _sentences(2, 100):
        once = chinese_punctuation(sentence)
        assert chinese_punctuation(once) == once
