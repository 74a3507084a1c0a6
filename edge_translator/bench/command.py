"""The benchmarks' subcommands: ``bench``, ``bench-serve``, ``bench-docs``, ``bench-load``,
``bench-soak``, ``bench-request`` and ``bench-models``.

Argument parsing and printing only: each command imports its benchmark when it runs, so
declaring them costs ``edge-translator translate`` nothing at start-up and needs none of
the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parsers(sub) -> None:
    """Declare the benchmarks' subcommands.

    Args:
        sub: The ``edge-translator`` parser's subparsers action.
    """
    from ..core.bundle import DEFAULT_BLOCK_SIZE

    be = sub.add_parser("bench", help="benchmark against PyTorch and CTranslate2 (extra 'bench')")
    be.add_argument("--work", default="work/bench", help="where the full-shape model and conversions are kept")
    be.add_argument("--reference", help="directory with the real model's config.json "
                    "(default: the opus-mt-en-zh configuration shipped with the toolchain)")
    be.add_argument("--out", default="docs", help="directory for benchmarks.md, .json and the plot")
    be.add_argument("--threads", type=int, default=2)
    be.add_argument("--rounds", type=int, default=7,
                    help="alternating rounds (batched runs use half, at least 3; the load benchmark at most 3)")
    be.add_argument("--batch-sizes", default="1,4,16,32,64", help="batch sizes of the throughput curve")
    be.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                    help=f"block size of the q8 and q4 bundles (default {DEFAULT_BLOCK_SIZE})")
    be.add_argument("--smoke", action="store_true", help="run on the tiny test fixtures (checks the harness only)")
    be.add_argument("--fixtures", default="tests/fixtures", help="fixtures directory for --smoke")
    _add_load_arguments(be)
    be.add_argument("--load", action=argparse.BooleanOptionalAction, default=True,
                    help="also benchmark the engine under load: concurrent callers, priority, memory (default on; "
                    "--no-load keeps the load section of the report in --out)")
    be.set_defaults(func=cmd_bench)

    bs = sub.add_parser("bench-serve", help="load-test the daemon over loopback (N clients against sequential "
                        "requests) and update that section of benchmarks.md (extras 'serve', 'bench')")
    bs.add_argument("--model", help="bundle to serve (default: the embedded model)")
    bs.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    bs.add_argument("--seconds", type=float, default=60.0, help="length of the concurrent run (default 60)")
    bs.add_argument("--sequential-seconds", type=float, default=30.0,
                    help="length of the one-client run (default 30)")
    bs.add_argument("--sentences-per-request", type=int, default=1, help="sentences in each request (default 1)")
    bs.add_argument("--threads", type=int, default=2, help="the daemon's ONNX Runtime threads, each worker's "
                    "(default 2)")
    bs.add_argument("--workers", type=int, default=1, help="the daemon's decoding workers (default 1)")
    bs.add_argument("--lean-memory", action="store_true", help="run the daemon with --lean-memory")
    bs.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    bs.add_argument("--smoke", action="store_true", help="generated sentences instead of the prose (no 'bench' "
                    "extra; checks the harness)")
    lt = bs.add_argument_group("LibreTranslate side by side (off by default: its first install takes minutes)")
    lt.add_argument("--libretranslate", action="store_true", help="also run LibreTranslate 1.9.6 on the same model, "
                    "at its defaults and its best thread setting, alternating with the daemon, and report the ratios")
    lt.add_argument("--lt-work", default="work/libretranslate", metavar="DIR",
                    help="its venv (installed from PyPI when missing), argos data and package (default %(default)s)")
    lt.add_argument("--lt-grid", metavar="IxJ,...", help="ARGOS_INTER_THREADS x ARGOS_INTRA_THREADS settings tried "
                    "besides its defaults (default: every pair of powers of two that fits in the CPUs)")
    lt.add_argument("--lt-seconds", type=float, default=20.0,
                    help="length of each measure of the alternating rounds (default 20)")
    lt.add_argument("--lt-tune-seconds", type=float, default=8.0,
                    help="length of each measure of the sweep that picks its best setting (default 8)")
    lt.add_argument("--lt-rounds", type=int, default=3,
                    help="alternating rounds; medians reported, ratios where the ranges do not cross (default 3)")
    lt.add_argument("--lt-checkpoint", metavar="DIR", help="MarianMT checkpoint of the served bundle's model (the "
                    "full shape's from `edge-translator test-model full`; default: unbundle the bundle)")
    lt.add_argument("--lt-length", choices=("cap", "exact", "own"), default="cap",
                    help="LibreTranslate's decoding length: 'cap' (default) stops it at the daemon's limit, 2 x source "
                    "tokens + 10, instead of 256; 'exact' decodes exactly that many tokens on both sides, the daemon "
                    "with --exact-length (random models, whose end of sentence comes at random); 'own' leaves argos's")
    bs.set_defaults(func=cmd_bench_serve)

    bd = sub.add_parser("bench-docs", help="measure `docs`: many small files against one large one, and the peak "
                        "memory of a mixed folder (extra 'docs')")
    bd.add_argument("--model", help="bundle directory (default: the embedded model)")
    bd.add_argument("--threads", type=int)
    bd.add_argument("--mb", type=float, default=10.0, help="size of the mixed folder (default 10 MB)")
    bd.add_argument("--files", type=int, default=200, help="small files of the comparison (default 200)")
    bd.add_argument("--sentences", type=int, default=1500, help="sentences of the comparison (default 1500)")
    bd.add_argument("--rounds", type=int, default=3)
    bd.add_argument("--slides", type=int, default=300,
                    help="slides of the large deck, measured beside one a tenth its size (default 300)")
    bd.add_argument("--cells", type=int, default=50_000,
                    help="cells of the large sheet, measured beside one a tenth its size (default 50000)")
    bd.add_argument("--pages", type=int, default=500,
                    help="pages of the large PDF, measured beside one a tenth its size (default 500)")
    bd.add_argument("--work", default="work/bench-docs", help="where the generated documents go")
    bd.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    bd.add_argument("--no-placeholders", action="store_true", help="skip the glossary placeholder measurement")
    bd.set_defaults(func=cmd_bench_docs)

    bl = sub.add_parser("bench-load", help="benchmark the engine under load only and update that section of "
                        "benchmarks.md and .json (extra 'bench')")
    bl.add_argument("--work", default="work/bench", help="where the full-shape model is kept")
    bl.add_argument("--reference", help="directory with the real model's config.json "
                    "(default: the opus-mt-en-zh configuration shipped with the toolchain)")
    bl.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    bl.add_argument("--threads", type=int, default=2)
    bl.add_argument("--rounds", type=int, default=3, help="alternating rounds of the throughput runs")
    bl.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                    help=f"block size of the q8 bundle it loads (default {DEFAULT_BLOCK_SIZE})")
    bl.add_argument("--smoke", action="store_true", help="run on the tiny test fixtures (checks the harness only)")
    bl.add_argument("--fixtures", default="tests/fixtures", help="fixtures directory for --smoke")
    _add_load_arguments(bl)
    bl.set_defaults(func=cmd_bench_load)

    bk = sub.add_parser("bench-soak", help="soak the daemon with mixed text and documents over loopback (RSS, "
                        "errors, text latency against unloaded) and update that section of benchmarks.md "
                        "(extras 'serve', 'docs', 'bench')")
    bk.add_argument("--model", help="bundle to serve (default: the embedded model)")
    bk.add_argument("--minutes", type=float, default=10.0, help="length of the soak (default 10)")
    bk.add_argument("--clients", type=int, default=4, help="text clients during the soak (default 4)")
    bk.add_argument("--unloaded-seconds", type=float, default=30.0,
                    help="length of the one-client run without load (default 30)")
    bk.add_argument("--probe-seconds", type=float, default=30.0,
                    help="length of the one-client run beside the document client alone (default 30)")
    bk.add_argument("--doc-sentences", type=int, default=40, help="sentences of each document (default 40)")
    bk.add_argument("--threads", type=int, default=2, help="the daemon's ONNX Runtime threads (default 2)")
    bk.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    bk.add_argument("--smoke", action="store_true", help="a few seconds on generated sentences (no 'bench' extra; "
                    "checks the harness)")
    bk.set_defaults(func=cmd_bench_soak)

    br = sub.add_parser("bench-request", help="where one short request's time goes (HTTP, application, engine, "
                        "ONNX Runtime) and update that section of benchmarks.md (extra 'serve')")
    br.add_argument("--model", help="bundle (default: the embedded model)")
    br.add_argument("--calls", type=int, default=300, help="calls per measure (medians are reported)")
    br.add_argument("--threads", type=int, default=2, help="ONNX Runtime threads, as `serve --threads`")
    br.add_argument("--sentence", default=None, help="the sentence to translate (default: a short question)")
    br.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    br.set_defaults(func=cmd_bench_request)

    bm = sub.add_parser("bench-models", help="two bundles side by side: size, start-up, batch-1 speed, and "
                        "untranslated or stuttering output on the benchmark prose (extra 'bench')")
    bm.add_argument("first", help="bundle directory (e.g. the current embedded model)")
    bm.add_argument("second", help="bundle directory to compare with it")
    bm.add_argument("--rounds", type=int, default=3, help="alternating rounds (medians are reported)")
    bm.add_argument("--sentences", type=int, default=60, help="prose sentences of the batch-1 measure")
    bm.set_defaults(func=cmd_bench_models)


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark this runtime against PyTorch and CTranslate2 and write the report."""
    import json

    from . import bench, benchreport
    from .prose import prose_sentences

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench"
    if args.smoke:
        # The tiny fixtures: shows the harness works end to end in seconds; the figures mean nothing.
        from ..toolchain.testmodels import english_sentences

        fixtures = Path(args.fixtures)
        work = Path(args.work)
        work.mkdir(parents=True, exist_ok=True)
        ct2 = bench.convert_ct2(fixtures / "tiny-marian", work / "tiny-ct2")
        bundles = {"ours-int8": fixtures / "tiny-int8", "ours-fp32": fixtures / "tiny-fp32",
                   **bench.smoke_bundles(fixtures / "tiny-marian", work, args.block_size)}
        options = bench.BenchOptions(threads=args.threads, rounds=1, new_tokens=8, batched_new_tokens=8,
                                     batched_sentences=16, batch_sizes=(1, 8), latency_runs=2, cold_runs=1)
        result = bench.run_benchmark(bundles, fixtures / "tiny-marian", ct2, english_sentences(32, 5), options,
                                     command)
        result.model = "SMOKE RUN on the tiny test fixtures: these figures only show that the harness works."
        sentences = english_sentences(64, 7)
    else:
        bundles, hf, ct2 = bench.prepare_models(Path(args.work), args.reference, args.threads, args.block_size)
        sizes = tuple(int(x) for x in args.batch_sizes.split(",") if x.strip())
        options = bench.BenchOptions(threads=args.threads, rounds=args.rounds, batch_sizes=sizes)
        sentences = prose_sentences()
        result = bench.run_benchmark(bundles, hf, ct2, sentences, options, command)
    if args.load:
        result.load = _load_benchmark(args, bundles[options.shipped], sentences, command,
                                      rounds=min(args.rounds, 3))
    else:  # keep the load section of an earlier run; it names its own command
        previous = Path(args.out) / "benchmarks.json"
        if previous.is_file():
            result.load = json.loads(previous.read_text()).get("load") or {}
    path = benchreport.write_report(result, Path(args.out))
    print(f"wrote {path}")
    for name, rate in result.batch1_tok_s.items():
        print(f"batch 1  {name:10s} {rate:9.1f} tok/s")
    if result.load:
        _print_load(result.load)
    return 0


