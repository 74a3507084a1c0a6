"""Quantization settings, weight quantization, and the check that quantized really is quantized.

Four weight schemes are applied while the graphs are built (see :mod:`.graphs`):

- ``dynamic`` (``--quantize int8``): every linear layer becomes a ``DynamicQuantizeMatMul``
  over an INT8 weight with one scale per output channel, and the token embedding becomes
  one INT8 matrix that serves both the lookup and the tied output projection. Activations
  are quantized with one scale per call, so a sentence's output can depend on the other
  sentences of its batch.
- ``rowwise`` (``--quantize int8r``): the same INT8 weights, but each row of the
  activations is quantized with its own scale (a few standard operators before a
  ``MatMulIntegerToFloat``), as CTranslate2 does. The integer product is exact, so a
  sentence's output cannot depend on its batch-mates on any CPU, and the u8s8 GEMM keeps
  INT8's batched speed. The codes use 64 steps each side of the zero point, not 127, so
  that x86 kernels without VNNI, which sum pairs of products in saturating int16, stay
  exact too.
- ``q8`` and ``q4``: every linear layer, the output layer included, becomes a
  ``MatMulNBits`` over 8- or 4-bit weights quantized in blocks of ``block_size`` along the
  input dimension, one float32 scale per block. With ``accuracy_level=4`` ONNX Runtime
  quantizes each row of the activations on its own, so a sentence's output does not
  depend on its batch-mates. The embedding lookup is a ``GatherBlockQuantized`` over the
  very bytes of the tied output layer.

Static INT8 (QDQ) is done afterwards by ONNX Runtime's ``quantize_static``, calibrated on
English sentences (see :mod:`.calibrate`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.bundle import DEFAULT_BLOCK_SIZE, DEFAULT_SCHEME, SCHEME_MODES  # noqa: F401 - re-exported
from ..core.cpu import INT8_KERNEL_FLAGS
from ..core.errors import ExportError

logger = logging.getLogger(__name__)

MODES = ("none", "dynamic", "rowwise", "static", "q8", "q4")
#: Weight bits of the block-quantized modes.
BLOCK_BITS = {"q8": 8, "q4": 4}
#: Block sizes MatMulNBits accepts (powers of two, at least 16).
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: MatMulNBits ``accuracy_level`` 4: activations quantized to int8 per row and block.
ACCURACY_INT8 = 4
#: ONNX Runtime releases with MatMulNBits int8-compute kernels for 8-bit weights (the
#: older 4-bit kernels are older still), by CPU architecture.
ORT_FOR_BLOCKS = {"x86_64": "1.22", "aarch64": "1.23"}
OP_TYPES = ("MatMul", "Gather")
#: Weights with fewer elements than this are not "large" and may stay float32.
LARGE_WEIGHT = 1024
#: Initializers that hold fixed tables rather than learned matrices; they stay float32.
EXEMPT_SUFFIXES = (".embed_positions",)


@dataclass(frozen=True)
class QuantizeOptions:
    """How the exported graphs are quantized."""

    mode: str = SCHEME_MODES[DEFAULT_SCHEME]
    """``"rowwise"`` (INT8 weights, activations quantized per row), ``"dynamic"`` (INT8
    weights, activations quantized per call), ``"static"`` (QDQ, calibrated),
    ``"q8"``/``"q4"`` (block-quantized weights, activations per row and block) or
    ``"none"`` (float32)."""
    block_size: int = DEFAULT_BLOCK_SIZE
    """Weights per scale along the input dimension, for ``q8`` and ``q4``."""
    accuracy_level: int = ACCURACY_INT8
    """MatMulNBits ``accuracy_level``; 4 computes in int8 with activations quantized per row."""
    per_channel: bool = True
    """One scale per output channel (per row of the embedding) instead of per tensor."""
    op_types: tuple[str, ...] = OP_TYPES
    """Which operator types to quantize: ``"MatMul"`` (linear layers and the output
    projection) and ``"Gather"`` (the token embedding lookup)."""
    exclude_nodes: tuple[str, ...] = ()
    """Node names to leave in float32, e.g. ``"lm_head"`` or ``"decoder.layers.5.fc2"``."""
    calibration: Path | None = None
    """Text file of English sentences, one per line, for ``mode="static"``."""
    calibration_limit: int = 200
    """Largest number of calibration sentences read."""

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"quantization mode must be one of {MODES}, not {self.mode!r}")
        unknown = set(self.op_types) - set(OP_TYPES)
        if unknown:
            raise ValueError(f"op types {sorted(unknown)} cannot be quantized; choose from {OP_TYPES}")
        if self.mode == "static" and self.calibration is None:
            raise ValueError("static quantization needs a calibration text file")
        if self.block_size not in BLOCK_SIZES:
            raise ValueError(f"block size must be one of {BLOCK_SIZES}, not {self.block_size}")
        if self.mode == "rowwise" and not self.per_channel:
            raise ValueError("int8r quantizes weights per channel; it does not go with --no-per-channel")
        if self.accuracy_level not in (0, 1, 2, 3, 4):
            raise ValueError(f"accuracy level must be 0 to 4, not {self.accuracy_level}")

    @property
    def bits(self) -> int | None:
        """Weight bits of a block-quantized mode, else ``None``."""
        return BLOCK_BITS.get(self.mode)

    @property
    def at_build(self) -> bool:
        """Whether the graphs are quantized as they are built (every mode but static and none)."""
        return self.mode in ("dynamic", "rowwise") or self.bits is not None

    @property
    def batch_invariant(self) -> bool:
        """Whether activations are quantized per row, so a row's output cannot depend on its batch."""
        return self.mode == "rowwise" or (self.bits is not None and self.accuracy_level == ACCURACY_INT8)

    def quantizes(self, op_type: str, node: str) -> bool:
        """Whether quantization at graph-build time applies to a node of this type and name."""
        return self.at_build and op_type in self.op_types and node not in self.exclude_nodes

    def as_manifest(self) -> dict:
        """The ``quantization`` block of ``bundle.json``."""
        if self.mode == "none":
            return {"mode": "none"}
        if self.bits is not None:
            return {
                "mode": self.mode,
                "weight_bits": self.bits,
                "block_size": self.block_size,
                "scales": "float32, one per block",
                "symmetric_weights": True,
                "accuracy_level": self.accuracy_level,
                "activations": "int8, per row and block" if self.accuracy_level == ACCURACY_INT8 else "float",
                "operators": ["MatMulNBits", "GatherBlockQuantized"],
                "op_types": list(self.op_types),
                "exclude_nodes": list(self.exclude_nodes),
            }
        if self.mode == "rowwise":
            return {
                "mode": self.mode,
                "weight_type": "int8",
                "per_channel": True,
                "symmetric_weights": True,
                "activations": "uint8 per row, symmetric: 64 steps around zero point 64",
                "activation_code_peak": 64,
                "operators": ["MatMulIntegerToFloat"],
                "op_types": list(self.op_types),
                "exclude_nodes": list(self.exclude_nodes),
            }
        record = {
            "mode": self.mode,
            "weight_type": "int8",
            "activation_type": "uint8",
            "per_channel": self.per_channel,
            "op_types": list(self.op_types),
            "exclude_nodes": list(self.exclude_nodes),
            "symmetric_weights": True,
        }
        if self.mode == "static":
            record["calibration"] = {"file": Path(self.calibration).name, "method": "minmax"}
        return record


