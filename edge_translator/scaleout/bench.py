"""``edge-translator bench-corpus``: what the corpus job costs, and how it scales on Ray.

Two measurements, side by side in one run, on the same distinct sentences (Tatoeba's, from
the ``hsg`` package of the extra ``train``, or ``--sentences FILE``), with every cache off:

* overhead: the local ``corpus`` job (read, blocks, commit, write) against
  ``Translator.translate_batch`` on the same translator settings, alternated over rounds;
* the ceiling: as many plain processes as nodes, each pinned to its own core and running
  the local job with one thread on its share, all at once (what the machine allows);
* scaling: the job on a Ray cluster of this machine (``ray.cluster_utils``) with one worker
  node of one CPU, then two, each an actor with a one-thread translator and each node's
  processes pinned to a core of their own (the driver and the head float).

Rates are rows per second of the whole job (actors' start and model load included) and,
for the cluster, also between the first and last committed block (the steady rate).
"""

from __future__ import annotations

import json
import logging
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusBenchOptions:
    """What ``bench-corpus`` runs."""

    sentences: int = 24000
    """Distinct sentences in the corpus."""
    rounds: int = 2
    """Rounds of the overhead pair (medians are reported)."""
    threads: int = 2
    """Translator threads of the overhead pair."""
    block_rows: int = 1000
    nodes: tuple[int, ...] = (1, 2)
    """Cluster sizes of the scaling runs (one-CPU nodes); empty: no cluster runs."""
    source: Path | None = None
    """A text file of sentences, one a line (default: Tatoeba's English side)."""


def corpus_sentences(options: CorpusBenchOptions) -> list[str]:
    """The benchmark's distinct sentences, in a fixed order."""
    if options.source is not None:
        lines = options.source.read_text("utf-8").splitlines()
    else:
        from ..toolchain.traindata import read_pairs, tatoeba_path

        lines = [row[3] for row in read_pairs(tatoeba_path())]
    seen: dict[str, None] = {}
    for line in lines:
        if line.strip():
            seen.setdefault(line.strip())
    if len(seen) < options.sentences:
        raise ValueError(f"only {len(seen)} distinct sentences; ask for fewer with --sentences-count")
    return list(seen)[:options.sentences]


class _Steady:
    """Progress that notes when the first and the last block were committed."""

    def __init__(self):
        self.first = self.last = None
        self.blocks = 0

    def start(self, files, sentences):
        pass

    def advance(self, rows, plan=None):
        now = time.perf_counter()
        self.first = self.first or now
        self.last = now
        self.blocks += 1

    def finished(self, plan):
        pass

    def message(self, text):
        pass


def _write(folder: Path, sentences: list[str]) -> Path:
    path = folder / "corpus.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        for i, text in enumerate(sentences):
            handle.write(json.dumps({"n": i, "text": text}, ensure_ascii=False) + "\n")
    return path


def run(options: CorpusBenchOptions, model: str | None = None) -> dict:
    """Run the benchmark; returns its figures (see :func:`markdown`)."""
    from ..core.translator import Translator
    from .corpus import CorpusJob, CorpusOptions, LocalRunner

    sentences = corpus_sentences(options)
    job_options = CorpusOptions(block_rows=options.block_rows)
    figures: dict = {"sentences": len(sentences), "threads": options.threads, "block_rows": options.block_rows}
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as scratch:
        folder = Path(scratch)
        source = _write(folder, sentences)
        batch_rates, corpus_rates = [], []
        with Translator.load(model, threads=options.threads, cache=None) as translator:
            figures["model_id"] = translator.model_id
            for r in range(options.rounds):
                started = time.perf_counter()
                translator.translate_batch(sentences)
                batch_rates.append(len(sentences) / (time.perf_counter() - started))
                job = CorpusJob(source, folder / f"local-{r}.jsonl", translator.model_id,
                                translator.bundle.default_target, job_options)
                summary = job.run(LocalRunner(translator, job_options))
                corpus_rates.append(summary.rows / summary.seconds)
                logger.info("round %d: translate_batch %.1f rows/s, corpus %.1f rows/s", r + 1, batch_rates[-1],
                            corpus_rates[-1])
        figures["translate_batch"] = statistics.median(batch_rates)
        figures["corpus_local"] = statistics.median(corpus_rates)
        figures["overhead_rounds"] = {"translate_batch": batch_rates, "corpus": corpus_rates}
        if options.nodes:
            figures["ceiling"] = [_ceiling(n, sentences, model, folder, options.block_rows)
                                  for n in sorted(options.nodes)]
            figures["cluster"] = _scaling(options, model, source, folder, job_options, figures["model_id"])
    return figures