def cmd_bench_serve(args: argparse.Namespace) -> int:
    """Load-test the daemon over loopback and update that section of the report."""
    import json

    from ..core.translator import resolve_model
    from . import report, servebench

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-serve"
    if args.smoke:
        from ..toolchain.testmodels import english_sentences

        sentences = english_sentences(200, 9)
    else:
        from .prose import prose_sentences

        sentences = prose_sentences()
    options = servebench.ServeBenchOptions(clients=args.clients, seconds=args.seconds, lean_memory=args.lean_memory,
                                           sequential_seconds=args.sequential_seconds,
                                           sentences_per_request=args.sentences_per_request, threads=args.threads,
                                           workers=args.workers,
                                           exact_length=args.libretranslate and args.lt_length == "exact",
                                           warmup_seconds=min(10.0, args.seconds / 6))
    peer = None
    if args.libretranslate:
        from .libretranslate import LibreTranslateOptions, parse_grid

        peer = LibreTranslateOptions(work=Path(args.lt_work), grid=parse_grid(args.lt_grid) if args.lt_grid else (),
                                     seconds=args.lt_seconds, tune_seconds=args.lt_tune_seconds,
                                     rounds=args.lt_rounds, length="" if args.lt_length == "own" else args.lt_length,
                                     checkpoint=Path(args.lt_checkpoint) if args.lt_checkpoint else None)
    run = servebench.run_serve_bench(resolve_model(args.model), sentences, options, command, peer)
    previous = Path(args.out) / "benchmarks.json"
    runs = (json.loads(previous.read_text()).get("serve") or {}) if previous.is_file() else {}
    key = run["model"] + (" --lean-memory" if args.lean_memory else "") + \
        (f" --workers {args.workers} --threads {args.threads}" if args.workers != 1 else "") + \
        (" --exact-length" if options.exact_length else "")
    if peer is not None:
        run["libretranslate"]["measured_by"] = command
    elif "libretranslate" in runs.get(key, {}):  # keep the side-by-side figures; they name their command
        run["libretranslate"] = runs[key]["libretranslate"]
    runs[key] = run
    path = report.update_section(Path(args.out), "serve", runs, "## Daemon under load",
                                 report.render_serve_section(runs))
    print(f"updated {path}")
    seq, con = run["sequential"], run["concurrent"]
    print(f"sequential {seq['req_s']} req/s; {con['clients']} clients {con['req_s']} req/s ({run['ratio']}x), "
          f"p50 {con['p50_ms']} ms, p99 {con['p99_ms']} ms, errors {con['errors'] or 0}, "
          f"RSS {run['rss_start_mb']} -> {run['rss_end_mb']} MB, exit {run['exit_code']}")
    if peer is None:
        return 0
    lt = run["libretranslate"]
    for measure, key in (("sequential", "seq_req_s"), (f"{options.clients} clients", "con_req_s")):
        which = "sequential" if key == "seq_req_s" else "concurrent"
        best = lt["best"][which]
        print(f"{measure}: ours {lt['medians']['ours'][key]} req/s, LibreTranslate best ({best}) "
              f"{lt['medians'][best][key]}, defaults {lt['medians']['defaults'][key]}: ours / best "
              f"{lt['ratios'][which]['best']}x, ours / defaults {lt['ratios'][which]['defaults']}x")
    agree = lt["agreement"]
    print(f"same output on {agree['identical']} of {agree['sentences']} sample requests; errors {lt['errors']}; "
          f"connections refused {lt['refused_connections']}")
    if lt["errors"]:
        print("error: requests failed in the side-by-side runs; the ratios are not valid", file=sys.stderr)
        return 1
    return 0


