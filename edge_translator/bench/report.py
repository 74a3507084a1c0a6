"""The report: ``docs/benchmarks.md`` and ``benchmarks.json``, each section rendered from its benchmark's dict.

Every benchmark writes its own section (:func:`update_section`) and leaves the others as
they are; ``bench`` rewrites the whole report and renders again, from the JSON, the
sections that other commands measured (``bench-serve``, ``bench-docs``, ``bench-soak``,
``bench-request``). Their renderers live here, and ``bench``'s own in :mod:`.benchreport`,
apart from the code that measures, so that no benchmark imports another to write the report.
"""

from __future__ import annotations

import json
from pathlib import Path

from .spread import told


def _threads(options: dict) -> str:
    """"2 ONNX Runtime threads", or "2 workers of 1 ONNX Runtime thread" (``serve --workers``)."""
    threads, workers = options["threads"], options.get("workers", 1)
    noun = f"ONNX Runtime thread{'s' if threads != 1 else ''}"
    return f"{threads} {noun}" if workers == 1 else f"{workers} workers of {threads} {noun}"


def ratio(a: float, b: float) -> float | None:
    """``a / b`` to two decimals, or ``None`` when either is missing or zero."""
    return round(a / b, 2) if a and b else None


def percent(share: float | None) -> str:
    """A share (0-1) as a whole percentage, ``?`` when unknown."""
    return "?" if share is None else f"{100 * share:.0f}%"


def update_report(load: dict, out_dir: Path) -> Path:
    """Put ``load`` into ``benchmarks.md`` and ``benchmarks.json`` in ``out_dir``, keeping the rest.

    The "Engine under load" section of the Markdown (up to the next ``## `` heading) and
    the ``load`` key of the JSON are replaced; both files are created if missing.
    """
    return update_section(out_dir, "load", load, "## Engine under load", render_load_section(load))


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


# -- the engine under load (bench-load, and bench without --no-load) -------------------------
def render_load_section(load: dict) -> list[str]:
    """Markdown lines of the "Engine under load" section, from :func:`.loadbench.run_load`'s dict."""
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


# -- the daemon under load (bench-serve) ----------------------------------------------------
#: Seconds between the daemon's RSS samples during the concurrent run (:mod:`.servebench`
#: samples at this interval; the section says so).
RSS_SAMPLE_S = 0.5


