"""The "Engine under load" section of ``docs/benchmarks.md``, rendered from :func:`.loadbench.run_load`'s dict."""

from __future__ import annotations

import json
from pathlib import Path



def ratio(a: float, b: float) -> float | None:
    """``a / b`` to two decimals, or ``None`` when either is missing or zero."""
    return round(a / b, 2) if a and b else None


def percent(share: float | None) -> str:
    """A share (0-1) as a whole percentage, ``?`` when unknown."""
    return "?" if share is None else f"{100 * share:.0f}%"


def render_section(load: dict) -> list[str]:
    """Markdown lines of the "Engine under load" section of ``docs/benchmarks.md``."""
    m, o, c = load["machine"], load["options"], load["concurrency"]
    seq, first, inter = c["sequential"], load["first_sentence"], load["interactive"]
    bulk, many = load["scheduler"]["bulk"], load["scheduler"]["interactive"]
    lines = [
        "## Engine under load",
        "",
        f"Measured by `{load['command']}` on {m.get('cpu', '?')} ({m.get('cpus')} logical CPUs), "
        f"{o['threads']} ONNX Runtime threads, cache off, `{load['bundle']}`. Decoding: {load['decoding']}. "
        "Every call goes through `Translator`; throughput figures are medians (and bests) of "
        f"{o['rounds']} alternating rounds, latency percentiles are over every call of every round. "
        "The last column of each table is the median share of this machine's CPUs that other processes used "
        "during those runs (from `/proc/stat`); a virtual machine's neighbours on the host do not show there.",
        "",
        f"### Concurrent callers ({c['paragraphs']} distinct paragraphs of {c['sentences_per_paragraph']} "
        f"sentences, {seq['tokens']} tokens)",
        "",
        "Each caller thread calls `translate` on its share of the paragraphs, one after another; "
        "*sequential* is the same work in one thread.",
        "",
        "| callers | tokens/s | sentences/s | vs sequential | best tokens/s | best vs best | p50 per call "
        "| p95 per call | CPU used by others |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in [("sequential", {**seq, "ratio": 1.0, "best_ratio": 1.0}), *c["callers"].items()]:
        lines.append(f"| {n} | {row['tok_s']} | {row['sent_s']} | {_times(row['ratio'])} | {row['best_tok_s']} "
                     f"| {_times(row['best_ratio'])} | {row['p50_ms']} ms | {row['p95_ms']} ms "
                     f"| {percent(row['others_cpu'])} |")
    two = bulk["max_bulk_batches_2"]
    lines += [
        "",
        f"For scale: the bulk job below (length-sorted batches of up to 32 sentences) ran at {two['tok_s']} "
        f"tokens/s, {_times(ratio(two['tok_s'], seq['tok_s']))} the sequential rate: roughly the most that "
        "any number of callers can reach on this machine.",
        "",
        "### Time to the first sentence, and priority",
        "",
        f"- A {first['sentences']}-sentence text, interactive: first result in input order "
        f"{first['first_s']} s after `submit` (earliest sentence done after {first['first_completed_s']} s), "
        f"all {first['all_s']} s (medians of {first['runs']}).",
        f"- One-sentence interactive `translate` calls (about {inter['probe_words']} words): unloaded p50 "
        f"{inter['unloaded']['p50_ms']} ms, p95 {inter['unloaded']['p95_ms']} ms; while a "
        f"{inter['bulk_sentences']}-sentence bulk job runs, p50 {inter['loaded']['p50_ms']} ms, p95 "
        f"{inter['loaded']['p95_ms']} ms: {_times(inter['ratio_p50'])} at p50, {_times(inter['ratio_p95'])} at p95. "
        f"The bulk job went on at {inter['bulk_sent_s_while_probing']} sentences/s meanwhile"
        + ("" if inter["bulk_running_throughout"] else " (and finished before the last call: not loaded throughout)")
        + ".",
        "",
        "### Continuous batching and interleaved batches",
        "",
        f"A {bulk['sentences']}-sentence bulk job with one and with two bulk batches decoding at once, with rows "
        "joining a batch that is decoding as its rows finish (`EngineOptions(continuous=True)`; default "
        f"{'on' if load['scheduler'].get('continuous_default') else 'off'}), and the same job with every sentence "
        f"cut to the same length ({bulk['uniform_length']} tokens, the mean): no batch then has a tail, which is "
        "what continuous batching could reach at best.",
        "",
        "| bulk job | tokens/s | best tokens/s | CPU used by others |",
        "|---|---|---|---|",
        *(f"| {name} | {bulk[key]['tok_s']} | {bulk[key]['best_tok_s']} | {percent(bulk[key]['others_cpu'])} |"
          for name, key in (("`max_bulk_batches=1`", "max_bulk_batches_1"),
                            ("`max_bulk_batches=2`", "max_bulk_batches_2"), ("`continuous=True`", "continuous"),
                            ("no-tail bound", "no_tail_bound")) if key in bulk),  # runs before it lack "continuous"
        "",
        f"Two bulk batches against one: {_times(bulk['ratio_2_vs_1'])}; rows joining against two batches: "
        f"{_times(bulk.get('ratio_continuous_vs_2'))}; the bound against two: {_times(bulk['ratio_bound_vs_2'])} "
        f"(best against best {_times(ratio(bulk['no_tail_bound']['best_tok_s'], two['best_tok_s']))}).",
        "",
        "Concurrent callers, and one text of many sentences, with one and with four interactive batches "
        "decoding at once, and with one that rows join:",
        "",
        "| callers | interactive batches | tokens/s | best tokens/s | p50 per call | p95 per call | against one "
        "| CPU used by others |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, pair in many["callers"].items():
        rows = [("1", pair["max_interactive_batches_1"], None),
                ("4", pair["max_interactive_batches_4"], pair["ratio_4_vs_1"])]
        if "continuous" in pair:
            rows.append(("1, rows join", pair["continuous"], pair["ratio_continuous"]))
        for k, row, against in rows:
            lines.append(f"| {n} | {k} | {row['tok_s']} | {row['best_tok_s']} | {row['p50_ms']} ms "
                         f"| {row['p95_ms']} ms | {_times(against) if against else ''} "
                         f"| {percent(row['others_cpu'])} |")
    lines += ["", f"First result of the {first['sentences']}-sentence text: {many['first_sentence_1']['first_s']} s "
              f"with one interactive batch, {many['first_sentence_4']['first_s']} s with four.", ""]
    soaked = load.get("soak") or {}
    lines += ["### Memory under load", ""]
    if not soaked:
        lines += ["Not measured in this run (`--soak-minutes 0`).", ""]
        return lines
    peaks = soaked.get("peak_per_min")
    lines += [
        f"In a process of its own (RSS {soaked.get('loaded_mb')} MB with the bundle loaded, "
        f"`memory=\"{soaked.get('memory', 'arena')}\"`), "
        f"{soaked['callers']} interactive callers (pausing {soaked['think_s']} s between calls) and a bulk job for "
        f"{soaked['seconds'] / 60:.1f} min ({soaked['interactive_sentences']} interactive and "
        f"{soaked['bulk_sentences']} bulk sentences, {soaked['tokens']} tokens); `VmRSS` sampled every "
        f"{o['soak_sample_s']} s: start {soaked['start_mb']} MB, peak {soaked['peak_mb']} MB, end "
        f"{soaked['end_mb']} MB; after the first {soaked['warmup_s']:g} s, {soaked['after_warmup_mb']} MB and a "
        f"slope of {soaked['slope_mb_per_min']} MB/min."
        + (f" Highest RSS in each minute: {', '.join(f'{mb:g}' for mb in peaks)} MB." if peaks else ""),
        "",
    ]
    return lines


def _times(ratio: float | None) -> str:
    return f"{ratio:.2f}×" if ratio else "n/a"


def update_report(load: dict, out_dir: Path) -> Path:
    """Put ``load`` into ``benchmarks.md`` and ``benchmarks.json`` in ``out_dir``, keeping the rest.

    The "Engine under load" section of the Markdown (up to the next ``## `` heading) and
    the ``load`` key of the JSON are replaced; both files are created if missing.
    """
    return update_section(out_dir, "load", load, "## Engine under load", render_section(load))


def update_section(out_dir: Path, key: str, value, heading: str, lines: list[str]) -> Path:
    """Replace one key of ``benchmarks.json`` and one ``## `` section of ``benchmarks.md``.

    The section runs from ``heading`` to the next ``## `` heading; it is appended when
    missing, and both files are created when missing.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "benchmarks.md", out_dir / "benchmarks.json"
    data = json.loads(js.read_text()) if js.is_file() else {}
    data[key] = value
    js.write_text(json.dumps(data, indent=2) + "\n")
    text = md.read_text() if md.is_file() else "# Benchmarks\n"
    before, after = text, ""
    if heading in text:
        before, rest = text.split(heading, 1)
        end = rest.find("\n## ")
        after = rest[end + 1:] if end >= 0 else ""
    section = "\n".join(lines)
    md.write_text(before.rstrip("\n") + "\n\n" + section + ("\n" + after if after else ""))
    return md
