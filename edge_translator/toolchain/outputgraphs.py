"""The decoder's output layer, in the decoder graph or as graphs of its own.

A bundle with a vocabulary shortlist splits the decoder at its final hidden state: the
decoder graph returns ``hidden`` and the output layer runs as one of two small graphs, the
whole vocabulary with its weights inside (``projection.onnx``, prepacked by ONNX Runtime
like any constant weight), or the rows a batch needs, gathered from ``weights.bin`` and fed
as inputs (``shortlist.onnx``). Both compute each column with the same operators as the
unsplit decoder (the per-row int8 product is exact in integers, then scaled column by
column), so a column's value does not depend on which others are computed beside it:
that is what keeps a sentence independent of its batch-mates under a shortlist.

The shortlist graph works with the output layers of the float32, int8 (dynamic) and int8r
(per-row) schemes; the block-quantized (q8, q4) and static schemes pack or calibrate the
output layer in ways a gathered slice cannot reproduce exactly.
"""

from __future__ import annotations

import numpy as np

from ..core.errors import ExportError
from ..core.graphio import BATCH, HIDDEN, LOGITS, NEW_LENGTH, OUTPUT_BIAS, OUTPUT_SCALE, OUTPUT_WEIGHT, SHORTLIST_COLUMNS
from .marian import MarianWeights
from .onnxbuild import MS_DOMAIN, ROW_CODE_UNIT, GraphBuilder, value_info
from .quantize import QuantizeOptions, quantize_blocks, quantize_weight

#: How the shortlist graph computes the output layer, by the projection's weight: float32
#: (``Gemm``), int8 with per-tensor activation scale (``DynamicQuantizeMatMul``), or int8 with
#: per-row activation scales (``MatMulIntegerToFloat``).
FLOAT, DYNAMIC, ROWWISE = "float", "dynamic", "rowwise"


def output_projection(g: GraphBuilder, w: MarianWeights, h: str, untie: bool = False,
                      output_ids: np.ndarray | None = None) -> str:
    """Logits = h @ lm_head^T + final_logits_bias, sharing the embedding when tied.

    Args:
        g: The graph being built.
        w: The model's weights.
        h: The final hidden states [B, T, D].
        untie: Write the FP32 projection as its own [d_model, vocab] MatMul weight, for
            quantizers that cannot give one tensor two quantizations (static QDQ).
        output_ids: Compute logits only for these vocabulary ids (in this order). The rows
            are gathered from the shared matrix by a constant node that ONNX Runtime folds
            at load, so the file still stores the matrix once.
    """
    vocab = w.lm_head.shape[0] if output_ids is None else len(output_ids)
    full_bias = w.final_logits_bias if output_ids is None else w.final_logits_bias[output_ids]
    rows = None if output_ids is None else g.ints("lm_head.output_ids", output_ids)

    def select(table: str, name: str) -> str:
        return table if rows is None else g.op("Gather", [table, rows], name=name, axis=0)

    if g.quant.bits is not None and g.quant.quantizes("MatMul", "lm_head"):
        if output_ids is not None:
            raise ValueError("a restricted output layer works with int8 and float32 bundles, not q8/q4")
        bias = g.const("final_logits_bias", full_bias) if np.any(full_bias) else None
        if w.tied_output and not untie:
            blocks, scales = g.block_table(w.lm_head)
            packed = g.const(f"embed_tokens.weight_q{blocks.bits}", blocks.packed)
        else:
            blocks = quantize_blocks(w.lm_head, g.quant.bits, g.quant.block_size)
            packed = g.const(f"lm_head.weight_q{blocks.bits}", blocks.packed)
            scales = g.const("lm_head.weight_scales", blocks.scales)
        return g.nbits_matmul(h, packed, scales, blocks, bias, "lm_head")
    if untie and not g.quant.quantizes("MatMul", "lm_head"):
        head = w.lm_head if output_ids is None else w.lm_head[output_ids]
        return g.linear(h, np.ascontiguousarray(head.T), full_bias, "lm_head")
    bias = g.const("final_logits_bias" if output_ids is None else "lm_head.bias", full_bias)
    tied = w.tied_output and not untie
    if g.quant.quantizes("MatMul", "lm_head"):
        q, scale = _int8_output_table(g, w, tied)
        q = select(q, "lm_head.rows")
        if g.quant.per_channel:
            scale = select(scale, "lm_head.row_scales")
        q_t = g.op("Transpose", [q], name="lm_head.transpose", perm=[1, 0])
        if g.quant.mode == "rowwise":
            scale_b = g.op("Mul", [scale, g.scalar("c.row_unit", ROW_CODE_UNIT)], name="lm_head.scale_b")
            return g.row_matmul(h, q_t, scale_b, bias if np.any(full_bias) else None, "lm_head")
        g.quantized_nodes.append("lm_head")
        return g.op("DynamicQuantizeMatMul", [h, q_t, scale, "", bias], name="lm_head", domain=MS_DOMAIN)
    table = select(g.const("embed_tokens.weight" if tied else "lm_head.weight", w.lm_head), "lm_head.rows")
    return _gemm(g, h, table, bias, w.shape.d_model, vocab)


