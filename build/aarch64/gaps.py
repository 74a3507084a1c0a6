"""How close were the decisions where two ids.py runs part? (core only)

    python gaps.py A.json B.json NAME=BUNDLE_DIR [...]

For each bundle, each sentence whose batch-1 greedy ids differ between A and B, find the
first position where they part and score both tokens under THIS machine's copy of the
bundle (teacher-forced on the common prefix). Prints one line per bundle: how many
sentences differ and the largest log-probability gap between the two tokens there. A
gap near zero is a near-tie that a kernel's rounding can flip; a large one is not.
Run it on both machines to see the decision from each side.
"""

from __future__ import annotations

import json
import sys

import numpy as np

from edge_translator.core.translator import Translator


def _next_logprobs(translator: Translator, source: list[int], prefix: list[int]) -> np.ndarray:
    model = translator.model
    ids, mask = model.pad([source])
    cross_k, cross_v = model.encode(ids, mask)
    tokens = np.asarray([[model.bundle.decoder_start_id, *prefix]], np.int64)
    empty = model.empty_cache(1)
    logits, _, _ = model.step(tokens, mask, empty, empty, cross_k, cross_v)
    row = logits[0, -1].astype(np.float64)
    row -= row.max()
    return row - np.log(np.exp(row).sum())


def main(argv: list[str]) -> int:
    with open(argv[0], encoding="utf-8") as fh:
        a = json.load(fh)
    with open(argv[1], encoding="utf-8") as fh:
        b = json.load(fh)
    for spec in argv[2:]:
        name, _, path = spec.partition("=")
        gaps = []
        with Translator.load(path, threads=1, cache=None) as tr:
            eos = tr.bundle.eos_id
            target = tr.bundle.targets[tr.bundle.default_target].id
            for sentence, x, y in zip(a["sentences"], a["bundles"][name]["batch1"], b["bundles"][name]["batch1"]):
                if x == y:
                    continue
                x, y = x + [eos], y + [eos]
                d = next(k for k, (p, q) in enumerate(zip(x, y)) if p != q)
                scores = _next_logprobs(tr, tr.tokenizer.encode(sentence, target), x[:d])
                gaps.append(float(scores[x[d]] - scores[y[d]]))
        detail = ", ".join(f"{g:+.3f}" for g in sorted(gaps, key=abs))
        print(f"{name}: {len(gaps)} differ; log-prob gap (first run's token minus second's) at the first "
              f"difference: {detail or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
