"""Train the small embedded English→Chinese Marian model, end to end and resumable.

Stages (each skipped when its output exists, so a rerun resumes):

1. ``data`` (:mod:`.traindata`): Tatoeba pairs split by ``cmn_id % 20`` (0 test, 1 dev),
   HSK sentences, CC-CEDICT word pairs and (``software``) the software harvest, with
   everything that touches an evaluation split (Tatoeba's test and dev, the software test
   and dev packages) or the held-out word sample removed; Simplified and Traditional targets.
2. ``tokenizers``: source and target SentencePiece models (the target's trained on both
   scripts) and the joint vocabulary with both language tokens.
3. ``train``: a MarianMTModel trained with label smoothing and an inverse-square-root
   schedule, each epoch a seeded share of the pairs with the Traditional target and
   ``>>cmn_Hant<<`` (and, with ``software_share``, a seeded share of the software rows);
   checkpointed (model, optimizer, position in the epoch, RNG) so it resumes, logging loss
   and dev BLEU to ``progress.log``; stops at a time budget and keeps the best dev
   checkpoint (:func:`dev_criterion`).
4. ``export``: the bundle, through the normal exporter (with its validation).
5. ``--evaluate``: PyTorch and every weight scheme scored on the test split (``eval.json``;
   :func:`.schemes.evaluate_choices`).
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import ExportError, require
from .quantize import QuantizeOptions
from .pairs import read_eval_pairs
from .traindata import is_software, prepare_data, read_pairs, read_train

logger = logging.getLogger(__name__)

#: The target tokens, as in ``export.TARGET_VARIANTS``; ``testmodels.joint_vocab`` gives them ids 2 and 3.
LANG_TOKEN = ">>cmn_Hans<<"
HANT_TOKEN = ">>cmn_Hant<<"
#: The arithmetic a training step may use (:attr:`TrainOptions.precision`).
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class TrainOptions:
    """Everything that decides the trained model; recorded in the work directory."""

    seed: int = 1
    """Seed of data shuffling, initialization and dropout."""
    d_model: int = 256
    encoder_layers: int = 6
    """The encoder runs once a sentence, so depth here is cheap at batch 1."""
    decoder_layers: int = 3
    heads: int = 4
    ffn: int = 1024
    source_vocab: int = 6000
    """SentencePiece pieces for English."""
    target_vocab: int = 10000
    """SentencePiece pieces for Chinese, Simplified and Traditional together."""
    target_coverage: float = 0.999
    """SentencePiece ``character_coverage`` of the Chinese side; rarer characters are
    unknown, and pairs whose target has one are left out of training."""
    hant_fraction: float = 0.3
    """Share of the training pairs given, each epoch, as Traditional with ``>>cmn_Hant<<``."""
    max_positions: int = 256
    dropout: float = 0.1
    label_smoothing: float = 0.1
    lr: float = 1e-3
    warmup: int = 500
    batch_tokens: int = 5000
    """Source plus target tokens per batch, roughly."""
    max_epochs: int = 40
    time_budget_minutes: float = 420.0
    """Training stops after this much training time, summed over resumes and counted as the
    process's CPU time over its threads: a machine busy with other work slows training
    down but does not use up its budget, so the steps a budget buys do not depend on load."""
    dev_size: int = 300
    """Tatoeba dev pairs decoded for the dev BLEU."""
    software_dev_size: int | None = None
    """Software dev pairs decoded for the software dev BLEU (with the software harvest);
    ``None`` decodes them all."""
    eval_minutes: float | None = None
    """Score the dev splits every this many minutes of training (and when training stops)
    instead of after each epoch: a short run still gets several points."""
    software_share: float = 1.0
    """Share of the software rows taken into each epoch, a seeded subset that changes from
    epoch to epoch; the other sources are always taken whole. 1.0 takes them all."""
    checkpoint_minutes: float = 10.0
    threads: int | None = None
    """Torch threads; ``None`` leaves torch's default (all cores)."""
    init_from: str | None = None
    """A Hugging Face Marian folder to start from (a kept checkpoint such as
    ``models/checkpoints/tatoeba-en-zh-small``): its tokenizers are used instead of new
    ones, and its weights are the first step's (its shape, or the same width and vocabulary
    with fewer layers: see :func:`_warm_start`). The learning rate warms up again; the data
    and the dev scoring are this run's."""

    precision: str = "fp32"
    """Arithmetic of the training steps: ``fp32``, or ``bf16``: the forward pass under
    torch's CPU autocast to bfloat16, the loss, the weights and the optimizer in float32.
    On a CPU with bfloat16 instructions a step costs less CPU time (about half on these
    machines' AMD EPYC: :mod:`.stepspeed`), so a budget buys more steps; without them it
    costs more. Dev scoring and export are float32 either way."""

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")
        if not 0.0 < self.software_share <= 1.0:
            raise ValueError(f"software_share must be above 0 and at most 1, not {self.software_share}")
        if self.eval_minutes is not None and not self.eval_minutes > 0:
            raise ValueError(f"eval_minutes must be above 0, not {self.eval_minutes}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not a multiple of heads {self.heads}")


