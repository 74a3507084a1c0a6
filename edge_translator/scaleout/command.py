"""The ``corpus`` subcommand, and ``--ray`` for ``docs``: argument parsing and the summary.

Thin by design: the work is :class:`~.corpus.CorpusJob` with a :class:`~.corpus.LocalRunner`
or a :class:`~.rayrun.RayRunner`, and :mod:`.raydocs` for documents; Ray is imported only
when ``--ray`` is given.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import tempfile
from pathlib import Path

from ..core.errors import require


def _progress(args: argparse.Namespace):
    from ..documents.command import BarProgress, MessagesOnly

    if args.json or args.quiet:
        return MessagesOnly(failures_only=True)
    return BarProgress()


def _quiet_logs(args: argparse.Namespace) -> None:
    if not args.verbose:  # a sentence cut at the length limit is logged per sentence: noise over a bar
        import logging

        logging.getLogger("edge_translator.core.translator").setLevel(logging.ERROR)


def cmd_corpus(args: argparse.Namespace) -> int:
    """Translate a column of a corpus file or folder; print a summary (or JSON)."""
    from ..core.cache import ChainedCache, LRUCache
    from ..core.memory import open_for_translating
    from ..core.translator import TranslateOptions, Translator
    from ..documents.command import report
    from .corpus import CorpusJob, CorpusOptions, LocalRunner
    from .corpusio import Columns

    translate = TranslateOptions(target=args.target, beam_size=args.beam, shortlist=not args.no_shortlist)
    options = CorpusOptions(Columns(args.column, args.output_column), translate, args.block_rows, args.force)
    model_id, target = _model(args)
    if args.ray is not None:
        from .rayrun import connect

        connect(args.ray or None)  # before any work: one line without the extra or the cluster
    memory = None if args.no_tm else open_for_translating(args.tm)  # a full disk: a warning, no memory
    _quiet_logs(args)
    progress = _progress(args)
    try:
        if args.ray is None:
            cache = ChainedCache(LRUCache(), memory) if memory is not None else LRUCache()
            job = CorpusJob(Path(args.input), Path(args.output), model_id, target, options)
            with Translator.load(args.model, threads=args.threads, cache=cache, memory="steady",
                                 workers=args.workers) as translator:
                summary = job.run(LocalRunner(translator, options), progress)
        else:
            from .rayrun import RayRunner
            job = CorpusJob(Path(args.input), Path(args.output), model_id, target, options, memory=memory)
            snapshot = _snapshot(memory, model_id, target) if memory is not None else None
            runner = RayRunner(args.ray or None, args.model, translate, model_id, args.ray_cpus, args.ray_actors,
                               snapshot)
            summary = job.run(runner, progress)
    except KeyboardInterrupt:
        progress.close()
        print("edge-translator: the finished blocks are kept; run the same command again to resume", file=sys.stderr)
        raise
    finally:
        progress.close()
        if memory is not None:
            memory.close()
    return report(args, summary, _summary_text)


def _model(args: argparse.Namespace) -> tuple[str, str]:
    """The checksum of ``--model`` and the target in effect, read from its manifest alone."""
    from ..core.bundle import load_bundle
    from ..core.translator import model_identity, resolve_model

    bundle = load_bundle(resolve_model(args.model))
    target = args.target or bundle.default_target
    if target not in bundle.targets:
        raise ValueError(f"--target {target} is not offered by this model; choose one of "
                         f"{', '.join(sorted(bundle.targets))}")
    return model_identity(bundle), target


def _snapshot(memory, model_id: str, target: str) -> bytes | None:
    with tempfile.TemporaryDirectory(prefix="edge-corpus-") as folder:
        path = Path(folder) / "snapshot.sqlite"
        if memory.copy_to(path, model_id, target) == 0:
            return None
        return path.read_bytes()


def cmd_docs_ray(args: argparse.Namespace, local) -> int:
    """``docs``: on a Ray cluster with ``--ray``, else as it always runs (``local``)."""
    if args.ray is None:
        return local(args)
    import hashlib

    from ..core.memory import open_for_translating
    from ..documents.command import glossary_file, job_options, report, summary_text
    from .raydocs import RayDocuments
    from .rayrun import connect

    connect(args.ray or None)  # before any work: one line without the extra or the cluster
    options = job_options(args)
    glossary = glossary_file(args)
    digest = hashlib.sha256(glossary.read_bytes()).hexdigest()[:16] if glossary is not None else ""
    model_id, target = _model(args)
    memory = None if args.no_tm else open_for_translating(args.tm)
    snapshot = _snapshot(memory, model_id, target) if memory is not None else None
    _quiet_logs(args)
    progress = _progress(args)
    job = RayDocuments([Path(p) for p in args.inputs], options, args.model, model_id, target, glossary, digest,
                       args.ray or None, args.ray_cpus, args.ray_actors, snapshot, memory=memory)
    try:
        summary = job.run(progress)
    finally:
        progress.close()
        if memory is not None:
            memory.close()
    return report(args, summary, summary_text)


def _summary_text(summary) -> str:
    rate = summary.rows / summary.seconds if summary.seconds > 0 else 0.0
    lines = [f"{len(summary.files)} files: {summary.count('done')} done, {summary.count('up to date')} up to date, "
             f"{summary.count('skipped')} skipped, {summary.count('failed')} failed",
             f"{summary.rows} rows in {summary.seconds:.1f} s ({rate:.1f}/s); {summary.decoded} sentences decoded, "
             f"{summary.reused} reused from the translation memory"]
    for plan in summary.files:
        if plan.status in ("failed", "skipped"):
            lines.append(f"  {plan.status}: {plan.input}: {plan.message}")
    return "\n".join(lines)


def _add_ray(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ray", nargs="?", const="", metavar="ADDRESS",
                        help="run on a Ray cluster: HOST:6379, or 'auto' for the one `ray start` began here; "
                        "without ADDRESS $RAY_ADDRESS, else a cluster of this machine alone (the extra 'ray'; "
                        "see docs/scale-out.md)")
    parser.add_argument("--ray-cpus", type=int, default=1, metavar="N",
                        help="CPUs of each Ray actor, and its translator's threads (default 1)")
    parser.add_argument("--ray-actors", type=int, metavar="N",
                        help="Ray actors in the pool (default: the cluster's CPUs over --ray-cpus)")


def cmd_bench_corpus(args: argparse.Namespace) -> int:
    """Measure the corpus job's overhead and its scaling on a cluster of this machine."""
    import platform

    from .bench import CorpusBenchOptions, markdown, run

    require("ray", "ray")
    options = CorpusBenchOptions(args.sentences_count, args.rounds, args.threads, args.block_rows,
                                 tuple(int(n) for n in args.nodes.split(",") if n.strip()) if args.nodes else (),
                                 Path(args.sentences) if args.sentences else None)
    figures = run(options, args.model)
    import os

    from ..core.cpu import cpu_info

    cpu = f"{cpu_info().name or platform.machine()}, {len(os.sched_getaffinity(0))} vCPUs"
    figures["cpu"] = cpu
    command = "edge-translator " + " ".join(["bench-corpus", *sys.argv[2:]]) if sys.argv[1:2] == ["bench-corpus"] \
        else "edge-translator bench-corpus"
    print(markdown(figures, cpu, command))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1), "utf-8")
    return 0


