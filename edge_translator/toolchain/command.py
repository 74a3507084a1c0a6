"""The toolchain's subcommands: ``export``, ``test-model``, ``train-demo``, ``train-sweep``,
``harvest-software``, ``schemes``, ``eval``, ``shortlist``, ``shortlist-curve``, ``upgrade``
(the dictionary's are in :mod:`.dictcommand`).

Argument parsing and printing only. Each command imports the toolchain module that does
its work when it runs, so declaring these subcommands needs neither torch, transformers
nor onnx, and ``edge-translator translate`` does not pay for them at start-up.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import InputError


def add_parsers(sub) -> None:
    """Declare the toolchain's subcommands.

    Args:
        sub: The ``edge-translator`` parser's subparsers action.
    """
    from ..core.bundle import DEFAULT_BLOCK_SIZE, DEFAULT_SCHEME, SCHEME_MODES

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
                    help="the FP32 graphs' logits may differ from float64 by FACTOR times what "
                    "float32's do, plus 1e-4 (default 4)")
    ex.add_argument("--shortlist", action="store_true",
                    help="also store a vocabulary shortlist: per source piece, the target pieces a translation "
                    "may need (the runtime then computes fewer output rows)")
    ex.add_argument("--shortlist-corpus", metavar="FILE",
                    help="count the shortlist on these pairs (TSV: en<TAB>zh, or Tatoeba's cmn_id, zh, en_id, en); "
                    "default: the model's own translations of the English shipped with the toolchain")
    ex.add_argument("--shortlist-top-k", type=int, metavar="K",
                    help="target pieces kept per source piece (default 50)")
    ex.add_argument("--shortlist-frequent", type=int, metavar="N",
                    help="most frequent target tokens always allowed (default 4000)")
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
    td.add_argument("--minutes", type=float, default=420.0,
                    help="training time budget, summed over resumes (default 420)")
    td.add_argument("--seed", type=int, default=1)
    td.add_argument("--threads", type=int, help="torch threads (default: all cores)")
    td.add_argument("--force", action="store_true", help="overwrite OUT (and --checkpoint) if it exists")
    td.add_argument("--checkpoint", metavar="DIR",
                    help="also keep the best model here as float16 safetensors with its tokenizer files")
    td.add_argument("--heldout", metavar="FILE",
                    help="also write the held-out dictionary word sample here (e.g. assets/eval/cedict-heldout.tsv)")
    td.add_argument("--evaluate", action="store_true",
                    help="also score PyTorch and every weight scheme on the test split (eval.json), ship the "
                    "scheme chosen from those scores, and write the model card")
    td.add_argument("--quantize", choices=tuple(SCHEME_MODES), default=DEFAULT_SCHEME,
                    help=f"weights of the exported bundle (default {DEFAULT_SCHEME})")
    td.add_argument("--block-size", type=int, default=DEFAULT_BLOCK_SIZE, metavar="N",
                    help=f"weights per scale for q8/q4 (default {DEFAULT_BLOCK_SIZE})")
    td.add_argument("--shape", metavar="SPEC", help="the model's shape, e.g. w256,e6,d2,h4,ffn1024,sv6000,tv10000: "
                    "d_model, encoder and decoder layers, heads, FFN, source and target pieces; sw0.5 takes half "
                    "the software rows into each epoch (default w256,e6,d3,h4,ffn1024,sv6000,tv10000)")
    _software_arguments(td)
    td.add_argument("--eval-minutes", type=float, metavar="M",
                    help="score the dev splits every M minutes of training instead of after each epoch")
    td.add_argument("--warmup", type=int, default=500, metavar="STEPS", help="warm-up steps (default 500)")
    td.add_argument("--lr", type=float, default=1e-3, help="peak learning rate (default 0.001)")
    td.add_argument("--init-from", metavar="DIR",
                    help="start from this checkpoint (e.g. models/checkpoints/tatoeba-en-zh-small): its tokenizers "
                    "and weights; --shape must be its shape")
    td.set_defaults(func=cmd_train_demo)

    ts = sub.add_parser("train-sweep", help="short, equal training runs of several model shapes on the same data, "
                        "compared on dev BLEU (Tatoeba and software) and batch-1 speed (extra 'train')")
    ts.add_argument("work", help="the sweep's folder: data/, tokenizers/, one folder per shape, sweep.json and "
                    "sweep.md (resumable: run the same command again)")
    ts.add_argument("--shape", action="append", required=True, metavar="NAME:SPEC",
                    help="a shape to train (repeat): NAME:w256,e6,d3,h4,ffn1024,sv6000,tv10000 (h defaults to "
                    "w/64, ffn to 4w; sw0.5 takes half the software rows into each epoch)")
    ts.add_argument("--minutes", type=float, default=45.0,
                    help="training budget of each shape, CPU time over its threads (default 45)")
    ts.add_argument("--threads", type=int, default=1, help="torch threads of each shape (default 1)")
    ts.add_argument("--parallel", type=int, default=2, help="shapes trained at once (default 2)")
    ts.add_argument("--eval-minutes", type=float, default=9.0, help="dev BLEU every M minutes of training (9)")
    ts.add_argument("--warmup", type=int, default=200, help="warm-up steps of every shape (default 200)")
    ts.add_argument("--batch-tokens", type=int, default=2500, help="tokens per batch of every shape (default 2500, "
                    "half a long run's: more updates in a short run)")
    ts.add_argument("--lr", type=float, default=1e-3, help="peak learning rate of every shape (default 0.001)")
    ts.add_argument("--seed", type=int, default=1)
    _software_arguments(ts)
    ts.add_argument("--reference", metavar="BUNDLE", help="a bundle scored and timed beside the shapes "
                    "(default: the embedded model; 'none' for none)")
    ts.add_argument("--init-from", metavar="CHECKPOINT", help="start every shape from a kept checkpoint's tokenizers "
                    "and weights (a shape may drop encoder or decoder layers; width and vocabulary stay)")
    ts.add_argument("--rounds", type=int, default=3, help="timing rounds over all bundles (default 3)")
    ts.add_argument("--sentences", type=int, default=60,
                    help="prose sentences each bundle translates one at a time per round (default 60)")
    ts.set_defaults(func=cmd_train_sweep)

    hs = sub.add_parser("harvest-software", help="software and interface text for train-demo: the zh_CN and zh_TW "
                        "gettext catalogs of Debian packages as cleaned pairs, with held-out packages (extra 'train')")
    hs.add_argument("out", nargs="?", help="folder to write: software.tsv, software-test.tsv, software-dev.tsv, "
                    "software-sources.json (e.g. work/software)")
    hs.add_argument("--debs", metavar="DIR", help="where the packages' .deb files are, downloaded there with "
                    "`apt-get download` when missing (default OUT/debs)")
    hs.add_argument("--installed", action="store_true", help="read the packages installed on this machine instead "
                    "of .deb files")
    hs.add_argument("--print-packages", action="store_true", help="print the package list (for apt-get) and exit")
    hs.set_defaults(func=cmd_harvest_software)

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
    ev.add_argument("--no-shortlist", action="store_true", help="use the whole vocabulary even when the bundle "
                    "has a shortlist")
    ev.set_defaults(func=cmd_eval)

    sl = sub.add_parser("shortlist", help="give an existing bundle a vocabulary shortlist (or count its lists "
                        "again), offline, without the PyTorch weights (extra 'convert')")
    sl.add_argument("bundle", help="bundle directory (fp32, int8 or int8r); replaced once the new one is complete")
    sl.add_argument("--out", help="write the new bundle to this new directory instead, leaving BUNDLE as it is")
    sl.add_argument("--corpus", metavar="FILE", help="count the lists on these pairs (TSV: en<TAB>zh, or Tatoeba's "
                    "cmn_id, zh, en_id, en); default: the model's own translations of the English shipped with "
                    "the toolchain")
    sl.add_argument("--english", metavar="FILE", help="count the lists on the model's own translations of this "
                    "English instead (one sentence a line, or a pairs TSV's English), e.g. what it will translate")
    sl.add_argument("--top-k", type=int, metavar="K", help="target pieces kept per source piece (default 50)")
    sl.add_argument("--frequent", type=int, metavar="N", help="most frequent target tokens always allowed "
                    "(default 4000)")
    sl.set_defaults(func=cmd_shortlist)

    cu = sub.add_parser("shortlist-curve", help="how often output under a vocabulary shortlist equals the whole "
                        "vocabulary's, for each size (to choose --shortlist-top-k and --shortlist-frequent)")
    cu.add_argument("bundle", help="bundle directory (its whole vocabulary is used)")
    cu.add_argument("--test", action="append", required=True, metavar="FILE",
                    help="English to measure on: one sentence a line, or a pairs TSV (repeatable)")
    cu.add_argument("--english", metavar="FILE", help="English the lists are counted on, from the model's own "
                    "translations (default: the corpus shipped with the toolchain, as export does)")
    cu.add_argument("--top-k", default="25,50,100", help="comma-separated values (default 25,50,100)")
    cu.add_argument("--frequent", default="1000,2000,4000", help="comma-separated values (default 1000,2000,4000)")
    cu.add_argument("--threads", type=int)
    cu.add_argument("--json", metavar="FILE", help="also write the curve as JSON")
    cu.add_argument("--decode", action="store_true", help="also decode the tests with the bundle's own shortlist "
                    "and count the sentences that come out as with the whole vocabulary")
    cu.set_defaults(func=cmd_shortlist_curve)

    up = sub.add_parser("upgrade", help="bring a bundle made by an earlier exporter up to date, offline: int8r "
                        "activation codes of 127 steps, fused SkipLayerNormalization (extra 'convert': onnx)")
    up.add_argument("bundle", help="bundle directory; replaced once the upgraded bundle is complete and loads")
    up.add_argument("--out", help="write the upgraded bundle to this new directory instead, leaving BUNDLE as it is")
    up.set_defaults(func=cmd_upgrade)


def cmd_export(args: argparse.Namespace) -> int:
    """Export a Hugging Face MarianMT model into a bundle."""
    from .export import ExportOptions, export
    from .quantize import DEFAULT_SCHEME, SCHEME_MODES, QuantizeOptions

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
                                                   restrict_output=args.restrict_output, **tolerance,
                                                   **_shortlist_options(args)))
    _print_summary(out)
    return 0


def _shortlist_options(args: argparse.Namespace) -> dict:
    """The ``ExportOptions`` fields of ``--shortlist`` and its companions, checked."""
    given = {"shortlist_corpus": args.shortlist_corpus, "shortlist_top_k": args.shortlist_top_k,
             "shortlist_frequent": args.shortlist_frequent}
    given = {key: value for key, value in given.items() if value is not None}
    if given and not args.shortlist:
        flags = ", ".join("--" + key.replace("_", "-") for key in given)
        raise InputError(f"{flags} only go with --shortlist; add it")
    for key in ("shortlist_top_k", "shortlist_frequent"):
        if given.get(key, 0) < 0:
            raise InputError(f"--{key.replace('_', '-')} must be at least 0, not {given[key]}")
    return {"shortlist": args.shortlist, **given} if args.shortlist else {}


def _print_summary(out: Path) -> None:
    from ..core.bundle import load_bundle

    bundle = load_bundle(out)
    size = sum(r["size"] for r in bundle.manifest["files"].values())
    validation = bundle.manifest.get("validation", {})
    print(f"wrote {out} ({size / 1e6:.1f} MB, quantization {bundle.quantization['mode']})")
    parity = validation.get("fp32_parity")
    if parity:
        own = parity.get("reference_fp32_max_abs_logit_diff", parity.get("torch_fp32_max_abs_logit_diff", float("nan")))
        print(f"FP32 graphs: max |logit diff| {parity['max_abs_logit_diff']:.2e} against float64, where float32 "
              f"differs by {own:.2e} "
              f"(allowed {parity.get('allowed_abs_logit_diff', float('nan')):.2e}), over {parity['sentences']} sentences")
    agreement = validation.get("shortlist_agreement")
    if agreement:
        print(f"shortlist vs whole vocabulary greedy: {agreement['identical']}/{agreement['sentences']} sentences "
              f"identical, {agreement['batch_differ']} differ batched vs one at a time, "
              f"{agreement['mean_columns']:.0f} of {agreement['vocabulary']} columns a sentence")
    restricted = validation.get("restriction_agreement")
    if restricted:
        print(f"restricted vs full output layer: {restricted['identical']}/{restricted['sentences']} identical")
    shortlist = bundle.manifest.get("shortlist")
    if shortlist:
        print(f"shortlist: {shortlist['always']} ids always allowed, {shortlist['candidates']} candidates "
              f"(top {shortlist['top_k']} per source piece), from {shortlist['built_from']}")
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
    from . import testmodels

    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise InputError(f"{out} already exists; pass --force to overwrite it")
    if args.kind == "tiny":
        testmodels.build_tiny(out, seed=args.seed)
    else:
        testmodels.build_full(out, args.reference, seed=args.seed)
    print(f"wrote {args.kind} Marian model to {out}")
    return 0


def _software_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--software", default="work/software", metavar="DIR",
                        help="a harvest-software output whose software text joins the data (default work/software; "
                        "write it with `edge-translator harvest-software DIR`)")
    parser.add_argument("--no-software", action="store_true",
                        help="train without the software text (as the model shipped before it was)")
    parser.add_argument("--software-share", type=float, metavar="F",
                        help="share of the software rows taken into each epoch (default 1: all)")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                        help="arithmetic of the training steps: fp32, or bf16 autocast with float32 weights, "
                        "faster on CPUs with bfloat16 instructions (AVX512_BF16, AMX) and slower without "
                        "(default fp32)")


def _software_dir(args: argparse.Namespace) -> Path | None:
    """The harvest folder, or None with --no-software (checked before any work starts)."""
    from .traindata import software_files

    if args.no_software:
        return None
    software_files(Path(args.software))
    return Path(args.software)


def _train_options(args: argparse.Namespace, **extra):
    """TrainOptions from the flags train-demo and train-sweep share."""
    from .sweep import parse_shape
    from .train import TrainOptions

    values = dict(seed=args.seed, warmup=args.warmup, eval_minutes=args.eval_minutes, precision=args.precision,
                  **extra)
    if args.software_share is not None:
        values["software_share"] = args.software_share
    try:
        base = TrainOptions(**values)
        return base if not getattr(args, "shape_spec", None) else parse_shape(f"model:{args.shape_spec}", base)[1]
    except ValueError as exc:
        raise InputError(f"{exc}; see edge-translator {args.command} --help") from None


def cmd_train_demo(args: argparse.Namespace) -> int:
    """Train, export and evaluate the small embedded demo model."""
    from .train import evaluate_and_describe, run, save_checkpoint

    args.shape_spec = args.shape
    if args.init_from and not Path(args.init_from, "config.json").is_file():
        raise InputError(f"--init-from {args.init_from} is not a checkpoint folder (no config.json); give one kept "
                         "by `train-demo --checkpoint`")
    options = _train_options(args, time_budget_minutes=args.minutes, threads=args.threads, lr=args.lr,
                             init_from=args.init_from)
    out = run(args.work, args.out, options, force=args.force, quantize=_scheme(args),
              heldout_out=Path(args.heldout) if args.heldout else None, software=_software_dir(args))
    _print_summary(out)
    if args.checkpoint:
        print(f"kept float16 checkpoint in {save_checkpoint(Path(args.work) / 'hf', args.checkpoint, args.force)}")
    if args.evaluate:
        evaluate_and_describe(Path(args.work), out, Path(args.checkpoint) if args.checkpoint else None, print,
                              _print_summary)
    return 0


def cmd_train_sweep(args: argparse.Namespace) -> int:
    """Train several shapes for equal budgets and compare them."""
    from .sweep import SweepOptions, parse_shapes, reference_bundle, sweep

    if min(args.parallel, args.threads, args.rounds, args.sentences, args.warmup, args.batch_tokens) < 1 or \
            not (args.minutes > 0 and args.eval_minutes > 0 and args.lr > 0):
        raise InputError("--minutes, --eval-minutes, --parallel, --threads, --warmup, --batch-tokens, --lr, --rounds "
                         "and --sentences must be above 0")
    try:
        shapes, reference = parse_shapes(args.shape, _train_options(args)), reference_bundle(args.reference)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    options = SweepOptions(minutes=args.minutes, threads=args.threads, parallel=args.parallel,
                           eval_minutes=args.eval_minutes, warmup=args.warmup, batch_tokens=args.batch_tokens,
                           lr=args.lr, rounds=args.rounds,
                           speed_sentences=args.sentences, reference=reference, init_from=args.init_from)
    if args.init_from and not Path(args.init_from, "config.json").is_file():
        raise InputError(f"--init-from {args.init_from} is not a checkpoint folder (no config.json); give one kept "
                         "by `train-demo --checkpoint`, e.g. models/checkpoints/tatoeba-en-zh-small")
    summary = sweep(Path(args.work), shapes, options, software=_software_dir(args), progress=print)
    from .sweep import render

    print("\n".join(render(summary)))
    return 0


def cmd_harvest_software(args: argparse.Namespace) -> int:
    """Harvest Debian's Chinese gettext catalogs into training and held-out pairs."""
    from . import softwaredata

    if args.print_packages:
        print(" ".join(softwaredata.package_names()))
        return 0
    if not args.out:
        raise InputError("harvest-software needs OUT, the folder to write (e.g. work/software)")
    files = softwaredata.harvest(Path(args.out), debs=Path(args.debs) if args.debs else None,
                                 installed=args.installed)
    print(softwaredata.summary(files))
    return 0


