"""OPUS-MT and Tatoeba-Challenge Marian releases read into :class:`.marian.MarianWeights` with numpy.

A release (a ``.zip``, or the folder it unpacks to) holds the model as a numpy ``.npz``
with marian-nmt's parameter names (``Wemb``, ``encoder_l1_self_Wq``, ...), its settings as
YAML inside it (``special:model.yml``), the vocabulary (``*.vocab.yml``), ``decoder.yml``
and the two SentencePiece models. Read here the way the Hugging Face ports of these models
were made: matrices are already [in, out]; ``<pad>`` is added as the last id, with a zero
embedding row and a zero output bias, and is also the decoder's start; the positions are
the sinusoidal table of ``dim-emb`` positions. :func:`prepare_release` writes what the
exporter reads beside the weights (``vocab.json``, ``config.json``, the tokenizer), so a
release exports like a Hugging Face folder. :func:`write_release` is the inverse, for tests
and for moving a model back to marian-nmt's tools.
"""

from __future__ import annotations

import json
import logging
import shutil
import zipfile
from pathlib import Path, PurePosixPath

import numpy as np

from ..core.errors import ExportError, require
from .marian import MarianShape, MarianWeights
from .statedict import LAYER_NORM_EPS, sinusoidal_positions

logger = logging.getLogger(__name__)

CONFIG_KEY = "special:model.yml"
BIAS_KEY = "decoder_ff_logit_out_b"
#: marian-nmt layer names → MarianWeights keys (the part after ``encoder_lN_`` / ``decoder_lN_``).
LAYER_NAMES = {
    "self_Wq": "sa_q_w", "self_bq": "sa_q_b", "self_Wk": "sa_k_w", "self_bk": "sa_k_b", "self_Wv": "sa_v_w",
    "self_bv": "sa_v_b", "self_Wo": "sa_o_w", "self_bo": "sa_o_b", "self_Wo_ln_scale": "ln1_g",
    "self_Wo_ln_bias": "ln1_b", "ffn_W1": "fc1_w", "ffn_b1": "fc1_b", "ffn_W2": "fc2_w", "ffn_b2": "fc2_b",
}
ENCODER_NAMES = {**LAYER_NAMES, "ffn_ffn_ln_scale": "ln2_g", "ffn_ffn_ln_bias": "ln2_b"}
DECODER_NAMES = {
    **LAYER_NAMES, "ffn_ffn_ln_scale": "ln3_g", "ffn_ffn_ln_bias": "ln3_b",
    "context_Wq": "ca_q_w", "context_bq": "ca_q_b", "context_Wk": "ca_k_w", "context_bk": "ca_k_b",
    "context_Wv": "ca_v_w", "context_bv": "ca_v_b", "context_Wo": "ca_o_w", "context_bo": "ca_o_b",
    "context_Wo_ln_scale": "ln2_g", "context_Wo_ln_bias": "ln2_b",
}
#: Settings the conversion assumes, as marian-nmt writes them: a post-norm transformer.
ASSUMED = {"type": "transformer", "transformer-postprocess": "dan", "transformer-preprocess": "",
           "transformer-ffn-depth": "2", "right-left": "false", "layer-normalization": "false",
           "transformer-postprocess-emb": "d", "transformer-no-projection": "false"}
#: The files of a release that conversion reads (everything else in a zip is left there).
RELEASE_SUFFIXES = (".npz", ".spm", ".yml", ".md", ".txt")
MAX_MEMBER_BYTES = 8 << 30