def cmd_bench_soak(args: argparse.Namespace) -> int:
    """Soak the daemon with mixed text and documents and update that section of the report."""
    from ..core.translator import resolve_model
    from . import report, soakbench

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-soak"
    if args.smoke:  # seconds, not minutes: the figures mean nothing
        from ..toolchain.testmodels import english_sentences

        sentences = english_sentences(200, 9)
        options = soakbench.SoakOptions(minutes=0.1, text_clients=2, unloaded_seconds=1.5, probe_seconds=3.0,
                                        doc_sentences=6, threads=1)
    else:
        from .prose import prose_sentences

        sentences = prose_sentences()
        options = soakbench.SoakOptions(minutes=args.minutes, text_clients=args.clients, threads=args.threads,
                                        unloaded_seconds=args.unloaded_seconds, probe_seconds=args.probe_seconds,
                                        doc_sentences=args.doc_sentences)
    run = soakbench.run_soak_bench(resolve_model(args.model), sentences, options, command)
    path = report.update_section(Path(args.out), "soak", run, report.SOAK_HEADING, report.render_soak_section(run))
    print(f"updated {path}")
    rss, soak, docs = run["rss"], run["soak"], run["soak"]["documents"]
    peaks = ", ".join(f"{mb:g}" for mb in rss["peak_per_minute_mb"])
    print(f"soak {soak['seconds']:.0f} s: RSS peak per minute {peaks} MB, slope {rss['slope_mb_per_min']} MB/min "
          f"after {rss['fit_after_s']:g} s; 5xx/no answer {run['errors_5xx']}, 4xx {run['errors_4xx']}; "
          f"documents {docs['done']} done ({docs['sent_s']} sentences/s); one-sentence p50 "
          f"{run['unloaded_p50_ms']} ms unloaded, {soak['single']['p50_ms']} ms soaked "
          f"({run['ratio_p50']}x), {run['during_document']['single_during_document']['p50_ms']} ms beside a "
          f"document job alone ({run['during_document_ratio_p50']}x); exit {run['exit_code']}")
    return 0