def add_parsers(sub) -> None:
    """Add ``corpus`` to the command's subparsers, and ``--ray`` to ``docs`` (this layer sits
    above the document layer, which knows nothing of clusters)."""
    corpus = sub.add_parser(
        "corpus", help="translate a column of a CSV, TSV, JSON Lines or Parquet corpus (resumable; --ray for a "
        "cluster)", description="Translate one column of a corpus file, or of every corpus file in a folder. "
        "The output keeps the input's rows, order and format, and adds the translation, its score and the "
        "model's checksum. Finished blocks are committed, so a killed job resumes when run again.")
    corpus.add_argument("input", metavar="IN", help="a .csv, .tsv, .jsonl or .parquet file, or a folder of them")
    corpus.add_argument("output", metavar="OUT", help="the output file (same format), or a folder")
    corpus.add_argument("--column", default="text", help="the column to translate: header name or key (CSV/TSV: "
                        "or 1-based number; default 'text')")
    corpus.add_argument("--as", dest="output_column", default="translation", metavar="NAME",
                        help="the added columns: NAME, NAME_score, NAME_model (default 'translation')")
    corpus.add_argument("--model", help="bundle directory or installed model name (default: $EDGE_TRANSLATOR_MODEL, "
                        "then `models default`, then the embedded model)")
    corpus.add_argument("--threads", type=int, help="ONNX Runtime threads of each worker (local runs)")
    corpus.add_argument("--workers", type=int, default=1, help="decoding workers (local runs; see docs/engine.md)")
    corpus.add_argument("--target", help="target variant, e.g. zh-Hans or zh-Hant (default: the model's)")
    corpus.add_argument("--beam", type=int, default=1, help="beam width (default 1, greedy)")
    corpus.add_argument("--no-shortlist", action="store_true",
                        help="use the whole vocabulary even when the model has a shortlist")
    corpus.add_argument("--block-rows", type=int, default=1000, metavar="N",
                        help="rows in a block, the unit sent to a worker and committed (default 1000)")
    memory = corpus.add_mutually_exclusive_group()
    memory.add_argument("--tm", metavar="FILE", help="translation memory file (default: in the user's data directory)")
    memory.add_argument("--no-tm", action="store_true", help="use no translation memory")
    corpus.add_argument("--force", action="store_true", help="overwrite outputs that exist")
    corpus.add_argument("--quiet", action="store_true", help="no progress bar and no summary; failures only")
    corpus.add_argument("--json", action="store_true", help="print the summary as JSON on standard output")
    _add_ray(corpus)
    corpus.set_defaults(func=cmd_corpus)
    bench = sub.add_parser("bench-corpus", help="the corpus job against translate_batch, and its scaling on a "
                           "Ray cluster of this machine (docs/benchmarks.md#corpus)")
    bench.add_argument("--sentences-count", type=int, default=24000, metavar="N", help="distinct sentences (default 24000)")
    bench.add_argument("--sentences", metavar="FILE", help="sentences, one a line (default: Tatoeba's, extra 'train')")
    bench.add_argument("--rounds", type=int, default=2, help="rounds of the local pair (default 2)")
    bench.add_argument("--threads", type=int, default=2, help="translator threads of the local pair (default 2)")
    bench.add_argument("--block-rows", type=int, default=1000, metavar="N")
    bench.add_argument("--nodes", default="1,2", help="cluster sizes, one-CPU nodes (default 1,2; '' for none)")
    bench.add_argument("--model", help="bundle directory or installed model name (default: the embedded model)")
    bench.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    bench.set_defaults(func=cmd_bench_corpus)
    docs = sub.choices.get("docs")
    if docs is not None and "func" in docs._defaults:  # the document layer is in this build
        _add_ray(docs)
        docs.set_defaults(func=functools.partial(cmd_docs_ray, local=docs._defaults["func"]))
