"""Chinese punctuation in Chinese output: ASCII ``, . ? ! : ; ( )`` beside Han characters
become their full-width forms (，。？！：；（）), as Chinese text writes them.

The model's pieces are left as they are (the ids and the score do not change); only the
text made from them is. A mark is changed when a Han character stands right before it or
right after it (a space between is dropped), except:

- between two digits: numbers and times ("3.5", "1,000", "10:30");
- inside a URL, an e-mail address, a file name or any other run of Latin letters, digits
  and dots ("example.com", "a.b@c.org", "config.ini", "v2.0");
- inside backquotes (code);
- an ellipsis ("..."), which is left whole (a run of other marks, "?!", changes mark by mark);
- a parenthesis right after a Latin letter or digit (``main()``, ``f(x)``).

A pair of parentheses changes together: when either one would change, or the text inside
them holds a Han character, both do.
"""

from __future__ import annotations

import re

FULL_WIDTH = {",": "，", ".": "。", "?": "？", "!": "！", ":": "：", ";": "；", "(": "（", ")": "）"}
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003ffff\u3000-\u303f\uff00-\uffef]")
#: Runs left whole: URLs, e-mail addresses, code in backquotes, dotted names and versions.
_PROTECTED = re.compile(r"""`[^`\n]*`|(?:(?:https?|ftp|file)://|www\.)[^\s\u3000-\u9fff\uff00-\uffef]+
    |[\w.+-]+@[\w-]+(?:\.[\w-]+)+|[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)+""", re.X)
_MARKS = re.compile(r"[,.?!:;()]")
_RUNS = re.compile(r"\.(?: ?\.)+|[,.?!:;]+")  # an ellipsis (". . ." too), or a run of marks


def _is_han(ch: str) -> bool:
    return bool(ch) and _HAN.match(ch) is not None


def chinese_punctuation(text: str) -> str:
    """``text`` with the ASCII marks beside Han characters in their full-width forms (see
    the module docstring for what is left alone)."""
    if not _MARKS.search(text) or not _HAN.search(text):
        return text
    for _ in range(4):  # a mark beside one that just changed ("好, !") changes on the next pass
        changed = _once(text)
        if changed == text:
            break
        text = changed
    return text


def _once(text: str) -> str:
    protected = [False] * len(text)
    for m in _PROTECTED.finditer(text):
        end = m.end()
        if not m.group().startswith("`"):
            while end > m.start() and text[end - 1] in ",.?!:;)":  # "example.com." ends a sentence
                end -= 1
        for i in range(m.start(), end):
            protected[i] = True
    change: dict[int, str] = {}
    drop: set[int] = set()
    opens: list[int] = []
    pairs: dict[int, int] = {}
    for i, ch in enumerate(text):
        if ch == "(" and not protected[i]:
            opens.append(i)
        elif ch == ")" and not protected[i] and opens:
            pairs[opens.pop()] = i
    for m in _RUNS.finditer(text):
        start, end, run = m.start(), m.end(), m.group()
        if any(protected[start:end]) or (run.count(".") > 1 and set(run) <= {".", " "}):
            continue  # inside a URL or a name; an ellipsis stays whole
        prev, nxt = text[start - 1: start], text[end: end + 1]
        if len(run) == 1 and prev.isdigit() and nxt.isdigit():
            continue  # "3.5", "1,000", "10:30"
        before, after = _neighbour(text, start, -1), _neighbour(text, end - 1, 1)
        if (before is not None and _is_han(text[before])) or (after is not None and _is_han(text[after])):
            for i in range(start, end):
                change[i] = FULL_WIDTH[text[i]]
            _drop_spaces(text, start, drop)
            _drop_spaces(text, end - 1, drop)
    for left, right in pairs.items():
        if left > 0 and (text[left - 1].isascii() and text[left - 1].isalnum()):
            continue  # a call: main(), f(x)
        inside = _HAN.search(text, left + 1, right) is not None
        before, after = _neighbour(text, left, -1), _neighbour(text, right, 1)
        beside = (before is not None and _is_han(text[before])) or (after is not None and _is_han(text[after]))
        if inside or beside:
            change[left], change[right] = "（", "）"
            _drop_spaces(text, left, drop)
            _drop_spaces(text, right, drop)
    for i, ch in enumerate(text):
        if ch in "()" and i not in change and not protected[i] and i not in pairs and i not in pairs.values():
            prev_han = i > 0 and _is_han(text[i - 1])
            next_han = i + 1 < len(text) and _is_han(text[i + 1])
            if prev_han or next_han:
                change[i] = FULL_WIDTH[ch]
    if not change:
        return text
    return "".join(change.get(i, ch) for i, ch in enumerate(text) if i not in drop)


def _neighbour(text: str, i: int, step: int) -> int | None:
    """The index of the nearest character beside ``text[i]`` past one space, or ``None``."""
    j = i + step
    if 0 <= j < len(text) and text[j] == " ":
        j += step
    return j if 0 <= j < len(text) and text[j] != "\n" else None


def _drop_spaces(text: str, i: int, drop: set[int]) -> None:
    """A full-width mark takes no space beside it (one space, between it and other text)."""
    for j, k in ((i - 1, i - 2), (i + 1, i + 2)):
        if 0 <= j < len(text) and text[j] == " " and 0 <= k < len(text) and not text[k].isspace():
            drop.add(j)