def _int8_output_table(g: GraphBuilder, w: MarianWeights, tied: bool) -> tuple[str, str]:
    """The int8 output matrix [vocab, d] and its scales: the embedding's when they are one tensor."""
    if tied and g.quant.quantizes("Gather", "decoder.embed_tokens"):
        return g.int8_table(w.lm_head)
    wq, scale_v = quantize_weight(w.lm_head, g.quant.per_channel, axis=0)
    return g.const("lm_head.weight_q", wq), g.const("lm_head.scale", scale_v)


def _gemm(g: GraphBuilder, h: str, table: str, bias: str, d_model: int, width) -> str:
    """``h @ table^T + bias`` as one ``Gemm`` over [B*T, D], reshaped back to [B, T, width]
    (``width``: an int, or the name of a 1-d int64 tensor holding it)."""
    flat = g.op("Reshape", [h, g.ints("c.flat", [-1, d_model])], name="lm_head.flatten")
    logits = g.op("Gemm", [flat, table, bias], name="lm_head", transB=1)
    batch_time = g.op("Slice", [g.op("Shape", [h], name="lm_head.shape"), g.ints("c.zero_1", [0]),
                                g.ints("c.two_1", [2])], name="lm_head.bt")
    width = g.ints("c.vocab", [width]) if isinstance(width, (int, np.integer)) else width
    out_shape = g.op("Concat", [batch_time, width], name="lm_head.out_shape", axis=0)
    return g.op("Reshape", [logits, out_shape], name="lm_head.unflatten")


def shortlist_kind(w: MarianWeights, quant: QuantizeOptions) -> str:
    """How this scheme's output layer is computed (:data:`FLOAT`, :data:`DYNAMIC` or :data:`ROWWISE`).

    Raises:
        ExportError: For a scheme whose output layer cannot run on gathered rows.
    """
    if quant.mode == "static" or quant.bits is not None:
        raise ExportError(f"a shortlist works with the fp32, int8 and int8r schemes, not {quant.mode}; "
                          "export with one of those, or without --shortlist")
    if not quant.quantizes("MatMul", "lm_head"):
        return FLOAT
    if not quant.per_channel:
        raise ExportError("a shortlist needs per-channel output scales; export without --per-tensor")
    return ROWWISE if quant.mode == "rowwise" else DYNAMIC


def build_projection(w: MarianWeights, quant: QuantizeOptions) -> GraphBuilder:
    """The whole output layer as a graph of its own: ``hidden`` [B, T, D] → ``logits`` [B, T, V]."""
    from onnx import TensorProto

    g = GraphBuilder("projection", quant)
    g.inputs = [value_info(HIDDEN, TensorProto.FLOAT, [BATCH, NEW_LENGTH, w.shape.d_model])]
    g.rename(output_projection(g, w, HIDDEN), LOGITS)
    g.outputs = [value_info(LOGITS, TensorProto.FLOAT, [BATCH, NEW_LENGTH, w.lm_head.shape[0]])]
    return g