# -- tokenizers ----------------------------------------------------------------------------
def train_tokenizers(work: Path, opts: TrainOptions, train_tsv: Path) -> Path:
    """Stage 2: SentencePiece models and joint vocabulary (both language tokens) in ``hf/``."""
    from .testmodels import joint_vocab, spm_pieces, train_spm, write_tokenizer

    hf = work / "hf"
    if (hf / "vocab.json").is_file():
        return hf
    if opts.init_from:
        return _copy_tokenizers(Path(opts.init_from), hf)
    rows = read_train(train_tsv)
    english = [r[3] for r in rows]
    chinese = [r[1] for r in rows] + [r[2] for r in rows if r[2] != r[1]]
    source = train_spm(english, opts.source_vocab, 1.0, opts.seed)
    target = train_spm(chinese, opts.target_vocab, opts.target_coverage, opts.seed)
    vocab = joint_vocab(source, target)
    hf.mkdir(parents=True, exist_ok=True)
    write_tokenizer(hf, source, target, vocab, opts.max_positions)
    logger.info("tokenizers: %d joint ids (%d source, %d target pieces)", len(vocab), len(spm_pieces(source)),
                len(spm_pieces(target)))
    return hf


def _copy_tokenizers(start: Path, hf: Path) -> Path:
    """A warm start's tokenizers: the starting checkpoint's, copied into ``hf/``."""
    import shutil

    needed = ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "config.json")
    missing = [name for name in needed if not (start / name).is_file()]
    if missing:
        raise ExportError(f"--init-from {start} is not a Hugging Face Marian folder: {', '.join(missing)} missing; "
                          "give a checkpoint kept by `train-demo --checkpoint`")
    hf.mkdir(parents=True, exist_ok=True)
    for name in needed[:4]:
        shutil.copyfile(start / name, hf / name)
    logger.info("tokenizers: those of %s (a warm start)", start)
    return hf


def kept_layers(theirs: int, ours: int) -> list[int]:
    """Which of a checkpoint's ``theirs`` layers a shallower stack of ``ours`` starts from:
    spread evenly, the first and the last kept (3 → 2: layers 0 and 2), the first alone for one
    (as DistilBART's shrink-and-fine-tune copies teacher layers)."""
    if ours == 1:
        return [0]
    return [round(i * (theirs - 1) / (ours - 1)) for i in range(ours)]


def _layer_count(names, side: str) -> int:
    found = {int(m.group(1)) for n in names if (m := re.match(rf"model\.{side}\.layers\.(\d+)\.", n))}
    return max(found) + 1 if found else 0


def _warm_start(model, start: Path, transformers) -> None:
    """Load the starting checkpoint's weights (float16 widened) into ``model``: the same shape, or
    the same width and vocabulary with fewer encoder or decoder layers, each stack starting from
    the checkpoint's layers that :func:`kept_layers` picks (a shallow decoder from a deep one)."""
    import torch

    source = transformers.MarianMTModel.from_pretrained(str(start), torch_dtype=torch.float32)
    theirs, ours = source.state_dict(), model.state_dict()
    maps = {}
    for side in ("encoder", "decoder"):
        have, want = _layer_count(theirs, side), _layer_count(ours, side)
        if want > have:
            raise ExportError(f"--init-from {start} has {have} {side} layers, this shape {want}: a warm start can "
                              f"keep or drop layers, not add them; give at most {have}")
        maps[side] = kept_layers(have, want) if want else []

    def source_name(name: str) -> str:
        match = re.match(r"model\.(encoder|decoder)\.layers\.(\d+)\.(.*)", name)
        if not match:
            return name
        return f"model.{match.group(1)}.layers.{maps[match.group(1)][int(match.group(2))]}.{match.group(3)}"

    wrong = [k for k in ours if source_name(k) not in theirs or theirs[source_name(k)].shape != ours[k].shape]
    if wrong:
        raise ExportError(f"--init-from {start} has another shape than this run ({len(wrong)} tensors differ, e.g. "
                          f"{wrong[0]}); give the checkpoint's width, heads, feed-forward size and vocabulary")
    model.load_state_dict({k: theirs[source_name(k)] for k in ours})
    dropped = {side: kept for side, kept in maps.items() if len(kept) < _layer_count(theirs, side)}
    logger.info("started from the weights of %s%s", start,
                "".join(f"; {side} layers {kept}" for side, kept in dropped.items()))


