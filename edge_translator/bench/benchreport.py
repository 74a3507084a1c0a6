"""The ``bench`` report: the side-by-side run's own sections of ``docs/benchmarks.md``, its
JSON and its plot, with the sections other commands measured kept (rendered by :mod:`.report`)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..core.errors import require
from .prose import PROSE_FILE, PROSE_PACKAGE
from .spread import Spread, range_text, ratio_text
from .report import (
    REQUEST_HEADING,
    SOAK_HEADING,
    render_documents_section,
    render_request_section,
    render_load_section,
    render_serve_section,
    render_soak_section,
    update_section,
)

#: The engine name of CTranslate2 with its vocabulary map, written from a bundle's shortlist.
CT2_VMAP = "ct2-int8-vmap"


@dataclass
class BenchResult:
    """Everything :func:`.bench.run_benchmark` measured in one run (written to JSON and rendered to Markdown here)."""

    machine: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    command: str = ""
    model: str = ("Random weights with the exact opus-mt-en-zh configuration (77.9 M parameters, "
                  "vocabulary 65,001), built by `edge-translator test-model full`.")
    batch1_tok_s: dict = field(default_factory=dict)
    batched_tok_s: dict = field(default_factory=dict)
    batch1_spread: dict = field(default_factory=dict)
    """Per engine, ``[lowest, median, highest]`` tokens/s of its batch-1 rounds (:mod:`.spread`)."""
    batched_spread: dict = field(default_factory=dict)
    """Per engine and batch size, the same of its batched rounds."""
    latency_ms: dict = field(default_factory=dict)
    cold_start_s: dict = field(default_factory=dict)
    peak_rss_mb: dict = field(default_factory=dict)
    sizes_mb: dict = field(default_factory=dict)
    bandwidth: dict = field(default_factory=dict)
    text: dict = field(default_factory=dict)
    load: dict = field(default_factory=dict)
    """The engine under load (:func:`.loadbench.run_load`); empty when not run."""
    ct2_sweep: dict = field(default_factory=dict)
    """CTranslate2 tokens/s at each ``INTERxINTRA`` setting: ``batch1`` and ``batched``
    (by batch size), and its ``default`` setting; with a shortlist, ``vmap``: the bundle its
    vocabulary map was written from and the setting ``ct2-int8-vmap`` ran at in each measure."""


def plot_throughput(result: BenchResult, path: Path) -> None:
    """PNG of batched tokens/s against batch size, this runtime and CTranslate2."""
    matplotlib = require("matplotlib", "bench")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for name, curve in result.batched_tok_s.items():
        sizes = [int(k) for k in curve]
        ax.plot(sizes, list(curve.values()), marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("batch size (sentences)")
    ax.set_ylabel("tokens / s")
    ax.set_title(f"Greedy decoding throughput, {result.options['threads']} threads")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}×" if a and b else "n/a"


def _compared(spreads: dict, name: str, peer: str, a: float | None, b: float | None) -> str:
    """``name`` over ``peer``: by their rounds' ranges where the run kept them (:mod:`.spread`),
    else the ratio of the medians (reports from before the ranges were kept)."""
    mine, theirs = Spread.from_list(spreads.get(name)), Spread.from_list(spreads.get(peer))
    return ratio_text(mine, theirs) if mine and theirs and name != peer else _ratio(a, b)


def render_markdown(result: BenchResult, plot_name: str) -> str:
    """The ``docs/benchmarks.md`` report of one run."""
    m, o, b1 = result.machine, result.options, result.batch1_tok_s
    shipped = o.get("shipped", "ours-int8r")
    ct2 = b1.get("ct2-int8")
    per_bundle = result.bandwidth.get("per_bundle", {})
    lines = [
        "# Benchmarks",
        "",
        "Every figure before *Engine under load* was measured in one run of the command below;",
        "rerun it to replace them. That section names the run it comes from. Engines alternate",
        f"round by round ({o.get('rounds', '?')} rounds at batch 1, {max(3, o.get('rounds', 0) // 2)} at each batch "
        "size); figures are medians. A ratio between two engines is given only where their",
        "rounds' ranges (lowest to highest) do not cross; where they cross, the table says so",
        "beside the ratio of the medians.",
        "",
        "```",
        result.command,
        "```",
        "",
        "## Machine",
        "",
        f"- CPU: {m.get('cpu', '?')}, {m.get('cpus')} logical CPUs; SIMD: {', '.join(m.get('simd', []))}",
        f"- Python {m.get('python')}, onnxruntime {m.get('onnxruntime')}, torch {m.get('torch')}, "
        f"transformers {m.get('transformers')}, ctranslate2 {m.get('ctranslate2')}",
        f"- Memory read bandwidth (numpy sums over 512 MB, {result.bandwidth.get('threads', 1)} thread(s)): "
        f"{result.bandwidth.get('read_gb_s')} GB/s",
        "",
        "## Model",
        "",
        result.model,
        "Our engines are one bundle each of that model: `ours-int8r` INT8 with per-row activations",
        "(`--quantize int8r`, the default), `ours-q8` and `ours-q4` block-quantized",
        f"(`--quantize q8|q4 --block-size {o.get('block_size', '?')}`), `ours-int8` INT8 with per-call",
        "activations, `ours-fp32` float32. Every engine decodes the same number",
        f"of tokens (batch 1: {o['source_tokens']} source tokens → {o['new_tokens']} tokens; batched: "
        f"{o['batched_new_tokens']} tokens per sentence), greedy, with {o['threads']} threads.",
        "",
        "## Batch 1",
        "",
        "The ceiling is what reading each step's weights once allows: the bytes a step reads, at",
        "the rate numpy's sums read an array of that size with the engines' threads (a step's",
        "weights stay in a large last-level cache between steps, so this is mostly the cache's rate).",
        "",
        "`ct2-int8` is CTranslate2 at its best thread setting for this measure (see *CTranslate2 at",
        "each setting*), `ct2-int8-default` at its own default.",
        *_vmap_note(result.ct2_sweep),
        "",
        "| engine | tokens/s | rounds, lowest–highest | vs ct2-int8 | size MB | weights read per step MB | read GB/s "
        "| ceiling tokens/s | of ceiling |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    sweep = (result.ct2_sweep or {}).get("batch1") or {}
    vmap = (result.ct2_sweep or {}).get("vmap") or {}
    labels = {"ct2-int8": f"ct2-int8 ({max(sweep, key=sweep.get)})" if sweep else "ct2-int8",
              "ct2-int8-default": f"ct2-int8-default ({result.ct2_sweep.get('default')})" if sweep else "",
              CT2_VMAP: f"{CT2_VMAP} ({vmap.get('batch1')})" if vmap else ""}
    spreads = result.batch1_spread or {}
    for name, rate in b1.items():
        bw = per_bundle.get(name, {})
        lines.append(f"| {labels.get(name) or name} | {rate} | {range_text(Spread.from_list(spreads.get(name)))} | "
                     f"{_compared(spreads, name, 'ct2-int8', rate, ct2)} | {result.sizes_mb.get(name, '')} | "
                     f"{bw.get('bytes_per_step_mb', '')} | {bw.get('read_gb_s', '')} | {bw.get('ceiling_tok_s', '')} | "
                     f"{_pct(rate, bw.get('ceiling_tok_s')) if bw else ''} |")
    if CT2_VMAP in b1:
        lines += ["", "vs CTranslate2 with its vmap: " + ", ".join(
            f"{name} {_compared(spreads, name, CT2_VMAP, rate, b1[CT2_VMAP])}" for name, rate in b1.items()
            if not name.startswith("ct2-int8"))
            + "."]
    curves = result.batched_tok_s
    ours = [name for name in curves if not name.startswith("ct2-int8")]
    lines += [
        "",
        f"## Batched ({result.text.get('sentences')} sentences of prose)",
        "",
        f"Text: Arthur Conan Doyle, *A Scandal in Bohemia* (1891, public domain), from the PyPI package "
        f"`{PROSE_PACKAGE}==1.0.1` (`{PROSE_FILE}`); mean {result.text.get('mean_source_tokens')} source tokens.",
        "Tokens/s, and in brackets the ratio to CTranslate2 int8 at the same batch size.",
        "",
        "| batch size | " + " | ".join(curves) + " |",
        "|---" * (len(curves) + 1) + "|",
    ]
    at = result.batched_spread or {}

    def versus(name: str, peer: str, size: str) -> str:
        return _compared({k: v.get(size) for k, v in at.items()}, name, peer, curves[name].get(size),
                         curves.get(peer, {}).get(size))

    for size in (str(s) for s in o["batch_sizes"]):
        row = [f"{curves[name].get(size, '')}" + (f" ({versus(name, 'ct2-int8', size)})" if name in ours else "")
               for name in curves]
        lines.append(f"| {size} | " + " | ".join(row) + " |")
    if CT2_VMAP in curves:
        sizes = [str(s) for s in o["batch_sizes"]]
        lines += ["", f"vs CTranslate2 with its vmap, at batch size {' / '.join(sizes)}: " + ", ".join(
            f"{name} " + " / ".join(versus(name, CT2_VMAP, size) for size in sizes)
            for name in ours) + "."]
    best = {name: max(curve.values(), default=None) for name, curve in curves.items()}
    lines += [
        "",
        "Best of each: " + ", ".join(f"{name} {rate} tokens/s" for name, rate in best.items()) + ".",
        "",
        f"![throughput against batch size]({plot_name})",
    ]
    lines += render_ct2_sweep(result.ct2_sweep)
    lines += [
        "",
        "## Latency, start-up, memory, size",
        "",
        f"- End-to-end `Translator.translate` of a {len(result.latency_ms.get('sentence', '').split())}-word "
        f"sentence with {result.latency_ms.get('bundle', shipped)} ({result.latency_ms.get('output_tokens')} output "
        f"tokens, stopped by {result.latency_ms.get('stop', '?')}): p50 {result.latency_ms.get('p50')} ms, "
        f"p95 {result.latency_ms.get('p95')} ms.",
        f"- CLI cold start to first translation with {shipped} (`edge-translator translate`, new process): median "
        f"{result.cold_start_s.get('median')} s over {result.cold_start_s.get('runs')} runs.",
        "- Peak RSS with the bundle loaded and one translation done: "
        + ", ".join(f"{k} {v} MB" for k, v in result.peak_rss_mb.items()) + ".",
        "- Size on disk: " + ", ".join(f"{k} {v} MB" for k, v in result.sizes_mb.items()) + ".",
        f"- Sentence segmentation (`split_sentences`, pure Python) of the prose above: "
        f"{result.text.get('segmentation_mb_s')} MB/s.",
        "",
    ]
    if result.load:
        lines += render_load_section(result.load)
    return "\n".join(lines)


def _vmap_note(sweep: dict) -> list[str]:
    """What ``ct2-int8-vmap`` is, when the run measured it."""
    vmap = (sweep or {}).get("vmap")
    if not vmap:
        return []
    return [f"`{CT2_VMAP}` is CTranslate2 with `use_vmap=True` at its own best setting of each measure (swept",
            "like `ct2-int8`, in the same alternating rounds), its vocabulary map written from",
            f"the shortlist of `{vmap.get('bundle')}`: the same candidate lists as our shortlisted output layer."]


def render_ct2_sweep(sweep: dict) -> list[str]:
    """The CTranslate2 thread sweep: tokens/s per ``inter × intra`` setting and measure, best in bold."""
    measures = [("batch 1", sweep.get("batch1") or {})]
    measures += [(f"batched, batch size {size}", rates) for size, rates in (sweep.get("batched") or {}).items()]
    own = ((sweep.get("vmap") or {}).get("sweep")) or {}
    if own:  # CTranslate2 with its vmap, swept the same way: the best of each is ct2-int8-vmap
        measures += [("batch 1, with its vmap", own.get("batch1") or {})]
        measures += [(f"batched, batch size {size}, with its vmap", rates)
                     for size, rates in (own.get("batched") or {}).items()]
    settings = list(dict.fromkeys(k for _, rates in measures for k in rates))
    if not settings:
        return []
    label = {k: f"{k} (default)" if k == sweep.get("default") else k for k in settings}
    lines = ["", "### CTranslate2 at each setting", "",
             "Tokens/s of CTranslate2 int8 at each `inter_threads` × `intra_threads` (`0` lets it choose), in",
             "the same alternating rounds as the tables above; the best of each measure (bold) is the",
             "`ct2-int8` every ratio divides by" + (" (`ct2-int8-vmap` in the rows with its vmap)." if own else "."), "",
             "| measure | " + " | ".join(label[k] for k in settings) + " |",
             "|---" * (len(settings) + 1) + "|"]
    for measure, rates in measures:
        top = max(rates.values(), default=None)
        cells = [("**{}**" if rates.get(k) == top else "{}").format(rates.get(k, "")) for k in settings]
        lines.append(f"| {measure} | " + " | ".join(cells) + " |")
    return lines


def _pct(a: float | None, b: float | None) -> str:
    return f"{100 * a / b:.0f}%" if a and b else "n/a"


def write_report(result: BenchResult, out_dir: Path) -> Path:
    """Write ``benchmarks.md``, ``benchmarks.json`` and ``benchmarks-throughput.png``.

    The sections that come from their own commands are kept from an earlier report: the
    daemon's (``edge-translator bench-serve``, key ``serve``), the documents'
    (``edge-translator bench-docs``, key ``documents``) and the soak's (``edge-translator
    bench-soak``, key ``soak``) and the one-request breakdown's (``bench-request``, key
    ``request``). So is every other ``## `` section
    of the earlier Markdown that this report does not write (measurements made by other
    commands, the history), after the report's own sections.
    """
    own_runs = {"serve": ("## Daemon under load", render_serve_section),
                "documents": ("## Documents", render_documents_section),
                "soak": (SOAK_HEADING, render_soak_section),
                "request": (REQUEST_HEADING, render_request_section)}
    out_dir.mkdir(parents=True, exist_ok=True)
    previous = out_dir / "benchmarks.json"
    earlier = json.loads(previous.read_text()) if previous.is_file() else {}
    report = render_markdown(result, "benchmarks-throughput.png")  # before anything is written: a report
    sections = {key: (heading, render(earlier[key])) for key, (heading, render) in own_runs.items()
                if earlier.get(key)}  # that fails to render must not cost the kept sections their figures
    plot_throughput(result, out_dir / "benchmarks-throughput.png")
    (out_dir / "benchmarks.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
    path = out_dir / "benchmarks.md"
    written = {heading for heading, _ in own_runs.values()} | set(_sections(report))
    kept = [text for heading, text in _sections(path.read_text() if path.is_file() else "").items()
            if heading not in written]
    path.write_text(report)
    for key, (heading, lines) in sections.items():
        update_section(out_dir, key, earlier[key], heading, lines)
    if kept:
        path.write_text(path.read_text().rstrip("\n") + "\n\n" + "\n".join(text.rstrip("\n") + "\n" for text in kept))
    return path


def _sections(markdown: str) -> dict[str, str]:
    """``## `` heading line → that section's text, up to the next such heading."""
    parts = ("\n" + markdown).split("\n## ")[1:]
    return {"## " + part.split("\n", 1)[0]: "## " + part for part in parts}
