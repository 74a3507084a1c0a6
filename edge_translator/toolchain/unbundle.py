"""A bundle back into a Hugging Face MarianMT directory: its weights dequantized to float32.

The embedded model ships only as a bundle; its PyTorch checkpoint is gone. Peers that
load Hugging Face checkpoints (CTranslate2's converter, and through it LibreTranslate's
argos packages) can still run the very same model when :func:`unbundle` rebuilds one:
``config.json`` and ``generation_config.json`` from ``bundle.json``, ``model.safetensors``
from the graphs' initializers, and the tokenizer files copied. What the exporter folded
in is undone (the attention scaling in the queries, the Q/K/V concatenation), and
quantized weights are dequantized exactly as the runtime reads them, so the float model
computes what the bundle computes, up to float rounding. An FP32 bundle round-trips to
its source's weights; a quantized one to the nearest float model, which quantizes back
to the same codes.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np

from ..core.bundle import Bundle, load_bundle
from ..core.errors import BundleError, ExportError, require
from .marian import ACTIVATIONS
from .onnxbuild import ROW_CODE_UNIT
from .quantize import BlockQuantized

logger = logging.getLogger(__name__)

#: Multiplier of a stored per-column scale that gives the weight scale: ``scale_b`` is the
#: weight scale times the int8r activation unit (1/64); ``scale_127`` (int8r bundles made
#: before the 64-step upgrade) is the weight scale over 127.
_SCALE_FACTORS = {"scale": 1.0, "scale_b": 1.0 / ROW_CODE_UNIT, "scale_127": 127.0}
#: Marian's layer norms: transformers builds them with PyTorch's default epsilon.
MARIAN_LAYER_NORM_EPS = 1e-5


def graph_tensors(bundle: Bundle, graph: str) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    """One graph's initializers as numpy arrays, and its nodes' attributes by node name.

    Args:
        bundle: A loaded bundle.
        graph: ``"encoder"`` or ``"decoder"``.

    Returns:
        ``(name → array, node name → {"op": op_type, "inputs": [...], attribute: value})``.
    """
    onnx = require("onnx", "export")
    from onnx import numpy_helper

    spec = bundle.encoder if graph == "encoder" else bundle.decoder
    model = onnx.load(str(bundle.file(spec.file)), load_external_data=True)
    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = {}
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        nodes[node.name] = {"op": node.op_type, "inputs": list(node.input), **attrs}
    return arrays, nodes


class _Graph:
    """A graph's weights read back as float32, in the layouts the exporter was given."""

    def __init__(self, bundle: Bundle, graph: str):
        self.where = f"{bundle.file((bundle.encoder if graph == 'encoder' else bundle.decoder).file)}"
        self.arrays, self.nodes = graph_tensors(bundle, graph)
        self.blocks = {n["inputs"][1]: n for n in self.nodes.values() if n["op"] == "MatMulNBits"}

    def has(self, name: str) -> bool:
        return name in self.arrays

    def plain(self, name: str) -> np.ndarray:
        """A float32 initializer stored as it is (biases, norms, position tables)."""
        if name not in self.arrays:
            raise BundleError(f"{self.where}: no initializer {name!r}; the bundle was not written by this "
                              "exporter, or by a version unbundle does not know")
        return self.arrays[name].astype(np.float32)

    def linear(self, name: str) -> np.ndarray:
        """The weight [in, out] of linear layer ``name``, dequantized."""
        a = self.arrays
        if f"{name}.weight" in a:
            return a[f"{name}.weight"].astype(np.float32)
        if f"{name}.weight_q" in a:
            q = a[f"{name}.weight_q"].astype(np.float32)
            for suffix, factor in _SCALE_FACTORS.items():
                if f"{name}.{suffix}" in a:
                    return q * (a[f"{name}.{suffix}"].astype(np.float64) * factor).astype(np.float32)
            raise BundleError(f"{self.where}: {name}.weight_q has no scale next to it")
        for bits in (8, 4):
            if f"{name}.weight_q{bits}" in a:
                return np.ascontiguousarray(self._blocks(f"{name}.weight_q{bits}", f"{name}.weight_scales").T)
        if f"{name}.weight_q" not in a and any(k.startswith(f"{name}.") for k in a):
            raise BundleError(f"{self.where}: linear layer {name} is stored in a form unbundle does not know "
                              f"({sorted(k for k in a if k.startswith(name + '.'))})")
        raise BundleError(f"{self.where}: no weight of linear layer {name}; a statically quantized (QDQ) "
                          "bundle cannot be unbundled, export another scheme")

    def _blocks(self, packed_name: str, scales_name: str, k: int | None = None) -> np.ndarray:
        packed, scales = self.arrays[packed_name], self.arrays[scales_name].astype(np.float32)
        node = self.blocks.get(packed_name)
        bits = int(packed_name.rsplit("_q", 1)[1])
        blocks = scales.shape[1]
        packed = packed.reshape(packed.shape[0], blocks, -1)
        block_size = node["block_size"] if node else packed.shape[2] * 8 // bits
        k = node["K"] if node else (k or blocks * block_size)
        return BlockQuantized(packed, scales, k, bits, block_size).dequantize()

    def embedding(self, d_model: int) -> np.ndarray:
        """The token embedding table [vocab, d_model], dequantized (one scale per row)."""
        a = self.arrays
        if "embed_tokens.weight" in a:
            return a["embed_tokens.weight"].astype(np.float32)
        if "embed_tokens.weight_q" in a:
            scale = a["embed_tokens.scale"].astype(np.float32)
            q = a["embed_tokens.weight_q"].astype(np.float32)
            return q * (scale[:, None] if scale.ndim else scale)
        for bits in (8, 4):
            for name in (f"embed_tokens.rows_q{bits}", f"embed_tokens.weight_q{bits}"):
                if name in a:
                    return self._blocks(name, "embed_tokens.weight_scales", d_model)
        raise BundleError(f"{self.where}: no token embedding table")

    def layer_norm_eps(self) -> set[float]:
        return {float(n.get("epsilon", 1e-5)) for n in self.nodes.values() if "LayerNormalization" in n["op"]}