def encode_pairs(hf: Path, rows, stats_out: Path | None = None,
                 origins: list[str] | None = None) -> list[tuple[list[int], ...]]:
    """Encode training rows as ``(source Hans, target Hans, source Hant, target Hant)`` ids.

    Rows whose target has an unknown piece in either script are dropped (they would teach
    ``<unk>``); the unknown rate is logged and written to ``stats_out``, with the drops per
    origin (every software package counted as ``software``).

    Args:
        origins: If given, each kept row's origin is appended to it, in step with the result.
    """
    from collections import Counter

    from .traindata import origin_group

    from ..core.tokenizer import Tokenizer

    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    tok = Tokenizer.load(hf / "source.spm", hf / "target.spm", hf / "vocab.json", 0, 1, vocab["<pad>"])
    hans, hant = vocab[LANG_TOKEN], vocab[HANT_TOKEN]
    pairs, unknown, pieces, dropped, by_origin = [], 0, 0, 0, Counter()
    for origin, zh, zh_hant, en in rows:
        src = tok.encode(en, hans)
        tgt = [vocab.get(p, 1) for p in tok.target.encode(zh, out_type=str)] + [0]
        tgt_t = [vocab.get(p, 1) for p in tok.target.encode(zh_hant, out_type=str)] + [0]
        bad = tgt.count(1) + tgt_t.count(1)
        unknown += bad
        pieces += len(tgt) + len(tgt_t)
        if bad:
            dropped += 1
            by_origin[origin_group(origin)] += 1
            continue
        pairs.append((src, tgt, [hant] + src[1:], tgt_t))
        if origins is not None:
            origins.append(origin)
    stats = {"pairs": len(rows), "dropped_unknown": dropped, "target_unknown_rate": round(unknown / max(pieces, 1), 5),
             "joint_vocab": len(vocab), "dropped_unknown_by_origin": dict(sorted(by_origin.items()))}
    logger.info("encoded: %s", stats)
    if stats_out is not None:
        stats_out.write_text(json.dumps(stats, indent=2))
    return pairs


def epoch_pairs(pairs, epoch: int, seed: int, fraction: float) -> list[tuple[list[int], list[int]]]:
    """The epoch's ``(source, target)`` ids: a seeded ``fraction`` of the pairs in Traditional."""
    rng = random.Random(seed * 7919 + epoch)
    return [(p[2], p[3]) if rng.random() < fraction else (p[0], p[1]) for p in pairs]


def mix_epoch(pairs: list, software: list[bool], epoch: int, seed: int, share: float) -> list:
    """The pairs of an epoch: every pair not from the software harvest, and a seeded ``share``
    of those that are (another subset each epoch). ``share`` 1.0 returns ``pairs`` itself."""
    if share >= 1.0:
        return pairs
    rng = random.Random(seed * 104729 + epoch)
    return [p for p, soft in zip(pairs, software) if not soft or rng.random() < share]


def dev_criterion(entry: dict) -> float:
    """What the kept checkpoint maximizes: the mean of the dev BLEUs scored (Tatoeba's, and the
    software split's when training has one)."""
    scores = [entry[k] for k in ("dev_bleu", "software_bleu") if entry.get(k) is not None]
    return sum(scores) / len(scores)


def dev_sets(files: dict[str, Path], opts: TrainOptions) -> dict[str, tuple[list[str], list[str]]]:
    """``{"dev": (English, Chinese), "software": ...}``: what each dev score decodes."""
    rows = read_pairs(files["dev"])[: opts.dev_size]
    sets = {"dev": ([r[3] for r in rows], [r[1] for r in rows])}
    if files.get("software_dev"):
        sets["software"] = read_eval_pairs(files["software_dev"], opts.software_dev_size)
    return sets


