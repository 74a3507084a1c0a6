"""Greedy output ids of a few bundles, at batch 1 and batched, as JSON (core only).

Run the same file on the x86 host and under qemu-aarch64, then compare with
``compare.py``. It imports nothing but the standard library and ``edge_translator.core``
(which brings numpy, onnxruntime and sentencepiece).

    python ids.py OUT.json NAME=BUNDLE_DIR [NAME=BUNDLE_DIR ...]
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import time

from edge_translator.core.cpu import cpu_info
from edge_translator.core.engine import EngineOptions
from edge_translator.core.translator import Translator

# 24 sentences from the tiny test model's vocabulary (words, names, numbers, punctuation).
SENTENCES = [
    "Hello there.",
    "How are you today?",
    "The water was hot and the air was cold.",
    "I think you can find the word in this sentence.",
    "Each day we made a new plan for the old house.",
    "She said that the boy had lost his number.",
    "There were 12 people at the end of the long line.",
    "Where did you put the little red book?",
    "Many of them live under the high land near the sea.",
    "Tell me what you want to read first.",
    "He came back home after three years of work.",
    "Look at the big hand of the clock!",
    "We can help you move the large stone if you give us time.",
    "It is $25 for one and 1,000 for all of them.",
    "The sound of the port was very low that night.",
    "Mary and John went out to play in the round field.",
    "Could you write your name on this form, please?",
    "Some people think too much and say too little.",
    "Every year the number of new words grows.",
    "Do not turn the light off before you go.",
    "My father took the first train to the city.",
    "Why does the same man call us every morning?",
    "These things are more important than you think.",
    "The answer is 42.5, but nobody knows the question.",
]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _batch1(path: str) -> list[list[int]]:
    """One sentence at a time: each submission is decoded alone."""
    with Translator.load(path, threads=1, cache=None) as tr:
        out = []
        for sentence in SENTENCES:
            results = list(tr.submit(sentence))
            out.append([i for r in results for i in r.ids])
        return out


def _batched(path: str) -> list[list[int]]:
    """All sentences in one submission (one per line), so they form one batch of 24 rows."""
    engine = EngineOptions(max_batch_size=len(SENTENCES), max_wait_ms=2000.0)
    with Translator.load(path, threads=1, cache=None, engine=engine) as tr:
        results = [r for r in tr.submit("\n".join(SENTENCES)) if r.source.strip()]
        sources = [r.source.strip() for r in results]
        if sources != SENTENCES:
            raise SystemExit(f"segmentation changed the sentences: {sources}")
        return [list(r.ids) for r in results]


def main(argv: list[str]) -> int:
    out_path, specs = argv[0], argv[1:]
    collect = _Collect()
    logging.getLogger("edge_translator").addHandler(collect)
    import onnxruntime

    cpu = cpu_info()
    report = {"machine": platform.machine(), "onnxruntime": onnxruntime.__version__, "cpu": cpu.name,
              "int8_kernel": cpu.int8_kernel(), "sentences": SENTENCES, "bundles": {}}
    for spec in specs:
        name, _, path = spec.partition("=")
        start = len(collect.lines)
        t0 = time.perf_counter()
        entry = {"batch1": _batch1(path), "batched": _batched(path)}
        entry["seconds"] = round(time.perf_counter() - t0, 2)
        entry["warnings"] = sorted(set(collect.lines[start:]))
        report["bundles"][name] = entry
        print(f"{name}: {entry['seconds']} s, warnings: {entry['warnings'] or 'none'}", flush=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(report, fh, indent=1, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
