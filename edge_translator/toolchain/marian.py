"""Read a Hugging Face MarianMT model into plain numpy weights and a checked config.

This is the only module of the export path that touches torch and transformers
objects; the graph builder works on :class:`MarianWeights` alone.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ExportError, require

logger = logging.getLogger(__name__)

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")
ACTIVATIONS = ("swish", "silu", "relu", "gelu", "gelu_new")


@dataclass(frozen=True)
class MarianShape:
    """The architecture numbers and special ids of a Marian model."""

    d_model: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_ffn: int
    decoder_ffn: int
    vocab_size: int
    decoder_vocab_size: int
    max_positions: int
    activation: str
    scale_embedding: bool
    layer_norm_eps: float
    pad_id: int
    eos_id: int
    decoder_start_id: int

    @property
    def embed_scale(self) -> float:
        """The factor applied to token embeddings."""
        return float(np.sqrt(self.d_model)) if self.scale_embedding else 1.0

    def as_manifest(self) -> dict[str, Any]:
        """The architecture block of ``bundle.json``."""
        return {
            "type": "marian",
            "d_model": self.d_model,
            "encoder_layers": self.encoder_layers,
            "decoder_layers": self.decoder_layers,
            "encoder_attention_heads": self.encoder_heads,
            "decoder_attention_heads": self.decoder_heads,
            "encoder_ffn_dim": self.encoder_ffn,
            "decoder_ffn_dim": self.decoder_ffn,
            "activation_function": self.activation,
            "scale_embedding": self.scale_embedding,
        }


@dataclass
class MarianWeights:
    """All weights of a Marian model as float32 numpy arrays, in the layout [in, out]."""

    shape: MarianShape
    encoder_embed: np.ndarray
    decoder_embed: np.ndarray
    lm_head: np.ndarray
    """Output projection [vocab, d_model]; usually the same values as decoder_embed."""
    final_logits_bias: np.ndarray
    encoder_positions: np.ndarray
    decoder_positions: np.ndarray
    encoder_layers: list[dict[str, np.ndarray]] = field(default_factory=list)
    decoder_layers: list[dict[str, np.ndarray]] = field(default_factory=list)

    @property
    def tied_output(self) -> bool:
        """Whether the output projection equals the decoder embedding."""
        return self.lm_head is self.decoder_embed or np.array_equal(self.lm_head, self.decoder_embed)

    @property
    def parameter_count(self) -> int:
        """Number of distinct parameters (tied matrices counted once, positions excluded)."""
        seen: list[np.ndarray] = []
        total = 0
        arrays = [self.encoder_embed, self.decoder_embed, self.lm_head, self.final_logits_bias]
        for layer in self.encoder_layers + self.decoder_layers:
            arrays.extend(layer.values())
        for array in arrays:
            if any(array is other or (array.shape == other.shape and np.array_equal(array, other))
                   for other in seen if array.size > 100_000):
                continue
            seen.append(array)
            total += array.size
        return total


def _shape_from_config(config: Any, where: str) -> MarianShape:
    if getattr(config, "model_type", None) != "marian":
        raise ExportError(
            f"{where} is a {getattr(config, 'model_type', 'unknown')!r} model, not a MarianMT "
            "model (config.json model_type must be 'marian')"
        )
    activation = config.activation_function
    if activation not in ACTIVATIONS:
        raise ExportError(
            f"{where}: activation_function {activation!r} is not supported; "
            f"supported: {', '.join(ACTIVATIONS)}"
        )
    if config.d_model % config.encoder_attention_heads or config.d_model % config.decoder_attention_heads:
        raise ExportError(f"{where}: d_model must be divisible by the number of attention heads")
    share = getattr(config, "share_encoder_decoder_embeddings", True)
    return MarianShape(
        d_model=config.d_model,
        encoder_layers=config.encoder_layers,
        decoder_layers=config.decoder_layers,
        encoder_heads=config.encoder_attention_heads,
        decoder_heads=config.decoder_attention_heads,
        encoder_ffn=config.encoder_ffn_dim,
        decoder_ffn=config.decoder_ffn_dim,
        vocab_size=config.vocab_size,
        decoder_vocab_size=config.vocab_size if share else config.decoder_vocab_size,
        max_positions=config.max_position_embeddings,
        activation=activation,
        scale_embedding=bool(config.scale_embedding),
        layer_norm_eps=1e-5,
        pad_id=config.pad_token_id,
        eos_id=config.eos_token_id,
        decoder_start_id=config.decoder_start_token_id,
    )


def looks_local(src: str) -> bool:
    """Whether ``src`` is meant as a path rather than a hub id such as ``org/name``."""
    return src.startswith(("/", ".", "~")) or src.count("/") != 1 or "\\" in src


def check_source_dir(src: Path) -> None:
    """Refuse a local source directory that is not a complete Marian model.

    Raises:
        ExportError: Naming the missing or wrong file.
    """
    if not src.is_dir():
        what = "is not a directory" if src.exists() else "does not exist"
        raise ExportError(f"{src} {what}; pass a Hugging Face MarianMT model directory")
    config_path = src / "config.json"
    if not config_path.is_file():
        raise ExportError(f"{config_path} is missing: {src} is not a Hugging Face model directory")
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ExportError(f"{config_path} is not valid JSON ({exc})") from None
    if config.get("model_type") != "marian":
        raise ExportError(
            f"{src} is a {config.get('model_type', 'unknown')!r} model, not a MarianMT model "
            "(config.json model_type must be 'marian')"
        )
    for name in TOKENIZER_FILES:
        if not (src / name).is_file():
            raise ExportError(
                f"{src / name} is missing: a Marian model needs source.spm, target.spm and "
                "vocab.json beside config.json"
            )
    if not any((src / name).is_file() for name in ("model.safetensors", "pytorch_model.bin")):
        raise ExportError(f"{src} has no model.safetensors or pytorch_model.bin weights")


def load_model(src: str | Path):
    """Load a MarianMTModel in float32 eval mode from a local directory or hub id.

    Returns:
        ``(model, local_dir)``, where ``local_dir`` holds the tokenizer files.
    """
    require("torch", "export")
    transformers = require("transformers", "export")
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    path = Path(src)
    if path.exists() or looks_local(str(src)):
        check_source_dir(path)
        local = path
    else:
        try:
            from huggingface_hub import snapshot_download
        except ImportError:
            raise ExportError(f"{src} does not exist and huggingface_hub is not installed") from None
        try:
            local = Path(snapshot_download(str(src), allow_patterns=[
                "config.json", "generation_config.json", "*.safetensors", "pytorch_model.bin",
                *TOKENIZER_FILES, "tokenizer_config.json", "README.md"]))
        except Exception as exc:  # noqa: BLE001 - hub errors are many and all mean the same here
            raise ExportError(
                f"{src} is not a local directory and could not be downloaded from the hub ({exc})"
            ) from None
        check_source_dir(local)
    try:
        model = transformers.MarianMTModel.from_pretrained(str(local), dtype="float32")
    except Exception as exc:  # noqa: BLE001
        raise ExportError(f"{local}: transformers could not load the model ({exc})") from None
    model.eval()
    return model, local


def _np(tensor) -> np.ndarray:
    return tensor.detach().to("cpu").float().numpy().astype(np.float32, copy=True)


def _attention(module, prefix: str) -> dict[str, np.ndarray]:
    return {
        f"{prefix}q_w": _np(module.q_proj.weight).T.copy(),
        f"{prefix}q_b": _np(module.q_proj.bias),
        f"{prefix}k_w": _np(module.k_proj.weight).T.copy(),
        f"{prefix}k_b": _np(module.k_proj.bias),
        f"{prefix}v_w": _np(module.v_proj.weight).T.copy(),
        f"{prefix}v_b": _np(module.v_proj.bias),
        f"{prefix}o_w": _np(module.out_proj.weight).T.copy(),
        f"{prefix}o_b": _np(module.out_proj.bias),
    }


def _norm(module, prefix: str) -> dict[str, np.ndarray]:
    return {f"{prefix}_g": _np(module.weight), f"{prefix}_b": _np(module.bias)}


def _ffn(layer) -> dict[str, np.ndarray]:
    return {
        "fc1_w": _np(layer.fc1.weight).T.copy(),
        "fc1_b": _np(layer.fc1.bias),
        "fc2_w": _np(layer.fc2.weight).T.copy(),
        "fc2_b": _np(layer.fc2.bias),
    }


def extract_weights(model, where: str = "model") -> MarianWeights:
    """Copy a MarianMTModel's weights into :class:`MarianWeights`.

    Args:
        model: A ``transformers.MarianMTModel``.
        where: How to name the model in error messages.

    Raises:
        ExportError: If the model uses a feature the graph builder does not support.
    """
    shape = _shape_from_config(model.config, where)
    eps = {m.eps for m in model.modules() if type(m).__name__ == "LayerNorm"}
    if len(eps) > 1:
        raise ExportError(f"{where}: layer norms use different epsilons {sorted(eps)}")
    if eps:
        shape = MarianShape(**{**shape.__dict__, "layer_norm_eps": float(eps.pop())})
    encoder, decoder = model.model.encoder, model.model.decoder
    decoder_embed = _np(decoder.embed_tokens.weight)
    encoder_embed = _np(encoder.embed_tokens.weight)
    if np.array_equal(encoder_embed, decoder_embed):
        encoder_embed = decoder_embed
    lm_head = _np(model.lm_head.weight)
    if np.array_equal(lm_head, decoder_embed):
        lm_head = decoder_embed
    weights = MarianWeights(
        shape=shape,
        encoder_embed=encoder_embed,
        decoder_embed=decoder_embed,
        lm_head=lm_head,
        final_logits_bias=_np(model.final_logits_bias).reshape(-1),
        encoder_positions=_np(encoder.embed_positions.weight),
        decoder_positions=_np(decoder.embed_positions.weight),
    )
    for layer in encoder.layers:
        params = _attention(layer.self_attn, "sa_")
        params.update(_norm(layer.self_attn_layer_norm, "ln1"))
        params.update(_ffn(layer))
        params.update(_norm(layer.final_layer_norm, "ln2"))
        weights.encoder_layers.append(params)
    for layer in decoder.layers:
        params = _attention(layer.self_attn, "sa_")
        params.update(_norm(layer.self_attn_layer_norm, "ln1"))
        params.update(_attention(layer.encoder_attn, "ca_"))
        params.update(_norm(layer.encoder_attn_layer_norm, "ln2"))
        params.update(_ffn(layer))
        params.update(_norm(layer.final_layer_norm, "ln3"))
        weights.decoder_layers.append(params)
    return weights
