"""Short, equal training runs of several model shapes on the same data (``train-sweep``),
compared on dev BLEU (Tatoeba and software), per minute of training and per millisecond of a
batch-1 decoding step.

Layout of the sweep's folder ``WORK``: ``data/`` (prepared once, :func:`.traindata.prepare_data`),
``tokenizers/sv…-tv…/`` (trained once per vocabulary size and copied into each shape that uses
it) and one folder per shape, ``WORK/NAME``: ``run.json`` (its options and data), the normal
training files of :func:`.train.train_model` (``hf/``, ``ckpt/``, ``progress.log``),
``train.log`` (its process's output), ``int8r/`` (its best checkpoint as an int8r bundle) and
``result.json``. Each shape trains in a process of its own, ``parallel`` at a time; the bundles
are timed together once every shape is done, and ``sweep.json`` and ``sweep.md`` are written.
Every stage is skipped when its output is there, so running the same command again resumes;
given a longer ``--minutes``, a finished shape trains on from its last checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from ..core.errors import ExportError, InputError
from .train import CHECKPOINT_FILES, TrainOptions

logger = logging.getLogger(__name__)

#: Keys of a shape spec (``w256,e6,d3,h4,ffn1024,sv6000,tv10000,sw0.5``) → TrainOptions fields.
SHAPE_KEYS = {"w": "d_model", "e": "encoder_layers", "d": "decoder_layers", "h": "heads", "ffn": "ffn",
              "sv": "source_vocab", "tv": "target_vocab", "sw": "software_share"}
_TOKEN = re.compile(r"^(ffn|sv|tv|sw|w|e|d|h)(\d+(?:\.\d+)?)$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: Folder names of ``WORK`` that a shape may not take.
RESERVED = ("data", "tokenizers")


@dataclass(frozen=True)
class SweepOptions:
    """What every shape of a sweep shares, and how the bundles are timed."""

    minutes: float = 45.0
    """Training budget of each shape, in CPU time over its threads (``time_budget_minutes``)."""
    threads: int = 1
    """Torch threads of each shape's process (and ONNX Runtime threads when it scores its bundle)."""
    parallel: int = 2
    """Shapes trained at once, each in its own process."""
    eval_minutes: float = 9.0
    """Dev BLEU every this many minutes of training."""
    warmup: int = 200
    """Warm-up steps of every shape (a short run needs fewer than the 500 of a long one)."""
    batch_tokens: int = 2500
    """Tokens per batch of every shape: half a long run's 5000, for twice the updates in a short run."""
    lr: float = 1e-3
    """Peak learning rate of every shape."""
    rounds: int = 3
    """Timing rounds over all bundles (alternating order); the median is reported."""
    speed_sentences: int = 60
    """Prose sentences translated one at a time, on one thread, per bundle and round."""
    reference: str | None = None
    """A bundle timed and scored beside the shapes (e.g. today's embedded model), or None."""
    init_from: str | None = None
    """A kept checkpoint every shape starts from (its tokenizers and weights; a shape may drop
    layers, see :func:`.train._warm_start`), or None to train each from scratch. On two CPUs a
    45-minute run from scratch reaches no dev BLEU to compare; a warm one does."""
    poll_seconds: float = 10.0
    """How often the driver looks at its processes."""


def parse_shapes(specs: list[str], base) -> dict:
    """``{name: TrainOptions}`` of ``--shape NAME:SPEC`` flags.

    Raises:
        ValueError: For a bad spec, or a name given twice.
    """
    shapes = {}
    for text in specs:
        try:
            name, opts = parse_shape(text, base)
        except ValueError as exc:
            raise ValueError(f"--shape: {exc}") from None
        if name in shapes:
            raise ValueError(f"--shape: {name} is given twice")
        shapes[name] = opts
    return shapes


def reference_bundle(given: str | None) -> str | None:
    """The bundle each shape's speed is timed beside: ``given``, else the embedded model;
    ``"none"``: none.

    Raises:
        ValueError: If ``given`` is not a bundle.
    """
    from ..core.locations import DEFAULT_MODEL, models_dir

    reference = given or str(models_dir() / DEFAULT_MODEL)
    if reference == "none":
        return None
    if not (Path(reference) / "bundle.json").is_file():
        raise ValueError(f"--reference {reference} is not a bundle (no bundle.json); pass 'none' to time none")
    return reference