def _batches(pairs, batch_tokens: int, rng: random.Random) -> list[list[int]]:
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][0]), rng.random()))
    batches, current, longest = [], [], 0
    for i in order:
        size = len(pairs[i][0]) + len(pairs[i][1])
        if current and (len(current) + 1) * max(longest, size) > batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    rng.shuffle(batches)
    return batches


# -- model --------------------------------------------------------------------------------
def _config(opts: TrainOptions, vocab_size: int):
    transformers = require("transformers", "export")
    pad = vocab_size - 1
    return transformers.MarianConfig(
        vocab_size=vocab_size, decoder_vocab_size=vocab_size, d_model=opts.d_model,
        encoder_layers=opts.encoder_layers, decoder_layers=opts.decoder_layers,
        encoder_attention_heads=opts.heads, decoder_attention_heads=opts.heads,
        encoder_ffn_dim=opts.ffn, decoder_ffn_dim=opts.ffn, max_position_embeddings=opts.max_positions,
        activation_function="swish", scale_embedding=True, share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True, dropout=opts.dropout, attention_dropout=opts.dropout,
        activation_dropout=0.0, pad_token_id=pad, eos_token_id=0, bos_token_id=0,
        decoder_start_token_id=pad, forced_eos_token_id=0, static_position_embeddings=True,
    )


def _collate(torch, pairs, idx, pad: int, max_positions: int):
    src = [pairs[i][0][:max_positions] for i in idx]
    tgt = [pairs[i][1][: max_positions - 1] for i in idx]
    s_len, t_len = max(map(len, src)), max(map(len, tgt))
    input_ids = torch.full((len(idx), s_len), pad, dtype=torch.long)
    mask = torch.zeros((len(idx), s_len), dtype=torch.long)
    labels = torch.full((len(idx), t_len), -100, dtype=torch.long)
    decoder_in = torch.full((len(idx), t_len), pad, dtype=torch.long)
    for row, (s, t) in enumerate(zip(src, tgt)):
        input_ids[row, : len(s)] = torch.tensor(s)
        mask[row, : len(s)] = 1
        labels[row, : len(t)] = torch.tensor(t)
        decoder_in[row, 1: len(t)] = torch.tensor(t[:-1])
    return input_ids, mask, decoder_in, labels