def cmd_bench_load(args: argparse.Namespace) -> int:
    """Benchmark the engine under load only, and update that section of the report."""
    from . import bench, report
    from .prose import prose_sentences

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-load"
    if args.smoke:
        from ..toolchain.testmodels import english_sentences

        int8, sentences = Path(args.fixtures) / "tiny-int8", english_sentences(64, 7)
    else:
        bundles = bench.prepare_models(Path(args.work), args.reference, args.threads, args.block_size)[0]
        int8 = bundles[bench.BenchOptions().shipped]
        sentences = prose_sentences()
    load = _load_benchmark(args, int8, sentences, command, rounds=args.rounds)
    path = report.update_report(load, Path(args.out))
    print(f"updated {path}")
    _print_load(load)
    return 0


def cmd_bench_docs(args: argparse.Namespace) -> int:
    """Measure the document translator and update the "Documents" section of the report."""
    from .docsbench import run

    command = "edge-translator bench-docs" + "".join(
        f" {flag} {value}" for flag, value in (("--mb", args.mb), ("--files", args.files),
                                               ("--rounds", args.rounds), ("--slides", args.slides),
                                               ("--cells", args.cells), ("--pages", args.pages)))
    from ..core.errors import InputError

    if args.slides < 10:
        raise InputError(f"--slides must be at least 10, not {args.slides}")
    if args.cells < 40:
        raise InputError(f"--cells must be at least 40, not {args.cells}")
    if args.pages < 10:
        raise InputError(f"--pages must be at least 10, not {args.pages}")
    data = run(args.model, Path(args.work), Path(args.out), args.mb, args.files, args.sentences, args.rounds,
               args.threads, command, not args.no_placeholders, args.slides, args.cells, args.pages)
    s, b = data["small_vs_large"], data["folder"]
    print(f"{s['files']} files {s['many_rate']}/s, one file {s['one_rate']}/s: {s['ratio']}x; "
          f"{b['megabytes']} MB folder: {b['seconds']} s, peak RSS {b['peak_rss_mb']} MB")
    return 0


