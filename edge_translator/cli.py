"""The ``edge-translator`` command: translate, export, and build test models.

Exit codes: 0 success; 1 unexpected error; 2 bad command-line usage; 3 missing or
corrupt model bundle; 4 unusable input (for example invalid UTF-8); 5 export failed;
6 an optional dependency is missing; 7 some documents failed (``docs``: the others were
translated); 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from .core.errors import EdgeTranslatorError, InputError

logger = logging.getLogger(__name__)


def _read_stdin() -> str:
    data = sys.stdin.buffer.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"standard input is not valid UTF-8 (byte {exc.start}: {data[exc.start:exc.start + 1]!r}); "
            "convert it first, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def cmd_translate(args: argparse.Namespace) -> int:
    """Translate TEXT arguments, or standard input with ``-``."""
    from .core.translator import TranslateOptions, Translator, render

    if args.text == ["-"] or (not args.text and not sys.stdin.isatty()):
        text = _read_stdin()
    elif not args.text:
        raise InputError("nothing to translate: give TEXT, or - to read standard input")
    else:
        text = " ".join(args.text)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError("the TEXT argument is not valid UTF-8; fix the terminal encoding "
                             "or pipe the text through standard input") from None
    options = TranslateOptions(target=args.target, beam_size=args.beam, max_length=args.max_length)
    translator = Translator.load(args.model, threads=args.threads)
    if args.target and args.target not in translator.bundle.targets:
        raise ValueError(f"--target {args.target} is not offered by this model; choose one of "
                         f"{', '.join(sorted(translator.bundle.targets))}")
    out = sys.stdout
    for piece in render(translator.translate_iter(text, options)):
        out.write(piece)
        out.flush()
    if text and not text.endswith("\n"):
        out.write("\n")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Export a Hugging Face MarianMT model into a bundle."""
    from .toolchain.export import ExportOptions, export
    from .toolchain.quantize import DEFAULT_SCHEME, SCHEME_MODES, QuantizeOptions

    if args.quantize is None:  # --calibrate alone means static int8
        args.quantize = "int8" if args.calibrate else DEFAULT_SCHEME
    if args.calibrate and args.quantize != "int8":
        raise InputError(f"--calibrate makes a static INT8 bundle; it does not go with --quantize {args.quantize}")
    if args.restrict_output and args.quantize in ("q8", "q4"):
        raise InputError(f"--restrict-output works with --quantize int8, int8r or none, not {args.quantize}")
    if args.quantize == "none":
        quant = QuantizeOptions(mode="none")
    else:
        op_types = tuple(t.strip() for t in args.op_types.split(",") if t.strip())
        mode = "static" if args.calibrate else SCHEME_MODES[args.quantize]
        try:
            quant = QuantizeOptions(
                mode=mode, per_channel=args.per_channel, block_size=args.block_size,
                op_types=op_types, exclude_nodes=tuple(args.exclude_nodes or ()),
                calibration=Path(args.calibrate) if args.calibrate else None,
            )
        except ValueError as exc:
            raise InputError(f"{exc}; see edge-translator export --help") from None
    if args.calibrate and not Path(args.calibrate).is_file():
        raise InputError(f"calibration file {args.calibrate} does not exist")
    tolerance = {} if args.parity_tolerance is None else {"parity_tolerance": args.parity_tolerance}
    out = export(args.src, args.out, ExportOptions(quantize=quant, force=args.force, name=args.name,
                                                   restrict_output=args.restrict_output, **tolerance))
    _print_summary(out)
    return 0


