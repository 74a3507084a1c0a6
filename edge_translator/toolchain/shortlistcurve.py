"""How a shortlist's sizes trade speed for agreement: the curve k and N are chosen by.

A restricted greedy decode equals the whole vocabulary's exactly when every token the whole
vocabulary's decode produces is among the sentence's candidates (the argmax over a subset
that holds the overall argmax is that argmax), so the share of test sentences whose
full-vocabulary output lies inside their candidate set is the share that comes out the same
(up to float ties). This measures it for a grid of ``top_k`` x ``frequent`` without
decoding again for each point: the model translates the build corpus and the test text once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from .pairs import read_eval_pairs
from .shortlist import ShortlistOptions, build_shortlist, coverage, default_sentences, translation_ids

logger = logging.getLogger(__name__)


def read_english(path: str | Path) -> list[str]:
    """English sentences of a file: one a line, or the English column of a pairs TSV
    (``en<TAB>zh``, or Tatoeba's ``cmn_id, zh, en_id, en``).

    Raises:
        InputError: If the file is missing, not UTF-8 or holds no sentence.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError(f"{path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {path} ({exc.strerror or exc})") from None
    if "\t" in text:
        return read_eval_pairs(path)[0]
    sentences = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    if not sentences:
        raise InputError(f"{path} holds no sentence")
    return sentences


def shortlist_curve(model, tokenizer, target_id: int, build: Sequence[str], tests: dict[str, Sequence[str]],
                    top_ks: Sequence[int], frequents: Sequence[int]) -> dict:
    """Coverage of each test text for every (k, N), lists counted on the model's own
    translations of ``build``.

    Returns:
        ``{"build_sentences", "vocabulary", "points": [{"top_k", "frequent", "candidates",
        <test name>: coverage(...)}]}``.
    """
    started = time.perf_counter()
    pairs = translation_ids(model, tokenizer, target_id, build)
    outputs = {name: translation_ids(model, tokenizer, target_id, text) for name, text in tests.items()}
    logger.info("shortlist curve: translated %d + %d sentences in %.0f s", len(build),
                sum(len(t) for t in tests.values()), time.perf_counter() - started)
    points = []
    for k in top_ks:
        for n in frequents:
            lists = build_shortlist(tokenizer, pairs, ShortlistOptions(top_k=k, frequent=n))
            point = {"top_k": k, "frequent": n, "always": len(lists.always), "candidates": len(lists.candidates)}
            for name, test in outputs.items():
                point[name] = coverage(lists, test)
            points.append(point)
            logger.info("shortlist curve: %s", point)
    return {"build_sentences": len(pairs), "vocabulary": model.bundle.vocab_size, "points": points}


def decode_agreement(model, tokenizer, target_id: int, tests: dict[str, Sequence[str]]) -> dict:
    """Decode each test text with the bundle's own shortlist and with the whole vocabulary:
    the share of sentences that come out the same, measured rather than inferred."""
    result = {}
    for name, text in tests.items():
        full = translation_ids(model, tokenizer, target_id, text)
        short = translation_ids(model, tokenizer, target_id, text, shortlist=True)
        same = sum(np.array_equal(a[1], b[1]) for a, b in zip(full, short))
        result[name] = {"sentences": len(full), "identical": int(same), "share": round(same / max(len(full), 1), 4)}
    return result


def render_curve(curve: dict, tests: Sequence[str]) -> str:
    """The curve as a Markdown table: per point, each test's share of identical sentences
    (and of tokens inside) and the mean columns a sentence computes."""
    head = "| top-k | frequent | " + " | ".join(f"{t}: same output | {t}: mean columns" for t in tests) + " |"
    rows = [head, "|" + "---|" * (2 + 2 * len(tests))]
    for p in curve["points"]:
        cells = []
        for t in tests:
            c = p[t]
            cells += [f"{100 * c['sentence_coverage']:.2f}% ({100 * c['token_coverage']:.2f}% of tokens)",
                      f"{c['mean_candidates']:.0f} of {curve['vocabulary']}"]
        rows.append(f"| {p['top_k']} | {p['frequent']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def default_build() -> list[str]:
    """The English the exporter counts a shortlist on by default."""
    return default_sentences()[0]