def quantize_weight(weight: np.ndarray, per_channel: bool, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Quantize a float32 matrix to symmetric INT8.

    Args:
        weight: The float32 matrix.
        per_channel: One scale per slice along ``axis`` instead of one for the tensor.
        axis: The channel axis (the output dimension).

    Returns:
        ``(int8 matrix, float32 scales)``; scales has one entry per channel, or shape
        ``()`` for per-tensor.
    """
    if per_channel:
        reduce = tuple(i for i in range(weight.ndim) if i != axis)
        peak = np.abs(weight).max(axis=reduce)
    else:
        peak = np.asarray(np.abs(weight).max())
    scale = (np.maximum(peak, 1e-12) / 127.0).astype(np.float32)
    shaped = scale if not per_channel else np.expand_dims(scale, reduce)
    quantized = np.clip(np.rint(weight / shaped), -127, 127).astype(np.int8)
    return quantized, scale


def runtime_requirements(options: QuantizeOptions) -> dict | None:
    """The ``runtime`` block of ``bundle.json``: what a block-quantized bundle needs to run well.

    Returns:
        ``None`` for modes every ONNX Runtime CPU build runs at full speed.
    """
    if options.bits is None:
        return None
    return {
        "onnxruntime": dict(ORT_FOR_BLOCKS),
        "int8_kernel_cpu_flags": {arch: list(flags) for arch, flags in INT8_KERNEL_FLAGS.items()},
        "fallback": "int8r",
    }


@dataclass(frozen=True)
class BlockQuantized:
    """A matrix quantized in blocks along its input dimension, in MatMulNBits' layout."""

    packed: np.ndarray
    """uint8 [N, blocks, block_size * bits / 8]: codes with zero point ``2**(bits-1)``, two
    4-bit codes per byte low nibble first."""
    scales: np.ndarray
    """float32 [N, blocks]."""
    k: int
    """Input dimension before padding to whole blocks."""
    bits: int
    block_size: int

    def dequantize(self) -> np.ndarray:
        """The float32 matrix [N, K] the codes stand for."""
        codes = self.packed
        if self.bits == 4:
            codes = np.stack([codes & 0x0F, codes >> 4], axis=-1).reshape(*codes.shape[:2], -1)
        values = (codes.astype(np.float32) - 2 ** (self.bits - 1)) * self.scales[..., None]
        return values.reshape(values.shape[0], -1)[:, :self.k]


#: Fractions of the block's range tried as the clipping point of 4-bit blocks.
CLIP_RATIOS = (1.0, 0.95, 0.9, 0.85, 0.8, 0.75)


def quantize_blocks(weight: np.ndarray, bits: int, block_size: int) -> BlockQuantized:
    """Quantize a float32 matrix [N, K] symmetrically in blocks of ``block_size`` along K.

    Each block gets the scale that maps its most negative value to ``-2**(bits-1)`` and its
    largest to ``2**(bits-1) - 1``. For 4 bits a few tighter clipping points are also tried
    and the one with the least squared error kept, which matters with only 16 levels.
    K is padded with zeros to whole blocks.
    """
    n, k = weight.shape
    blocks = -(-k // block_size)
    padded = np.zeros((n, blocks * block_size), dtype=np.float32)
    padded[:, :k] = weight
    values = padded.reshape(n, blocks, block_size)
    low, high = 2 ** (bits - 1), 2 ** (bits - 1) - 1
    reach = np.maximum(-values.min(axis=-1) / low, values.max(axis=-1) / high)
    best_scale, best_codes, best_error = None, None, None
    for ratio in (CLIP_RATIOS if bits == 4 else (1.0,)):
        scale = np.maximum(reach * ratio, 1e-12).astype(np.float32)
        codes = np.clip(np.rint(values / scale[..., None]), -low, high)
        error = ((codes * scale[..., None] - values) ** 2).sum(axis=-1)
        if best_error is None:
            best_scale, best_codes, best_error = scale, codes, error
            continue
        better = error < best_error
        best_scale = np.where(better, scale, best_scale)
        best_codes = np.where(better[..., None], codes, best_codes)
        best_error = np.minimum(error, best_error)
    unsigned = (best_codes + low).astype(np.uint8)
    if bits == 4:
        unsigned = (unsigned[..., 0::2] | (unsigned[..., 1::2] << 4)).astype(np.uint8)
    return BlockQuantized(np.ascontiguousarray(unsigned), best_scale.astype(np.float32), k, bits, block_size)


def unquantized_weights(model_paths: dict[str, Path], options: QuantizeOptions) -> list[str]:
    """List the large weights that are not quantized the way ``options`` asked.

    A weight is expected to be quantized when a node of a quantized op type uses it and
    that node is not excluded; a float32 one is reported. For q8/q4 every MatMulNBits and
    GatherBlockQuantized must also read uint8 codes of the asked bits and block size.
    Position tables are fixed sinusoids and stay float32.

    Args:
        model_paths: Graph name → ONNX file (external data beside it).
        options: The quantization that was asked for.

    Returns:
        One line per offending weight or node; empty when all is as asked.
    """
    import onnx

    if options.mode == "none":
        return []
    wanted = {"MatMul": {"MatMul", "Gemm"}, "Gather": {"Gather"}}
    watched = set().union(*(wanted[t] for t in options.op_types))
    problems = []
    for graph_name, path in model_paths.items():
        model = onnx.load(str(path), load_external_data=False)
        inits = {t.name: t for t in model.graph.initializer}
        if options.bits is not None:
            problems += _block_problems(graph_name, model, inits, options)
        for node in model.graph.node:
            if node.op_type not in watched or node.name in options.exclude_nodes:
                continue
            for name in node.input:
                tensor = inits.get(name)
                if tensor is None or tensor.data_type != onnx.TensorProto.FLOAT:
                    continue
                size = int(np.prod(tensor.dims)) if tensor.dims else 1
                if len(tensor.dims) < 2 or size < LARGE_WEIGHT or name.endswith(EXEMPT_SUFFIXES):
                    continue
                problems.append(
                    f"{graph_name}: weight {name} {list(tensor.dims)} used by {node.op_type} "
                    f"node {node.name or '?'} is still float32"
                )
    return problems


def _block_problems(graph_name: str, model, inits: dict, options: QuantizeOptions) -> list[str]:
    """Block-quantized nodes whose weights are not the scheme that was asked for."""
    import onnx

    problems = []
    for node in model.graph.node:
        if node.op_type not in ("MatMulNBits", "GatherBlockQuantized"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        weight = inits.get(node.input[1] if node.op_type == "MatMulNBits" else node.input[0])
        if weight is None or weight.data_type != onnx.TensorProto.UINT8:
            problems.append(f"{graph_name}: {node.op_type} node {node.name} has no uint8 constant weight")
        elif attrs.get("bits", 4) != options.bits or attrs.get("block_size") != options.block_size:
            problems.append(f"{graph_name}: {node.op_type} node {node.name} has {attrs.get('bits', 4)}-bit blocks "
                            f"of {attrs.get('block_size')}, not {options.bits}-bit blocks of {options.block_size}")
    return problems


def check_int8(model_paths: dict[str, Path], options: QuantizeOptions) -> None:
    """Fail loudly if quantization left a large weight matrix in float32 (or in another scheme).

    Raises:
        ExportError: Naming the first weight that is not as asked, and how many more.
    """
    problems = unquantized_weights(model_paths, options)
    if problems:
        raise ExportError(
            f"quantization did not apply to {len(problems)} weight(s): {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; exclude those nodes explicitly with --exclude-nodes or report a bug"
        )
