"""Build the bundle's two ONNX graphs directly from Marian weights.

The encoder graph runs once per batch of sources and returns the hidden states and every
decoder layer's cross-attention K/V. The decoder graph runs one step (or a few tokens) for
rows that may each be at a different position: self-attention is ``GroupQueryAttention``
over a cache of fixed capacity, with each row's cached length an input (``past_lengths``),
zero included, so the first step needs no second graph. Bound to the same memory as the
past, the presents are the cache itself, the new positions written in place; nothing else
of the cache is copied. Bundles exported before this have a decoder whose
``MultiHeadAttention`` returns the past with the new position appended (one length for all
rows); :func:`build_decoder` still writes it with ``ragged=False``, and the runtime runs both.

The graphs use ONNX Runtime's fused CPU operators (``MultiHeadAttention``,
``GroupQueryAttention``, ``DynamicQuantizeMatMul`` or ``MatMulNBits``; ONNX's ``LayerNormalization``), so a
decoder step of the full opus-mt-en-zh shape runs about 125 nodes; int8r adds four small
per-row quantization nodes before each ``MatMulIntegerToFloat`` (320 nodes). Writing the graphs ourselves, rather
than tracing PyTorch, also lets every weight be stored once: both graphs point into one ``weights.bin``, where identical tensors share bytes, and
with INT8 the one quantized embedding matrix serves the lookup and the tied output layer.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..core.kvcache import ALIGNED_SOURCE, PLAIN_SOURCE, SOURCE_ALIGN
from .marian import MarianWeights
from .quantize import BlockQuantized, QuantizeOptions, quantize_blocks, quantize_weight

logger = logging.getLogger(__name__)

OPSET = 17
MS_DOMAIN = "com.microsoft"
NEG_INF = -1e9
#: int8r activations: a row's codes are ``round(64 * x / peak)`` around a zero point of 64,
#: so every code is in [0, 128] and a pair of products of codes and int8 weights fits in an
#: int16 (128 * 127 * 2 = 32,512): see :meth:`GraphBuilder.row_quantize`. Powers of two, so
#: scaling by them is exact.
ROW_CODE_UNIT = 1 / 64
ROW_ZERO_POINT = 64
#: Tensors at least this large go to the shared weights file; smaller ones stay inline.
EXTERNAL_MIN_BYTES = 1024
ALIGN_LARGE = 4096
ALIGN_SMALL = 64


def encoder_io(layers: int) -> tuple[list[str], list[str]]:
    """Input and output names of the encoder graph."""
    outputs = ["last_hidden_state"]
    for i in range(layers):
        outputs += [f"cross_key.{i}", f"cross_value.{i}"]
    return ["input_ids", "attention_mask"], outputs


def decoder_io(layers: int, ragged: bool = True) -> tuple[list[str], list[str]]:
    """Input and output names of the decoder graph (see :func:`build_decoder` for ``ragged``)."""
    inputs = ["input_ids", "encoder_attention_mask"] + (["past_lengths"] if ragged else [])
    inputs += [f"past_key.{i}" for i in range(layers)] + [f"past_value.{i}" for i in range(layers)]
    inputs += [f"cross_key.{i}" for i in range(layers)] + [f"cross_value.{i}" for i in range(layers)]
    outputs = ["logits"]
    outputs += [f"present_key.{i}" for i in range(layers)]
    outputs += [f"present_value.{i}" for i in range(layers)]
    return inputs, outputs


class SharedWeights:
    """Writes tensors into one external-data file, storing identical bytes once."""

    def __init__(self, path: Path):
        self.path = path
        self._handle = open(path, "wb")
        self._offsets: dict[str, int] = {}
        self.stored = 0
        self.referenced = 0

    def add(self, array: np.ndarray) -> tuple[int, int]:
        """Store an array (or find its twin) and return ``(offset, length)``."""
        data = np.ascontiguousarray(array).tobytes()
        self.referenced += len(data)
        key = hashlib.sha256(data).hexdigest()
        if key not in self._offsets:
            align = ALIGN_LARGE if len(data) >= ALIGN_LARGE * 16 else ALIGN_SMALL
            position = self._handle.tell()
            padding = (-position) % align
            self._handle.write(b"\0" * padding)
            self._offsets[key] = position + padding
            self._handle.write(data)
            self.stored += len(data)
        return self._offsets[key], len(data)

    def close(self) -> None:
        """Flush and close the file."""
        self._handle.close()


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
        :data:`SOURCE_ALIGN`.

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
            length = self.dim("input_ids", 1, "encoder.source_length")
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
        than the two nodes it replaces, more so the more rows (Intel Xeon, 2 threads, 512
        wide: 426 against 77 us at 384 rows, 76 against 30 at 64, the same at 1), and ONNX
        Runtime does not fuse the pair back. On the full opus-mt-en-zh shape (int8r) the
        encoder of 16 sentences of 24 tokens took 28.5 ms instead of 32.6, and greedy
        batches of 1, 16 and 64 rows 3%, 4% and 8% less time.
        """
        total = self.op("Add", [x, residual], name=f"{name}.add")
        return self.op("LayerNormalization", [total, self.const(f"{name}.weight", gamma), self.const(f"{name}.bias", beta)],
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


def tensor_proto(name: str, array: np.ndarray, shared: SharedWeights, weights_file: str):
    """An initializer: inline if small, else a reference into the shared weights file."""
    from onnx import TensorProto, helper, numpy_helper

    if array.nbytes < EXTERNAL_MIN_BYTES:
        return numpy_helper.from_array(array, name)
    offset, length = shared.add(array)
    tensor = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
    tensor.dims.extend(array.shape)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", weights_file), ("offset", str(offset)), ("length", str(length))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return tensor


def save_shared(models: dict, out: Path, weights_file: str = "weights.bin") -> tuple[dict[str, Path], SharedWeights]:
    """Write ONNX models (name → ModelProto with data loaded) into ``out`` sharing one weights file."""
    import onnx
    from onnx import numpy_helper

    shared = SharedWeights(out / weights_file)
    files = {}
    try:
        for name, model in models.items():
            tensors = [tensor_proto(t.name, numpy_helper.to_array(t), shared, weights_file)
                       for t in model.graph.initializer]
            del model.graph.initializer[:]
            model.graph.initializer.extend(tensors)
            path = out / f"{name}.onnx"
            onnx.save_model(model, str(path))
            files[name] = path
    finally:
        shared.close()
    return files, shared


def _value(name: str, elem: int, dims: list):
    from onnx import helper

    return helper.make_tensor_value_info(name, elem, dims)


def _qkv(layer: dict[str, np.ndarray], prefix: str, scaling: float, parts: str) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate projection weights, folding the attention scaling into q."""
    ws, bs = [], []
    for part in parts:
        factor = scaling if part == "q" else 1.0
        ws.append(layer[f"{prefix}{part}_w"] * np.float32(factor))
        bs.append(layer[f"{prefix}{part}_b"] * np.float32(factor))
    return np.concatenate(ws, axis=1), np.concatenate(bs)


def invariant_attention(quant: QuantizeOptions) -> bool:
    """Whether cross-attention K/V are padded to whole loop steps (:meth:`GraphBuilder.pad_source`):
    with the batch-invariant schemes (int8r, q8, q4), where the last bits matter."""
    return quant.batch_invariant


def cross_dims(quant: QuantizeOptions, heads: int, head_dim: int) -> list:
    """Shape of a cross-attention K or V graph input/output."""
    return ["batch", heads, ALIGNED_SOURCE if invariant_attention(quant) else PLAIN_SOURCE, head_dim]


def build_encoder(w: MarianWeights, quant: QuantizeOptions) -> GraphBuilder:
    """The encoder graph: ids, mask → hidden states and each decoder layer's cross K/V."""
    from onnx import TensorProto

    s = w.shape
    g = GraphBuilder("encoder", quant)
    g.inputs = [_value("input_ids", TensorProto.INT64, ["batch", "source_length"]),
                _value("attention_mask", TensorProto.INT64, ["batch", "source_length"])]
    dh, dhd = s.encoder_heads, s.d_model // s.encoder_heads
    embedded = g.embedding("input_ids", w.encoder_embed, s.embed_scale, "encoder.embed_tokens")
    length = g.dim("input_ids", 1, "encoder.length")
    _, pos = g.positions(w.encoder_positions, g.ints("c.zero_i", 0), length, "encoder.embed_positions")
    h = g.op("Add", [embedded, pos], name="encoder.embed_add")
    mask = g.op("Cast", ["attention_mask"], name="encoder.mask_i32", to=TensorProto.INT32)
    for i, layer in enumerate(w.encoder_layers):
        p = f"encoder.layers.{i}"
        qkv_w, qkv_b = _qkv(layer, "sa_", dhd ** -0.5, "qkv")
        qkv = g.linear(h, qkv_w, qkv_b, f"{p}.self_attn.qkv")
        q, k, v = g.split_last(qkv, 3, s.d_model, f"{p}.self_attn.split")
        attn = g.mha(q, k, v, dh, f"{p}.self_attn", mask=mask)
        attn = g.linear(attn, layer["sa_o_w"], layer["sa_o_b"], f"{p}.self_attn.out")
        h = g.add_norm(attn, h, layer["ln1_g"], layer["ln1_b"], s.layer_norm_eps, f"{p}.self_attn_layer_norm")
        ff = g.activation(g.linear(h, layer["fc1_w"], layer["fc1_b"], f"{p}.fc1"), s.activation, f"{p}.act")
        ff = g.linear(ff, layer["fc2_w"], layer["fc2_b"], f"{p}.fc2")
        h = g.add_norm(ff, h, layer["ln2_g"], layer["ln2_b"], s.layer_norm_eps, f"{p}.final_layer_norm")
    g.rename(h, "last_hidden_state")
    g.outputs = [_value("last_hidden_state", TensorProto.FLOAT, ["batch", "source_length", s.d_model])]
    hd, hdd = s.decoder_heads, s.d_model // s.decoder_heads
    for i, layer in enumerate(w.decoder_layers):
        p = f"decoder.layers.{i}.encoder_attn"
        kv_w, kv_b = _qkv(layer, "ca_", 1.0, "kv")
        kv = g.linear("last_hidden_state", kv_w, kv_b, f"{p}.kv")
        k, v = g.split_heads(kv, 2, hd, hdd, p)
        if invariant_attention(quant):
            k, v = g.pad_source(k, f"{p}.k"), g.pad_source(v, f"{p}.v")
        for kind, tensor in (("key", k), ("value", v)):
            g.rename(tensor, f"cross_{kind}.{i}")
            g.outputs.append(_value(f"cross_{kind}.{i}", TensorProto.FLOAT, cross_dims(quant, hd, hdd)))
    return g


def build_decoder(w: MarianWeights, quant: QuantizeOptions, untie_output: bool = False,
                  output_ids: np.ndarray | None = None, ragged: bool = True) -> GraphBuilder:
    """The decoder step graph: new ids, past K/V, cross K/V → logits, present K/V.

    Args:
        ragged: Self-attention is ``GroupQueryAttention`` over a cache of fixed capacity
            that each row fills to its own length (input ``past_lengths`` [B] int32): the
            new keys and values are written into the past's memory when the presents are
            bound to it, so a step copies no cache, and rows of a batch may be at different
            positions. ``False``: the graphs of earlier bundles, ``MultiHeadAttention``
            whose present is the past (of any length, the same for every row) with the new
            position appended.
    """
    from onnx import TensorProto

    s = w.shape
    n, heads, hd = s.decoder_layers, s.decoder_heads, s.d_model // s.decoder_heads
    g = GraphBuilder("decoder", quant)
    g.inputs = [_value("input_ids", TensorProto.INT64, ["batch", "new_length"]),
                _value("encoder_attention_mask", TensorProto.INT64, ["batch", "source_length"])]
    if ragged:
        g.inputs.append(_value("past_lengths", TensorProto.INT32, ["batch"]))
    for kind in ("key", "value"):
        g.inputs += [_value(f"past_{kind}.{i}", TensorProto.FLOAT,
                            ["batch", heads, "cache_capacity" if ragged else "past_length", hd])
                     for i in range(n)]
    for kind in ("key", "value"):
        g.inputs += [_value(f"cross_{kind}.{i}", TensorProto.FLOAT, cross_dims(quant, heads, hd))
                     for i in range(n)]
    embedded = g.embedding("input_ids", w.decoder_embed, s.embed_scale, "decoder.embed_tokens")
    if ragged:
        new = g.dim("input_ids", 1, "decoder.new_length")
        # row b's new tokens sit at positions past_lengths[b] .. past_lengths[b] + T - 1
        steps = g.op("Range", [g.ints("c.zero_i", 0), new, g.ints("c.one_i", 1)], name="decoder.steps")
        starts = g.op("Cast", ["past_lengths"], name="decoder.starts", to=TensorProto.INT64)
        position_ids = g.op("Add", [g.op("Unsqueeze", [starts, g.ints("c.axis1", [1])], name="decoder.starts_1"),
                                    g.op("Unsqueeze", [steps, g.ints("c.axis0", [0])], name="decoder.steps_1")],
                            name="decoder.position_ids")
        pos = g.op("Gather", [g.const("decoder.embed_positions", w.decoder_positions), position_ids],
                   name="decoder.embed_positions.gather")
        new_32 = g.op("Cast", [new], name="decoder.new_length_32", to=TensorProto.INT32)
        last = g.op("Add", ["past_lengths", g.op("Sub", [new_32, g.const("c.one_32", np.int32(1))],
                                                  name="decoder.new_minus_1")], name="decoder.last_positions")
        total = g.op("Add", [g.op("ReduceMax", ["past_lengths"], name="decoder.longest_past", keepdims=0), new_32],
                     name="decoder.total_length")
    else:
        past = g.dim("past_key.0", 2, "decoder.past_length")
        new = g.dim("input_ids", 1, "decoder.new_length")
        new_pos, pos = g.positions(w.decoder_positions, past, new, "decoder.embed_positions")
    h = g.op("Add", [embedded, pos], name="decoder.embed_add")
    cross_mask = g.op("Cast", ["encoder_attention_mask"], name="decoder.cross_mask", to=TensorProto.INT32)
    if invariant_attention(quant):
        # the mask padded with zeros to the K/V's aligned source length
        extra = g.op("Sub", [g.dim("cross_key.0", 2, "decoder.aligned_length"),
                             g.dim("encoder_attention_mask", 1, "decoder.source_length")], name="decoder.source_extra")
        pads = g.op("Concat", [g.ints("c.zeros3", [0] * 3), g.op("Unsqueeze", [extra, g.ints("c.axis0", [0])],
                                                                  name="decoder.source_extra_1")],
                    name="decoder.mask_pads", axis=0)
        cross_mask = g.op("Pad", [cross_mask, pads], name="decoder.cross_mask_aligned")
    if not ragged:
        # Causal bias [1, 1, T, P+T]: new token t (at position P+t) sees key j when j <= P+t.
        query_pos = g.op("Unsqueeze", [new_pos, g.ints("c.axis1", [1])],
                         name="decoder.causal.q")
        total = g.op("Add", [past, new], name="decoder.total_length")
        key_pos = g.op("Range", [g.ints("c.zero_i", 0), total, g.ints("c.one_i", 1)], name="decoder.causal.k")
        allowed = g.op("LessOrEqual", [key_pos, query_pos], name="decoder.causal.allowed")
        causal = g.op("Where", [allowed, g.scalar("c.zero", 0.0), g.scalar("c.neg_inf", NEG_INF)],
                      name="decoder.causal_where")
        causal = g.op("Unsqueeze", [causal, g.ints("c.axes01", [0, 1])], name="decoder.causal_bias")
    presents = {"key": [], "value": []}
    for i, layer in enumerate(w.decoder_layers):
        p = f"decoder.layers.{i}"
        qkv_w, qkv_b = _qkv(layer, "sa_", hd ** -0.5, "qkv")
        qkv = g.linear(h, qkv_w, qkv_b, f"{p}.self_attn.qkv")
        q, k_new, v_new = g.split_last(qkv, 3, s.d_model, f"{p}.self_attn.split")
        past_kv = (f"past_key.{i}", f"past_value.{i}")
        if ragged:
            attn, k, v = g.gqa(q, k_new, v_new, heads, past_kv, last, total, f"{p}.self_attn")
        else:
            attn, k, v = g.mha(q, k_new, v_new, heads, f"{p}.self_attn", bias=causal, past=past_kv)
        presents["key"].append(k)
        presents["value"].append(v)
        attn = g.linear(attn, layer["sa_o_w"], layer["sa_o_b"], f"{p}.self_attn.out")
        h = g.add_norm(attn, h, layer["ln1_g"], layer["ln1_b"], s.layer_norm_eps, f"{p}.self_attn_layer_norm")
        cq = g.linear(h, layer["ca_q_w"] * np.float32(hd ** -0.5), layer["ca_q_b"] * np.float32(hd ** -0.5),
                      f"{p}.encoder_attn.q")
        attn = g.mha(cq, f"cross_key.{i}", f"cross_value.{i}", heads, f"{p}.encoder_attn", mask=cross_mask)
        attn = g.linear(attn, layer["ca_o_w"], layer["ca_o_b"], f"{p}.encoder_attn.out")
        h = g.add_norm(attn, h, layer["ln2_g"], layer["ln2_b"], s.layer_norm_eps, f"{p}.encoder_attn_layer_norm")
        ff = g.activation(g.linear(h, layer["fc1_w"], layer["fc1_b"], f"{p}.fc1"), s.activation, f"{p}.act")
        ff = g.linear(ff, layer["fc2_w"], layer["fc2_b"], f"{p}.fc2")
        h = g.add_norm(ff, h, layer["ln3_g"], layer["ln3_b"], s.layer_norm_eps, f"{p}.final_layer_norm")
    logits = _output_projection(g, w, h, untie_output, output_ids)
    g.rename(logits, "logits")
    vocab = w.lm_head.shape[0] if output_ids is None else len(output_ids)
    g.outputs = [_value("logits", TensorProto.FLOAT, ["batch", "new_length", vocab])]
    for kind in ("key", "value"):
        for i, tensor in enumerate(presents[kind]):
            g.rename(tensor, f"present_{kind}.{i}")
            g.outputs.append(_value(f"present_{kind}.{i}", TensorProto.FLOAT,
                                    ["batch", heads, "present_length", hd]))
    return g


def _output_projection(g: GraphBuilder, w: MarianWeights, h: str, untie: bool = False,
                       output_ids: np.ndarray | None = None) -> str:
    """Logits = h @ lm_head^T + final_logits_bias, sharing the embedding when tied.

    Args:
        g: The decoder graph being built.
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
        if tied and g.quant.quantizes("Gather", "decoder.embed_tokens"):
            q, scale = g.int8_table(w.lm_head)
        else:
            wq, scale_v = quantize_weight(w.lm_head, g.quant.per_channel, axis=0)
            q, scale = g.const("lm_head.weight_q", wq), g.const("lm_head.scale", scale_v)
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
    flat = g.op("Reshape", [h, g.ints("c.flat", [-1, w.shape.d_model])], name="lm_head.flatten")
    logits = g.op("Gemm", [flat, table, bias], name="lm_head", transB=1)
    batch_time = g.op("Slice", [g.op("Shape", [h], name="lm_head.shape"), g.ints("c.zero_1", [0]),
                                g.ints("c.two_1", [2])], name="lm_head.bt")
    out_shape = g.op("Concat", [batch_time, g.ints("c.vocab", [vocab])], name="lm_head.out_shape", axis=0)
    return g.op("Reshape", [logits, out_shape], name="lm_head.unflatten")


@dataclass
class WrittenGraphs:
    """What :func:`write_graphs` produced."""

    files: dict[str, Path]
    weights_file: Path
    stored_bytes: int
    referenced_bytes: int
    quantized_nodes: list[str]


def write_graphs(w: MarianWeights, quant: QuantizeOptions, out: Path, weights_file: str = "weights.bin",
                 untie_output: bool = False, output_ids: np.ndarray | None = None,
                 ragged: bool = True) -> WrittenGraphs:
    """Build both graphs and write ``encoder.onnx``, ``decoder.onnx`` and the shared weights.

    Args:
        w: The model's weights.
        quant: Quantization options (``dynamic``, ``q8`` and ``q4`` quantize here; others write FP32).
        out: Directory to write into (it must exist).
        weights_file: Name of the shared external-data file.
        untie_output: Give the output projection its own weight (see :func:`_output_projection`).
        output_ids: Restrict the logits to these vocabulary ids (see :func:`_output_projection`).
        ragged: The decoder's self-attention (see :func:`build_decoder`); ``False`` writes
            the decoder of bundles exported before ``GroupQueryAttention``.
    """
    import onnx

    build_quant = quant if quant.at_build else QuantizeOptions(mode="none")
    shared = SharedWeights(out / weights_file)
    files, quantized = {}, []
    try:
        for name, graph in (("encoder", build_encoder(w, build_quant)),
                            ("decoder", build_decoder(w, build_quant, untie_output, output_ids, ragged))):
            model = graph.model(shared, weights_file, f"edge-translator {name} for {w.shape.d_model}-d Marian")
            path = out / f"{name}.onnx"
            onnx.save_model(model, str(path))
            files[name] = path
            quantized += graph.quantized_nodes
    finally:
        shared.close()
    for path in files.values():
        onnx.checker.check_model(str(path))
    logger.info("wrote %s: %.1f MB stored for %.1f MB referenced", out, shared.stored / 1e6,
                shared.referenced / 1e6)
    return WrittenGraphs(files, out / weights_file, shared.stored, shared.referenced, quantized)
