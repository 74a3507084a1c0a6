"""Side-by-side speed benchmark: this runtime (INT8, FP32) against PyTorch and CTranslate2.

All engines run in one process on the same model (the full-shape opus-mt-en-zh random
model unless told otherwise) and decode the same number of tokens: random weights rarely
emit ``</s>``, and every engine is told to decode exactly N tokens. Rounds alternate
between engines, and medians are reported. The figures go into a
:class:`~.benchreport.BenchResult`, which :mod:`.benchreport` writes out.

CTranslate2 runs at every ``inter_threads`` × ``intra_threads`` setting of
:attr:`BenchOptions.ct2_settings` in every measure, and ``ct2-int8`` is the best of them
for that measure: a ratio to a peer means something only at the peer's best setting (on
2 vCPUs, one intra thread is 1.7–2× faster than two at batch 1). Its own default
(``ct2-int8-default``, one translator with ``intra_threads=0``) is reported beside it. When
a bundle has a vocabulary shortlist, ``ct2-int8-vmap`` is CTranslate2 with ``use_vmap=True``
and a vocabulary map written from those lists (:mod:`.vmap`), swept over the same thread
settings in the same alternating rounds, at its own best setting of each measure.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ..core.bundle import load_bundle
from ..core.decode import Seq2Seq
from ..core.engine import Engine, EngineOptions, Priority
from ..core.errors import EdgeTranslatorError, ExportError, require
from ..core.shortlist import read_shortlist
from ..core.ticket import Request
from ..core.tokenizer import Tokenizer
from .benchreport import CT2_VMAP, BenchResult
from .machine import dir_mb, machine_info, memory_bandwidth_gbs
from .spread import Spread
from .vmap import vmap_model

logger = logging.getLogger(__name__)

#: CTranslate2's own default: one translator, ``intra_threads=0`` (it picks the count).
CT2_DEFAULT = (1, 0)
#: Prefix of the engine name of one CTranslate2 setting, e.g. ``ct2-int8@2x1``.
CT2_PREFIX = "ct2-int8@"
VMAP_PREFIX = "ct2-int8-vmap@"


@dataclass(frozen=True)
class BenchOptions:
    """What the benchmark measures."""

    threads: int = 2
    """Intra-op threads for every engine."""
    rounds: int = 7
    """Alternating rounds per measurement (the batched runs take half, at least 3); medians
    are reported, with each engine's lowest and highest round (:mod:`.spread`)."""
    source_tokens: int = 31
    """Source length of the batch-1 sentence (target token and ``</s>`` included)."""
    new_tokens: int = 64
    """Tokens decoded per sentence at batch 1."""
    batched_new_tokens: int = 48
    """Tokens decoded per sentence in the batched runs."""
    batched_sentences: int = 256
    """Sentences of prose in the batched runs."""
    batch_sizes: tuple[int, ...] = (1, 4, 16, 32, 64)
    """Batch sizes (CTranslate2's ``max_batch_size``) for the throughput curve."""
    latency_runs: int = 20
    """Translations of the 20-word sentence for p50/p95."""
    cold_runs: int = 5
    """CLI cold starts timed."""
    engines: tuple[str, ...] = ("ours-int8r", "ours-int8r-sl", "ours-q8", "ours-q4", "ours-int8", "ours-fp32", "torch",
                                "ct2-int8")
    """Engines to run (``ours-SCHEME`` for each bundle given, ``torch``, ``ct2-int8``)."""
    ct2_settings: tuple[tuple[int, int], ...] = ((1, 1), (1, 2), (2, 1), CT2_DEFAULT)
    """CTranslate2 ``(inter_threads, intra_threads)`` settings swept in every measure
    (``intra_threads=0`` is CTranslate2's automatic choice)."""
    shipped: str = "ours-int8r"
    """The bundle whose latency, start-up and memory are reported, and the ratios' numerator."""
    ours_workers: tuple[tuple[int, int], ...] = ((2, 1),)
    """``(workers, threads)`` settings of the engine (``Translator.load(workers=...)``) at which
    :data:`WORKER_ENGINES` are also measured batched, as ``NAME@WxT``: the sentences go to the
    engine as one bulk job, as ``edge-translator docs --workers W --threads T`` would give them.
    At batch 1 one sentence runs on one worker, so the plain engine is the measure there."""


