"""Two bundles side by side: what a user of the embedded model would notice if it changed.

Size on disk, start-up of a fresh ``translate`` process, batch-1 decoding speed on one
thread, and how often longer prose comes back untranslated or stuttering. The
rounds alternate between the two bundles so that drift in the machine's speed hits both.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CJK = re.compile(r"[\u3400-\u9fff]")
#: Starts the CLI the way the console script does, so start-up includes its imports.
STARTUP = "import sys; from edge_translator.cli import main; sys.exit(main())"


@dataclass(frozen=True)
class ModelBenchOptions:
    """How much each measurement runs."""

    rounds: int = 3
    batch1_sentences: int = 60
    """Prose sentences translated one at a time per round, on one thread."""
    prose_threads: int = 2


def untranslated(output: str) -> bool:
    """No Chinese character at all in the output."""
    return not CJK.search(output)


def stuttering(output: str) -> bool:
    """The output stutters (:func:`.toolchain.evaluate.stutters`: a Han unit of one to four
    characters three or more times in a row), the measure that ``eval`` reports too."""
    from ..toolchain.evaluate import stutters

    return stutters(output) is not None


def _startup_s(bundle: Path) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", STARTUP, "translate", "--model", str(bundle), "Hello."],
                   check=True, capture_output=True)
    return time.perf_counter() - start


def batch1_speed(bundle: Path, sentences: list[str]) -> tuple[float, float]:
    """(tokens/s, sentences/s) translating one sentence at a time on one thread (also what
    ``train-sweep`` times its bundles with)."""
    import sentencepiece

    from ..core.translator import Translator

    target = sentencepiece.SentencePieceProcessor(model_file=str(bundle / "target.spm"))
    with Translator.load(bundle, threads=1, cache=None) as translator:
        translator.translate("Hello.")
        start = time.perf_counter()
        outputs = [translator.translate(s) for s in sentences]
        seconds = time.perf_counter() - start
    tokens = sum(len(target.encode(o)) + 1 for o in outputs)  # + the end-of-sentence token
    return tokens / seconds, len(sentences) / seconds


def compare(bundles: dict[str, Path], sentences: list[str], options: ModelBenchOptions) -> dict:
    """Measure each bundle; returns ``{"rows": {name: figures}, "sentences": n}``."""
    from ..core.translator import Translator
    from .machine import dir_mb

    samples = {name: {"startup": [], "tok_s": [], "sent_s": []} for name in bundles}
    order = list(bundles.items())
    for round_ in range(options.rounds):
        for name, path in (order if round_ % 2 == 0 else order[::-1]):
            samples[name]["startup"].append(_startup_s(path))
            tok_s, sent_s = batch1_speed(path, sentences[:options.batch1_sentences])
            samples[name]["tok_s"].append(tok_s)
            samples[name]["sent_s"].append(sent_s)
    rows = {}
    for name, path in bundles.items():
        with Translator.load(path, threads=options.prose_threads, cache=None) as translator:
            outputs = translator.translate_batch(sentences)
        rows[name] = {
            "size_mb": round(dir_mb(path), 1),
            "startup_s": round(statistics.median(samples[name]["startup"]), 3),
            "batch1_tok_s": round(statistics.median(samples[name]["tok_s"]), 1),
            "batch1_sent_s": round(statistics.median(samples[name]["sent_s"]), 2),
            "untranslated": sum(map(untranslated, outputs)),
            "stutters": sum(map(stuttering, outputs)),
        }
    return {"rows": rows, "sentences": len(sentences), "batch1_sentences": options.batch1_sentences}


def render(result: dict) -> list[str]:
    """A Markdown table of :func:`compare`'s result."""
    n = result["sentences"]
    lines = ["| bundle | size MB | start-up s | batch-1 tok/s | batch-1 sentences/s | untranslated | stutters |",
             "|---|---|---|---|---|---|---|"]
    for name, r in result["rows"].items():
        lines.append(f"| {name} | {r['size_mb']} | {r['startup_s']} | {r['batch1_tok_s']} | {r['batch1_sent_s']} "
                     f"| {r['untranslated']} of {n} | {r['stutters']} of {n} |")
    return lines