def render_serve_section(runs: dict) -> list[str]:
    """Markdown lines of the "Daemon under load" section, one row per model measured."""
    lines = ["## Daemon under load", "",
             "`edge-translator serve` in its own process on 127.0.0.1 (cache off, so every request is decoded), "
             "driven over HTTP by LibreTranslate `/translate` requests of prose sentences: first one client "
             "sending requests one after another, then N clients at once for a fixed time; then SIGTERM. "
             "RSS is the daemon's: idle after loading, then at the start and the end of the concurrent run, "
             "which follows a short concurrent warm-up (ONNX Runtime allocates for the larger batches there), "
             f"and its highest in the first and in the second half of that run (sampled every {RSS_SAMPLE_S:g} s): "
             "at any one instant RSS is mostly what the batches in flight hold, so the halves' peaks are what "
             "shows growth. Each row names the command that measured it.", "",
             "| model | CPU | sentences a request | sequential req/s | clients | concurrent req/s | vs sequential "
             "| p50 | p99 | errors | RSS idle; start → end | RSS peak, first → second half | exit |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs.values():
        seq, con, o = run["sequential"], run["concurrent"], run["options"]
        errors = sum(seq["errors"].values()) + sum(con["errors"].values())
        growth = "" if run["rss_growth"] is None else f" ({100 * run['rss_growth']:+.1f}%)"
        lean = " --lean-memory" if run["options"].get("lean_memory") else ""
        lines.append(f"| {run['model']} ({run['quantization']}){lean} | {run['machine'].get('cpu', '?')} | "
                     f"{o['sentences_per_request']} | {seq['req_s']} | {con['clients']} | {con['req_s']} | "
                     f"{run['ratio']}x | {con['p50_ms']} ms | {con['p99_ms']} ms | {errors} | "
                     f"{run.get('rss_idle_mb')}; {run['rss_start_mb']} → {run['rss_end_mb']} MB{growth} | "
                     f"{_peaks(run)} | {run['exit_code']} |")
    lines += [""] + [f"- {run['model']}: `{run['command']}` ({run['concurrent']['seconds']} s with "
                     f"{run['concurrent']['clients']} clients, {run['sequential']['seconds']} s sequential, "
                     f"{_threads(run['options'])})" for run in runs.values()]
    lines.append("")
    for run in runs.values():
        if run.get("libretranslate"):
            lines += render_libretranslate(run)
    return lines


def render_libretranslate(run: dict) -> list[str]:
    """Markdown lines of one model's "Beside LibreTranslate" subsection (``bench-serve --libretranslate``)."""
    lt = run["libretranslate"]
    o, med, best, agree = lt["options"], lt["medians"], lt["best"], lt["agreement"]
    ours = med["ours"]
    v = lt.get("versions", {})
    stack = ", ".join(f"{k} {v[k]}" for k in ("argos-translate-lt", "ctranslate2", "numpy") if k in v)
    lines = [
        f"### Beside LibreTranslate: {run['model']}, the daemon with {_threads(o) if 'threads' in o else '?'}"
        + (", equal lengths" if o.get("length") == "exact" else ""),
        "",
        f"Measured by `{lt.get('measured_by', run['command'])}` on {run['machine'].get('cpu', '?')} "
        f"({run['machine'].get('cpus')} logical CPUs). LibreTranslate {v.get('libretranslate', '?')} ({stack}) in "
        f"its own venv, offline, on an argos package of the same model: {lt['checkpoint']}, converted by "
        f"CTranslate2's converter ({lt['ct2_quantization']}), with the bundle's SentencePiece models. "
        f"Requests are the same one-sentence LibreTranslate `/translate` requests, the same texts in the same order "
        f"for both servers; each measure runs in a fresh process after a short warm-up: one client for "
        f"{o['seconds']:g} s, then {o['clients']} clients for {o['seconds']:g} s. A sweep of {o['tune_seconds']:g} s "
        f"per measure over LibreTranslate's settings picked its best for each measure; then {o['rounds']} rounds "
        f"alternated the daemon ({_threads(o) if 'threads' in o else '?'}), LibreTranslate at its best and at its "
        "defaults. Figures are medians of the rounds "
        "(requests/s); ratios are ours over theirs, given as such only where every round of one "
        "server was faster than every round of the other (else: ranges cross).",
        "",
        "| measure | ours | LibreTranslate at its best | its defaults | ours / its best | ours / its defaults |",
        "|---|---|---|---|---|---|",
    ]
    for label, key, which in (("sequential (1 client)", "seq_req_s", "sequential"),
                              (f"{o['clients']} clients", "con_req_s", "concurrent")):
        lines.append(f"| {label} | {ours[key]} | {med[best[which]][key]} (`{best[which]}`) | "
                     f"{med['defaults'][key]} | {_told(lt['ratios'][which], 'best')} | "
                     f"{_told(lt['ratios'][which], 'defaults')} |")
    lines += ["", "The sweep (`defaults`: no `ARGOS_INTER_THREADS`/`ARGOS_INTRA_THREADS`; `IxJ`: "
              "`ARGOS_INTER_THREADS=I ARGOS_INTRA_THREADS=J`):", "",
              f"| setting | sequential req/s | {o['clients']} clients req/s | errors |", "|---|---|---|---|",
              *(f"| `{name}` | {row['seq_req_s']} | {row['con_req_s']} | {row['errors']} |"
                for name, row in lt["sweep"].items())]
    env = " ".join(f"{k}={val}" for k, val in lt["environment"].items())
    lines += [
        "",
        f"- Errors in the rounds: {lt['errors']} (a run with errors cannot be picked as best). Connections "
        f"refused by the offline guard: {lt['refused_connections']}.",
        f"- Same output: {agree['identical']} of {agree['sentences']} sample requests gave the same translation "
        f"on both servers (whitespace and the final mark aside); mean length {agree['ours_chars']} characters ours, "
        f"{agree['theirs_chars']} theirs.",
        f"- Started as `{lt['command']}` with {env}; the thread settings add their two variables. "
        "`ARGOS_BEAM_SIZE=1`: both decode greedily (argos's default is a beam of 4). Every argos directory is under "
        "the work folder, so nothing reads or writes `~/.local`.",
        "- Patched at start-up, in memory, by the launcher (LibreTranslate's installed files are untouched):",
        *(f"  - {text}" for text in lt["patches"].values()),
        "- CTranslate2 starts Marian decoders from a zero embedding; the demo model's start (pad) row is not zero, "
        "so it is folded into the converted copy's first position encoding.",
        "- Each round's requests/s (sequential; concurrent): " + "; ".join(
            f"{name} {_rounds(m['seq_req_s_all'])}; {_rounds(m['con_req_s_all'])}" for name, m in med.items()) + ".",
        "",
    ]
    return lines


def _told(ratios: dict, which: str) -> str:
    """A ratio of :func:`render_libretranslate`'s table, or that the rounds' ranges cross (runs
    from before the ranges were compared give the ratio alone)."""
    if ratios.get(which) is None:
        return _times(None)
    return told(ratios[which], ratios.get(f"{which}_apart", True))


def _rounds(values: list) -> str:
    return " / ".join(f"{v:g}" for v in values)


def _peaks(run: dict) -> str:
    """The halves' RSS peaks of a run, or "not sampled" for rows measured before they were."""
    a, b, growth = run.get("rss_peak_first_half_mb"), run.get("rss_peak_second_half_mb"), run.get("rss_peak_growth")
    if a is None or b is None:
        return "not sampled"
    return f"{a} → {b} MB" + ("" if growth is None else f" ({100 * growth:+.1f}%)")


# -- mixed text and documents (bench-soak) --------------------------------------------------
SOAK_HEADING = "## Mixed text and documents (serve)"


def render_soak_section(run: dict) -> list[str]:
    """Markdown lines of the "Mixed text and documents" section, from :func:`.soakbench.run_soak_bench`'s dict."""
    m, o, rss = run["machine"], run["options"], run["rss"]
    unloaded, soak, during, again = run["unloaded"], run["soak"], run["during_document"], run["unloaded_again"]
    docs = soak["documents"]
    peaks = ", ".join(f"{mb:g}" for mb in rss["peak_per_minute_mb"])
    lines = [
        SOAK_HEADING,
        "",
        f"Measured by `{run['command']}` on {m.get('cpu', '?')} ({m.get('cpus')} logical CPUs): "
        f"`edge-translator serve` in its own process on 127.0.0.1 with `{run['model']}` ({run['quantization']}), "
        f"{o['threads']} ONNX Runtime thread{'s' if o['threads'] != 1 else ''}, the cache off (every request is "
        "decoded) and its state folder in a temporary one. Four phases, over HTTP: one client sending "
        "one-sentence LibreTranslate `/translate` requests one after another (*unloaded*); then, for "
        f"{o['minutes']:g} min, {o['text_clients']} text clients "
        f"without pause (every third request has 2 to {o['multi_sentences']} sentences, the others one) beside a "
        f"document client that uploads {o['doc_sentences']}-sentence `.txt` and `.docx` files in turn through "
        "`/v1/documents`, polls each, downloads it, checks that it has text (a `.docx`: that it opens with some) "
        "and deletes it (*soak*); then the document client alone with one client of one-sentence requests, "
        "counting only those made while a document was being translated (*one client beside a document job*); "
        "then the unloaded client again. The loaded latencies are compared with the lower of the two unloaded "
        "ones. Every response's status is counted, and the share of the machine's CPU that processes other than "
        "the daemon and the clients took in each phase (from `/proc`); then SIGTERM.",
        "",
        "| phase | seconds | one-sentence requests | p50 | p95 | multi-sentence requests | p50 | documents done "
        "| document sentences/s | text sentences/s | 5xx or no answer | 4xx | CPU used by others |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, phase, single in (("unloaded", unloaded, "single"), ("soak", soak, "single"),
                                ("one client beside a document job", during, "single_during_document"),
                                ("unloaded, again", again, "single")):
        one, multi, d = phase[single], phase["multi"], phase["documents"]
        multi_p50 = _ms(multi["p50_ms"]) if multi["requests"] else ""
        lines.append(f"| {name} | {phase['seconds']:g} | {one['requests']} | {_ms(one['p50_ms'])} "
                     f"| {_ms(one['p95_ms'])} | {multi['requests'] or ''} | {multi_p50} "
                     f"| {d['done'] if d['done'] else ''} | {d['sent_s'] if d['done'] else ''} "
                     f"| {phase['text_sent_s']} | {phase['errors_5xx']} | {phase['errors_4xx']} "
                     f"| {percent(phase['others_cpu'])} |")
    growth = rss.get("rss_peak_growth")
    lines += [
        "",
        f"- **Errors:** {run['errors_5xx']} responses 5xx or unanswered, {run['errors_4xx']} 4xx, over all four "
        f"phases (soak statuses: {', '.join(f'{k}: {v}' for k, v in soak['statuses'].items())}); daemon exit "
        f"code {run['exit_code']}.",
        f"- **One-sentence latency:** p50 {_ms(run['unloaded_p50_ms'])} unloaded (p95 "
        f"{_ms(run['unloaded_p95_ms'])}); "
        f"{_ms(soak['single']['p50_ms'])} during the soak, {_times(run['ratio_p50'])} (p95 "
        f"{_times(run['ratio_p95'])}); {_ms(during['single_during_document']['p50_ms'])} beside a document job "
        f"alone, {_times(run['during_document_ratio_p50'])} (goal: at most 2×).",
        f"- **Documents during the soak:** {docs['done']} done ({docs['txt']} `.txt`, {docs['docx']} `.docx`), "
        f"{docs['failed']} failed, {docs['bad_results']} with a bad result; {docs['sentences']} sentences, "
        f"{docs['sent_s']} sentences/s; median {docs['p50_s']} s from upload to done.",
        f"- **Memory (RSS of the daemon):** {rss['idle_mb']} MB idle after loading; during the soak, sampled every "
        f"{rss['sample_s']:g} s ({rss['rss_samples']} samples), highest in each minute: {peaks} MB; slope "
        f"{rss['slope_mb_per_min']} MB/min after the first {rss['fit_after_s']:g} s; highest in the first half "
        f"{rss['rss_peak_first_half_mb']} MB, in the second {rss['rss_peak_second_half_mb']} MB"
        + ("" if growth is None else f" ({100 * growth:+.1f}%)") + f"; {rss['after_mb']} MB after the last phase.",
        "",
    ]
    return lines


REQUEST_HEADING = "## One request, where the time goes"

#: The layers of :mod:`.requestbench`, outermost first: (key, what it covers, the inner key it wraps).
REQUEST_LAYERS = (
    ("http", "`POST /translate` over loopback, a new connection each time", "app"),
    ("http_health", "`GET /health` the same way: the HTTP server and connection alone", None),
    ("app", "the WSGI application called directly: routing, JSON, limits, the service", "translate"),
    ("translate", "`Translator.translate`: segmentation, tokens, the engine's queue, decoding", "engine_decoding"),
    ("engine_queued", "the engine's queue: from submit to the start of decoding", None),
    ("engine_decoding", "decoding, as the engine times it", None),
    ("ort_encoder", "inside ONNX Runtime: the encoder call", None),
    ("ort_decoder", "inside ONNX Runtime: the decoder steps, summed", None),
    ("ort_score", "inside ONNX Runtime: the log-softmax of each step (the score)", None),
    ("segment", "sentence segmentation", None),
    ("tokens", "SentencePiece of the sentence", None),
)


def render_request_section(run: dict) -> list[str]:
    """The ``bench-request`` section: each layer's median and what it adds to the one inside it."""
    ms, m = run["ms"], run["machine"]
    lines = [REQUEST_HEADING, "",
             f"Measured by `{run['command']}` on {m.get('cpu', '?')} ({m.get('cpus')} logical CPUs), "
             f"{run['options']['threads']} ONNX Runtime threads, cache off, `{Path(run['model']).name}`: the sentence "
             f"\"{run['options']['sentence']}\" ({run['output']}), medians of {run['options']['calls']} calls each. "
             f"{ms.get('decoder_calls', '?'):g} decoder steps. The daemon runs in the benchmark's process, so only "
             "loopback separates client and server. The idle engine waited for batch-mates "
             f"{run.get('gathered', '?')} times in the whole run.", "",
             "| layer | ms | adds to the layer inside |", "|---|---|---|"]
    for key, what, inner in REQUEST_LAYERS:
        if key in ms:
            adds = f"{ms[key] - ms[inner]:.3f}" if inner and inner in ms else ""
            lines.append(f"| {what} | {ms[key]} | {adds} |")
    return lines + [""]


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g} ms"