def output_table(w: MarianWeights, quant: QuantizeOptions) -> dict[str, np.ndarray | None]:
    """The arrays the shortlist gathers rows of, byte for byte those :func:`build_projection`
    stores: ``weight`` [V, D] (int8 codes or float32), ``scale`` [V] (``None`` for float32),
    ``bias`` [V] (``None`` when the int8r product has none)."""
    kind = shortlist_kind(w, quant)
    if kind == FLOAT:
        return {"weight": np.ascontiguousarray(w.lm_head, np.float32), "scale": None,
                "bias": np.ascontiguousarray(w.final_logits_bias, np.float32)}
    wq, scale = quantize_weight(w.lm_head, quant.per_channel, axis=0)
    bias = w.final_logits_bias if kind == DYNAMIC or np.any(w.final_logits_bias) else None
    return {"weight": wq, "scale": np.asarray(scale, np.float32),
            "bias": None if bias is None else np.ascontiguousarray(bias, np.float32)}


def build_shortlist_projection(kind: str, d: int, bias: bool, quant: QuantizeOptions | None = None) -> GraphBuilder:
    """The output layer on gathered rows: ``hidden`` and the rows' weights (:func:`output_table`,
    gathered; int8 codes transposed to [D, N]) → ``logits`` [B, T, N].

    Args:
        kind: :func:`shortlist_kind`.
        d: d_model.
        bias: Whether the int8 layer has a bias (float32 and dynamic layers always take one).
    """
    from onnx import TensorProto

    g = GraphBuilder("shortlist", quant or QuantizeOptions(mode="none"))
    g.inputs = [value_info(HIDDEN, TensorProto.FLOAT, [BATCH, NEW_LENGTH, d])]
    if kind == FLOAT:
        g.inputs += [value_info(OUTPUT_WEIGHT, TensorProto.FLOAT, [SHORTLIST_COLUMNS, d]),
                     value_info(OUTPUT_BIAS, TensorProto.FLOAT, [SHORTLIST_COLUMNS])]
        width = g.op("Slice", [g.op("Shape", [OUTPUT_WEIGHT], name="lm_head.rows_shape"), g.ints("c.zero_1", [0]),
                               g.ints("c.one_1", [1])], name="lm_head.width")
        logits = _gemm(g, HIDDEN, OUTPUT_WEIGHT, OUTPUT_BIAS, d, width)
    else:
        g.inputs += [value_info(OUTPUT_WEIGHT, TensorProto.INT8, [d, SHORTLIST_COLUMNS]),
                     value_info(OUTPUT_SCALE, TensorProto.FLOAT, [SHORTLIST_COLUMNS])]
        if bias or kind == DYNAMIC:
            g.inputs.append(value_info(OUTPUT_BIAS, TensorProto.FLOAT, [SHORTLIST_COLUMNS]))
        if kind == ROWWISE:
            scale_b = g.op("Mul", [OUTPUT_SCALE, g.scalar("c.row_unit", ROW_CODE_UNIT)], name="lm_head.scale_b")
            logits = g.row_matmul(HIDDEN, OUTPUT_WEIGHT, scale_b, OUTPUT_BIAS if bias else None, "lm_head")
        else:
            g.quantized_nodes.append("lm_head")
            logits = g.op("DynamicQuantizeMatMul", [HIDDEN, OUTPUT_WEIGHT, OUTPUT_SCALE, "", OUTPUT_BIAS],
                          name="lm_head", domain=MS_DOMAIN)
    g.rename(logits, LOGITS)
    g.outputs = [value_info(LOGITS, TensorProto.FLOAT, [BATCH, NEW_LENGTH, SHORTLIST_COLUMNS])]
    return g
