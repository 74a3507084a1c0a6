"""Load benchmark of the engine: concurrent callers, priority under a bulk job, memory over time.

Every figure goes through the public :class:`~edge_translator.core.translator.Translator`
(cache off, one thread count throughout) on one bundle, and every function returns a
plain dict. Random weights rarely emit ``</s>`` and soon loop on one token, so decoding
runs with the repetition guard off to the translator's own length rule (2 × source
tokens + 10): output lengths then vary with the sentence, as a real model's do.
"""

from __future__ import annotations

import contextlib
import json
import logging
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..core.engine import EngineOptions, Priority
from ..core.errors import ExportError
from ..core.translator import SentenceResult, TranslateOptions, Translator, join_results
from .machine import cpu_snapshot, machine_info, others_share
from .report import percent, ratio

logger = logging.getLogger(__name__)

#: Words put before a sentence to make a distinct copy of it (a submission decodes a
#: repeated sentence once).
CONNECTORS = ("Then", "Later", "Still", "Meanwhile", "Indeed", "Again", "Besides", "Moreover", "Naturally",
              "Clearly", "Anyway", "Afterwards")


@dataclass(frozen=True)
class LoadOptions:
    """What the load benchmark runs."""

    threads: int = 2
    """ONNX Runtime intra-op threads of every translator."""
    callers: tuple[int, ...] = (1, 4, 16)
    """Concurrent caller threads, each translating its own share of the paragraphs."""
    paragraphs: int = 32
    """Distinct paragraphs translated in each throughput run (shared out among the callers)."""
    sentences_per_paragraph: int = 3
    """Sentences in each paragraph."""
    max_words: int = 20
    """Longest sentence used, in words (the random model decodes 2 × source + 10 tokens)."""
    rounds: int = 3
    """Alternating rounds of the throughput and scheduler runs; medians are reported."""
    first_text_sentences: int = 50
    """Sentences in the text whose first result is timed."""
    first_runs: int = 3
    """Timed submissions of that text."""
    bulk_sentences: int = 2000
    """Sentences of the bulk job running while interactive latency is measured."""
    interactive_runs: int = 20
    """One-sentence interactive calls timed in each phase (unloaded before, loaded, unloaded after)."""
    probe_gap_s: float = 0.2
    """Pause between those calls."""
    scheduler_sentences: int = 256
    """Sentences of the bulk job timed with one and with two interleaved bulk batches."""
    scheduler_callers: tuple[int, ...] = (4, 16)
    """Caller counts (from ``callers``) also timed with one interactive batch at a time."""
    soak_seconds: float = 600.0
    """Length of the memory soak; 0 skips it."""
    soak_callers: int = 4
    """Interactive callers during the soak (beside one bulk job)."""
    soak_think_s: float = 1.0
    """Pause of each soak caller between calls, as a person reading; strict priority would
    otherwise starve the bulk job."""
    soak_sample_s: float = 5.0
    """Interval between RSS samples."""
    soak_warmup_s: float = 180.0
    """Samples before this are left out of the RSS slope."""
    soak_memory: str = "steady"
    """The soak translator's ``memory`` mode: the daemon's, the desktop app's and document
    jobs' (``Translator.load``'s default, ``"arena"``, is for short runs)."""

    def __post_init__(self) -> None:
        if self.threads < 1 or not self.callers or min(self.callers) < 1:
            raise ValueError(f"threads and callers must be at least 1, not {self.threads} and {self.callers}")
        if not set(self.scheduler_callers) <= set(self.callers):
            raise ValueError(f"scheduler_callers {self.scheduler_callers} must be among callers {self.callers}")
        if self.paragraphs < max(self.callers):
            raise ValueError(f"paragraphs ({self.paragraphs}) must be at least the most callers "
                             f"({max(self.callers)}) so that every caller has work")
        for name in ("sentences_per_paragraph", "rounds", "first_text_sentences", "first_runs", "bulk_sentences",
                     "interactive_runs", "scheduler_sentences", "soak_callers", "max_words"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.soak_seconds < 0 or self.soak_sample_s <= 0:
            raise ValueError(f"soak_seconds must not be negative and soak_sample_s must be positive, not "
                             f"{self.soak_seconds} and {self.soak_sample_s}")


def smoke_options(threads: int = 2, soak: bool = True) -> LoadOptions:
    """A run of a few seconds on the tiny fixtures: it checks the harness, its figures mean nothing."""
    return LoadOptions(threads=threads, paragraphs=16, sentences_per_paragraph=2, rounds=1, first_runs=1,
                       bulk_sentences=200, interactive_runs=3, probe_gap_s=0.01, scheduler_sentences=64,
                       soak_seconds=2.0 if soak else 0.0, soak_callers=2, soak_think_s=0.01, soak_sample_s=0.25,
                       soak_warmup_s=0.5)


# -- helpers ------------------------------------------------------------------------------------
def rss_mb() -> float | None:
    """Resident memory of this process (``VmRSS``) in MB; ``None`` where ``/proc`` is missing."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def distinct_sentences(sentences: list[str], count: int) -> list[str]:
    """``count`` different sentences: the list, then copies led by connecting words.

    Raises:
        ValueError: If ``sentences`` is empty.
    """
    if not sentences:
        raise ValueError("distinct_sentences needs at least one sentence")
    out = []
    for k in range(count):
        cycle, base = divmod(k, len(sentences))
        words = []
        while cycle:
            cycle, digit = divmod(cycle, len(CONNECTORS))
            words.append(CONNECTORS[digit])
        out.append(", ".join(words + [sentences[base]]))
    return out


def _tokens(results: list[SentenceResult]) -> int:
    """Decoder tokens produced: the output ids, and ``</s>`` where it ended a sentence."""
    return sum(len(r.ids) + (r.stop == "eos") for r in results)


def _ms_percentiles(seconds: list[float]) -> dict:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p95_ms": round(float(np.percentile(ms, 95)), 1),
            "calls": len(ms)}


def _run_threads(targets: list[Callable[[], None]]) -> None:
    """Run each target on its own thread, wait for all, and re-raise the first failure."""
    with ThreadPoolExecutor(len(targets)) as pool:
        futures = [pool.submit(target) for target in targets]
    for future in futures:
        future.result()


def _warm_up(translator: Translator, sentences: list[str], options: TranslateOptions) -> None:
    """One paragraph, and a short full batch so that batch-32 shapes are allocated."""
    translator.translate(" ".join(sentences[:3]), options)
    short = TranslateOptions(max_length=8, repetition_guard=False)
    translator.translate_batch(sentences[:translator.engine.options.max_batch_size], short)


# -- measurements ---------------------------------------------------------------------------
def drive(translator: Translator, paragraphs: list[str], callers: int, options: TranslateOptions) -> dict:
    """Translate every paragraph with ``callers`` threads (0: one call after another, in this thread).

    Each caller takes every ``callers``-th paragraph and calls ``translate`` on each in turn
    (through ``translate_iter`` + ``join_results``, which is what ``translate`` does, so that
    the tokens can be counted).

    Returns:
        ``wall_s``, ``sentences``, ``tokens`` and the per-call ``latencies_s``.
    """
    records: list[tuple[float, int, int]] = []
    lock = threading.Lock()

    def translate_all(share: list[str]) -> None:
        for paragraph in share:
            start = time.perf_counter()
            results = list(translator.translate_iter(paragraph, options))
            join_results(results)
            elapsed = time.perf_counter() - start
            with lock:
                records.append((elapsed, len(results), _tokens(results)))

    start = time.perf_counter()
    if callers == 0:
        translate_all(paragraphs)
    else:
        _run_threads([lambda k=k: translate_all(paragraphs[k::callers]) for k in range(callers)])
    wall = time.perf_counter() - start
    return {"wall_s": wall, "sentences": sum(r[1] for r in records), "tokens": sum(r[2] for r in records),
            "latencies_s": [r[0] for r in records]}


def bulk_run(translator: Translator, text: str, options: TranslateOptions) -> dict:
    """Translate ``text`` as one bulk submission; its wall time, sentences and tokens."""
    start = time.perf_counter()
    results = list(translator.submit(text, options, priority=Priority.BULK, order="completion"))
    wall = time.perf_counter() - start
    return {"wall_s": wall, "sentences": len(results), "tokens": _tokens(results)}


def _alternate(runs: dict[str, Callable[[], dict]], rounds: int) -> dict[str, list[dict]]:
    """Run each measurement once per round, in turn, so that drift hits all of them alike."""
    samples: dict[str, list[dict]] = {name: [] for name in runs}
    for round_ in range(rounds):
        for name, run in runs.items():
            before = cpu_snapshot()
            last = run()
            last["others"] = others_share(before, cpu_snapshot())
            samples[name].append(last)
            logger.info("round %d, %s: %.1f s, %.1f tokens/s, other processes %s of the CPUs", round_ + 1, name,
                        last["wall_s"], last["tokens"] / last["wall_s"], percent(last["others"]))
    return samples


def _summary(samples: list[dict]) -> dict:
    """Median and best throughput over rounds; latency percentiles over every call of every round."""
    others = [s["others"] for s in samples if s.get("others") is not None]
    return {"tok_s": round(statistics.median(s["tokens"] / s["wall_s"] for s in samples), 1),
            "best_tok_s": round(max(s["tokens"] / s["wall_s"] for s in samples), 1),
            "others_cpu": round(statistics.median(others), 2) if others else None,
            "sent_s": round(statistics.median(s["sentences"] / s["wall_s"] for s in samples), 2),
            "wall_s": round(statistics.median(s["wall_s"] for s in samples), 2),
            "sentences": samples[0]["sentences"], "tokens": samples[0]["tokens"],
            **(_ms_percentiles([t for s in samples for t in s["latencies_s"]]) if "latencies_s" in samples[0]
               else {})}


def first_sentence(translator: Translator, sentences: list[str], opts: LoadOptions,
                   options: TranslateOptions) -> dict:
    """Time from ``submit`` of a long text to its first result (input order) and to its last.

    ``first_completed_s`` is when the earliest sentence finished decoding, counted from the
    engine's submission (segmentation, a few milliseconds, not included): what a caller
    iterating in completion order would see.
    """
    text = " ".join(sentences[: opts.first_text_sentences])
    firsts, earliest, totals, count = [], [], [], 0
    for _ in range(opts.first_runs):
        start = time.perf_counter()
        submission = translator.submit(text, options)
        results = []
        for result in submission:
            if not results:
                firsts.append(time.perf_counter() - start)
            results.append(result)
        totals.append(time.perf_counter() - start)
        earliest.append(min(r.timing.queued + r.timing.decoding for r in results if r.timing))
        count = len(results)
    return {"sentences": count, "runs": opts.first_runs, "first_s": round(statistics.median(firsts), 3),
            "first_completed_s": round(statistics.median(earliest), 3), "all_s": round(statistics.median(totals), 2)}


def _probe(translator: Translator, probes: list[str], gap: float, options: TranslateOptions) -> list[float]:
    times = []
    for sentence in probes:
        start = time.perf_counter()
        translator.translate(sentence, options)
        times.append(time.perf_counter() - start)
        time.sleep(gap)
    return times


def interactive_under_bulk(translator: Translator, sentences: list[str], bulk_text: str, opts: LoadOptions,
                           options: TranslateOptions) -> dict:
    """Latency of one-sentence interactive calls, unloaded and while a bulk job runs.

    Unloaded calls are timed before and after the loaded ones and pooled. The bulk job is
    cancelled once the loaded calls are done.
    """
    middling = [s for s in sentences if 10 <= len(s.split()) <= 20] or sentences
    probes = (middling * opts.interactive_runs)[: opts.interactive_runs]
    before = _probe(translator, probes, opts.probe_gap_s, options)
    submission = translator.submit(bulk_text, options, priority=Priority.BULK, order="completion")
    done = [0]
    running = threading.Event()

    def consume() -> None:
        try:
            for _ in submission:
                done[0] += 1
                running.set()
        finally:
            running.set()

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    running.wait()
    at_start, start = done[0], time.perf_counter()
    loaded = _probe(translator, probes, opts.probe_gap_s, options)
    elapsed, during = time.perf_counter() - start, done[0] - at_start
    still_running = done[0] < len(submission)
    submission.cancel()
    consumer.join()
    after = _probe(translator, probes, opts.probe_gap_s, options)
    unloaded = _ms_percentiles(before + after)
    loaded_ms = _ms_percentiles(loaded)
    return {"unloaded": unloaded, "loaded": loaded_ms,
            "ratio_p50": ratio(loaded_ms["p50_ms"], unloaded["p50_ms"]),
            "ratio_p95": ratio(loaded_ms["p95_ms"], unloaded["p95_ms"]),
            "bulk_sentences": len(submission), "bulk_done_while_probing": during,
            "bulk_sent_s_while_probing": round(during / elapsed, 2), "bulk_running_throughout": still_running,
            "probe_words": round(statistics.mean(len(p.split()) for p in probes), 1)}


def soak(translator: Translator, paragraphs: list[str], bulk_text: str, opts: LoadOptions,
         options: TranslateOptions) -> dict:
    """Keep callers and a bulk job busy for ``opts.soak_seconds`` and sample RSS.

    Returns:
        RSS at start, peak and end (MB), the slope after warm-up (MB per minute, least
        squares), the samples, and the work done; ``{}`` when the soak is off.
    """
    if opts.soak_seconds <= 0:
        return {}
    stop = threading.Event()
    work = {"interactive": 0, "bulk": 0, "tokens": 0}
    lock = threading.Lock()

    def caller(k: int) -> None:
        index = k
        while not stop.is_set():
            results = list(translator.translate_iter(paragraphs[index % len(paragraphs)], options))
            with lock:
                work["interactive"] += len(results)
                work["tokens"] += _tokens(results)
            index += opts.soak_callers
            stop.wait(opts.soak_think_s)

    def bulk() -> None:
        while not stop.is_set():
            submission = translator.submit(bulk_text, options, priority=Priority.BULK, order="completion")
            for result in submission:
                with lock:
                    work["bulk"] += 1
                    work["tokens"] += _tokens([result])
                if stop.is_set():
                    submission.cancel()

    def sample() -> None:
        begin = time.perf_counter()
        while True:
            now = time.perf_counter() - begin
            samples.append((round(now, 1), rss_mb()))
            if now >= opts.soak_seconds:
                break
            time.sleep(min(opts.soak_sample_s, opts.soak_seconds - now))
        stop.set()

    samples: list[tuple[float, float | None]] = []
    logger.info("soak: %d callers and a bulk job for %.0f s", opts.soak_callers, opts.soak_seconds)
    _run_threads([sample, bulk] + [lambda k=k: caller(k) for k in range(opts.soak_callers)])
    values = [mb for _, mb in samples if mb is not None]
    late = [(t, mb) for t, mb in samples if mb is not None and t >= opts.soak_warmup_s]
    slope = None
    if len(late) >= 2:
        slope = round(float(np.polyfit([t / 60 for t, _ in late], [mb for _, mb in late], 1)[0]), 2)
    return {"seconds": samples[-1][0], "callers": opts.soak_callers, "think_s": opts.soak_think_s,
            "start_mb": round(values[0], 1) if values else None, "peak_mb": round(max(values), 1) if values else None,
            "end_mb": round(values[-1], 1) if values else None,
            "after_warmup_mb": round(late[0][1], 1) if late else None,
            "slope_mb_per_min": slope, "warmup_s": opts.soak_warmup_s, "memory": opts.soak_memory,
            "peak_per_min": _peaks_per_minute(samples),
            "interactive_sentences": work["interactive"], "bulk_sentences": work["bulk"], "tokens": work["tokens"],
            "samples": [[t, round(mb, 1) if mb is not None else None] for t, mb in samples]}


def _peaks_per_minute(samples: list[tuple[float, float | None]]) -> list[float]:
    """The highest RSS sampled in each whole minute of the soak (a last part minute included)."""
    minutes: dict[int, float] = {}
    for t, mb in samples:
        if mb is not None:
            minutes[int(t // 60)] = max(mb, minutes.get(int(t // 60), mb))
    return [round(minutes[m], 1) for m in sorted(minutes)]


def soak_in_child(bundle_dir: Path, paragraphs: list[str], bulk_text: str, opts: LoadOptions) -> dict:
    """:func:`soak` in a new process, so that its RSS holds one translator and nothing else.

    Raises:
        ExportError: If the child fails.
    """
    if opts.soak_seconds <= 0:
        return {}
    request = {"bundle": str(bundle_dir), "paragraphs": paragraphs, "bulk_text": bulk_text, "options": asdict(opts)}
    code = "from edge_translator.bench.loadbench import _soak_child; _soak_child()"
    child = subprocess.run([sys.executable, "-c", code], input=json.dumps(request), capture_output=True, text=True)
    if child.returncode != 0:
        raise ExportError(f"the soak process failed: {child.stderr.strip().splitlines()[-1:]}")
    return json.loads(child.stdout.strip().splitlines()[-1])


def _soak_child() -> None:
    """The child of :func:`soak_in_child`: the request on stdin, the result as JSON on stdout."""
    request = json.loads(sys.stdin.read())
    opts = LoadOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in request["options"].items()})
    logging.getLogger("edge_translator.core.translator").setLevel(logging.ERROR)
    options = TranslateOptions(repetition_guard=False)
    with Translator.load(request["bundle"], opts.threads, cache=None, memory=opts.soak_memory) as translator:
        loaded = rss_mb()
        _warm_up(translator, request["paragraphs"], options)
        result = soak(translator, request["paragraphs"], request["bulk_text"], opts, options)
    print(json.dumps({"loaded_mb": round(loaded, 1) if loaded else None, **result}))


def interleaved_bulk(one: Translator, two: Translator, joining: Translator, text: str, opts: LoadOptions,
                     options: TranslateOptions) -> dict:
    """One bulk job with one and with two bulk batches at once, with rows joining running
    batches (``joining``: :attr:`.EngineOptions.continuous`), and its no-tail bound.

    The bound is the same job with every sentence cut to the mean length of the others,
    so that no batch has a tail: what continuous batching could reach at best.
    """
    natural: list[dict] = []

    def timed(translator: Translator) -> dict:
        natural.append(bulk_run(translator, text, options))
        return natural[-1]

    def no_tail() -> dict:
        mean = round(statistics.mean(s["tokens"] / s["sentences"] for s in natural))
        return bulk_run(two, text, TranslateOptions(max_length=max(1, mean), repetition_guard=False))

    samples = _alternate({"one": lambda: timed(one), "two": lambda: timed(two),
                          "continuous": lambda: bulk_run(joining, text, options), "bound": no_tail}, opts.rounds)
    bulk = {name: _summary(s) for name, s in samples.items()}
    return {"sentences": bulk["two"]["sentences"], "max_bulk_batches_1": bulk["one"], "max_bulk_batches_2": bulk["two"],
            "continuous": bulk["continuous"], "no_tail_bound": bulk["bound"],
            "ratio_continuous_vs_2": ratio(bulk["continuous"]["tok_s"], bulk["two"]["tok_s"]),
            "uniform_length": round(statistics.mean(s["tokens"] / s["sentences"] for s in natural)),
            "ratio_2_vs_1": ratio(bulk["two"]["tok_s"], bulk["one"]["tok_s"]),
            "ratio_bound_vs_2": ratio(bulk["bound"]["tok_s"], bulk["two"]["tok_s"])}


def run_load(bundle_dir: Path, sentences: list[str], opts: LoadOptions, command: str = "") -> dict:
    """Every load measurement on one bundle.

    Args:
        bundle_dir: The bundle (the full-shape INT8 one for real figures).
        sentences: English sentences; those longer than ``opts.max_words`` are left out and
            the rest made distinct where more are needed.
        opts: What to run.
        command: The command line, recorded with the figures.

    Returns:
        A dict of plain values: ``machine``, ``options``, ``concurrency``, ``first_sentence``,
        ``interactive``, ``scheduler`` and ``soak``.

    Raises:
        ValueError: If no sentence is short enough.
    """
    pool = list(dict.fromkeys(s for s in sentences if len(s.split()) <= opts.max_words))
    if not pool:
        raise ValueError(f"no sentence has at most {opts.max_words} words")
    options = TranslateOptions(repetition_guard=False)
    n = opts.sentences_per_paragraph
    paragraphs = [" ".join(p) for p in _chunks(distinct_sentences(pool, opts.paragraphs * n), n)]
    bulk_text = " ".join(distinct_sentences(pool, opts.bulk_sentences))
    long_text = distinct_sentences(pool, opts.first_text_sentences)
    engine = EngineOptions()  # the defaults, as users get them
    result = {"machine": machine_info(), "command": command, "options": asdict(opts), "engine": asdict(engine),
              "bundle": str(bundle_dir),
              "decoding": "greedy, repetition guard off, length 2 × source tokens + 10 (random weights)"}
    with contextlib.ExitStack() as stack:
        quiet = logging.getLogger("edge_translator.core.translator")  # every sentence stops at its length limit
        stack.callback(quiet.setLevel, quiet.level)
        quiet.setLevel(logging.ERROR)

        def load(engine: EngineOptions) -> Translator:
            translator = stack.enter_context(Translator.load(bundle_dir, opts.threads, cache=None, engine=engine))
            _warm_up(translator, pool, options)
            return translator

        main, four = load(engine), load(replace(engine, max_interactive_batches=4))
        joining = load(replace(engine, continuous=True))  # rows join running batches
        runs = {"sequential": lambda: drive(main, paragraphs, 0, options)}
        runs.update({str(c): (lambda c=c: drive(main, paragraphs, c, options)) for c in opts.callers})
        runs.update({f"{c}, four batches": (lambda c=c: drive(four, paragraphs, c, options))
                     for c in opts.scheduler_callers})
        runs.update({f"{c}, continuous": (lambda c=c: drive(joining, paragraphs, c, options))
                     for c in opts.scheduler_callers})
        samples = _alternate(runs, opts.rounds)
        first_four = first_sentence(four, long_text, opts, options)
        four.close()
        sequential = _summary(samples.pop("sequential"))
        four_batches = {c: _summary(samples.pop(f"{c}, four batches")) for c in opts.scheduler_callers}
        continuous = {c: _summary(samples.pop(f"{c}, continuous")) for c in opts.scheduler_callers}
        callers = {name: _summary(s) for name, s in samples.items()}
        for summary in callers.values():
            summary["ratio"] = ratio(summary["tok_s"], sequential["tok_s"])
            summary["best_ratio"] = ratio(summary["best_tok_s"], sequential["best_tok_s"])
        result["concurrency"] = {"paragraphs": len(paragraphs), "sentences_per_paragraph": n,
                                 "sequential": sequential, "callers": callers}
        result["first_sentence"] = first_sentence(main, long_text, opts, options)
        logger.info("first sentence: %s", result["first_sentence"])
        result["interactive"] = interactive_under_bulk(main, pool, bulk_text, opts, options)
        logger.info("interactive under bulk: %s", result["interactive"])
        one_bulk = load(replace(engine, max_bulk_batches=1))
        scheduler_text = " ".join(distinct_sentences(pool, opts.scheduler_sentences))
        interactive = {str(c): {"max_interactive_batches_1": callers[str(c)], "max_interactive_batches_4": four_batches[c],
                                "ratio_4_vs_1": ratio(four_batches[c]["tok_s"], callers[str(c)]["tok_s"]),
                                "continuous": continuous[c],
                                "ratio_continuous": ratio(continuous[c]["tok_s"], callers[str(c)]["tok_s"])}
                       for c in opts.scheduler_callers}
        result["scheduler"] = {
            "continuous_default": engine.continuous,
            "bulk": interleaved_bulk(one_bulk, main, joining, scheduler_text, opts, options),
            "interactive": {"callers": interactive, "first_sentence_1": result["first_sentence"],
                            "first_sentence_4": first_four}}
        one_bulk.close()
    result["soak"] = soak_in_child(bundle_dir, paragraphs, bulk_text, opts)
    return result


def _chunks(items: list[str], size: int) -> list[list[str]]:
    return [items[k:k + size] for k in range(0, len(items), size)]
