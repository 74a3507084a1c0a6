"""Measure every weight scheme of one model on held-out pairs, and choose the one to ship.

For each scheme (float32, per-channel INT8, and q8/q4 at each block size) the model is
exported, the pairs are translated at batch size 32 and scored (sacrebleu BLEU and chrF),
and translated again one sentence at a time, to count the sentences whose output depends
on the batch they share. The choice is the smallest batch-invariant bundle that loses at
most ``max_bleu_loss`` BLEU against float32.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .quantize import QuantizeOptions

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SchemeOptions:
    """Which schemes to measure and how."""

    block_sizes: tuple[int, ...] = (64, 128, 256)
    """Block sizes tried for q8 and q4."""
    batch_size: int = 32
    """Batch size of the scored run; the invariance run uses 1."""
    threads: int | None = None
    """ONNX Runtime threads (default: physical cores)."""
    max_bleu_loss: float = 0.3
    """Largest BLEU loss against float32 the shipped scheme may have."""
    limit: int | None = None
    """Score only the first N pairs (quick looks; the published figures use all)."""
    only: tuple[str, ...] = ()
    """Measure only these schemes (names as in :func:`variants`), e.g. to split the work
    between processes; empty measures all."""


def variants(opts: SchemeOptions) -> dict[str, QuantizeOptions]:
    """Scheme name → quantization, in report order."""
    out = {"none": QuantizeOptions(mode="none"), "int8": QuantizeOptions(mode="dynamic"),
           "int8r": QuantizeOptions(mode="rowwise")}
    for mode in ("q8", "q4"):
        for block in opts.block_sizes:
            out[f"{mode}-b{block}"] = QuantizeOptions(mode=mode, block_size=block)
    unknown = set(opts.only) - set(out)
    if unknown:
        raise ValueError(f"unknown schemes {sorted(unknown)}; choose from {', '.join(out)}")
    return {name: quant for name, quant in out.items() if not opts.only or name in opts.only}


def measure(hf: Path, pairs: Path, work: Path, opts: SchemeOptions | None = None,
            progress: Callable[[str], None] | None = None) -> dict:
    """Export and score each scheme; bundles are kept in ``work/NAME`` and reused.

    Returns:
        ``{"pairs", "sentences", "schemes": {name: {bleu, chrf, size_mb, batch_dependent, ...}},
        "choice", "why"}``.
    """
    from . import evaluate
    from .export import ExportOptions, export

    from ..core.cpu import cpu_name

    opts = opts or SchemeOptions()
    say = progress or (lambda line: logger.info("%s", line))
    results: dict = {"pairs": str(pairs), "batch_size": opts.batch_size, "cpu": cpu_name(), "schemes": {}}
    for name, quant in variants(opts).items():
        out = work / name
        if not _matches(out, quant):
            export(hf, out, ExportOptions(quantize=quant, force=True, name=name))
        batched: list[str] = []
        single: list[str] = []
        row = evaluate.evaluate_bundle(out, pairs, opts.limit, opts.threads, opts.batch_size, batched)
        evaluate.evaluate_bundle(out, pairs, opts.limit, opts.threads, 1, single)
        row["size_mb"] = round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6, 1)  # on disk
        row["batch_dependent"] = sum(a != b for a, b in zip(batched, single))
        row["quantization"] = quant.as_manifest()
        results["schemes"][name] = row
        results["sentences"] = len(batched)
        say(f"{name:10s} BLEU {row['bleu']:6.2f}  chrF {row['chrf']:6.2f}  {row['size_mb']:6.1f} MB  "
            f"{row['batch_dependent']} of {len(batched)} differ between batch {opts.batch_size} and 1")
    if "none" in results["schemes"]:
        results["choice"], results["why"] = choose(results["schemes"], opts.max_bleu_loss)
        say(f"choice: {results['choice']} ({results['why']})")
    return results


def _matches(out: Path, quant: QuantizeOptions) -> bool:
    """Whether ``out`` already holds a bundle of this scheme (a rerun reuses it)."""
    try:
        manifest = json.loads((out / "bundle.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return manifest.get("quantization") == quant.as_manifest()


def choose(schemes: dict[str, dict], max_bleu_loss: float) -> tuple[str, str]:
    """The smallest batch-invariant quantized scheme within ``max_bleu_loss`` BLEU of float32.

    Returns:
        ``(name, reason)``; ``("int8", ...)`` when no block scheme qualifies.
    """
    base = schemes["none"]["bleu"]
    fit = [(row["size_mb"], name) for name, row in schemes.items()
           if name not in ("none", "int8") and row["batch_dependent"] == 0 and base - row["bleu"] <= max_bleu_loss]
    if not fit:
        return "int8", f"no scheme is batch-invariant within {max_bleu_loss} BLEU of float32"
    size, name = min(fit)
    row = schemes[name]
    return name, (f"smallest batch-invariant scheme within {max_bleu_loss} BLEU of float32: "
                  f"{row['bleu']} against {base}, {size} MB")


def render_table(results: dict) -> list[str]:
    """Markdown rows: one per scheme (the loss column needs ``none`` among them)."""
    base = results["schemes"].get("none", {}).get("bleu", float("nan"))
    lines = [f"| scheme | BLEU | vs float32 | chrF | size MB | outputs that differ, batch {results['batch_size']} "
             "vs 1 |", "|---|---|---|---|---|---|"]
    for name, row in results["schemes"].items():
        mark = "**" if name == results.get("choice") else ""
        lines.append(f"| {mark}{name}{mark} | {row['bleu']} | {row['bleu'] - base:+.2f} | {row['chrf']} | "
                     f"{row['size_mb']} | {row['batch_dependent']} of {results['sentences']} |")
    return lines


def evaluate_choices(work: Path, hf: Path, progress=None) -> dict:
    """Stage 5 of ``train-demo``: test-split scores of PyTorch and of every weight scheme.

    Writes ``eval.json`` in ``work``; the model card is written from it.
    """
    from . import evaluate

    test = work / "data" / "test.tsv"
    results = measure(hf, test, work / "variants", progress=progress)
    results["pytorch_fp32"] = evaluate.evaluate_torch(hf, test)
    results["test_pairs"] = str(test)
    (work / "eval.json").write_text(json.dumps(results, indent=2, ensure_ascii=False))
    logger.info("evaluation: %s", json.dumps(results))
    return results