def _print_summary(out: Path) -> None:
    from .core.bundle import load_bundle

    bundle = load_bundle(out)
    size = sum(r["size"] for r in bundle.manifest["files"].values())
    validation = bundle.manifest.get("validation", {})
    print(f"wrote {out} ({size / 1e6:.1f} MB, quantization {bundle.quantization['mode']})")
    parity = validation.get("fp32_parity")
    if parity:
        print(f"FP32 vs PyTorch: max |logit diff| {parity['max_abs_logit_diff']:.2e} against float64, where PyTorch "
              f"float32 differs by {parity.get('torch_fp32_max_abs_logit_diff', float('nan')):.2e} "
              f"(allowed {parity.get('allowed_abs_logit_diff', float('nan')):.2e}), over {parity['sentences']} sentences")
    restricted = validation.get("restriction_agreement")
    if restricted:
        print(f"restricted vs full output layer: {restricted['identical']}/{restricted['sentences']} identical")
    agreement = validation.get("int8_agreement")
    labels = {"dynamic": "INT8", "static": "static INT8", "rowwise": "INT8 (per-row)"}
    label = labels.get(bundle.quantization["mode"], bundle.quantization["mode"])
    if agreement:
        print(f"{label} vs FP32 greedy: {agreement['identical']}/{agreement['sentences']} sentences identical, "
              f"token agreement {agreement['token_agreement']:.1%}")
    invariance = validation.get("batch_invariance")
    if invariance:
        print(f"{label} batched vs one at a time: {invariance['differ']}/{invariance['sentences']} sentences differ, "
              f"max |logit diff| {invariance['max_abs_logit_diff']:.2e} (on {invariance['cpu']})")


def cmd_test_model(args: argparse.Namespace) -> int:
    """Build a random Marian model for tests or benchmarks."""
    from .toolchain import testmodels

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise InputError(f"{out} already exists; pass --force to overwrite it")
    if args.kind == "tiny":
        testmodels.build_tiny(out, seed=args.seed)
    else:
        testmodels.build_full(out, args.reference, seed=args.seed)
    print(f"wrote {args.kind} Marian model to {out}")
    return 0


def cmd_train_demo(args: argparse.Namespace) -> int:
    """Train, export and evaluate the small embedded demo model."""
    from .core.bundle import load_bundle
    from .toolchain.schemes import SchemeOptions
    from .toolchain.train import TrainOptions, run

    options = TrainOptions(seed=args.seed, time_budget_minutes=args.minutes, threads=args.threads)
    out = run(args.work, args.out, options, force=args.force, quantize=_scheme(args))
    _print_summary(out)
    if args.evaluate:
        from .toolchain.train import evaluate_choices

        from .toolchain.export import ExportOptions, export
        from .toolchain.modelcard import write_model_card
        from .toolchain.schemes import variants

        work, hf = Path(args.work), Path(args.work) / "hf"
        results = evaluate_choices(work, hf, progress=print)
        r = results["pytorch_fp32"]
        print(f"{'pytorch':10s} BLEU {r['bleu']:6.2f}  chrF {r['chrf']:6.2f}")
        chosen = variants(SchemeOptions())[results["choice"]]
        if load_bundle(out).quantization != chosen.as_manifest():
            out = export(hf, out, ExportOptions(quantize=chosen, force=True, name=Path(out).name))
            _print_summary(out)
        print(f"wrote {write_model_card(out, work, Path(out).name)}")
    return 0


def _scheme(args: argparse.Namespace):
    """QuantizeOptions from ``--quantize`` and ``--block-size`` (no calibration, all op types)."""
    from .toolchain.quantize import SCHEME_MODES, QuantizeOptions

    try:
        return QuantizeOptions(mode=SCHEME_MODES[args.quantize], block_size=args.block_size)
    except ValueError as exc:
        raise InputError(f"{exc}; see edge-translator {args.command} --help") from None