def _unfold(weight: np.ndarray, bias: np.ndarray, parts: str, d_model: int, scaling: float,
            prefix: str) -> dict[str, np.ndarray]:
    """Split a concatenated projection [d, len(parts) * d] into HF's [out, in] weights, undoing
    the attention scaling the exporter folded into q."""
    out = {}
    for k, part in enumerate(parts):
        factor = np.float32(1.0 / scaling) if part == "q" else np.float32(1.0)
        w = weight[:, k * d_model:(k + 1) * d_model] * factor
        out[f"{prefix}.{part}_proj.weight"] = np.ascontiguousarray(w.T)
        out[f"{prefix}.{part}_proj.bias"] = bias[k * d_model:(k + 1) * d_model] * factor
    return out


def _linear(g: _Graph, name: str, hf: str) -> dict[str, np.ndarray]:
    return {f"{hf}.weight": np.ascontiguousarray(g.linear(name).T), f"{hf}.bias": g.plain(f"{name}.bias")}


def _norm(g: _Graph, name: str, hf: str) -> dict[str, np.ndarray]:
    return {f"{hf}.weight": g.plain(f"{name}.weight"), f"{hf}.bias": g.plain(f"{name}.bias")}


def state_dict(bundle: Bundle) -> tuple[dict[str, np.ndarray], dict]:
    """The bundle's weights under transformers' MarianMTModel names, and its config.

    Args:
        bundle: A loaded bundle exported without a restricted output layer.

    Returns:
        ``(HF parameter name → float32 array, MarianConfig keyword arguments)``.

    Raises:
        BundleError: When the bundle's graphs hold weights in a form this cannot read back.
    """
    arch = bundle.manifest["model"]["architecture"]
    if arch.get("type") != "marian":
        raise BundleError(f"{bundle.path}/bundle.json: architecture type {arch.get('type')!r}, not 'marian'")
    if arch["activation_function"] not in ACTIVATIONS:
        raise BundleError(f"{bundle.path}/bundle.json: unknown activation {arch['activation_function']!r}")
    if bundle.output_ids is not None:
        raise BundleError(f"{bundle.path}: the output layer is restricted to {len(bundle.output_ids)} ids; "
                          "a MarianMTModel has no such layer (unbundle the bundle it was made from)")
    d = arch["d_model"]
    enc, dec = _Graph(bundle, "encoder"), _Graph(bundle, "decoder")
    eps = enc.layer_norm_eps() | dec.layer_norm_eps()
    if any(abs(e - MARIAN_LAYER_NORM_EPS) > 1e-9 for e in eps):
        raise BundleError(f"{bundle.path}: layer norm epsilons {sorted(eps)}; MarianMTModel uses "
                          f"{MARIAN_LAYER_NORM_EPS:g}")
    embed = dec.embedding(d)
    if not np.array_equal(embed, enc.embedding(d)):
        raise BundleError(f"{bundle.path}: the encoder's and the decoder's embeddings differ; unbundle writes "
                          "models with one shared vocabulary")
    sd: dict[str, np.ndarray] = {"model.shared.weight": embed, "model.encoder.embed_tokens.weight": embed,
                                 "model.decoder.embed_tokens.weight": embed,
                                 "model.encoder.embed_positions.weight": enc.plain("encoder.embed_positions"),
                                 "model.decoder.embed_positions.weight": dec.plain("decoder.embed_positions")}
    tied = not any(dec.has(n) for n in ("lm_head.weight", "lm_head.weight_q", "lm_head.weight_q8",
                                        "lm_head.weight_q4"))
    if tied:
        sd["lm_head.weight"] = embed
    else:
        head = dec.linear("lm_head") if dec.has("lm_head.weight_q8") or dec.has("lm_head.weight_q4") else None
        if head is None:
            raw = dec.arrays.get("lm_head.weight")
            if raw is not None:  # [vocab, d] read by a Gemm, or [d, vocab] as a linear layer
                head = raw.astype(np.float32) if raw.shape[0] == bundle.vocab_size else raw.T.astype(np.float32)
            else:
                scale = dec.plain("lm_head.scale")
                head = dec.arrays["lm_head.weight_q"].astype(np.float32) * (scale[:, None] if scale.ndim else scale)
        sd["lm_head.weight"] = np.ascontiguousarray(head if head.shape[0] == bundle.vocab_size else head.T)
    bias_name = "final_logits_bias" if dec.has("final_logits_bias") else None
    sd["final_logits_bias"] = (dec.plain(bias_name) if bias_name else
                               np.zeros(bundle.vocab_size, np.float32)).reshape(1, -1)
    enc_scaling = (d // arch["encoder_attention_heads"]) ** -0.5
    dec_scaling = (d // arch["decoder_attention_heads"]) ** -0.5
    for i in range(arch["encoder_layers"]):
        p, hf = f"encoder.layers.{i}", f"model.encoder.layers.{i}"
        sd.update(_unfold(enc.linear(f"{p}.self_attn.qkv"), enc.plain(f"{p}.self_attn.qkv.bias"), "qkv", d,
                          enc_scaling, f"{hf}.self_attn"))
        sd.update(_linear(enc, f"{p}.self_attn.out", f"{hf}.self_attn.out_proj"))
        sd.update(_norm(enc, f"{p}.self_attn_layer_norm", f"{hf}.self_attn_layer_norm"))
        sd.update(_linear(enc, f"{p}.fc1", f"{hf}.fc1"))
        sd.update(_linear(enc, f"{p}.fc2", f"{hf}.fc2"))
        sd.update(_norm(enc, f"{p}.final_layer_norm", f"{hf}.final_layer_norm"))
    for i in range(arch["decoder_layers"]):
        p, hf = f"decoder.layers.{i}", f"model.decoder.layers.{i}"
        sd.update(_unfold(dec.linear(f"{p}.self_attn.qkv"), dec.plain(f"{p}.self_attn.qkv.bias"), "qkv", d,
                          dec_scaling, f"{hf}.self_attn"))
        sd.update(_linear(dec, f"{p}.self_attn.out", f"{hf}.self_attn.out_proj"))
        sd.update(_norm(dec, f"{p}.self_attn_layer_norm", f"{hf}.self_attn_layer_norm"))
        # the cross-attention's K/V live in the encoder graph, its queries in the decoder's
        sd.update(_unfold(dec.linear(f"{p}.encoder_attn.q"), dec.plain(f"{p}.encoder_attn.q.bias"), "q", d,
                          dec_scaling, f"{hf}.encoder_attn"))
        sd.update(_unfold(enc.linear(f"{p}.encoder_attn.kv"), enc.plain(f"{p}.encoder_attn.kv.bias"), "kv", d,
                          1.0, f"{hf}.encoder_attn"))
        sd.update(_linear(dec, f"{p}.encoder_attn.out", f"{hf}.encoder_attn.out_proj"))
        sd.update(_norm(dec, f"{p}.encoder_attn_layer_norm", f"{hf}.encoder_attn_layer_norm"))
        sd.update(_linear(dec, f"{p}.fc1", f"{hf}.fc1"))
        sd.update(_linear(dec, f"{p}.fc2", f"{hf}.fc2"))
        sd.update(_norm(dec, f"{p}.final_layer_norm", f"{hf}.final_layer_norm"))
    config = {
        "vocab_size": bundle.vocab_size, "decoder_vocab_size": bundle.vocab_size, "d_model": d,
        "encoder_layers": arch["encoder_layers"], "decoder_layers": arch["decoder_layers"],
        "encoder_attention_heads": arch["encoder_attention_heads"],
        "decoder_attention_heads": arch["decoder_attention_heads"],
        "encoder_ffn_dim": arch["encoder_ffn_dim"], "decoder_ffn_dim": arch["decoder_ffn_dim"],
        "max_position_embeddings": bundle.max_positions, "activation_function": arch["activation_function"],
        "scale_embedding": bool(arch["scale_embedding"]), "share_encoder_decoder_embeddings": True,
        "tie_word_embeddings": tied, "pad_token_id": bundle.pad_id, "eos_token_id": bundle.eos_id,
        "decoder_start_token_id": bundle.decoder_start_id, "forced_eos_token_id": bundle.eos_id,
        "bos_token_id": bundle.eos_id, "static_position_embeddings": True, "dropout": 0.0,
        "attention_dropout": 0.0, "activation_dropout": 0.0,
    }
    return sd, config


def _generation(bundle: Bundle) -> dict:
    gen = bundle.manifest.get("generation") or {}
    return {"bad_words_ids": gen.get("bad_words_ids") or [[bundle.pad_id]], "bos_token_id": bundle.eos_id,
            "decoder_start_token_id": bundle.decoder_start_id, "eos_token_id": bundle.eos_id,
            "forced_eos_token_id": bundle.eos_id if gen.get("forced_eos", True) else None,
            "max_length": bundle.max_positions, "num_beams": int(gen.get("published_num_beams") or 1),
            "pad_token_id": bundle.pad_id}


def unbundle(bundle_dir: str | Path, out: str | Path, force: bool = False) -> Path:
    """Rebuild a transformers MarianMTModel directory from a bundle.

    Args:
        bundle_dir: The bundle (a scheme written at build time: none, int8, int8r; q8 and q4
            are read back too, but no test covers them yet).
        out: The directory to write: ``config.json``, ``generation_config.json``,
            ``model.safetensors``, ``source.spm``, ``target.spm``, ``vocab.json``,
            ``tokenizer_config.json``.
        force: Replace ``out`` if it exists.

    Returns:
        ``out``, loadable with ``MarianMTModel.from_pretrained`` and convertible with
        CTranslate2's ``TransformersConverter``.

    Raises:
        ExportError: If ``out`` exists and ``force`` is not set.
        BundleError: If the bundle cannot be read back (see :func:`state_dict`).
    """
    torch = require("torch", "export")
    transformers = require("transformers", "export")
    from .testmodels import write_tokenizer

    bundle = load_bundle(bundle_dir)
    out = Path(out)
    if out.exists():
        if not force:
            raise ExportError(f"{out} exists; pass force=True (--force) to replace it")
        shutil.rmtree(out)
    sd, config_kwargs = state_dict(bundle)
    config = transformers.MarianConfig(**config_kwargs)
    model = transformers.MarianMTModel(config).eval()
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    if missing:
        raise BundleError(f"{bundle.path}: no weights for {missing[:3]} (transformers "
                          f"{transformers.__version__} expects them)")
    for name in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
        drift = float(np.abs(own[name].numpy() - sd[name]).max())
        if drift > 1e-4:
            logger.warning("%s: the bundle's position table differs from transformers' by %.2g", name, drift)
    with torch.no_grad():
        model.load_state_dict({k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in sd.items() if k in own},
                              strict=True)
    out.mkdir(parents=True)
    model.save_pretrained(str(out))
    (out / "generation_config.json").write_text(json.dumps(_generation(bundle), indent=2) + "\n")
    vocab = json.loads(bundle.vocab.read_text(encoding="utf-8"))
    write_tokenizer(out, bundle.source_spm.read_bytes(), bundle.target_spm.read_bytes(), vocab,
                    bundle.max_positions)
    logger.info("unbundled %s (%s) into %s", bundle.name, bundle.scheme, out)
    return out
