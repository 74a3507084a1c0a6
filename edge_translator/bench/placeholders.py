"""Measure which placeholder forms survive translation by a model; the glossary's styles come from this.

Each English test sentence gets a term of one kind inserted at a word boundary (a brand,
an SKU, a URL, an e-mail address, a glossary term, or a brand and a URL together); the
glossary masks it with each candidate form, the model translates it, and the glossary
restores it. A sentence counts when every placeholder came back (after the tolerance of
:meth:`~edge_translator.documents.glossary.Glossary.unmask`). "After retry" counts a
sentence when either form of a pair survived, which is what the document job does: it
translates a damaged sentence again with style 1.

Run ``python -m edge_translator.bench.placeholders``: every candidate form is first
screened on 40 sentences, and the best four (with the glossary's two styles) are measured
on 400; ``--json`` prints the raw figures, ``--styles`` measures only the glossary's styles.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path

from ..core.cpu import cpu_name
from ..documents.glossary import STYLES, Glossary, PlaceholderForm

#: The forms tried: brackets and codes that other tools use, numbers, and the few Latin
#: words the demo model saw copied in its training targets (Tatoeba, Linux, CD).
CANDIDATES = (
    PlaceholderForm("__N__", "__{}__"),
    PlaceholderForm("{N}", "{{{}}}"),
    PlaceholderForm("[N]", "[{}]"),
    PlaceholderForm("<N>", "<{}>"),
    PlaceholderForm("ZXN", "ZX{}"),
    PlaceholderForm("XQZN", "XQZ{}"),
    PlaceholderForm("#N#", "#{}#"),
    PlaceholderForm("⟦N⟧", "⟦{}⟧"),
    PlaceholderForm("$N", "${}"),
    PlaceholderForm("@N", "@{}"),
    PlaceholderForm("999N", "999{}"),
    PlaceholderForm("TERMx", "TERM{}", names=tuple(f"TERM{c}" for c in "ABCDEFGHIJ")),
    PlaceholderForm("N from 1", "{}", start=1),
    PlaceholderForm("N from 30", "{}", start=30),
    PlaceholderForm("N% from 10", "{}%", start=10),
    PlaceholderForm("N% from 30", "{}%", start=30),
    PlaceholderForm("Linux, N%", "{}%", names=("Linux",), start=30),
    PlaceholderForm("CD, N%", "{}%", names=("CD",), start=30),
    PlaceholderForm("Tatoeba, N", "{}", names=("Tatoeba",), start=30),
    *STYLES,
)
SCREEN = 40
"""Sentences every candidate is first tried on; the best :data:`KEEP` go on to the full set."""
KEEP = 4

#: The terms inserted, by kind, and the glossary that masks them.
TERMS = {
    "brand": ("Acme",),
    "sku": ("XR-2040",),
    "url": ("https://example.com/help",),
    "email": ("help@example.com",),
    "term": ("router",),
    "brand+url": ("Acme", "https://example.com/help"),
}
GLOSSARY = "Acme\nrouter\t路由器\nre:\\b[A-Z]{2,}-\\d+\\b\n"
DEFAULT_PAIRS = Path(__file__).resolve().parents[2] / "assets" / "eval" / "tatoeba-cmn-eng-test.tsv"


def load_sentences(path: str | Path = DEFAULT_PAIRS, limit: int = 400, min_words: int = 4) -> list[str]:
    """The first ``limit`` English sentences of a Tatoeba TSV (``cmn_id, zh, en_id, en``)
    with at least ``min_words`` words."""
    sentences = []
    for line in Path(path).read_text(encoding="utf-8-sig").splitlines():
        columns = line.split("\t")
        if len(columns) == 4 and len(columns[3].split()) >= min_words:
            sentences.append(columns[3].strip())
            if len(sentences) == limit:
                break
    return sentences


def insert_terms(sentence: str, terms: Sequence[str], rng: random.Random) -> str:
    """``sentence`` with each term put between two of its words (never after the last)."""
    words = sentence.split(" ")
    for term in terms:
        at = rng.randrange(1, len(words))
        words.insert(at, term)
    return " ".join(words)


def measure(translator, sentences: Sequence[str], styles: Sequence[PlaceholderForm],
            glossary: Glossary | None = None, seed: int = 0) -> dict:
    """Survival of each placeholder form, per kind of term, and of each pair with a retry.

    Args:
        translator: Anything with ``translate_batch(list[str]) -> list[str]``.
        sentences: English sentences to insert terms into.
        styles: The forms to compare (their names must differ).
        glossary: What masks the terms; by default one with :data:`GLOSSARY`.
        seed: Where the terms are inserted.

    Returns:
        ``{"sentences", "kinds", "styles": {name: {kind: share, "all": share, "mangled": share}},
        "pairs": {"a + b": {kind: share, "all": share}}, "examples": {name: [...]}}``;
        shares are fractions of the sentences, "all" over every kind.
    """
    glossary = glossary or Glossary.parse(GLOSSARY, "<measure>")
    rng = random.Random(seed)
    cases = [(kind, insert_terms(s, terms, rng)) for kind, terms in TERMS.items() for s in sentences]
    survived: dict[str, list[bool]] = {}
    result: dict = {"sentences": len(sentences), "kinds": list(TERMS), "styles": {}, "pairs": {}, "examples": {}}
    for form in styles:
        masked = [glossary.mask(text, style=form) for _, text in cases]
        outputs = translator.translate_batch([m.text for m in masked])
        restored = [glossary.unmask(out, m) for out, m in zip(outputs, masked)]
        survived[form.name] = [not r.missing for r in restored]
        figures = _shares(cases, survived[form.name])
        figures["mangled"] = round(sum(r.mangled for r in restored) / len(cases), 3)
        result["styles"][form.name] = figures
        result["examples"][form.name] = [(m.text, out) for m, out in list(zip(masked, outputs))[::len(sentences)]]
    for a, b in combinations(survived, 2):
        either = [x or y for x, y in zip(survived[a], survived[b])]
        result["pairs"][f"{a} + {b}"] = _shares(cases, either)
    return result


def _shares(cases: list[tuple[str, str]], ok: list[bool]) -> dict:
    figures = {}
    for kind in TERMS:
        flags = [flag for (k, _), flag in zip(cases, ok) if k == kind]
        figures[kind] = round(sum(flags) / len(flags), 3)
    figures["all"] = round(sum(ok) / len(ok), 3)
    return figures


def report(result: dict, pairs: bool = True) -> str:
    """The figures as a plain-text table, best form first (and the best pairs)."""
    kinds = result["kinds"]
    head = f"{'form':<14}" + "".join(f"{k:>10}" for k in kinds) + f"{'all':>8}"
    lines = [f"{result['sentences']} sentences x {len(kinds)} kinds; share of sentences whose placeholders "
             "all survived", head]
    ranked = sorted(result["styles"].items(), key=lambda kv: -kv[1]["all"])
    for name, figures in ranked:
        lines.append(f"{name:<14}" + "".join(f"{figures[k]:>10.0%}" for k in kinds) + f"{figures['all']:>8.0%}")
    if not pairs:
        return "\n".join(lines)
    lines += ["", "after one retry with the other form (best pairs)", head]
    for name, figures in sorted(result["pairs"].items(), key=lambda kv: -kv[1]["all"])[:6]:
        lines.append(f"{name:<14}\n{'':<14}" + "".join(f"{figures[k]:>10.0%}" for k in kinds)
                     + f"{figures['all']:>8.0%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Screen the candidate forms on a bundle (the embedded demo model by default), then
    measure the best of them on every sentence."""
    parser = argparse.ArgumentParser(prog="python -m edge_translator.bench.placeholders",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="bundle directory (default: the embedded demo model)")
    parser.add_argument("--pairs", default=str(DEFAULT_PAIRS), help="Tatoeba TSV of test sentences")
    parser.add_argument("--limit", type=int, default=400, help="sentences to use (default 400)")
    parser.add_argument("--styles", action="store_true", help="measure only the glossary's STYLES")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    from .. import Translator

    sentences = load_sentences(args.pairs, args.limit)
    start = time.perf_counter()
    with Translator.load(args.model, cache=None) as translator:
        screen = None
        forms: Sequence[PlaceholderForm] = STYLES
        if not args.styles:
            screen = measure(translator, sentences[:SCREEN], CANDIDATES)
            ranked = sorted(CANDIDATES, key=lambda f: -screen["styles"][f.name]["all"])
            forms = list(dict.fromkeys([*ranked[:KEEP], *STYLES]))
        result = measure(translator, sentences, forms)
    result.update(seconds=round(time.perf_counter() - start, 1), cpu=cpu_name(), screen=screen)
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=1))
        return 0
    if screen is not None:
        print(f"Screening: {report(screen, pairs=False)}\n")
    print(report(result))
    print(f"\n{result['seconds']} s on {result['cpu']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