def cmd_schemes(args: argparse.Namespace) -> int:
    """Export and score every weight scheme of a model on held-out pairs."""
    import json

    from .toolchain import schemes
    from .toolchain.quantize import BLOCK_SIZES

    try:
        sizes = tuple(int(x) for x in args.block_sizes.split(",") if x.strip())
    except ValueError:
        sizes = ()
    if not sizes or set(sizes) - set(BLOCK_SIZES):
        raise InputError(f"--block-sizes takes sizes from {', '.join(map(str, BLOCK_SIZES))} separated by commas, "
                         f"not {args.block_sizes!r}")
    only = tuple(x.strip() for x in (args.only or "").split(",") if x.strip())
    options = schemes.SchemeOptions(block_sizes=sizes, threads=args.threads, limit=args.limit,
                                    max_bleu_loss=args.max_bleu_loss, only=only)
    try:
        schemes.variants(options)
    except ValueError as exc:
        raise InputError(f"--only: {exc}") from None
    results = schemes.measure(Path(args.src), Path(args.pairs), Path(args.work), options, progress=print)
    print("\n".join(schemes.render_table(results)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    """Score a bundle on held-out pairs with sacrebleu."""
    import json

    from .toolchain import evaluate

    if args.torch:
        result = evaluate.evaluate_torch(args.bundle, args.pairs, args.limit)
    else:
        result = evaluate.evaluate_bundle(args.bundle, args.pairs, args.limit, args.threads, args.batch_size)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  ({result['sentences']} sentences, "
              f"{result['seconds']} s)  {result['signature']}")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Rewrite an int8r bundle's activation codes from 127 to 64 steps (see toolchain.upgrade)."""
    from .toolchain.upgrade import upgrade_bundle

    report = upgrade_bundle(args.bundle, args.out)
    if not report.upgraded:
        print(f"{report.path}: already current (int8r, 64-step activation codes); nothing to do")
    else:
        print(f"{report.path}: upgraded to 64-step activation codes ({report.row_quantizers} row quantizers, "
              f"{report.matmuls} integer matmuls); the weights are unchanged")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Benchmark this runtime against PyTorch and CTranslate2 and write the report."""
    import json

    from .toolchain import bench

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench"
    if args.smoke:
        # The tiny fixtures: shows the harness works end to end in seconds; the figures mean nothing.
        from .toolchain.testmodels import english_sentences

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
        sentences = bench.prose_sentences()
        result = bench.run_benchmark(bundles, hf, ct2, sentences, options, command)
    if args.load:
        result.load = _load_benchmark(args, bundles[options.shipped], sentences, command,
                                      rounds=min(args.rounds, 3))
    else:  # keep the load section of an earlier run; it names its own command
        previous = Path(args.out) / "benchmarks.json"
        if previous.is_file():
            result.load = json.loads(previous.read_text()).get("load") or {}
    path = bench.write_report(result, Path(args.out))
    print(f"wrote {path}")
    for name, rate in result.batch1_tok_s.items():
        print(f"batch 1  {name:10s} {rate:9.1f} tok/s")
    if result.load:
        _print_load(result.load)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the translation daemon (LibreTranslate, DeepL and our own API) until SIGTERM."""
    from .daemon.server import ServeOptions, serve

    options = ServeOptions(host=args.host, port=args.port, model=args.model, threads=args.threads,
                           api_keys=args.api_keys, char_limit=args.char_limit, batch_limit=args.batch_limit,
                           max_body=args.max_body, timeout=args.timeout, req_limit=args.req_limit,
                           http_threads=args.http_threads, connections=args.connections, cache_size=args.cache,
                           cors_origin=args.cors_origin, drain_timeout=args.drain_timeout, memory=args.tm,
                           lean_memory=args.lean_memory)
    if not args.verbose:
        logging.getLogger("edge_translator").setLevel(logging.INFO)
    return serve(options)


def cmd_bench_serve(args: argparse.Namespace) -> int:
    """Load-test the daemon over loopback and update that section of the report."""
    import json

    from .core.translator import resolve_model
    from .toolchain import loadreport, servebench

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-serve"
    if args.smoke:
        from .toolchain.testmodels import english_sentences

        sentences = english_sentences(200, 9)
    else:
        from .toolchain.bench import prose_sentences

        sentences = prose_sentences()
    options = servebench.ServeBenchOptions(clients=args.clients, seconds=args.seconds, lean_memory=args.lean_memory,
                                           sequential_seconds=args.sequential_seconds,
                                           sentences_per_request=args.sentences_per_request, threads=args.threads,
                                           warmup_seconds=min(10.0, args.seconds / 6))
    run = servebench.run_serve_bench(resolve_model(args.model), sentences, options, command)
    previous = Path(args.out) / "benchmarks.json"
    runs = (json.loads(previous.read_text()).get("serve") or {}) if previous.is_file() else {}
    runs[run["model"] + (" --lean-memory" if args.lean_memory else "")] = run
    path = loadreport.update_section(Path(args.out), "serve", runs, "## Daemon under load",
                                     servebench.render_section(runs))
    print(f"updated {path}")
    seq, con = run["sequential"], run["concurrent"]
    print(f"sequential {seq['req_s']} req/s; {con['clients']} clients {con['req_s']} req/s ({run['ratio']}x), "
          f"p50 {con['p50_ms']} ms, p99 {con['p99_ms']} ms, errors {con['errors'] or 0}, "
          f"RSS {run['rss_start_mb']} -> {run['rss_end_mb']} MB, exit {run['exit_code']}")
    return 0


def cmd_bench_load(args: argparse.Namespace) -> int:
    """Benchmark the engine under load only, and update that section of the report."""
    from .toolchain import bench, loadreport

    command = "edge-translator " + " ".join(sys.argv[1:]) if sys.argv[1:] else "edge-translator bench-load"
    if args.smoke:
        from .toolchain.testmodels import english_sentences

        int8, sentences = Path(args.fixtures) / "tiny-int8", english_sentences(64, 7)
    else:
        bundles = bench.prepare_models(Path(args.work), args.reference, args.threads, args.block_size)[0]
        int8 = bundles[bench.BenchOptions().shipped]
        sentences = bench.prose_sentences()
    load = _load_benchmark(args, int8, sentences, command, rounds=args.rounds)
    path = loadreport.update_report(load, Path(args.out))
    print(f"updated {path}")
    _print_load(load)
    return 0


def cmd_gui(args: argparse.Namespace) -> int:
    """Open the desktop app."""
    from .core.errors import require

    require("PySide6", "gui")
    from .gui.app import main as gui_main

    argv = ["edge-translator gui"]
    if args.model:
        argv += ["--model", args.model]
    if args.threads:
        argv += ["--threads", str(args.threads)]
    if args.no_tm:
        argv.append("--no-tm")
    if args.self_test is not None:
        argv += ["--self-test", args.self_test]
    return gui_main(argv)


def cmd_bench_docs(args: argparse.Namespace) -> int:
    """Measure the document translator and update the "Documents" section of the report."""
    from .toolchain.docsbench import run

    command = "edge-translator bench-docs" + "".join(
        f" {flag} {value}" for flag, value in (("--mb", args.mb), ("--files", args.files),
                                               ("--rounds", args.rounds)))
    data = run(args.model, Path(args.work), Path(args.out), args.mb, args.files, args.sentences, args.rounds,
               args.threads, command, not args.no_placeholders)
    s, b = data["small_vs_large"], data["folder"]
    print(f"{s['files']} files {s['many_rate']}/s, one file {s['one_rate']}/s: {s['ratio']}x; "
          f"{b['megabytes']} MB folder: {b['seconds']} s, peak RSS {b['peak_rss_mb']} MB")
    return 0


def _load_benchmark(args: argparse.Namespace, bundle: Path, sentences: list[str], command: str, rounds: int) -> dict:
    from .toolchain import loadbench

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


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``edge-translator`` command."""
    from . import __version__
    from .core.bundle import DEFAULT_BLOCK_SIZE, DEFAULT_SCHEME, SCHEME_MODES

    parser = argparse.ArgumentParser(prog="edge-translator", description="Offline English→Chinese translation.",
                                     epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"edge-translator {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True)

    tr = sub.add_parser("translate", help="translate text (arguments, or stdin with -)")
    tr.add_argument("text", nargs="*", help="text to translate; '-' or nothing reads standard input")
    tr.add_argument("--model", help="bundle directory (default: $EDGE_TRANSLATOR_MODEL, then the embedded model)")
    tr.add_argument("--target", help="zh-Hans (default) or zh-Hant")
    tr.add_argument("--threads", type=int, help="ONNX Runtime threads (default: physical cores)")
    tr.add_argument("--beam", type=int, default=1, help="beam size (1 = greedy)")
    tr.add_argument("--max-length", type=int, help="most new tokens per sentence (default: automatic)")
    tr.set_defaults(func=cmd_translate)

    ex = sub.add_parser("export", help="export a Hugging Face MarianMT model into a bundle")
    ex.add_argument("src", help="local Hugging Face MarianMT directory (or hub id, when online)")
    ex.add_argument("out", help="bundle directory to write")
    ex.add_argument("--quantize", choices=tuple(SCHEME_MODES),
                    help="weights: int8r (INT8 per channel, activations per row: batch-invariant, any CPU), "
                    "int8 (activations per call: fastest batched, batch-dependent), q8/q4 (8- or 4-bit blocks, "
                    "batch-invariant, need an int8 dot-product CPU), none (float32); "
                    f"default {DEFAULT_SCHEME}, or int8 with --calibrate")
    ex.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                    help=f"weights per scale for q8/q4: 16, 32, 64, 128 or 256 (default {DEFAULT_BLOCK_SIZE})")
    ex.add_argument("--calibrate", metavar="FILE", help="static INT8 (QDQ) calibrated on these English lines")
    ex.add_argument("--per-channel", action=argparse.BooleanOptionalAction, default=True,
                    help="one INT8 scale per output channel (default on)")
    ex.add_argument("--op-types", default="MatMul,Gather", help="operator types to quantize (MatMul,Gather)")
    ex.add_argument("--exclude-nodes", nargs="+", metavar="NODE", help="node names to keep in float32")
    ex.add_argument("--name", help="model name recorded in bundle.json")
    ex.add_argument("--restrict-output", action="store_true",
                    help="compute logits only for target-side pieces (fewer bytes per step)")
    ex.add_argument("--parity-tolerance", type=float, metavar="FACTOR",
                    help="the FP32 graphs' logits may differ from PyTorch float64 by FACTOR times what "
                    "PyTorch float32's do, plus 1e-4 (default 4)")
    ex.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    ex.set_defaults(func=cmd_export)

    tm = sub.add_parser("test-model", help="build a random Marian model (tiny, or full opus-mt-en-zh shape)")
    tm.add_argument("kind", choices=("tiny", "full"))
    tm.add_argument("out")
    tm.add_argument("--reference", help="directory with the real model's config.json (for 'full'; "
                    "default: the opus-mt-en-zh configuration shipped with the toolchain)")
    tm.add_argument("--seed", type=int, default=0)
    tm.add_argument("--force", action="store_true")
    tm.set_defaults(func=cmd_test_model)

    td = sub.add_parser("train-demo", help="train the small Tatoeba demo model and export it (extra 'train')")
    td.add_argument("out", help="bundle directory to write, e.g. models/tatoeba-en-zh")
    td.add_argument("--work", default="work/train-demo", help="data, tokenizers and checkpoints (resumable)")
    td.add_argument("--minutes", type=float, default=100.0, help="training time budget")
    td.add_argument("--seed", type=int, default=1)
    td.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    td.add_argument("--force", action="store_true", help="overwrite OUT if it exists")
    td.add_argument("--evaluate", action="store_true",
                    help="also score PyTorch and every weight scheme on the test split (eval.json), ship the "
                    "scheme chosen from those scores, and write the model card")
    td.add_argument("--quantize", choices=tuple(SCHEME_MODES), default=DEFAULT_SCHEME,
                    help=f"weights of the exported bundle (default {DEFAULT_SCHEME})")
    td.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                    help=f"weights per scale for q8/q4 (default {DEFAULT_BLOCK_SIZE})")
    td.set_defaults(func=cmd_train_demo)

    sc = sub.add_parser("schemes", help="export and score every weight scheme (none, int8, q8, q4 per block "
                        "size) on held-out pairs, and say which to ship (extras 'export', 'eval')")
    sc.add_argument("src", help="local Hugging Face MarianMT directory")
    sc.add_argument("--pairs", required=True, help="TSV: en<TAB>zh, or Tatoeba's cmn_id, zh, en_id, en")
    sc.add_argument("--work", default="work/schemes", help="where the bundles are written (reused on a rerun)")
    sc.add_argument("--block-sizes", default="64,128,256", help="block sizes for q8 and q4 (default 64,128,256)")
    sc.add_argument("--max-bleu-loss", type=float, default=0.3, help="BLEU the chosen scheme may lose (0.3)")
    sc.add_argument("--limit", type=int, help="score only the first N pairs")
    sc.add_argument("--only", metavar="NAMES", help="measure only these schemes, e.g. none,int8,q8-b64 "
                    "(the choice needs none among them)")
    sc.add_argument("--threads", type=int)
    sc.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    sc.set_defaults(func=cmd_schemes)

    ev = sub.add_parser("eval", help="BLEU and chrF of a bundle on held-out pairs (extra 'eval')")
    ev.add_argument("bundle", help="bundle directory (or, with --torch, a Hugging Face model directory)")
    ev.add_argument("--pairs", required=True, help="TSV: en<TAB>zh, or Tatoeba's cmn_id, zh, en_id, en")
    ev.add_argument("--limit", type=int, help="score only the first N pairs")
    ev.add_argument("--threads", type=int)
    ev.add_argument("--batch-size", type=int, default=32)
    ev.add_argument("--torch", action="store_true", help="score the PyTorch model in BUNDLE instead")
    ev.add_argument("--json", action="store_true", help="print the result as JSON")
    ev.set_defaults(func=cmd_eval)

    up = sub.add_parser("upgrade", help="bring an int8r bundle exported before the 64-step activation codes up to "
                        "date, offline (extra 'export': onnx)")
    up.add_argument("bundle", help="bundle directory; replaced once the upgraded bundle is complete and loads")
    up.add_argument("--out", help="write the upgraded bundle to this new directory instead, leaving BUNDLE as it is")
    up.set_defaults(func=cmd_upgrade)

    be = sub.add_parser("bench", help="benchmark against PyTorch and CTranslate2 (extra 'bench')")
    be.add_argument("--work", default="work/bench", help="where the full-shape model and conversions are kept")
    be.add_argument("--reference", help="directory with the real model's config.json "
                    "(default: the opus-mt-en-zh configuration shipped with the toolchain)")
    be.add_argument("--out", default="docs", help="directory for benchmarks.md, .json and the plot")
    be.add_argument("--threads", type=int, default=2)
    be.add_argument("--rounds", type=int, default=5,
                    help="alternating rounds (batched runs use half, the load benchmark at most 3)")
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

    sv = sub.add_parser("serve", help="run the offline translation server (LibreTranslate and DeepL APIs; "
                        "extra 'serve')")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=5000, help="TCP port (default 5000; 0 picks a free one)")
    sv.add_argument("--model", help="bundle directory (default: $EDGE_TRANSLATOR_MODEL, else the embedded model)")
    sv.add_argument("--threads", type=int, help="ONNX Runtime threads (default: physical cores)")
    sv.add_argument("--api-keys", metavar="FILE", help="file of API keys, one per line ('KEY [REQUESTS_PER_MINUTE]'); "
                    "when given, every request needs one")
    sv.add_argument("--char-limit", type=int, default=20_000, help="most characters per request (0: no limit; "
                    "default 20000)")
    sv.add_argument("--batch-limit", type=int, default=64, help="most texts per request (default 64)")
    sv.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                    help="largest request body (default 1 MiB; larger gets 413)")
    sv.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="most seconds a translation may take, and an idle or slow client may stay connected "
                    "(default 60)")
    sv.add_argument("--req-limit", type=int, default=0, metavar="N",
                    help="requests per minute per API key (or per address without keys); 0: no limit (default)")
    sv.add_argument("--http-threads", type=int, default=32, help="requests answered at once (default 32)")
    sv.add_argument("--connections", type=int, default=100, help="most open connections (default 100)")
    sv.add_argument("--cache", type=int, default=4096, metavar="SENTENCES",
                    help="translations kept in memory for repeated sentences (default 4096; 0: off)")
    sv.add_argument("--tm", metavar="FILE", help="also reuse and fill this translation memory (SQLite; see "
                    "`edge-translator tm`)")
    sv.add_argument("--cors-origin", metavar="ORIGIN", help="let browser pages from ORIGIN ('*': any) call the API "
                    "(default: no CORS headers)")
    sv.add_argument("--lean-memory", action="store_true",
                    help="no ONNX Runtime arena at all (the default keeps memory steady with the decoder's "
                    "arena): less RSS, less throughput under many clients (for boards short of memory)")
    sv.add_argument("--drain-timeout", type=float, default=30.0, metavar="SECONDS",
                    help="after SIGTERM, most seconds to finish the requests in flight (default 30)")
    sv.set_defaults(func=cmd_serve)

    bs = sub.add_parser("bench-serve", help="load-test the daemon over loopback (N clients against sequential "
                        "requests) and update that section of benchmarks.md (extras 'serve', 'bench')")
    bs.add_argument("--model", help="bundle to serve (default: the embedded model)")
    bs.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    bs.add_argument("--seconds", type=float, default=60.0, help="length of the concurrent run (default 60)")
    bs.add_argument("--sequential-seconds", type=float, default=30.0,
                    help="length of the one-client run (default 30)")
    bs.add_argument("--sentences-per-request", type=int, default=1, help="sentences in each request (default 1)")
    bs.add_argument("--threads", type=int, default=2, help="the daemon's ONNX Runtime threads (default 2)")
    bs.add_argument("--lean-memory", action="store_true", help="run the daemon with --lean-memory")
    bs.add_argument("--out", default="docs", help="directory of benchmarks.md and .json (other sections are kept)")
    bs.add_argument("--smoke", action="store_true", help="generated sentences instead of the prose (no 'bench' "
                    "extra; checks the harness)")
    bs.set_defaults(func=cmd_bench_serve)

    from .documents.command import add_parsers as add_document_parsers

    add_document_parsers(sub)

    gu = sub.add_parser("gui", help="open the desktop app (extra 'gui'; also `edge-translator-gui`)")
    gu.add_argument("--model", help="bundle directory for this run (default: the one chosen in the app)")
    gu.add_argument("--threads", type=int, help="ONNX Runtime threads for this run")
    gu.add_argument("--no-tm", action="store_true", help="do not use the translation memory in the user's data "
                    "directory (the one `docs` fills)")
    gu.add_argument("--self-test", nargs="?", const="", metavar="TEXT",
                    help="translate TEXT (default: a short sentence) in the window, print it and quit: "
                    "exit 0 if it came out in Chinese; saves nothing")
    gu.set_defaults(func=cmd_gui)

    bd = sub.add_parser("bench-docs", help="measure `docs`: many small files against one large one, and the peak "
                        "memory of a mixed folder (extra 'docs')")
    bd.add_argument("--model", help="bundle directory (default: the embedded model)")
    bd.add_argument("--threads", type=int)
    bd.add_argument("--mb", type=float, default=10.0, help="size of the mixed folder (default 10 MB)")
    bd.add_argument("--files", type=int, default=200, help="small files of the comparison (default 200)")
    bd.add_argument("--sentences", type=int, default=1500, help="sentences of the comparison (default 1500)")
    bd.add_argument("--rounds", type=int, default=3)
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
    return parser


def _add_load_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--soak-minutes", type=float, default=10.0,
                        help="how long callers and a bulk job run while RSS is sampled; 0 skips it "
                        "(--smoke: a few seconds)")


#: Top-level modules a single-file build leaves out (build/edge-translator.spec).
_TOOLCHAIN_MODULES = ("torch", "transformers", "onnx")


def main(argv: list[str] | None = None) -> int:
    """Run the command; errors become one line on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return args.func(args)
    except EdgeTranslatorError as exc:
        print(f"edge-translator: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except ValueError as exc:
        print(f"edge-translator: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("edge-translator: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback
        missing = getattr(exc, "name", None) or ""
        if isinstance(exc, ModuleNotFoundError) and (missing.split(".")[0] in _TOOLCHAIN_MODULES
                                                     or missing.startswith("edge_translator.toolchain")):
            print(f"edge-translator: error: `{args.command}` needs the toolchain, which this build of "
                  f"edge-translator leaves out (no module {missing}); run it from the Python package: "
                  "pip install 'edge-translator[export]'", file=sys.stderr)
            return 6
        reason = str(exc).splitlines()[0] if str(exc) else ""
        print(f"edge-translator: unexpected error: {type(exc).__name__}: {reason} "
              "(run with -v for details, and please report it)", file=sys.stderr)
        if args.verbose:
            logger.exception("unexpected error")
        return 1


if __name__ == "__main__":
    sys.exit(main())