#: Our engines measured batched at :attr:`BenchOptions.ours_workers` too.
WORKER_ENGINES = ("ours-int8r", "ours-int8r-sl")


def bytes_per_step(bundle_dir: Path) -> int:
    """Weight bytes one decoder step at batch 1 reads: every decoder matrix, the output layer.

    Gathers (embedding rows, position rows) read one row, so their tables count only where
    another node (the tied output projection) reads them whole. A bundle with a shortlist
    reads the rows its candidates gather: export's mean columns per sentence.
    """
    import onnx

    manifest = load_bundle(bundle_dir, verify=False).manifest
    gathered = 0
    if "output_layer" in manifest:
        layer = manifest["output_layer"]
        row = sum(int(np.prod(spec["shape"][1:])) * np.dtype(spec["dtype"]).itemsize
                  for key, spec in layer.items() if key != "kind")
        gathered = int(manifest.get("validation", {}).get("shortlist_agreement", {}).get("mean_columns", 0) * row)

    model = onnx.load(str(bundle_dir / "decoder.onnx"), load_external_data=False)
    sizes = {}
    for t in model.graph.initializer:
        n = int(np.prod(t.dims)) if t.dims else 1
        width = {onnx.TensorProto.INT8: 1, onnx.TensorProto.UINT8: 1}.get(t.data_type, 4)
        sizes[t.name] = n * width
    whole = set()
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if name in sizes and not (node.op_type == "Gather" and k == 0) \
                    and not (node.op_type == "GatherBlockQuantized" and k in (0, 2)):
                whole.add(name)
    return sum(sizes[n] for n in whole) + gathered


# -- engines ------------------------------------------------------------------------------
class OursEngine:
    """This runtime on one bundle."""

    def __init__(self, bundle_dir: Path, threads: int):
        self.bundle = load_bundle(bundle_dir)
        self.model = Seq2Seq.load(self.bundle, threads)

    def run(self, sources: list[list[int]], new_tokens: int, batch_size: int) -> int:
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        for start in range(0, len(order), batch_size):
            batch = [sources[i] for i in order[start:start + batch_size]]
            for hyp in self.model.greedy_all(batch, new_tokens, min_new_tokens=new_tokens):
                if len(hyp.ids) + 1 < new_tokens:
                    raise ExportError(f"decoded {len(hyp.ids)} tokens, expected {new_tokens}")
        return new_tokens * len(sources)


class OursWorkers:
    """This runtime's engine with several workers, each with its own copy of the sessions."""

    def __init__(self, bundle_dir: Path, workers: int, threads: int):
        bundle = load_bundle(bundle_dir)
        self.models = [Seq2Seq.load(bundle, threads) for _ in range(workers)]

    def run(self, sources: list[list[int]], new_tokens: int, batch_size: int) -> int:
        engine = Engine(self.models, EngineOptions(max_batch_size=batch_size, min_new_tokens=new_tokens))
        try:
            ticket = engine.submit([Request(tuple(s), new_tokens) for s in sources], Priority.BULK)
            for outcome in ticket.completed():
                if len(outcome.hypothesis.ids) + 1 < new_tokens:
                    raise ExportError(f"decoded {len(outcome.hypothesis.ids)} tokens, expected {new_tokens}")
        finally:
            engine.close()
        return new_tokens * len(sources)