def _load_benchmark(args: argparse.Namespace, bundle: Path, sentences: list[str], command: str, rounds: int) -> dict:
    from . import loadbench

    if args.smoke:  # the tiny fixtures, in seconds: the figures mean nothing
        options = loadbench.smoke_options(args.threads, soak=args.soak_minutes > 0)
    else:
        options = loadbench.LoadOptions(threads=args.threads, rounds=rounds, soak_seconds=args.soak_minutes * 60)
    return loadbench.run_load(bundle, sentences, options, command)


def _print_load(load: dict) -> None:
    for callers, row in load["concurrency"]["callers"].items():
        print(f"{callers:>2} callers  {row['tok_s']:9.1f} tok/s  {row['ratio']}x sequential  "
              f"p50 {row['p50_ms']} ms  p95 {row['p95_ms']} ms")
    inter = load["interactive"]
    print(f"interactive during bulk: p50 {inter['loaded']['p50_ms']} ms, {inter['ratio_p50']}x unloaded")
    if load["soak"]:
        print(f"soak {load['soak']['seconds']:.0f} s: RSS {load['soak']['start_mb']} -> {load['soak']['end_mb']} MB, "
              f"slope {load['soak']['slope_mb_per_min']} MB/min")


def _add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--soak-minutes", type=float, default=10.0,
                        help="how long callers and a bulk job run while RSS is sampled; 0 skips it "
                        "(--smoke: a few seconds)")


def cmd_bench_request(args: argparse.Namespace) -> int:
    """Break one short request's time down by layer and update that section of the report."""
    from ..core.translator import resolve_model
    from . import report, requestbench

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-request"
    if args.calls < 1 or args.threads < 1:
        print("edge-translator: error: --calls and --threads must be at least 1", file=sys.stderr)
        return 2
    options = requestbench.RequestBenchOptions(calls=args.calls, threads=args.threads,
                                               sentence=args.sentence or requestbench.SENTENCE)
    run = requestbench.run_request_bench(resolve_model(args.model), options, command)
    path = report.update_section(Path(args.out), "request", run, report.REQUEST_HEADING,
                                 report.render_request_section(run))
    print(f"updated {path}")
    for name, ms in run["ms"].items():
        print(f"{name:16s} {ms}")
    return 0


def cmd_bench_models(args: argparse.Namespace) -> int:
    """Compare two bundles and print the Markdown table."""
    from ..core.bundle import load_bundle
    from .machine import machine_info
    from .modelbench import ModelBenchOptions, compare, render
    from .prose import prose_sentences

    if args.rounds < 1 or args.sentences < 1:
        print("edge-translator: error: --rounds and --sentences must be at least 1", file=sys.stderr)
        return 2
    bundles = {}
    for given in (args.first, args.second):
        load_bundle(Path(given))  # a bad folder ends here, in one line
        bundles[f"{Path(given).name} ({given})" if given in bundles else given] = Path(given)
    result = compare(bundles, prose_sentences(), ModelBenchOptions(rounds=args.rounds,
                                                                   batch1_sentences=args.sentences))
    print(f"CPU: {machine_info()['cpu']}; {args.rounds} rounds; batch 1 on one thread over "
          f"{args.sentences} sentences (tokens by each bundle's own tokenizer); untranslated and stuttering "
          f"over all {result['sentences']} sentences on 2 threads")
    print("\n".join(render(result)))
    return 0