def _scheme(args: argparse.Namespace):
    """QuantizeOptions from ``--quantize`` and ``--block-size`` (no calibration, all op types)."""
    from .quantize import SCHEME_MODES, QuantizeOptions

    try:
        return QuantizeOptions(mode=SCHEME_MODES[args.quantize], block_size=args.block_size)
    except ValueError as exc:
        raise InputError(f"{exc}; see edge-translator {args.command} --help") from None


def cmd_schemes(args: argparse.Namespace) -> int:
    """Export and score every weight scheme of a model on held-out pairs."""
    import json

    from . import schemes
    from .quantize import BLOCK_SIZES

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

    from . import evaluate

    if args.torch:
        result = evaluate.evaluate_torch(args.bundle, args.pairs, args.limit)
    else:
        result = evaluate.evaluate_bundle(args.bundle, args.pairs, args.limit, args.threads, args.batch_size,
                                          shortlist=not args.no_shortlist)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"BLEU {result['bleu']:.2f}  chrF {result['chrf']:.2f}  stutters {result['stutters']}  "
              f"({result['sentences']} sentences, {result['seconds']} s)  {result['signature']}")
    return 0


def cmd_shortlist(args: argparse.Namespace) -> int:
    """Add a vocabulary shortlist to an existing bundle (see toolchain.addshortlist)."""
    from .addshortlist import add_shortlist
    from .shortlist import DEFAULT_FREQUENT, DEFAULT_TOP_K, ShortlistOptions

    sizes = {"--top-k": args.top_k, "--frequent": args.frequent}
    for flag, value in sizes.items():
        if value is not None and value < 0:
            raise InputError(f"{flag} must be at least 0, not {value}")
    options = ShortlistOptions(top_k=DEFAULT_TOP_K if args.top_k is None else args.top_k,
                               frequent=DEFAULT_FREQUENT if args.frequent is None else args.frequent)
    out = add_shortlist(args.bundle, args.out, args.corpus, options, args.english)
    _print_summary(out)
    return 0