def parse_shape(text: str, base: TrainOptions | None = None) -> tuple[str, TrainOptions]:
    """``NAME:SPEC`` → ``(NAME, options)``.

    SPEC is comma-separated ``w`` (d_model), ``e`` (encoder layers), ``d`` (decoder layers),
    ``h`` (heads, default d_model / 64), ``ffn`` (default 4 × d_model), ``sv`` and ``tv``
    (source and target SentencePiece pieces) and ``sw`` (software_share), each followed by
    its number: ``base:w256,e6,d3,ffn1024,sv6000,tv10000``. What SPEC leaves out comes from
    ``base``.

    Raises:
        ValueError: A bad name, key, number or combination, naming it.
    """
    base = base or TrainOptions()
    name, sep, spec = text.partition(":")
    if not sep or not _NAME.match(name) or name in RESERVED:
        raise ValueError(f"shape {text!r}: expected NAME:SPEC with NAME of letters, digits, '.', '_', '-' "
                         f"(not {' or '.join(RESERVED)}), e.g. small:w256,e6,d2")
    values: dict = {}
    for token in filter(None, (t.strip() for t in spec.split(","))):
        match = _TOKEN.match(token)
        if not match:
            raise ValueError(f"shape {name}: {token!r} is not one of {', '.join(k + 'N' for k in SHAPE_KEYS)}")
        field = SHAPE_KEYS[match.group(1)]
        if field in values:
            raise ValueError(f"shape {name}: {match.group(1)} is given twice")
        number = float(match.group(2))
        if field != "software_share":
            if not number.is_integer() or number < 1:
                raise ValueError(f"shape {name}: {token!r} needs a whole number of at least 1")
            number = int(number)
        values[field] = number
    if "d_model" in values:
        values.setdefault("heads", max(1, values["d_model"] // 64))
        values.setdefault("ffn", 4 * values["d_model"])
    try:
        return name, replace(base, **values)
    except ValueError as exc:
        raise ValueError(f"shape {name}: {exc}") from None


def shape_spec(opts: TrainOptions) -> str:
    """The SPEC that gives ``opts``'s shape (every key, ``sw`` only when not 1)."""
    parts = [f"{key}{getattr(opts, field)}" for key, field in SHAPE_KEYS.items() if field != "software_share"]
    if opts.software_share != 1.0:
        parts.append(f"sw{opts.software_share:g}")
    return ",".join(parts)


def count_parameters(opts: TrainOptions, vocab_size: int) -> int:
    """Trainable parameters of the MarianMTModel :func:`.train.train_model` builds: the tied
    embedding and output layer, the encoder and decoder layers (sinusoidal positions are not
    trained and not counted)."""
    d, f = opts.d_model, opts.ffn
    attention = 4 * (d * d + d)
    feed_forward = 2 * d * f + f + d
    encoder = attention + feed_forward + 2 * 2 * d
    decoder = 2 * attention + feed_forward + 3 * 2 * d
    return vocab_size * d + opts.encoder_layers * encoder + opts.decoder_layers * decoder


def expected_bundle_mb(parameters: int, vocab_size: int) -> float:
    """An int8r bundle's size, estimated from the embedded model's (12.62 MB of weights for
    11.97 M parameters, and about 1.1 MB of tokenizer files for 15,885 ids)."""
    return round((parameters * 1.055 + 1.07e6 * vocab_size / 15885) / 1e6, 1)


# -- one shape, in its own process -------------------------------------------------------------
def _lock(run_dir: Path):
    """An exclusive lock on ``run_dir/lock``, or None when another process holds it."""
    import fcntl

    handle = open(run_dir / "lock", "w")  # noqa: SIM115 - held for the life of the process
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def _locked(run_dir: Path) -> bool:
    if not (run_dir / "lock").is_file():
        return False
    handle = _lock(run_dir)
    if handle is None:
        return True
    handle.close()
    return False


def run_shape(run_dir: Path) -> dict:
    """Train one shape as ``run.json`` says, export its best checkpoint as int8r, score the
    bundle on both dev splits and write ``result.json``.

    Raises:
        ExportError: If another process is working in ``run_dir``.
    """
    from ..core.bundle import load_bundle
    from . import evaluate
    from .export import ExportOptions, export
    from .quantize import QuantizeOptions
    from .train import train_model

    lock = _lock(run_dir)
    if lock is None:
        raise ExportError(f"another process is training {run_dir} (it holds {run_dir / 'lock'})")
    spec = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    opts = TrainOptions(**spec["options"])
    files = {key: Path(path) for key, path in spec["files"].items()}
    hf = train_model(run_dir, opts, run_dir / "hf", files)
    done = json.loads((run_dir / "ckpt" / "done.json").read_text(encoding="utf-8"))
    bundle = run_dir / "int8r"
    if not (bundle / "bundle.json").is_file() or \
            (bundle / "bundle.json").stat().st_mtime < (run_dir / "ckpt" / "done.json").stat().st_mtime:
        export(hf, bundle, ExportOptions(quantize=QuantizeOptions(mode="rowwise"), force=True, name=run_dir.name))
    dev = {"tatoeba": evaluate.evaluate_bundle(bundle, files["dev"], opts.dev_size, opts.threads)}
    if files.get("software_dev"):
        dev["software"] = evaluate.evaluate_bundle(bundle, files["software_dev"], opts.software_dev_size,
                                                   opts.threads)
    manifest = load_bundle(bundle).manifest
    history = done["history"]
    result = {
        "name": run_dir.name, "spec": shape_spec(opts), "options": asdict(opts),
        "parameters": manifest["model"]["parameters"],
        "vocab": len(json.loads((hf / "vocab.json").read_text(encoding="utf-8"))),
        "bundle_mb": round(sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 1e6, 2),
        "minutes": history[-1]["minutes"] if history else 0.0, "steps": history[-1]["step"] if history else 0,
        "epochs": history[-1]["epoch"] if history else 0, "best": done.get("best"), "history": history,
        "encoded": json.loads((run_dir / "encoded.json").read_text(encoding="utf-8")),
        "bundle_dev": {name: {k: r[k] for k in ("bleu", "chrf", "stutters", "sentences", "seconds")}
                       for name, r in dev.items()},
    }
    (run_dir / "result.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    lock.close()
    return result


def main(argv: list[str] | None = None) -> int:
    """``python -m edge_translator.toolchain.sweep RUN_DIR``: what the driver starts per shape."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m edge_translator.toolchain.sweep RUN_DIR", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    result = run_shape(Path(argv[0]))
    print(json.dumps({k: result[k] for k in ("name", "steps", "minutes", "bundle_mb", "bundle_dev")}))
    return 0


# -- the driver ----------------------------------------------------------------------------------
def _tokenizers(work: Path, opts: TrainOptions, train_tsv: Path, run_hf: Path) -> None:
    """Copy the shape's tokenizers into ``run_hf``, training them once per vocabulary."""
    from .train import _copy_tokenizers, train_tokenizers

    if (run_hf / "vocab.json").is_file():
        return
    if opts.init_from:
        _copy_tokenizers(Path(opts.init_from), run_hf)
        return
    key = f"sv{opts.source_vocab}-tv{opts.target_vocab}-c{opts.target_coverage:g}-s{opts.seed}"
    shared = train_tokenizers(work / "tokenizers" / key, opts, train_tsv)
    run_hf.mkdir(parents=True, exist_ok=True)
    for name in CHECKPOINT_FILES:
        if (shared / name).is_file():
            shutil.copyfile(shared / name, run_hf / name)


def _prepare_run(work: Path, name: str, opts: TrainOptions, files: dict[str, Path]) -> Path:
    run_dir = work / name
    run_dir.mkdir(parents=True, exist_ok=True)
    spec = {"options": asdict(opts), "files": {k: str(v) for k, v in files.items()}}
    path = run_dir / "run.json"
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        # an option added since the shape was started counts as its default then
        before["options"] = {**{f.name: f.default for f in fields(TrainOptions)}, **before["options"]}
        if before["options"] != spec["options"]:
            changed = sorted(k for k in spec["options"] if before["options"].get(k) != spec["options"][k])
            longer = changed == ["time_budget_minutes"] and \
                opts.time_budget_minutes > before["options"]["time_budget_minutes"]
            if not longer:
                raise InputError(f"{run_dir} was started with other options ({', '.join(changed)}); "
                                 "give the shape another name or remove that folder")
            if _locked(run_dir):
                raise InputError(f"{run_dir} is training in another process; give it a longer budget once it ends")
            # a longer budget goes on from the shape's last checkpoint, its schedule unchanged
            for stale in (run_dir / "result.json", run_dir / "ckpt" / "done.json"):
                stale.unlink(missing_ok=True)
            path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    else:
        path.write_text(json.dumps(spec, indent=2), encoding="utf-8")
    _tokenizers(work, opts, files["train"], run_dir / "hf")
    return run_dir


def _start(run_dir: Path, threads: int) -> subprocess.Popen:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    log = open(run_dir / "train.log", "a", encoding="utf-8")  # noqa: SIM115 - the child's output
    try:
        return subprocess.Popen([sys.executable, "-m", "edge_translator.toolchain.sweep", str(run_dir)],
                                stdout=log, stderr=subprocess.STDOUT, env=env)
    finally:
        log.close()


def _last_line(path: Path) -> str:
    try:
        lines = [line for line in path.read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""


def train_all(work: Path, runs: list[Path], parallel: int, threads: int, poll: float, say) -> dict[str, str]:
    """Run each shape's process, ``parallel`` at a time; returns ``{name: why}`` for those that failed.

    A shape whose folder another process is working in (a sweep started again while the
    last one's processes still run) is waited for, not started twice.
    """
    pending = [r for r in runs if not (r / "result.json").is_file()]
    running: dict[Path, subprocess.Popen | None] = {}
    failed: dict[str, str] = {}
    while pending or running:
        for run_dir, proc in list(running.items()):
            code = proc.poll() if proc is not None else (None if _locked(run_dir) else 0)
            if code is None:
                continue
            del running[run_dir]
            if code != 0 or not (run_dir / "result.json").is_file():
                failed[run_dir.name] = f"exit {code}: {_last_line(run_dir / 'train.log')}"
                say(f"{run_dir.name}: failed ({failed[run_dir.name]}); see {run_dir / 'train.log'}")
            else:
                say(f"{run_dir.name}: done")
        while pending and len(running) < parallel:
            run_dir = pending.pop(0)
            if _locked(run_dir):
                say(f"{run_dir.name}: another process is training it; waiting for that one")
                running[run_dir] = None
            else:
                say(f"{run_dir.name}: training (log {run_dir / 'train.log'})")
                running[run_dir] = _start(run_dir, threads)
        if running:
            time.sleep(poll)
    return failed


def time_bundles(bundles: dict[str, Path], rounds: int, sentences: int) -> dict[str, dict]:
    """Batch-1 speed of each bundle on one thread (``bench-models``' measure), median of ``rounds``
    alternating rounds: ``{name: {"ms_per_token", "tok_s", "sent_s"}}``."""
    from ..bench.modelbench import batch1_speed
    from ..bench.prose import prose_sentences

    text = prose_sentences()[:sentences]
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in bundles}
    order = list(bundles.items())
    for round_ in range(rounds):
        for name, path in (order if round_ % 2 == 0 else order[::-1]):
            samples[name].append(batch1_speed(path, text))
    out = {}
    for name, values in samples.items():
        tok_s = statistics.median(v[0] for v in values)
        out[name] = {"ms_per_token": round(1000 / tok_s, 3), "tok_s": round(tok_s, 1),
                     "sent_s": round(statistics.median(v[1] for v in values), 2)}
    return out


def _reference(work: Path, bundle: Path, files: dict[str, Path], opts: TrainOptions) -> dict:
    """The reference bundle's dev BLEUs (cached in ``WORK/reference.json``)."""
    from ..core.bundle import load_bundle
    from . import evaluate

    path = work / "reference.json"
    if path.is_file():
        cached = json.loads(path.read_text(encoding="utf-8"))
        if cached.get("bundle") == str(bundle):
            return cached
    dev = {"tatoeba": evaluate.evaluate_bundle(bundle, files["dev"], opts.dev_size, 1)}
    if files.get("software_dev"):
        dev["software"] = evaluate.evaluate_bundle(bundle, files["software_dev"], opts.software_dev_size, 1)
    manifest = load_bundle(bundle).manifest
    result = {"name": "reference", "bundle": str(bundle), "spec": "", "parameters": manifest["model"]["parameters"],
              "bundle_mb": round(sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file()) / 1e6, 2),
              "bundle_dev": {k: {x: r[x] for x in ("bleu", "chrf", "stutters", "sentences")} for k, r in dev.items()}}
    path.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return result


def sweep(work: str | Path, shapes: dict[str, TrainOptions], options: SweepOptions | None = None,
          software: Path | None = None, progress=None) -> dict:
    """Train, export, score and time every shape; writes ``WORK/sweep.json`` and ``WORK/sweep.md``.

    Args:
        shapes: Name → options (:func:`parse_shape`); the sweep sets each one's budget,
            threads, warm-up and dev schedule from ``options``.
        software: The ``harvest-software`` output whose text joins the data, or None.

    Returns:
        The content of ``sweep.json``.

    Raises:
        InputError: If a shape's folder was started with other options.
        ExportError: If a shape's training failed (the others are still finished and reported).
    """
    from .traindata import prepare_data

    options = options or SweepOptions()
    say = progress or (lambda line: logger.info("%s", line))
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    files = prepare_data(work, software=software)
    shared = dict(time_budget_minutes=options.minutes, threads=options.threads, warmup=options.warmup,
                  eval_minutes=options.eval_minutes, batch_tokens=options.batch_tokens, lr=options.lr,
                  init_from=options.init_from)
    runs = []
    for name, opts in shapes.items():
        runs.append(_prepare_run(work, name, replace(opts, **shared), files))
    say(f"{len(runs)} shapes, {options.parallel} at a time, {options.minutes:g} minutes each on "
        f"{options.threads} thread(s)")
    failed = train_all(work, runs, options.parallel, options.threads, options.poll_seconds, say)
    results = {r.name: json.loads((r / "result.json").read_text(encoding="utf-8"))
               for r in runs if (r / "result.json").is_file()}
    bundles = {name: work / name / "int8r" for name in results}
    if options.reference:
        base = next(iter(shapes.values()))
        results["reference"] = _reference(work, Path(options.reference), files, replace(base, **shared))
        bundles["reference"] = Path(options.reference)
    if bundles:
        say(f"timing {len(bundles)} bundles at batch 1 on one thread ({options.rounds} rounds)")
        for name, speed in time_bundles(bundles, options.rounds, options.speed_sentences).items():
            results[name]["speed"] = speed
    from ..core.cpu import cpu_name

    summary = {"options": asdict(options), "cpu": cpu_name(), "software": str(software) if software else None,
               "shapes": results, "failed": failed}
    (work / "sweep.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    (work / "sweep.md").write_text("\n".join(render(summary)) + "\n", encoding="utf-8")
    if failed:
        raise ExportError(f"{len(failed)} of {len(runs)} shapes failed ({', '.join(failed)}); the others are in "
                          f"{work / 'sweep.md'}; run the same command again to retry them")
    return summary


def render(summary: dict) -> list[str]:
    """``sweep.md``: one row per shape, the dev BLEUs of its int8r bundle and how many of its
    dev translations stutter (Tatoeba/software, :func:`.evaluate.stutters`), its speed and its
    PyTorch dev BLEU at each logged minute."""
    opts = summary["options"]
    lines = [f"Sweep: {opts['minutes']:g} minutes of training per shape (CPU time over {opts['threads']} "
             f"thread(s), {opts['parallel']} shapes at a time), batches of {opts['batch_tokens']} tokens, peak learning "
             f"rate {opts['lr']:g} after {opts['warmup']} warm-up steps, dev BLEU every "
             f"{opts['eval_minutes']:g} minutes; CPU: {summary['cpu']}. Dev BLEU of each int8r bundle (greedy); "
             "the kept checkpoint is the best by the mean of the two. Speed: batch 1 on one thread over "
             f"{opts['speed_sentences']} prose sentences, median of {opts['rounds']} rounds (encoder included); "
             "the curve is PyTorch's dev BLEU (Tatoeba/software) at each logged minute."
             + (f" Every shape started from {opts['init_from']} (its tokenizers and weights; a shallower stack from "
                "its evenly spread layers, first and last kept)." if opts.get("init_from") else ""), "",
             "| shape | spec | params M | bundle MB | minutes | steps | epochs | dev BLEU Tatoeba | dev BLEU software "
             "| mean | stutters | ms/token | sentences/s | dev BLEU by minute |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in summary["shapes"].items():
        dev = r.get("bundle_dev", {})
        tat, soft = dev.get("tatoeba", {}).get("bleu"), dev.get("software", {}).get("bleu")
        scored = [x for x in (tat, soft) if x is not None]
        mean = round(sum(scored) / len(scored), 2) if scored else ""
        speed = r.get("speed", {})
        stutter = "/".join(str(dev.get(split, {}).get("stutters", "–")) for split in ("tatoeba", "software"))
        curve = ", ".join(f"{h['minutes']:g}: {h.get('dev_bleu', '')}/{h.get('software_bleu', '–')}"
                          for h in r.get("history", []))
        spec = r.get("spec", "") + (" (bf16)" if r.get("options", {}).get("precision") == "bf16" else "")
        lines.append(f"| {name} | {spec} | {r['parameters'] / 1e6:.2f} | {r['bundle_mb']} | "
                     f"{r.get('minutes', '')} | {r.get('steps', '')} | {r.get('epochs', '')} | "
                     f"{'' if tat is None else tat} | {'' if soft is None else soft} | {mean} | {stutter} | "
                     f"{speed.get('ms_per_token', '')} | {speed.get('sent_s', '')} | {curve} |")
    for name, why in summary.get("failed", {}).items():
        lines.append(f"| {name} | failed: {why} " + "| " * 12 + "|")
    return lines


if __name__ == "__main__":
    sys.exit(main())