# -- documents (bench-docs) -----------------------------------------------------------------
def render_documents_section(data: dict) -> list[str]:
    """Markdown lines of the "Documents" section."""
    m, s, b = data["machine"], data["small_vs_large"], data["folder"]
    lines = [
        "## Documents",
        "",
        f"Measured by `{data['command']}` on {m.get('cpu', '?')} ({m.get('cpus')} logical CPUs), the embedded "
        "demo model, sentences of its test split.",
        "",
        f"**Many small files against one large file** ({s['sentences']} sentences in {s['files']} text files, "
        f"or in one; one process, one translator, {s['rounds']} alternating rounds, fresh journal and no memory, "
        "so every sentence is decoded):",
        "",
        "| layout | sentences/s (median) | runs |",
        "|---|---|---|",
        f"| one file | {s['one_rate']} | {', '.join(map(str, s['one_runs']))} |",
        f"| {s['files']} files | {s['many_rate']} | {', '.join(map(str, s['many_runs']))} |",
        "",
        f"Many small files run at **{s['ratio']}×** the rate of one large file (goal: within 15%).",
        "",
        f"**A {b['megabytes']} MB folder of mixed documents** ({b['files']} files: txt, md, srt, html, csv, docx, pptx, xlsx; "
        f"`edge-translator docs` in a child process): {b['done']} done, {b['failed']} failed, "
        f"{b['sentences']} sentences in {b['seconds']} s ({b['decoded']} decoded, {b['reused']} reused from the "
        f"journal: the sentences repeat), **peak RSS {b['peak_rss_mb']} MB** (goal: under 400 MB).",
    ]
    if data.get("large"):
        lines += ["", "**Large office files**, each alone (`edge-translator docs` in a child process; the sentences "
                  "repeat, so most are reused from the journal: this measures the format, not decoding):", "",
                  "| file | MB | sentences | decoded | seconds | peak RSS (MB) |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['file']} | {r['megabytes']} | {r['sentences']} | {r['decoded']} | {r['seconds']} | "
                  f"{r['peak_rss_mb']} |" for r in data["large"]]
    if data.get("placeholders"):
        lines += ["", data["placeholders"]]
    return lines
