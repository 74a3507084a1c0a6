"""An ONNX graph builder: nodes and numpy initializers in, one ONNX model out.

:class:`GraphBuilder` has the primitives (constants, nodes, renaming) and the layers the
Marian graphs are made of, in ONNX Runtime's fused CPU operators: quantized linear layers
(``DynamicQuantizeMatMul``, ``MatMulIntegerToFloat`` with per-row activation codes, or
``MatMulNBits``), embeddings, ``MultiHeadAttention``, ``GroupQueryAttention`` and layer
normalization. :meth:`GraphBuilder.model` writes large initializers into the shared
weights file (:mod:`.weightsfile`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core.graphio import INPUT_IDS, SOURCE_ALIGN
from .quantize import BlockQuantized, QuantizeOptions, quantize_blocks, quantize_weight
from .weightsfile import SharedWeights, tensor_proto

OPSET = 17
MS_DOMAIN = "com.microsoft"
#: int8r activations: a row's codes are ``round(64 * x / peak)`` around a zero point of 64,
#: so every code is in [0, 128] and a pair of products of codes and int8 weights fits in an
#: int16 (128 * 127 * 2 = 32,512): see :meth:`GraphBuilder.row_quantize`. Powers of two, so
#: scaling by them is exact.
ROW_CODE_UNIT = 1 / 64
ROW_ZERO_POINT = 64


@dataclass
class GraphBuilder:
    """Accumulates nodes and numpy initializers, then writes one ONNX model."""

    name: str
    quant: QuantizeOptions
    nodes: list = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    inputs: list = field(default_factory=list)
    outputs: list = field(default_factory=list)
    quantized_nodes: list[str] = field(default_factory=list)
    _count: int = 0
    _block_table: BlockQuantized | None = None
    _shared: dict = field(default_factory=dict)

    # -- primitives ---------------------------------------------------------------
    def const(self, name: str, array) -> str:
        """Register an initializer (once per name) and return its name."""
        if name not in self.inits:
            self.inits[name] = np.asarray(array)
        return name

    def op(self, op_type: str, inputs: list[str], name: str | None = None, domain: str = "",
           outputs: int = 1, **attrs):
        """Append a node; return its output name, or a list of names if ``outputs > 1``."""
        from onnx import helper

        self._count += 1
        node_name = name or f"{op_type}_{self._count}"
        outs = [f"{node_name}:{k}" if outputs > 1 else f"{node_name}:out" for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=node_name, domain=domain, **attrs))
        return outs if outputs > 1 else outs[0]

    def rename(self, tensor: str, new_name: str) -> str:
        """Give a node output its graph-output name, so no Identity copy is needed."""
        for node in self.nodes:
            for field_ in (node.input, node.output):
                for k, value in enumerate(field_):
                    if value == tensor:
                        field_[k] = new_name
        return new_name

    def ints(self, name: str, values) -> str:
        """An int64 constant."""
        return self.const(name, np.asarray(values, dtype=np.int64))

    def scalar(self, name: str, value: float) -> str:
        """A float32 scalar constant."""
        return self.const(name, np.asarray(value, dtype=np.float32))

    # -- layers ---------------------------------------------------------------------
    def linear(self, x: str, weight: np.ndarray, bias: np.ndarray | None, name: str) -> str:
        """``x @ weight + bias`` with weight [in, out]; quantized when the options say so."""
        if self.quant.bits is not None and self.quant.quantizes("MatMul", name):
            blocks = quantize_blocks(np.ascontiguousarray(weight.T), self.quant.bits, self.quant.block_size)
            packed = self.const(f"{name}.weight_q{blocks.bits}", blocks.packed)
            scales = self.const(f"{name}.weight_scales", blocks.scales)
            bias_name = None if bias is None else self.const(f"{name}.bias", bias)
            return self.nbits_matmul(x, packed, scales, blocks, bias_name, name)
        if self.quant.mode == "rowwise" and self.quant.quantizes("MatMul", name):
            q, scale = quantize_weight(weight, True, axis=1)
            bias_name = None if bias is None else self.const(f"{name}.bias", bias)
            return self.row_matmul(x, self.const(f"{name}.weight_q", q),
                                   self.const(f"{name}.scale_b", scale * np.float32(ROW_CODE_UNIT)), bias_name, name)
        if self.quant.quantizes("MatMul", name):
            q, scale = quantize_weight(weight, self.quant.per_channel, axis=1)
            inputs = [x, self.const(f"{name}.weight_q", q), self.const(f"{name}.scale", scale), ""]
            if bias is not None:
                inputs.append(self.const(f"{name}.bias", bias))
            self.quantized_nodes.append(name)
            return self.op("DynamicQuantizeMatMul", inputs, name=name, domain=MS_DOMAIN)
        out = self.op("MatMul", [x, self.const(f"{name}.weight", weight)], name=name)
        if bias is None:
            return out
        return self.op("Add", [out, self.const(f"{name}.bias", bias)], name=f"{name}.add")

    def row_quantize(self, x: str) -> tuple[str, str]:
        """``x`` [..., K] quantized to uint8 with one scale per row: ``(codes, peaks [..., 1])``.

        Symmetric: each row's largest magnitude (its peak) maps to 64 steps from a zero point
        of 64 (:data:`ROW_CODE_UNIT`, :data:`ROW_ZERO_POINT`), so a row's codes depend on that
        row alone, and the integer product that follows is exact whatever kernel computes it
        (bundles exported before this used 127 steps around 128). The codes stay in
        [0, 128] so that no kernel can overflow: x86 CPUs without VNNI (AVX2, AVX-512 without
        VNNI) add pairs of uint8 x int8 products into int16 with saturation (``vpmaddubsw``),
        and two products of codes up to 255 and weights up to 127 do not fit (255 * 127 * 2 >
        32767), while 128 * 127 * 2 does. A row of zeros has a zero peak: its codes are then
        meaningless but its output, multiplied by the peak, is exactly zero. Quantized once
        per tensor, however many linear layers read it.
        """
        key = f"rowq:{x}"
        if key not in self._shared:
            name = f"{x.split(':')[0]}.rowq"
            peak = self.op("ReduceMax", [self.op("Abs", [x], name=f"{name}.abs")], name=f"{name}.peak",
                           axes=[-1], keepdims=1)
            codes = self.op("QuantizeLinear", [self.op("Div", [x, peak], name=f"{name}.div"),
                                               self.scalar("c.row_unit", ROW_CODE_UNIT), self._row_zero_point()],
                            name=f"{name}.codes")
            self._shared[key] = (codes, peak)
        return self._shared[key]

    def _row_zero_point(self) -> str:
        return self.const("c.row_zero_point", np.uint8(ROW_ZERO_POINT))

    def row_matmul(self, x: str, weight_q: str, scale: str, bias: str | None, name: str) -> str:
        """``x @ dequantize(weight_q) (+ bias)`` with activations quantized per row.

        ``weight_q`` is int8 [K, N]; ``scale`` holds one float32 scale per output column,
        already multiplied by :data:`ROW_CODE_UNIT` (the activation codes' unit). The product
        runs in ONNX Runtime's u8s8 integer GEMM (``MatMulIntegerToFloat``), which multiplies each row by
        its own activation peak: CTranslate2's int8 scheme, in standard kernels, and
        batch-invariant because integer sums are exact.
        """
        codes, peak = self.row_quantize(x)
        self.quantized_nodes.append(name)
        product = self.op("MatMulIntegerToFloat", [codes, weight_q, peak, scale, self._row_zero_point()],
                          name=name, domain=MS_DOMAIN)
        # not the node's own bias input: with a per-row A scale, ONNX Runtime scales the bias too
        return product if bias is None else self.op("Add", [product, bias], name=f"{name}.add")

    def nbits_matmul(self, x: str, packed: str, scales: str, blocks: BlockQuantized, bias: str | None,
                     name: str) -> str:
        """``x @ dequantize(blocks)^T (+ bias)`` as one ``MatMulNBits`` node."""
        inputs = [x, packed, scales] + (["", "", bias] if bias else [])
        self.quantized_nodes.append(name)
        return self.op("MatMulNBits", inputs, name=name, domain=MS_DOMAIN, K=blocks.k,
                       N=int(blocks.packed.shape[0]), bits=blocks.bits, block_size=blocks.block_size,
                       accuracy_level=self.quant.accuracy_level)

    def block_table(self, table: np.ndarray) -> tuple[BlockQuantized, str]:
        """The block-quantized embedding matrix [vocab, d] and the name of its scales.

        Quantized once per graph; the same bytes serve the embedding lookup and the tied
        output layer.
        """
        if self._block_table is None:
            self._block_table = quantize_blocks(table, self.quant.bits, self.quant.block_size)
        return self._block_table, self.const("embed_tokens.weight_scales", self._block_table.scales)

    def activation(self, x: str, kind: str, name: str) -> str:
        """The feed-forward activation, in standard operators."""
        if kind in ("swish", "silu"):
            return self.op("Mul", [x, self.op("Sigmoid", [x], name=f"{name}.sigmoid")], name=name)
        if kind == "relu":
            return self.op("Relu", [x], name=name)
        if kind == "gelu":
            scaled = self.op("Mul", [x, self.scalar("c.inv_sqrt2", 1 / np.sqrt(2))], name=f"{name}.s")
            erf = self.op("Erf", [scaled], name=f"{name}.erf")
            plus = self.op("Add", [erf, self.scalar("c.one", 1.0)], name=f"{name}.p")
            half = self.op("Mul", [x, self.scalar("c.half", 0.5)], name=f"{name}.h")
            return self.op("Mul", [half, plus], name=name)
        # gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        cube = self.op("Mul", [self.op("Mul", [x, x], name=f"{name}.x2"), x], name=f"{name}.x3")
        inner = self.op("Add", [x, self.op("Mul", [cube, self.scalar("c.gelu_k", 0.044715)],
                                             name=f"{name}.kx3")], name=f"{name}.in")
        tanh = self.op("Tanh", [self.op("Mul", [inner, self.scalar("c.gelu_s", np.sqrt(2 / np.pi))],
                                        name=f"{name}.sin")], name=f"{name}.tanh")
        plus = self.op("Add", [tanh, self.scalar("c.one", 1.0)], name=f"{name}.p")
        return self.op("Mul", [self.op("Mul", [x, self.scalar("c.half", 0.5)], name=f"{name}.h"), plus],
                       name=name)

    def embedding(self, ids: str, table: np.ndarray, scale: float, name: str) -> str:
        """Token embedding lookup times ``scale``; a quantized table if the options say so."""
        if self.quant.bits is not None and self.quant.quantizes("Gather", name):
            scaled = self.block_gather(ids, table, name)
        elif self.quant.quantizes("Gather", name):
            q, row_scale = self.int8_table(table)
            rows = self.op("Cast", [self.op("Gather", [q, ids], name=name)], name=f"{name}.cast", to=1)
            if self.quant.per_channel:
                factor = self.op("Unsqueeze", [self.op("Gather", [row_scale, ids], name=f"{name}.scales"),
                                               self.ints("c.axis_last", [-1])], name=f"{name}.unsq")
            else:
                factor = row_scale
            scaled = self.op("Mul", [rows, factor], name=f"{name}.dequant")
            self.quantized_nodes.append(name)
        else:
            scaled = self.op("Gather", [self.const("embed_tokens.weight", table), ids], name=name)
        if scale == 1.0:
            return scaled
        return self.op("Mul", [scaled, self.scalar("c.embed_scale", scale)], name=f"{name}.scale")

    def block_gather(self, ids: str, table: np.ndarray, name: str) -> str:
        """Rows of the block-quantized table, dequantized by ``GatherBlockQuantized``.

        The node reads the output layer's ``MatMulNBits`` weight, viewed as [vocab, padded d]
        (one initializer over the same bytes of ``weights.bin``); columns past ``d``, padding
        to whole blocks, are sliced off.
        """
        blocks, scales = self.block_table(table)
        packed = blocks.packed
        data = self.const(f"embed_tokens.rows_q{blocks.bits}", packed.reshape(packed.shape[0], -1))
        rows = self.op("GatherBlockQuantized", [data, ids, scales], name=name, domain=MS_DOMAIN,
                       bits=blocks.bits, block_size=blocks.block_size, gather_axis=0, quantize_axis=1)
        self.quantized_nodes.append(name)
        width = packed.shape[1] * blocks.block_size
        if width == blocks.k:
            return rows
        return self.op("Slice", [rows, self.ints("c.zero_1", [0]), self.ints("c.embed_width", [blocks.k]),
                                 self.ints("c.axis_last", [-1])], name=f"{name}.unpad")

    def int8_table(self, table: np.ndarray) -> tuple[str, str]:
        """The INT8 embedding matrix [vocab, d] and its scales, created once per graph."""
        if "embed_tokens.weight_q" not in self.inits:
            q, scale = quantize_weight(table, self.quant.per_channel, axis=0)
            self.const("embed_tokens.weight_q", q)
            self.const("embed_tokens.scale", scale)
        return "embed_tokens.weight_q", "embed_tokens.scale"

    def positions(self, table: np.ndarray, start: str, length: str, name: str) -> tuple[str, str]:
        """Rows ``start .. start+length`` of a position table; returns ``(indices, rows)``."""
        end = self.op("Add", [start, length], name=f"{name}.end")
        idx = self.op("Range", [start, end, self.ints("c.one_i", 1)], name=f"{name}.range")
        return idx, self.op("Gather", [self.const(name, table), idx], name=f"{name}.gather")

    def dim(self, tensor: str, axis: int, name: str) -> str:
        """A 0-d int64 tensor holding one dimension of ``tensor``."""
        shape = self.op("Shape", [tensor], name=f"{name}.shape")
        return self.op("Gather", [shape, self.ints(f"c.idx{axis}", axis)], name=name, axis=0)

    def split_last(self, x: str, parts: int, width: int, name: str) -> list[str]:
        """[B, T, parts*width] → ``parts`` tensors [B, T, width]."""
        return self.op("Split", [x, self.ints(f"c.split{parts}x{width}", [width] * parts)], name=name,
                       outputs=parts, axis=-1)

    def split_heads(self, x: str, parts: int, heads: int, head_dim: int, name: str) -> list[str]:
        """[B, T, parts*D] → ``parts`` tensors of shape [B, H, T, Dh]."""
        shaped = self.op("Reshape", [x, self.ints(f"c.heads{parts}", [0, 0, parts * heads, head_dim])],
                         name=f"{name}.reshape")
        moved = self.op("Transpose", [shaped], name=f"{name}.transpose", perm=[0, 2, 1, 3])
        if parts == 1:
            return [moved]
        return self.op("Split", [moved, self.ints(f"c.split{parts}x{heads}", [heads] * parts)],
                       name=f"{name}.split", outputs=parts, axis=1)

    def mha(self, q: str, k: str, v: str, heads: int, name: str, mask: str = "", bias: str = "",
            past: tuple[str, str] | None = None):
        """ONNX Runtime's fused MultiHeadAttention (scale folded into q, so ``scale=1``).

        Args:
            q: Queries [B, T, D].
            k, v: Keys and values, [B, S, D], or [B, H, S, Dh] when precomputed.
            heads: Number of heads.
            mask: Key padding mask [B, S] (int32, 1 = attend).
            bias: Additive attention bias broadcastable to [B, H, T, S+past].
            past: Past (key, value) [B, H, P, Dh]; the node then also returns the presents.
        """
        inputs = [q, k, v, "", mask, bias, *(past or ())]
        while inputs[-1] == "":
            inputs.pop()
        return self.op("MultiHeadAttention", inputs, name=name, domain=MS_DOMAIN,
                       outputs=3 if past else 1, num_heads=heads, scale=1.0)

    def gqa(self, q: str, k: str, v: str, heads: int, past: tuple[str, str], lengths: str, total: str,
            name: str) -> list[str]:
        """ONNX Runtime's GroupQueryAttention as causal self-attention over a K/V cache that
        each row fills to its own length; returns ``(output, present_key, present_value)``.

        Args:
            q, k, v: The new positions' queries, keys and values [B, T, D] (scale folded into q).
            past: Past (key, value) [B, H, capacity, Dh]: row b's first ``lengths[b] - T + 1``
                positions hold its cache. Bound to the same memory as the presents, the new
                keys and values are written into it in place.
            lengths: [B] int32: each row's last position (its cached length + T - 1).
            total: 0-d int32: the longest row's cached length + T.

        Each row's scores, softmax and weighted sum run over its own positions only, so a
        row's result cannot depend on how long its batch-mates are.
        """
        return self.op("GroupQueryAttention", [q, k, v, *past, lengths, total], name=name, domain=MS_DOMAIN,
                       outputs=3, num_heads=heads, kv_num_heads=heads, scale=1.0)

    def pad_source(self, x: str, name: str) -> str:
        """Zero-pad the source axis (2) of cross-attention K or V [B, H, S, Dh] to a multiple of
        :data:`.graphio.SOURCE_ALIGN`.

        ``MultiHeadAttention`` sums over the source in an unrolled loop whose last, partial
        step rounds differently, so without this a sentence's attention moves in the last
        bits with the length of the longest sentence in its batch, and int8 activations turn
        those bits into visible logit differences. With the source axis always a whole
        number of steps, padded positions only add exact zeros.
        """
        pads = self.op("Concat", [self.ints("c.zeros6", [0] * 6), self.source_padding(), self.ints("c.zero_1", [0])],
                       name=f"{name}.pads", axis=0)
        return self.op("Pad", [x, pads], name=f"{name}.pad")

    def source_padding(self) -> str:
        """[1] int64: positions that round the source length up to a multiple of SOURCE_ALIGN."""
        if "encoder.source_extra" not in self._shared:
            length = self.dim(INPUT_IDS, 1, "encoder.source_length")
            align = self.ints("c.source_align", SOURCE_ALIGN)
            aligned = self.op("Mul", [self.op("Div", [self.op("Add", [length, self.ints("c.source_align_m1",
                                                                                        SOURCE_ALIGN - 1)],
                                                         name="encoder.source_up"), align],
                                              name="encoder.source_blocks"), align], name="encoder.source_aligned")
            extra = self.op("Sub", [aligned, length], name="encoder.source_extra")
            self._shared["encoder.source_extra"] = self.op("Unsqueeze", [extra, self.ints("c.axis0", [0])],
                                                           name="encoder.source_extra_1")
        return self._shared["encoder.source_extra"]

    def add_norm(self, x: str, residual: str, gamma: np.ndarray, beta: np.ndarray, eps: float, name: str) -> str:
        """LayerNorm(x + residual): an ``Add`` and ONNX's ``LayerNormalization``.

        Not ONNX Runtime's fused ``SkipLayerNormalization``: its CPU kernel (1.32) is slower
        than the two nodes it replaces, more so the more rows, and ONNX Runtime does not
        fuse the pair back (docs/benchmarks.md).
        """
        total = self.op("Add", [x, residual], name=f"{name}.add")
        return self.op("LayerNormalization",
                       [total, self.const(f"{name}.weight", gamma), self.const(f"{name}.bias", beta)],
                       name=name, axis=-1, epsilon=eps)

    # -- output -----------------------------------------------------------------------
    def model(self, shared: SharedWeights, weights_file: str, doc: str):
        """Return the ONNX ModelProto, with large initializers in the shared file."""
        from onnx import helper

        initializers = [tensor_proto(name, array, shared, weights_file) for name, array in self.inits.items()]
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, initializers)
        opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid(MS_DOMAIN, 1)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="edge-translator",
                                  doc_string=doc)
        model.ir_version = 8
        return model


def value_info(name: str, elem: int, dims: list):
    """A graph input or output: its name, element type (``onnx.TensorProto``) and dims."""
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, dims)