def _yaml(text: str, where: str) -> dict:
    yaml = require("yaml", "convert")
    try:
        loaded = yaml.load(text, Loader=getattr(yaml, "CBaseLoader", yaml.BaseLoader))
    except yaml.YAMLError as exc:
        raise ExportError(f"{where} is not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(loaded, dict):
        raise ExportError(f"{where} is not a YAML mapping")
    return loaded


def _flag(cfg: dict, key: str, default: str = "false") -> bool:
    return str(cfg.get(key, default)).lower() == "true"


def release_files(folder: Path) -> tuple[Path, Path, Path, Path, Path]:
    """``(npz, vocab.yml, source.spm, target.spm, decoder.yml)`` of a release folder.

    Raises:
        ExportError: Naming the file that is missing, or a vocabulary split in two.
    """
    npz = sorted(p for p in folder.glob("*.npz") if not p.name.endswith(".optimizer.npz"))
    if len(npz) != 1:
        raise ExportError(f"{folder} holds {len(npz)} model .npz files; a Marian release has exactly one")
    if list(folder.glob("*.src.vocab.yml")) or list(folder.glob("*.trg.vocab.yml")):
        raise ExportError(f"{folder} has separate source and target vocabularies (*.src.vocab.yml, *.trg.vocab.yml), "
                          "which the exporter does not convert; use a release with one shared vocab.yml")
    vocabs = sorted(folder.glob("*vocab.yml"))
    if len(vocabs) != 1:
        raise ExportError(f"{folder} holds {len(vocabs)} *vocab.yml files; a Marian release has one")
    found = [npz[0], vocabs[0]]
    for name in ("source.spm", "target.spm", "decoder.yml"):
        if not (folder / name).is_file():
            raise ExportError(f"{folder / name} is missing: a Marian release has source.spm, target.spm, "
                              "decoder.yml and its vocab.yml beside the .npz")
        found.append(folder / name)
    return tuple(found)


def _model_config(params, where: str) -> dict:
    if CONFIG_KEY not in params:
        raise ExportError(f"{where} holds no {CONFIG_KEY}: it is not a marian-nmt model file")
    raw = bytes(np.asarray(params[CONFIG_KEY]).astype(np.uint8).tobytes()).rstrip(b"\x00")
    cfg = _yaml(raw.decode("utf-8", errors="replace"), f"{where} ({CONFIG_KEY})")
    for key, wanted in ASSUMED.items():
        if key in cfg and str(cfg[key]).lower() != wanted:
            raise ExportError(f"{where}: {key} is {cfg[key]!r}; the exporter converts marian-nmt transformers with "
                              f"{key}: {wanted!r} (the OPUS-MT and Tatoeba-Challenge models)")
    if "n" in str(cfg.get("transformer-preprocess", "")) or "Wpos" in params or "encoder_emb_ln_scale_pre" in params:
        raise ExportError(f"{where}: embedding normalization or learned positions are not converted")
    return cfg


def _int(cfg: dict, key: str, where: str) -> int:
    try:
        return int(cfg[key])
    except (KeyError, TypeError, ValueError):
        raise ExportError(f"{where}: {CONFIG_KEY} lacks a number for {key}") from None


def read_release(folder: Path) -> tuple[MarianWeights, dict[str, int], dict]:
    """Read an unpacked release: ``(weights, vocab with <pad> last, decoder.yml settings)``.

    Raises:
        ExportError: One line naming the missing file, the missing parameter or the setting
            that is not converted.
    """
    npz_path, vocab_path, _, _, decoder_path = release_files(folder)
    where = str(npz_path)
    try:
        params = dict(np.load(npz_path, allow_pickle=False))
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise ExportError(f"{npz_path} cannot be read as a numpy .npz ({str(exc).splitlines()[0]}); the release is "
                          "truncated or corrupt, download it again") from None
    cfg = _model_config(params, where)
    vocab_raw = _yaml(vocab_path.read_text(encoding="utf-8"), str(vocab_path))
    try:
        vocab = {str(k): int(v) for k, v in vocab_raw.items()}
    except (TypeError, ValueError):
        raise ExportError(f"{vocab_path} does not map pieces to ids") from None
    decoder = _yaml(decoder_path.read_text(encoding="utf-8"), str(decoder_path))
    if "<pad>" not in vocab:
        vocab["<pad>"] = max(vocab.values()) + 1
    pad, eos = vocab["<pad>"], vocab.get("</s>", 0)
    tied_src = _flag(cfg, "tied-embeddings-src") or _flag(cfg, "tied-embeddings-all")
    tied_out = _flag(cfg, "tied-embeddings", "true") or _flag(cfg, "tied-embeddings-all")
    if not tied_out or "decoder_ff_logit_out_W" in params:
        raise ExportError(f"{where}: its output layer is not tied to the target embeddings, which the exporter does "
                          "not convert")

    def take(name: str) -> np.ndarray:
        if name not in params:
            raise ExportError(f"{where} lacks {name}; the release is incomplete or not a transformer")
        return np.ascontiguousarray(params[name], dtype=np.float32)

    def with_pad(matrix: np.ndarray) -> np.ndarray:
        return np.concatenate([matrix, np.zeros((1, matrix.shape[1]), np.float32)])

    d = _int(cfg, "dim-emb", where)
    if tied_src:
        encoder_embed = decoder_embed = with_pad(take("Wemb"))
    else:
        encoder_embed, decoder_embed = with_pad(take("encoder_Wemb")), with_pad(take("decoder_Wemb"))
    vocab_size = encoder_embed.shape[0]
    if decoder_embed.shape[0] != vocab_size or max(vocab.values()) + 1 != vocab_size:
        raise ExportError(f"{where}: {vocab_size} embedding rows (with <pad>) against {max(vocab.values()) + 1} ids in "
                          f"{vocab_path.name}; the vocabulary is not this model's")
    bias = np.concatenate([take(BIAS_KEY).reshape(-1), np.zeros(1, np.float32)])
    heads, ffn = _int(cfg, "transformer-heads", where), _int(cfg, "transformer-dim-ffn", where)
    activation = str(cfg.get("transformer-ffn-activation", "swish"))
    shape = MarianShape(d_model=d, encoder_layers=_int(cfg, "enc-depth", where),
                        decoder_layers=_int(cfg, "dec-depth", where), encoder_heads=heads, decoder_heads=heads,
                        encoder_ffn=ffn, decoder_ffn=ffn, vocab_size=vocab_size, decoder_vocab_size=vocab_size,
                        max_positions=d, activation=activation, scale_embedding=True,
                        layer_norm_eps=LAYER_NORM_EPS, pad_id=pad, eos_id=eos, decoder_start_id=pad)
    if d % heads:
        raise ExportError(f"{where}: dim-emb {d} is not divisible by transformer-heads {heads}")
    positions = sinusoidal_positions(d, d)
    weights = MarianWeights(shape=shape, encoder_embed=encoder_embed, decoder_embed=decoder_embed,
                            lm_head=decoder_embed, final_logits_bias=bias, encoder_positions=positions,
                            decoder_positions=positions.copy())
    for side, names, count, out in (("encoder", ENCODER_NAMES, shape.encoder_layers, weights.encoder_layers),
                                    ("decoder", DECODER_NAMES, shape.decoder_layers, weights.decoder_layers)):
        for i in range(1, count + 1):
            layer = {ours: take(f"{side}_l{i}_{theirs}") for theirs, ours in names.items()}
            out.append({k: v.reshape(-1) if k[-2:] in ("_b", "_g") else v for k, v in layer.items()})
    if encoder_embed is not decoder_embed and np.array_equal(encoder_embed, decoder_embed):
        weights.encoder_embed = weights.decoder_embed
    return weights, vocab, decoder


def unpack_release(zip_path: Path, into: Path) -> Path:
    """Extract a release ``.zip``'s model files into ``into`` (safely) and return the release folder.

    Raises:
        ExportError: A file that is not a zip, a member that would land outside ``into``, or
            a release that lacks a file.
    """
    try:
        archive = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise ExportError(f"{zip_path} is not a readable zip file ({exc}); download it again") from None
    with archive:
        for info in archive.infolist():
            name = PurePosixPath(info.filename)
            if info.filename.startswith(("/", "\\")) or ".." in name.parts or "\\" in info.filename:
                raise ExportError(f"{zip_path}: the member {info.filename!r} points outside its folder; refusing "
                                  "the zip")
            if info.is_dir() or not name.name.lower().endswith(RELEASE_SUFFIXES):
                continue
            if info.file_size > MAX_MEMBER_BYTES:
                raise ExportError(f"{zip_path}: the member {info.filename!r} claims {info.file_size} bytes")
            dest = into.joinpath(*name.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                with archive.open(info) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
            except (zipfile.BadZipFile, EOFError, OSError) as exc:
                raise ExportError(f"{zip_path} is truncated or corrupt at {info.filename} ({exc}); download it "
                                  "again") from None
    candidates = sorted({p.parent for p in into.rglob("*.npz") if not p.name.endswith(".optimizer.npz")})
    if len(candidates) != 1:
        raise ExportError(f"{zip_path} holds {len(candidates)} model .npz files; a Marian release has exactly one")
    return candidates[0]


def prepare_release(folder: Path, out: Path) -> Path:
    """Write the Hugging Face-shaped files the exporter reads beside the weights: the two
    SentencePiece models, ``vocab.json``, a ``config.json`` and ``generation_config.json``
    describing the release, and its README. Returns ``out``."""
    weights, vocab, decoder = read_release(folder)
    _, _, source_spm, target_spm, _ = release_files(folder)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source_spm, out / "source.spm")
    shutil.copyfile(target_spm, out / "target.spm")
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    s = weights.shape
    config = {"model_type": "marian", "d_model": s.d_model, "encoder_layers": s.encoder_layers,
              "decoder_layers": s.decoder_layers, "encoder_attention_heads": s.encoder_heads,
              "decoder_attention_heads": s.decoder_heads, "encoder_ffn_dim": s.encoder_ffn,
              "decoder_ffn_dim": s.decoder_ffn, "vocab_size": s.vocab_size, "decoder_vocab_size": s.decoder_vocab_size,
              "max_position_embeddings": s.max_positions, "activation_function": s.activation,
              "scale_embedding": True, "pad_token_id": s.pad_id, "eos_token_id": s.eos_id,
              "decoder_start_token_id": s.decoder_start_id, "forced_eos_token_id": s.eos_id,
              "share_encoder_decoder_embeddings": weights.encoder_embed is weights.decoder_embed,
              "tie_word_embeddings": True, "architectures": ["MarianMTModel"], "converted_from": "marian-nmt .npz"}
    (out / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    generation = {"bad_words_ids": [[s.pad_id]], "decoder_start_token_id": s.pad_id, "eos_token_id": s.eos_id,
                  "forced_eos_token_id": s.eos_id, "max_length": 512, "pad_token_id": s.pad_id,
                  "num_beams": int(decoder.get("beam-size", 4) or 4)}
    (out / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    for readme in sorted(folder.glob("README*")):
        shutil.copyfile(readme, out / "README.md")
        break
    return out


def write_release(weights: MarianWeights, vocab: dict[str, int], tokenizer_dir: Path, out: Path,
                  name: str = "opus.spm32k-spm32k") -> Path:
    """Write ``weights`` as a marian-nmt release folder (the inverse of :func:`read_release`):
    the ``.npz`` with marian-nmt's names, ``<name>.vocab.yml`` without ``<pad>``, ``decoder.yml``
    and the SentencePiece models from ``tokenizer_dir``.

    Raises:
        ExportError: If ``<pad>`` is not the last id with a zero row (no release looks otherwise).
    """
    yaml = require("yaml", "convert")
    s = weights.shape
    if s.pad_id != s.vocab_size - 1 or np.any(weights.decoder_embed[s.pad_id]) or weights.lm_head is not \
            weights.decoder_embed:
        raise ExportError("only a model whose <pad> is the last id, with a zero row, and whose output layer is tied "
                          "can be written as a Marian release")
    out.mkdir(parents=True, exist_ok=True)
    tied_src = weights.encoder_embed is weights.decoder_embed
    params = {"decoder_ff_logit_out_b": weights.final_logits_bias[None, :-1]}
    if tied_src:
        params["Wemb"] = weights.decoder_embed[:-1]
    else:
        params["encoder_Wemb"], params["decoder_Wemb"] = weights.encoder_embed[:-1], weights.decoder_embed[:-1]
    for side, names, layers in (("encoder", ENCODER_NAMES, weights.encoder_layers),
                                ("decoder", DECODER_NAMES, weights.decoder_layers)):
        for i, layer in enumerate(layers, 1):
            for theirs, ours in names.items():
                value = layer[ours]
                params[f"{side}_l{i}_{theirs}"] = value[None, :] if value.ndim == 1 else value
    cfg = {"type": "transformer", "dim-emb": s.d_model, "enc-depth": s.encoder_layers, "dec-depth": s.decoder_layers,
           "transformer-heads": s.encoder_heads, "transformer-dim-ffn": s.encoder_ffn,
           "transformer-ffn-activation": s.activation, "transformer-postprocess": "dan",
           "transformer-preprocess": "", "transformer-ffn-depth": 2, "transformer-postprocess-emb": "d",
           "tied-embeddings-all": tied_src, "tied-embeddings-src": tied_src, "tied-embeddings": True,
           "dim-vocabs": [s.vocab_size - 1, s.vocab_size - 1]}
    text = yaml.safe_dump(cfg, sort_keys=False) + "\x00"
    params[CONFIG_KEY] = np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int8)
    np.savez(out / f"{name}.transformer.model1.npz", **params)
    pieces = {p: i for p, i in sorted(vocab.items(), key=lambda kv: kv[1]) if p != "<pad>"}
    (out / f"{name}.vocab.yml").write_text(yaml.safe_dump(pieces, allow_unicode=True, sort_keys=False),
                                           encoding="utf-8")
    (out / "decoder.yml").write_text(yaml.safe_dump({"models": [f"{name}.transformer.model1.npz"],
                                                     "vocabs": [f"{name}.vocab.yml"] * 2, "beam-size": 4}),
                                     encoding="utf-8")
    for spm in ("source.spm", "target.spm"):
        shutil.copyfile(tokenizer_dir / spm, out / spm)
    return out