def cmd_shortlist_curve(args: argparse.Namespace) -> int:
    """Measure a shortlist's agreement with the whole vocabulary for a grid of sizes."""
    import json

    from ..core.bundle import load_bundle
    from ..core.decode import Seq2Seq
    from ..core.tokenizer import Tokenizer
    from .shortlistcurve import decode_agreement, default_build, read_english, render_curve, shortlist_curve

    def numbers(text: str, flag: str) -> list[int]:
        try:
            values = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            values = []
        if not values or min(values) < 0:
            raise InputError(f"{flag} takes comma-separated whole numbers of at least 0, not {text!r}")
        return values

    top_ks, frequents = numbers(args.top_k, "--top-k"), numbers(args.frequent, "--frequent")
    tests = {Path(t).stem: read_english(t) for t in args.test}
    build = read_english(args.english) if args.english else default_build()
    bundle = load_bundle(args.bundle)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id, bundle.unk_id,
                               bundle.pad_id)
    model = Seq2Seq.load(bundle, args.threads)
    target_id = bundle.targets[bundle.default_target].id
    if args.decode:
        if model.shortlist is None:
            raise InputError(f"{args.bundle} has no shortlist to decode with; export it with --shortlist")
        agreement = decode_agreement(model, tokenizer, target_id, tests)
        for name, figures in agreement.items():
            print(f"{name}: {figures['identical']} of {figures['sentences']} sentences identical under the bundle's "
                  f"shortlist ({100 * figures['share']:.2f}%)")
        if args.json:
            Path(args.json).with_suffix(".decode.json").write_text(json.dumps(agreement, indent=1) + "\n",
                                                                   encoding="utf-8")
    curve = shortlist_curve(model, tokenizer, target_id, build, tests, top_ks, frequents)
    curve["english"] = args.english or "the corpus shipped with the toolchain"
    print(f"lists counted on the model's own translations of {curve['build_sentences']} sentences "
          f"({curve['english']})")
    print(render_curve(curve, list(tests)))
    if args.json:
        Path(args.json).write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
    return 0


def cmd_upgrade(args: argparse.Namespace) -> int:
    """Bring a bundle's graphs up to date (see toolchain.upgrade)."""
    from .upgrade import upgrade_bundle

    report = upgrade_bundle(args.bundle, args.out)
    if not report.upgraded:
        print(f"{report.path}: already current (no 127-step int8r codes, no fused layer norms); nothing to do")
    else:
        done = []
        if report.row_quantizers or report.matmuls:
            done.append(f"64-step activation codes ({report.row_quantizers} row quantizers, {report.matmuls} "
                        "integer matmuls)")
        if report.layer_norms:
            done.append(f"{report.layer_norms} fused layer norms written as Add and LayerNormalization")
        print(f"{report.path}: upgraded: {'; '.join(done)}; the weights are unchanged")
    return 0