def train_model(work: Path, opts: TrainOptions, hf: Path, files: dict[str, Path]) -> Path:
    """Stage 3: train (resuming from ``ckpt/last.pt``); the best dev model is saved in ``hf/``.

    Dev BLEU is scored after each epoch, or every ``opts.eval_minutes`` of training, on the
    first ``opts.dev_size`` Tatoeba dev pairs and, when ``files`` has ``software_dev``, on
    the software dev split; the checkpoint kept is the best by :func:`dev_criterion`.
    ``ckpt/done.json`` holds every point (``history``) and the kept one (``best``).
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")

    transformers.utils.logging.set_verbosity_error()
    done = work / "ckpt" / "done.json"
    if done.is_file():
        return hf
    if opts.threads:
        torch.set_num_threads(opts.threads)
    threads = torch.get_num_threads()
    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    pad = vocab["<pad>"]
    origins: list[str] = []
    encoded = encode_pairs(hf, read_train(files["train"]), work / "encoded.json", origins)
    software = [is_software(o) for o in origins]
    dev = dev_sets(files, opts)
    torch.manual_seed(opts.seed)
    model = transformers.MarianMTModel(_config(opts, len(vocab)))
    if opts.init_from and not (work / "ckpt" / "last.pt").is_file():
        _warm_start(model, Path(opts.init_from), transformers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=opts.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=0.0)
    state = {"epoch": 0, "batch": 0, "step": 0, "elapsed": 0.0, "best_bleu": -1.0, "history": []}
    ckpt_dir = work / "ckpt"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    last = ckpt_dir / "last.pt"
    if last.is_file():
        saved = torch.load(last, weights_only=False)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        torch.set_rng_state(saved["torch_rng"])
        logger.info("resumed at epoch %d batch %d (%.1f min trained)", state["epoch"], state["batch"],
                    state["elapsed"] / 60)
    state.setdefault("best", None)
    if state["best"] is None and state["best_bleu"] >= 0:  # a run begun before the combined criterion
        state["best"] = {"dev_bleu": state["best_bleu"], "score": state["best_bleu"]}
    state.setdefault("next_eval", opts.eval_minutes)
    state.setdefault("losses", [])
    (work / "train_options.json").write_text(json.dumps(asdict(opts), indent=2))

    def lr_at(step: int) -> float:
        step = max(step, 1)
        return opts.lr * min(step / opts.warmup, math.sqrt(opts.warmup / step))

    def save(path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                    "torch_rng": torch.get_rng_state()}, tmp)
        tmp.replace(path)

    def evaluate_dev() -> None:
        entry = {"epoch": state["epoch"], "step": state["step"], "minutes": round(state["elapsed"] / 60, 2),
                 "train_loss": round(sum(state["losses"]) / max(len(state["losses"]), 1), 4)}
        entry.update(dev_scores(model, hf, dev))
        entry["score"] = round(dev_criterion(entry), 2)
        state["history"].append(entry)
        state["losses"] = []
        logger.info("dev: %s", entry)
        if state["best"] is None or entry["score"] > state["best"]["score"]:
            state["best"], state["best_bleu"] = entry, entry["dev_bleu"]
            model.save_pretrained(str(hf))
        save(last)

    budget = opts.time_budget_minutes * 60
    last_save = time.monotonic()
    progress = logging.FileHandler(work / "progress.log", encoding="utf-8")
    progress.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(progress)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    logger.info("training %d pairs (%d from the software harvest), %s", len(encoded), sum(software),
                json.dumps(asdict(opts)))
    while state["epoch"] < opts.max_epochs and state["elapsed"] < budget:
        chosen = mix_epoch(encoded, software, state["epoch"], opts.seed, opts.software_share)
        train_pairs = epoch_pairs(chosen, state["epoch"], opts.seed, opts.hant_fraction)
        batches = _batches(train_pairs, opts.batch_tokens, random.Random(opts.seed * 1000 + state["epoch"]))
        model.train()
        cpu_tick = time.process_time()
        while state["batch"] < len(batches) and state["elapsed"] < budget:
            input_ids, mask, decoder_in, labels = _collate(torch, train_pairs, batches[state["batch"]], pad,
                                                           opts.max_positions)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(state["step"] + 1)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=opts.precision == "bf16"):
                logits = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_in).logits
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                     ignore_index=-100, label_smoothing=opts.label_smoothing)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            state["losses"].append(loss.item())
            state["batch"] += 1
            state["step"] += 1
            now, cpu_now = time.monotonic(), time.process_time()
            # CPU time over the threads: what the step cost this process, not how long other
            # work on the machine (or a SIGSTOP, a laptop's sleep) kept it waiting.
            state["elapsed"] += min((cpu_now - cpu_tick) / threads, 120.0)
            cpu_tick = cpu_now
            if state["step"] % 100 == 0:
                recent = state["losses"][-100:]
                logger.info("epoch %d step %d loss %.3f lr %.2e (%.1f min)", state["epoch"], state["step"],
                            sum(recent) / len(recent), lr_at(state["step"]), state["elapsed"] / 60)
            if opts.eval_minutes and state["elapsed"] >= state["next_eval"] * 60:
                while state["next_eval"] * 60 <= state["elapsed"]:
                    state["next_eval"] += opts.eval_minutes
                evaluate_dev()  # not counted in the budget: the CPU clock restarts below
                model.train()
                last_save = time.monotonic()
                cpu_tick = time.process_time()
            elif now - last_save > opts.checkpoint_minutes * 60:
                save(last)
                last_save = now
        if state["batch"] >= len(batches):
            state["epoch"] += 1
            state["batch"] = 0
        stopping = state["epoch"] >= opts.max_epochs or state["elapsed"] >= budget
        scored = state["history"] and state["history"][-1]["step"] == state["step"]
        if not scored and (not opts.eval_minutes or stopping):
            evaluate_dev()
            last_save = time.monotonic()
    generation = {"bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad, "eos_token_id": 0,
                  "forced_eos_token_id": 0, "max_length": opts.max_positions, "num_beams": 1, "pad_token_id": pad}
    (hf / "generation_config.json").write_text(json.dumps(generation, indent=2))
    done.write_text(json.dumps({"best_dev_bleu": state["best_bleu"], "best": state["best"],
                                "criterion": "mean of the dev BLEUs scored (Tatoeba dev, software dev)",
                                "history": state["history"]}, indent=2))
    logger.removeHandler(progress)
    progress.close()
    return hf


def dev_scores(model, hf: Path, sets: dict[str, tuple[list[str], list[str]]]) -> dict:
    """Greedy PyTorch BLEU and chrF on each dev set: ``dev_bleu``, ``dev_chrf``, ``software_bleu``..."""
    from . import evaluate

    scores = {}
    for name, (sources, references) in sets.items():
        score = evaluate.score(evaluate.greedy_translate(model, hf, sources, LANG_TOKEN), references)
        scores[f"{name}_bleu"], scores[f"{name}_chrf"] = score["bleu"], score["chrf"]
    return scores


def run(work: str | Path, out: str | Path, opts: TrainOptions | None = None, force: bool = False,
        quantize: QuantizeOptions | None = None, heldout_out: Path | None = None,
        software: Path | None = None) -> Path:
    """Run every stage; returns the exported bundle directory (default scheme unless ``quantize``).

    Args:
        heldout_out: Also write the held-out word sample here (e.g. ``assets/eval/``).
        software: A ``harvest-software`` output folder whose text joins the data
            (:func:`.traindata.prepare_data`); ``None`` trains without it.
    """
    from .export import ExportOptions, export

    opts = opts or TrainOptions()
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    random.seed(opts.seed)
    files = prepare_data(work, heldout_out, software=software)
    hf = train_tokenizers(work, opts, files["train"])
    train_model(work, opts, hf, files)
    return export(hf, out, ExportOptions(quantize=quantize or QuantizeOptions(), force=force, name=Path(out).name))



def evaluate_and_describe(work: Path, out: Path, checkpoint: Path | None, progress, describe) -> Path:
    """``train-demo --evaluate``: score PyTorch and every weight scheme on the test split,
    export the chosen scheme (when OUT has another), score single words, write the card.

    Args:
        progress: Prints a line.
        describe: Prints a bundle's summary.

    Returns:
        The bundle written.
    """
    from ..core.bundle import load_bundle
    from .export import ExportOptions, export
    from .modelcard import write_model_card
    from .schemes import SchemeOptions, evaluate_choices, variants

    hf = work / "hf"
    results = evaluate_choices(work, hf, progress=progress)
    r = results["pytorch_fp32"]
    progress(f"{'pytorch':10s} BLEU {r['bleu']:6.2f}  chrF {r['chrf']:6.2f}")
    chosen = variants(SchemeOptions())[results["choice"]]
    if load_bundle(out).quantization != chosen.as_manifest():
        out = export(hf, out, ExportOptions(quantize=chosen, force=True, name=Path(out).name))
        describe(out)
    words = evaluate_words(out, work / "data" / "heldout.tsv")
    (work / "words.json").write_text(json.dumps(words, indent=2, ensure_ascii=False), encoding="utf-8")
    progress(f"single words right: {words['right']} of {words['words']} ({words['accuracy']:.1%})")
    progress(f"wrote {write_model_card(out, work, Path(out).name, checkpoint)}")
    return out


#: Files of a Hugging Face Marian directory that a kept checkpoint carries beside the weights.
CHECKPOINT_FILES = ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json", "generation_config.json")


def save_checkpoint(hf: str | Path, out: str | Path, force: bool = False) -> Path:
    """Keep a trained model as float16 safetensors plus its config and tokenizer files.

    The directory is a normal Hugging Face MarianMT directory: ``edge-translator export OUT
    BUNDLE`` reads it back as float32 (the exporter always loads float32), and
    ``MarianMTModel.from_pretrained(OUT, dtype="float32")`` resumes work on it.

    Raises:
        ExportError: If ``out`` exists and ``force`` is not set.
    """
    import shutil

    from ..core.errors import ExportError

    torch = require("torch", "export")
    transformers = require("transformers", "export")
    hf, out = Path(hf), Path(out)
    if out.exists() and not force:
        raise ExportError(f"{out} already exists; pass force=True (--force) to overwrite it")
    model = transformers.MarianMTModel.from_pretrained(str(hf), dtype=torch.float32).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(str(out), safe_serialization=True)
    for name in CHECKPOINT_FILES:
        if (hf / name).is_file():
            shutil.copyfile(hf / name, out / name)
    logger.info("kept float16 checkpoint in %s", out)
    return out


def evaluate_words(bundle: str | Path, heldout: str | Path, threads: int | None = None) -> dict:
    """Single-word accuracy of a bundle's model on a held-out sample file
    (:func:`.dictionary.single_word_accuracy`): the model's, so the dictionary is off."""
    from ..core.translator import TranslateOptions, Translator
    from .dictionary import read_heldout, single_word_accuracy

    sample, index = read_heldout(Path(heldout))
    with Translator.load(bundle, threads=threads, cache=None) as translator:
        return single_word_accuracy(lambda words: translator.translate_batch(words, TranslateOptions(dictionary=False)),
                                    sample, index)