class TorchEngine:
    """transformers ``generate`` (greedy) on the same model."""

    def __init__(self, hf_dir: Path, threads: int):
        self.torch = require("torch", "export")
        transformers = require("transformers", "export")
        transformers.utils.logging.set_verbosity_error()
        self.torch.set_num_threads(threads)
        self.model = transformers.MarianMTModel.from_pretrained(str(hf_dir)).eval()
        self.pad = self.model.config.pad_token_id

    def run(self, sources: list[list[int]], new_tokens: int, batch_size: int) -> int:
        torch = self.torch
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        with torch.inference_mode():
            for start in range(0, len(order), batch_size):
                batch = [sources[i] for i in order[start:start + batch_size]]
                width = max(map(len, batch))
                ids = torch.full((len(batch), width), self.pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, src in enumerate(batch):
                    ids[row, : len(src)] = torch.tensor(src)
                    mask[row, : len(src)] = 1
                out = self.model.generate(input_ids=ids, attention_mask=mask, num_beams=1, do_sample=False,
                                          max_new_tokens=new_tokens, min_new_tokens=new_tokens, max_length=None)
                if out.shape[1] - 1 != new_tokens:
                    raise ExportError(f"generate decoded {out.shape[1] - 1} tokens, expected {new_tokens}")
        return new_tokens * len(sources)


class CT2Engine:
    """CTranslate2 int8, converted from the same Hugging Face directory, at one thread setting.

    With ``inter_threads`` above 1, ``translate_batch`` hands its ``max_batch_size`` chunks
    to that many translators at once, so the batched measures use them all. With
    ``use_vmap``, each batch computes only the output rows of its vocabulary map's
    candidates (``ct2_dir`` must hold a ``vmap.txt``, :func:`.vmap.vmap_model`).
    """

    def __init__(self, ct2_dir: Path, vocab: dict[str, int], inter_threads: int, intra_threads: int,
                 use_vmap: bool = False):
        ctranslate2 = require("ctranslate2", "bench")
        self.translator = ctranslate2.Translator(str(ct2_dir), device="cpu", compute_type="int8",
                                                 intra_threads=intra_threads, inter_threads=inter_threads)
        self.pieces = {i: p for p, i in vocab.items()}
        self.use_vmap = use_vmap

    def run(self, sources: list[list[int]], new_tokens: int, batch_size: int) -> int:
        tokens = [[self.pieces[i] for i in src] for src in sources]
        results = self.translator.translate_batch(
            tokens, max_batch_size=batch_size, beam_size=1, max_decoding_length=new_tokens,
            min_decoding_length=new_tokens, return_scores=False, use_vmap=self.use_vmap)
        if any(len(r.hypotheses[0]) + 1 < new_tokens for r in results):
            raise ExportError("CTranslate2 decoded fewer tokens than asked")
        return new_tokens * len(sources)


def vmap_source(bundles: dict[str, Path], shipped: str, ct2_dir: Path) -> tuple[str, Path] | None:
    """``(engine name, model directory)``: CTranslate2's model with a vocabulary map written
    from the shortlist of the shipped bundle (or, if it has none, of the first bundle that has
    one), a copy of ``ct2_dir``; ``None`` when no bundle has a shortlist."""
    for name in sorted(bundles, key=lambda n: n != shipped):
        bundle = load_bundle(bundles[name], verify=False)  # verified by run_benchmark's load already
        entry = bundle.manifest.get("shortlist")
        if entry:
            return name, vmap_model(ct2_dir, read_shortlist(bundle.path, entry),
                                    json.loads(bundle.vocab.read_text(encoding="utf-8")))
    return None


def convert_ct2(hf_dir: Path, out: Path) -> Path:
    """Convert with ``ct2-transformers-converter --quantization int8`` (reused if present)."""
    if (out / "model.bin").is_file():
        return out
    converter = Path(sys.executable).with_name("ct2-transformers-converter")
    command = [str(converter) if converter.exists() else "ct2-transformers-converter", "--model", str(hf_dir),
               "--output_dir", str(out), "--quantization", "int8", "--force"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise ExportError(f"ct2-transformers-converter failed: {result.stderr.strip().splitlines()[-1:]}")
    return out


# -- measurements -----------------------------------------------------------------------------
def _median_rate(samples: list[tuple[int, float]]) -> float:
    return statistics.median(tokens / seconds for tokens, seconds in samples)


def _time(engine, sources, new_tokens, batch_size) -> tuple[int, float]:
    start = time.perf_counter()
    produced = engine.run(sources, new_tokens, batch_size)
    return produced, time.perf_counter() - start


def ct2_name(setting: tuple[int, int], prefix: str = CT2_PREFIX) -> str:
    """Engine name of a CTranslate2 setting: ``ct2-int8@INTERxINTRA`` (``ct2-int8-vmap@...`` with its vmap)."""
    return f"{prefix}{setting[0]}x{setting[1]}"


def pick_vmap_best(rates: dict) -> tuple[dict, dict]:
    """Fold CTranslate2-with-its-vmap's settings of one measure into ``ct2-int8-vmap`` (the
    best); returns ``(rates, {setting: rate})``. Without any, unchanged."""
    sweep = {k.removeprefix(VMAP_PREFIX): v for k, v in rates.items() if k.startswith(VMAP_PREFIX)}
    if not sweep:
        return rates, {}
    return {**{k: v for k, v in rates.items() if not k.startswith(VMAP_PREFIX)}, CT2_VMAP: max(sweep.values())}, sweep


def pick_ct2_best(rates: dict) -> tuple[dict, dict]:
    """Fold the CTranslate2 settings of one measure into ``ct2-int8`` (the best) and
    ``ct2-int8-default``; returns ``(rates, {setting: rate})``. Without any, unchanged."""
    sweep = {k.removeprefix(CT2_PREFIX): v for k, v in rates.items() if k.startswith(CT2_PREFIX)}
    if not sweep:
        return rates, {}
    out = {k: v for k, v in rates.items() if not k.startswith(CT2_PREFIX)}
    out["ct2-int8"] = max(sweep.values())
    default = ct2_name(CT2_DEFAULT).removeprefix(CT2_PREFIX)
    if default in sweep:
        out["ct2-int8-default"] = sweep[default]
    return out, sweep


def _spreads(samples: dict) -> dict[str, Spread]:
    return {name: Spread.of(tokens / seconds for tokens, seconds in s) for name, s in samples.items()}


def batch1(engines: dict, source: list[int], opts: BenchOptions) -> tuple[dict, dict[str, Spread]]:
    """Median tokens/s decoding one sentence, engines alternating each round, and each
    engine's spread over the rounds."""
    samples = {name: [] for name in engines}
    for engine in engines.values():
        engine.run([source], 4, 1)  # warm-up
    for _ in range(opts.rounds):
        for name, engine in engines.items():
            samples[name].append(_time(engine, [source], opts.new_tokens, 1))
    rates = {name: round(_median_rate(s), 1) for name, s in samples.items()}
    logger.info("batch 1: %s", rates)
    return rates, _spreads(samples)


def batched(engines: dict, sources: list[list[int]], opts: BenchOptions) -> tuple[dict, dict]:
    """Median tokens/s over all sentences, per engine and batch size, and the spreads
    (:class:`.spread.Spread`) by engine and batch size."""
    out, spreads = {}, {}
    rounds = max(3, opts.rounds // 2)
    for size in opts.batch_sizes:
        samples = {name: [] for name in engines}
        for _ in range(rounds):
            for name, engine in engines.items():
                samples[name].append(_time(engine, sources, opts.batched_new_tokens, size))
        for name, s in samples.items():
            out.setdefault(name, {})[str(size)] = round(_median_rate(s), 1)
        for name, spread in _spreads(samples).items():
            spreads.setdefault(name, {})[str(size)] = spread
        logger.info("batched, batch size %d: %s", size, {name: curve[str(size)] for name, curve in out.items()})
    return out, spreads


def fold_spreads(spreads: dict[str, Spread], sweep: dict, vmap_sweep: dict) -> dict[str, list[float]]:
    """The spreads under the names :func:`pick_ct2_best` and :func:`pick_vmap_best` fold the
    CTranslate2 settings into: ``ct2-int8`` is its best setting's rounds, ``ct2-int8-default``
    its default's, ``ct2-int8-vmap`` the best setting with its vmap."""
    out = {name: s.as_list() for name, s in spreads.items() if not name.startswith((CT2_PREFIX, VMAP_PREFIX))}
    if sweep:
        out["ct2-int8"] = spreads[CT2_PREFIX + max(sweep, key=sweep.get)].as_list()
        default = ct2_name(CT2_DEFAULT)
        if default in spreads:
            out["ct2-int8-default"] = spreads[default].as_list()
    if vmap_sweep:
        out[CT2_VMAP] = spreads[VMAP_PREFIX + max(vmap_sweep, key=vmap_sweep.get)].as_list()
    return out


def _child(code: str, env: dict | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **(env or {})})
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise ExportError(f"benchmark child failed: {result.stderr.strip().splitlines()[-1:]}")
    return elapsed, result.stdout.strip()


def cold_start(bundle_dir: Path, opts: BenchOptions) -> dict:
    """Wall time of ``edge-translator translate`` in a new process, to the first translation."""
    code = ("import sys; from edge_translator.cli import main; "
            f"sys.exit(main(['translate', '--model', {str(bundle_dir)!r}, '--threads', '{opts.threads}', "
            "'--max-length', '16', 'Where is the train station?']))")
    times = [_child(code)[0] for _ in range(opts.cold_runs)]
    return {"median": round(statistics.median(times), 3), "min": round(min(times), 3), "runs": len(times)}


def peak_rss(bundle_dir: Path, opts: BenchOptions) -> float:
    """Peak resident memory (MB) of a process that loads the bundle and translates once.

    Read from ``VmHWM``, which starts afresh at exec; ``ru_maxrss`` would include the
    benchmark process the child was forked from.
    """
    code = ("from edge_translator.core.translator import Translator, TranslateOptions; "
            f"t = Translator.load({str(bundle_dir)!r}, threads={opts.threads}); "
            "t.translate('Where is the train station? I would like two tickets.', TranslateOptions(max_length=32)); "
            "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])")
    return round(int(_child(code)[1].splitlines()[-1]) / 1024, 1)


def latency(bundle_dir: Path, sentence: str, opts: BenchOptions) -> dict:
    """End-to-end ``Translator.translate`` latency of one sentence, p50 and p95 (cache off)."""
    from ..core.translator import Translator

    translator = Translator.load(bundle_dir, threads=opts.threads, cache=None)
    translator.translate(sentence)
    times = []
    for _ in range(opts.latency_runs):
        start = time.perf_counter()
        result = list(translator.translate_iter(sentence))
        times.append(time.perf_counter() - start)
    ms = sorted(t * 1000 for t in times)
    return {"p50": round(float(np.percentile(ms, 50)), 1), "p95": round(float(np.percentile(ms, 95)), 1),
            "output_tokens": len(result[0].ids), "stop": result[0].stop, "runs": len(ms)}


def segmentation_speed(text: str, rounds: int = 5) -> float:
    """Speed of :func:`~edge_translator.core.text.split_sentences` on ``text``, in MB/s of UTF-8.

    Args:
        text: The text to split (not empty).
        rounds: Timed runs; the median is reported.

    Raises:
        ValueError: If ``text`` is empty or ``rounds`` is below 1.
    """
    from ..core.text import split_sentences

    if not text or rounds < 1:
        raise ValueError(f"segmentation_speed needs text and rounds >= 1, got {len(text)} characters, {rounds} rounds")
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        split_sentences(text)
        times.append(time.perf_counter() - start)
    return len(text.encode("utf-8")) / max(statistics.median(times), 1e-9) / 1e6


#: Engines the batched curve and the memory figures leave out (too slow to be a choice).
UNBATCHED = ("ours-fp32", "torch")


def run_benchmark(bundles: dict[str, Path], hf_dir: Path, ct2_dir: Path, sentences: list[str],
                  opts: BenchOptions, command: str = "") -> BenchResult:
    """Measure everything; engines not in ``opts.engines`` are skipped.

    Args:
        bundles: Our bundles by engine name, e.g. ``{"ours-q8": ..., "ours-int8": ...}``, all
            exported from ``hf_dir``.
        hf_dir: The Hugging Face model (for ``torch``).
        ct2_dir: Its CTranslate2 int8 conversion.
    """
    shipped_dir = bundles.get(opts.shipped) or next(iter(bundles.values()))
    bundle = load_bundle(shipped_dir)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id,
                               bundle.unk_id, bundle.pad_id)
    target = bundle.targets[bundle.default_target].id
    vocab = json.loads(bundle.vocab.read_text(encoding="utf-8"))
    result = BenchResult(machine=machine_info(), options=asdict(opts), command=command)
    blocks = {load_bundle(d).quantization.get("block_size") for d in bundles.values()} - {None}
    result.options["block_size"] = ", ".join(str(b) for b in sorted(blocks))
    engines = {}
    factories = {name: (lambda d=d: OursEngine(d, opts.threads)) for name, d in bundles.items()}
    factories["torch"] = lambda: TorchEngine(hf_dir, opts.threads)
    for setting in opts.ct2_settings:
        factories[ct2_name(setting)] = lambda s=setting: CT2Engine(ct2_dir, vocab, *s)
    vmap = vmap_source(bundles, opts.shipped, ct2_dir) if "ct2-int8" in opts.engines else None
    for setting in opts.ct2_settings if vmap else ():  # swept like ct2-int8, in the same alternating rounds
        factories[ct2_name(setting, VMAP_PREFIX)] = lambda s=setting: CT2Engine(vmap[1], vocab, *s, use_vmap=True)
    for name in opts.engines:
        ct2_keys = [ct2_name(s, p) for p in (CT2_PREFIX, VMAP_PREFIX) for s in opts.ct2_settings]
        for key in [name] if name != "ct2-int8" else ct2_keys:
            if key in factories:
                engines[key] = factories[key]()
    long_text = " ".join(sentences)
    ids = tokenizer.encode(long_text, target)
    source = ids[: opts.source_tokens - 1] + [bundle.eos_id]
    rates, spreads = batch1(engines, source, opts)
    rates, vmap_sweep = pick_vmap_best(rates)
    result.batch1_tok_s, sweep = pick_ct2_best(rates)
    result.batch1_spread = fold_spreads(spreads, sweep, vmap_sweep)
    result.ct2_sweep = {"default": ct2_name(CT2_DEFAULT).removeprefix(CT2_PREFIX), "batch1": sweep, "batched": {}}
    if vmap_sweep:
        result.ct2_sweep["vmap"] = {"bundle": vmap[0], "batch1": max(vmap_sweep, key=vmap_sweep.get), "batched": {},
                                    "sweep": {"batch1": vmap_sweep, "batched": {}}}
    limit = bundle.max_positions
    sources = [tokenizer.encode(s, target)[:limit] for s in sentences[: opts.batched_sentences]]
    batched_engines = {k: v for k, v in engines.items() if k not in UNBATCHED}
    for name in (n for n in WORKER_ENGINES if n in engines):
        for workers, threads in opts.ours_workers:
            batched_engines[f"{name}@{workers}x{threads}"] = OursWorkers(bundles[name], workers, threads)
    curves, curve_spreads = batched(batched_engines, sources, opts)
    for size in (str(s) for s in opts.batch_sizes):
        rates, vmap_sweep = pick_vmap_best({name: curve[size] for name, curve in curves.items() if size in curve})
        rates, sweep = pick_ct2_best(rates)
        at_size = {name: by_size[size] for name, by_size in curve_spreads.items() if size in by_size}
        for name, spread in fold_spreads(at_size, sweep, vmap_sweep).items():
            result.batched_spread.setdefault(name, {})[size] = spread
        result.ct2_sweep["batched"][size] = sweep
        if vmap_sweep:
            result.ct2_sweep["vmap"]["batched"][size] = max(vmap_sweep, key=vmap_sweep.get)
            result.ct2_sweep["vmap"]["sweep"]["batched"][size] = vmap_sweep
        for name, rate in rates.items():
            result.batched_tok_s.setdefault(name, {})[size] = rate
    result.text = {"sentences": len(sources), "mean_source_tokens": round(float(np.mean([len(s) for s in sources])), 1),
                   "segmentation_mb_s": round(segmentation_speed(" ".join(sentences), opts.rounds), 2)}
    twenty = next((s for s in sentences if 18 <= len(s.split()) <= 22), sentences[0])
    result.latency_ms = {"sentence": twenty, "bundle": opts.shipped, **latency(shipped_dir, twenty, opts)}
    result.cold_start_s = cold_start(shipped_dir, opts)
    result.peak_rss_mb = {name: peak_rss(d, opts) for name, d in bundles.items()
                          if name in engines and name not in UNBATCHED}
    result.sizes_mb = {**{name: dir_mb(d) for name, d in bundles.items()}, "ct2-int8": dir_mb(ct2_dir)}
    result.bandwidth = {"read_gb_s": round(memory_bandwidth_gbs(threads=opts.threads), 1),
                        "threads": opts.threads, "per_bundle": {}}
    for name, d in bundles.items():
        step = bytes_per_step(d)
        gbs = memory_bandwidth_gbs(step / (1 << 20), threads=opts.threads)
        result.bandwidth["per_bundle"][name] = {"bytes_per_step_mb": round(step / 1e6, 1), "read_gb_s": round(gbs, 1),
                                                "ceiling_tok_s": round(gbs * 1e9 / step, 1)}
    return result


# -- models -----------------------------------------------------------------------------------
#: Our bundles of the full-shape model: engine name → quantization mode.
SCHEMES = {"ours-int8r": "rowwise", "ours-q8": "q8", "ours-q4": "q4", "ours-int8": "dynamic", "ours-fp32": "none"}


def prepare_models(work: Path, reference: Path | None, threads: int,
                   block_size: int | None = None) -> tuple[dict[str, Path], Path, Path]:
    """Build or reuse the full-shape model, a bundle per scheme and its CTranslate2 conversion.

    Returns:
        ``(bundles by engine name, Hugging Face directory, CTranslate2 directory)``.
    """
    from ..toolchain.export import ExportOptions, export
    from ..toolchain.quantize import DEFAULT_BLOCK_SIZE, QuantizeOptions
    from ..toolchain.testmodels import build_full

    block_size = block_size or DEFAULT_BLOCK_SIZE
    hf, ct2 = work / "full-hf", work / "full-ct2"
    if not (hf / "config.json").is_file():
        build_full(hf, reference)
    bundles = {}
    for name, mode in SCHEMES.items():
        quant = QuantizeOptions(mode=mode, block_size=block_size)
        out = work / ("full-" + name.removeprefix("ours-") + (f"-b{block_size}" if quant.bits else ""))
        if not _exported_by_this_version(out):
            export(hf, out, ExportOptions(quantize=quant, force=True))
        bundles[name] = out
    shortlisted = shortlist_bundle(hf, work / "full-int8r-sl")
    if shortlisted is not None:
        bundles[SHORTLISTED] = shortlisted
    convert_ct2(hf, ct2)
    return bundles, hf, ct2


#: The engine of the int8r bundle with a vocabulary shortlist.
SHORTLISTED = "ours-int8r-sl"


def shortlist_bundle(hf: Path, out: Path, corpus: Path | None = None) -> Path | None:
    """The int8r bundle with a shortlist counted on Tatoeba's English–Chinese pairs (the
    ``hsg`` package of the ``train`` extra), built or reused; ``None`` without the pairs.

    On the random full-shape model the model's own translations mean nothing, while real
    pairs give candidate sets of a real sentence's size, which is what its speed depends on.
    """
    from ..toolchain.export import ExportOptions, export

    if _exported_by_this_version(out) and "shortlist" in load_bundle(out, verify=False).manifest:
        return out
    if corpus is None:
        try:
            from ..toolchain.traindata import tatoeba_path

            corpus = tatoeba_path()
        except Exception as exc:  # noqa: BLE001 - any missing package or file: the engine is skipped
            logger.warning("no shortlisted bundle: Tatoeba's pairs are missing (%s); install the train extra", exc)
            return None
    export(hf, out, ExportOptions(force=True, shortlist=True, shortlist_corpus=str(corpus)))
    return out


def _exported_by_this_version(out: Path) -> bool:
    """Whether ``out`` holds a bundle whose graphs this exporter would write (same decoder
    inputs): a benchmark must not time an earlier exporter's graphs."""
    from ..core.graphio import decoder_io

    try:
        bundle = load_bundle(out, verify=False)
    except EdgeTranslatorError:
        return False
    return list(bundle.decoder.inputs) == decoder_io(bundle.num_layers)[0]


def smoke_bundles(hf: Path, work: Path, block_size: int) -> dict[str, Path]:
    """int8r, q8 and q4 bundles of the tiny fixture model, for ``bench --smoke`` (reused if present)."""
    from ..toolchain.export import ExportOptions, export
    from ..toolchain.quantize import QuantizeOptions

    bundles = {}
    for name, mode in (("int8r", "rowwise"), ("q8", "q8"), ("q4", "q4")):
        out = work / (f"tiny-{name}" + (f"-b{block_size}" if mode in ("q8", "q4") else ""))
        if not (out / "bundle.json").is_file():
            export(hf, out, ExportOptions(quantize=QuantizeOptions(mode=mode, block_size=block_size), force=True))
        bundles[f"ours-{name}"] = out
    out = work / "tiny-int8r-sl"
    if not (out / "bundle.json").is_file():
        export(hf, out, ExportOptions(force=True, shortlist=True))
    bundles[SHORTLISTED] = out
    return bundles