def _ceiling(processes: int, sentences: list[str], model: str | None, folder: Path, block_rows: int) -> dict:
    """The hardware's ceiling for ``processes`` one-CPU nodes: as many plain processes, each
    pinned to a core of its own, each running the local corpus job with one thread on its
    share of the sentences at once. No Ray: what is left is the machine's own contention."""
    import functools
    import os
    import subprocess
    import sys

    cores = sorted(os.sched_getaffinity(0))
    shares = [sentences[i::processes] for i in range(processes)]
    commands = []
    for i, share in enumerate(shares):
        part = folder / f"ceiling-{processes}-{i}"
        part.mkdir()
        _write(part, share)
        commands.append([sys.executable, "-m", "edge_translator.cli", "corpus", str(part / "corpus.jsonl"),
                         str(part / "out.jsonl"), "--no-tm", "--threads", "1", "--quiet", "--block-rows",
                         str(block_rows), *(["--model", model] if model else [])])
    started = time.perf_counter()
    running = [subprocess.Popen(command, preexec_fn=functools.partial(os.sched_setaffinity, 0,
                                                                       {cores[i % len(cores)]}))
               for i, command in enumerate(commands)]
    codes = [p.wait() for p in running]
    seconds = time.perf_counter() - started
    if any(codes):
        raise RuntimeError(f"a ceiling process failed (exit codes {codes})")
    return {"processes": processes, "rows": len(sentences), "seconds": seconds, "rate": len(sentences) / seconds}


def _scaling(options, model, source, folder, job_options, model_id) -> list[dict]:
    import ray
    from ray.cluster_utils import Cluster

    from ..core.bundle import load_bundle
    from ..core.translator import TranslateOptions, resolve_model
    from .corpus import CorpusJob
    from .rayrun import RayRunner, connect

    target = load_bundle(resolve_model(model)).default_target
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    results = []
    try:
        ray.init(address=cluster.address, log_to_driver=False, logging_level=logging.WARNING)
        connect(cluster.address)
        nodes = 0
        for size in sorted(options.nodes):
            while nodes < size:
                _add_pinned_node(cluster, nodes)
                nodes += 1
            cluster.wait_for_nodes()
            job = CorpusJob(source, folder / f"ray-{size}.jsonl", model_id, target, job_options)
            progress = _Steady()
            summary = job.run(RayRunner(cluster.address, model, TranslateOptions(), model_id), progress)
            steady = (progress.blocks - 1) * options.block_rows / (progress.last - progress.first) \
                if progress.blocks > 1 else float("nan")
            same = (folder / f"ray-{size}.jsonl").read_bytes() == (folder / "local-0.jsonl").read_bytes()
            results.append({"nodes": size, "rows": summary.rows, "seconds": summary.seconds,
                            "rate": summary.rows / summary.seconds, "steady": steady, "same_as_local": same})
            logger.info("%d nodes: %.1f rows/s (steady %.1f), same as local: %s", size, results[-1]["rate"], steady,
                        same)
    finally:
        ray.shutdown()
        cluster.shutdown()
    return results


def _add_pinned_node(cluster, index: int) -> None:
    """A one-CPU node whose processes run on one core of this machine alone (core ``index``,
    modulo the cores): the raylet starts with that affinity and its workers inherit it, so
    a one-CPU node cannot borrow a second core, as a board could not."""
    import os

    cores = sorted(os.sched_getaffinity(0))
    try:
        os.sched_setaffinity(0, {cores[index % len(cores)]})
        cluster.add_node(num_cpus=1)
    finally:
        os.sched_setaffinity(0, set(cores))


def markdown(figures: dict, cpu: str, command: str) -> str:
    """The figures as the section of docs/benchmarks.md."""
    lines = [f"`{command}` ({cpu}; {figures['sentences']:,} distinct Tatoeba sentences, blocks of "
             f"{figures['block_rows']:,} rows, every cache off, model {figures['model_id']}):", "",
             "| run | rows/s | against |", "|---|---|---|",
             f"| `Translator.translate_batch`, {figures['threads']} threads | {figures['translate_batch']:.1f} | |",
             f"| `corpus`, local, {figures['threads']} threads | {figures['corpus_local']:.1f} | "
             f"{figures['corpus_local'] / figures['translate_batch']:.1%} of translate_batch |"]
    cluster = figures.get("cluster") or []
    base = next((c for c in cluster if c["nodes"] == 1), None)
    for c in cluster:
        ratio = f"{c['rate'] / base['rate']:.2f}× one node (steady {c['steady'] / base['steady']:.2f}×)" \
            if base and c is not base else ""
        lines.append(f"| `corpus --ray`, {c['nodes']} one-CPU node{'s' if c['nodes'] > 1 else ''} | "
                     f"{c['rate']:.1f} (steady {c['steady']:.1f}) | {ratio}"
                     f"{'' if c['same_as_local'] else ' OUTPUT DIFFERS FROM THE LOCAL RUN'} |")
    ceiling = figures.get("ceiling") or []
    alone = next((c for c in ceiling if c["processes"] == 1), None)
    for c in ceiling:
        ratio = f"{c['rate'] / alone['rate']:.2f}× one process" if alone and c is not alone else ""
        lines.append(f"| ceiling: {c['processes']} plain process{'es' if c['processes'] > 1 else ''} of one thread, "
                     f"each on its own core, no Ray | {c['rate']:.1f} | {ratio} |")
    lines += ["", f"Medians of {len(figures['overhead_rounds']['corpus'])} alternated rounds for the local pair; "
              "one run per cluster size. A cluster rate counts the whole job (actors' start and model load); "
              "steady counts from the first committed block to the last."]

    return "\n".join(lines) + "\n"
