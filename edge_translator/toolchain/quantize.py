"""Quantization settings, INT8 weight quantization, and the check that INT8 really is INT8.

Dynamic INT8 is applied while the graphs are built (see :mod:`.graphs`): every linear
layer becomes a ``DynamicQuantizeMatMul`` over an INT8 weight, and the token embedding
becomes one INT8 matrix that serves both the embedding lookup and the tied output
projection, so it is stored once. Static INT8 (QDQ) is done afterwards by ONNX Runtime's
``quantize_static``, calibrated on English sentences (see :mod:`.calibrate`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.errors import ExportError

logger = logging.getLogger(__name__)

MODES = ("none", "dynamic", "static")
OP_TYPES = ("MatMul", "Gather")
#: Weights with fewer elements than this are not "large" and may stay float32.
LARGE_WEIGHT = 1024
#: Initializers that hold fixed tables rather than learned matrices; they stay float32.
EXEMPT_SUFFIXES = (".embed_positions",)


@dataclass(frozen=True)
class QuantizeOptions:
    """How the exported graphs are quantized."""

    mode: str = "dynamic"
    """``"dynamic"`` (INT8 weights, activations quantized per call), ``"static"`` (QDQ,
    calibrated) or ``"none"`` (float32)."""
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

    def quantizes(self, op_type: str, node: str) -> bool:
        """Whether dynamic quantization applies to a node of this type and name."""
        return self.mode == "dynamic" and op_type in self.op_types and node not in self.exclude_nodes

    def as_manifest(self) -> dict:
        """The ``quantization`` block of ``bundle.json``."""
        if self.mode == "none":
            return {"mode": "none"}
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


def unquantized_weights(model_paths: dict[str, Path], options: QuantizeOptions) -> list[str]:
    """List the large float32 weights that quantization should have turned into INT8.

    A weight is expected to be INT8 when a node of a quantized op type uses it and that
    node is not excluded. Position tables are fixed sinusoids and stay float32.

    Args:
        model_paths: Graph name → ONNX file (external data beside it).
        options: The quantization that was asked for.

    Returns:
        One line per offending weight; empty when every large weight is INT8.
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


def check_int8(model_paths: dict[str, Path], options: QuantizeOptions) -> None:
    """Fail loudly if quantization left a large weight matrix in float32.

    Raises:
        ExportError: Listing the weights that are not INT8.
    """
    problems = unquantized_weights(model_paths, options)
    if problems:
        raise ExportError(
            f"quantization did not apply to {len(problems)} weight(s): {problems[0]}"
            + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            + "; exclude those nodes explicitly with --exclude-nodes or report a bug"
        )
