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
``GroupQueryAttention``, ``DynamicQuantizeMatMul`` or ``MatMulNBits``; ONNX's
``LayerNormalization``), built by :class:`.onnxbuild.GraphBuilder`, so a decoder step of the
full opus-mt-en-zh shape runs about 125 nodes; int8r adds four small per-row quantization
nodes before each ``MatMulIntegerToFloat`` (320 nodes). Writing the graphs ourselves, rather
than tracing PyTorch, also lets every weight be stored once: both graphs point into one
``weights.bin`` (:mod:`.weightsfile`), where identical tensors share bytes, and with INT8 the
one quantized embedding matrix serves the lookup and the tied output layer. Their input and
output names, axes and source alignment are the contract in :mod:`edge_translator.core.graphio`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.graphio import (ATTENTION_MASK, BATCH, CACHE_CAPACITY, ENCODER_ATTENTION_MASK, HIDDEN, INPUT_IDS,
                            LAST_HIDDEN_STATE, LOGITS, NEW_LENGTH, PAST_LENGTH, PAST_LENGTHS, PRESENT_LENGTH,
                            SOURCE_LENGTH, cross_key, cross_value, past_key, past_value, present_key,
                            present_value, source_axis)
from .marian import MarianWeights
from .onnxbuild import GraphBuilder, value_info
from .outputgraphs import (build_projection, build_shortlist_projection, output_projection, output_table,
                           shortlist_kind)
from .quantize import QuantizeOptions
from .weightsfile import SharedWeights

logger = logging.getLogger(__name__)

NEG_INF = -1e9


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
    return [BATCH, heads, source_axis(invariant_attention(quant)), head_dim]


def build_encoder(w: MarianWeights, quant: QuantizeOptions) -> GraphBuilder:
    """The encoder graph: ids, mask → hidden states and each decoder layer's cross K/V."""
    from onnx import TensorProto

    s = w.shape
    g = GraphBuilder("encoder", quant)
    g.inputs = [value_info(INPUT_IDS, TensorProto.INT64, [BATCH, SOURCE_LENGTH]),
                value_info(ATTENTION_MASK, TensorProto.INT64, [BATCH, SOURCE_LENGTH])]
    dh, dhd = s.encoder_heads, s.d_model // s.encoder_heads
    embedded = g.embedding(INPUT_IDS, w.encoder_embed, s.embed_scale, "encoder.embed_tokens")
    length = g.dim(INPUT_IDS, 1, "encoder.length")
    _, pos = g.positions(w.encoder_positions, g.ints("c.zero_i", 0), length, "encoder.embed_positions")
    h = g.op("Add", [embedded, pos], name="encoder.embed_add")
    mask = g.op("Cast", [ATTENTION_MASK], name="encoder.mask_i32", to=TensorProto.INT32)
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
    g.rename(h, LAST_HIDDEN_STATE)
    g.outputs = [value_info(LAST_HIDDEN_STATE, TensorProto.FLOAT, [BATCH, SOURCE_LENGTH, s.d_model])]
    hd, hdd = s.decoder_heads, s.d_model // s.decoder_heads
    for i, layer in enumerate(w.decoder_layers):
        p = f"decoder.layers.{i}.encoder_attn"
        kv_w, kv_b = _qkv(layer, "ca_", 1.0, "kv")
        kv = g.linear(LAST_HIDDEN_STATE, kv_w, kv_b, f"{p}.kv")
        k, v = g.split_heads(kv, 2, hd, hdd, p)
        if invariant_attention(quant):
            k, v = g.pad_source(k, f"{p}.k"), g.pad_source(v, f"{p}.v")
        for name, tensor in ((cross_key(i), k), (cross_value(i), v)):
            g.rename(tensor, name)
            g.outputs.append(value_info(name, TensorProto.FLOAT, cross_dims(quant, hd, hdd)))
    return g


def build_decoder(w: MarianWeights, quant: QuantizeOptions, untie_output: bool = False,
                  output_ids: np.ndarray | None = None, ragged: bool = True, split: bool = False) -> GraphBuilder:
    """The decoder step graph: new ids, past K/V, cross K/V → logits, present K/V.

    Args:
        ragged: Self-attention is ``GroupQueryAttention`` over a cache of fixed capacity
            that each row fills to its own length (input ``past_lengths`` [B] int32): the
            new keys and values are written into the past's memory when the presents are
            bound to it, so a step copies no cache, and rows of a batch may be at different
            positions. ``False``: the graphs of earlier bundles, ``MultiHeadAttention``
            whose present is the past (of any length, the same for every row) with the new
            position appended.
        split: End at the final hidden state (output ``hidden``, [B, T, d_model]) and leave
            the output layer to its own graphs (:mod:`.outputgraphs`).
    """
    from onnx import TensorProto

    s = w.shape
    n, heads, hd = s.decoder_layers, s.decoder_heads, s.d_model // s.decoder_heads
    g = GraphBuilder("decoder", quant)
    g.inputs = [value_info(INPUT_IDS, TensorProto.INT64, [BATCH, NEW_LENGTH]),
                value_info(ENCODER_ATTENTION_MASK, TensorProto.INT64, [BATCH, SOURCE_LENGTH])]
    if ragged:
        g.inputs.append(value_info(PAST_LENGTHS, TensorProto.INT32, [BATCH]))
    for name in (past_key, past_value):
        g.inputs += [value_info(name(i), TensorProto.FLOAT,
                                [BATCH, heads, CACHE_CAPACITY if ragged else PAST_LENGTH, hd]) for i in range(n)]
    for name in (cross_key, cross_value):
        g.inputs += [value_info(name(i), TensorProto.FLOAT, cross_dims(quant, heads, hd)) for i in range(n)]
    embedded = g.embedding(INPUT_IDS, w.decoder_embed, s.embed_scale, "decoder.embed_tokens")
    if ragged:
        new = g.dim(INPUT_IDS, 1, "decoder.new_length")
        # row b's new tokens sit at positions past_lengths[b] .. past_lengths[b] + T - 1
        steps = g.op("Range", [g.ints("c.zero_i", 0), new, g.ints("c.one_i", 1)], name="decoder.steps")
        starts = g.op("Cast", [PAST_LENGTHS], name="decoder.starts", to=TensorProto.INT64)
        position_ids = g.op("Add", [g.op("Unsqueeze", [starts, g.ints("c.axis1", [1])], name="decoder.starts_1"),
                                    g.op("Unsqueeze", [steps, g.ints("c.axis0", [0])], name="decoder.steps_1")],
                            name="decoder.position_ids")
        pos = g.op("Gather", [g.const("decoder.embed_positions", w.decoder_positions), position_ids],
                   name="decoder.embed_positions.gather")
        new_32 = g.op("Cast", [new], name="decoder.new_length_32", to=TensorProto.INT32)
        last = g.op("Add", [PAST_LENGTHS, g.op("Sub", [new_32, g.const("c.one_32", np.int32(1))],
                                                  name="decoder.new_minus_1")], name="decoder.last_positions")
        total = g.op("Add", [g.op("ReduceMax", [PAST_LENGTHS], name="decoder.longest_past", keepdims=0), new_32],
                     name="decoder.total_length")
    else:
        past = g.dim(past_key(0), 2, "decoder.past_length")
        new = g.dim(INPUT_IDS, 1, "decoder.new_length")
        new_pos, pos = g.positions(w.decoder_positions, past, new, "decoder.embed_positions")
    h = g.op("Add", [embedded, pos], name="decoder.embed_add")
    cross_mask = g.op("Cast", [ENCODER_ATTENTION_MASK], name="decoder.cross_mask", to=TensorProto.INT32)
    if invariant_attention(quant):
        # the mask padded with zeros to the K/V's aligned source length
        extra = g.op("Sub", [g.dim(cross_key(0), 2, "decoder.aligned_length"),
                             g.dim(ENCODER_ATTENTION_MASK, 1, "decoder.source_length")], name="decoder.source_extra")
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
        past_kv = (past_key(i), past_value(i))
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
        attn = g.mha(cq, cross_key(i), cross_value(i), heads, f"{p}.encoder_attn", mask=cross_mask)
        attn = g.linear(attn, layer["ca_o_w"], layer["ca_o_b"], f"{p}.encoder_attn.out")
        h = g.add_norm(attn, h, layer["ln2_g"], layer["ln2_b"], s.layer_norm_eps, f"{p}.encoder_attn_layer_norm")
        ff = g.activation(g.linear(h, layer["fc1_w"], layer["fc1_b"], f"{p}.fc1"), s.activation, f"{p}.act")
        ff = g.linear(ff, layer["fc2_w"], layer["fc2_b"], f"{p}.fc2")
        h = g.add_norm(ff, h, layer["ln3_g"], layer["ln3_b"], s.layer_norm_eps, f"{p}.final_layer_norm")
    if split:
        g.rename(h, HIDDEN)
        g.outputs = [value_info(HIDDEN, TensorProto.FLOAT, [BATCH, NEW_LENGTH, s.d_model])]
    else:
        g.rename(output_projection(g, w, h, untie_output, output_ids), LOGITS)
        vocab = w.lm_head.shape[0] if output_ids is None else len(output_ids)
        g.outputs = [value_info(LOGITS, TensorProto.FLOAT, [BATCH, NEW_LENGTH, vocab])]
    for kind, name in (("key", present_key), ("value", present_value)):
        for i, tensor in enumerate(presents[kind]):
            g.rename(tensor, name(i))
            g.outputs.append(value_info(name(i), TensorProto.FLOAT, [BATCH, heads, PRESENT_LENGTH, hd]))
    return g


@dataclass
class WrittenGraphs:
    """What :func:`write_graphs` produced."""

    files: dict[str, Path]
    weights_file: Path
    stored_bytes: int
    referenced_bytes: int
    quantized_nodes: list[str]
    output_table: dict | None = None
    """Split graphs: where ``weights.bin`` holds the output layer's tensors the shortlist
    gathers from (``bundle.json``'s ``shortlist.output_layer``)."""


def write_graphs(w: MarianWeights, quant: QuantizeOptions, out: Path, weights_file: str = "weights.bin",
                 untie_output: bool = False, output_ids: np.ndarray | None = None,
                 ragged: bool = True, split: bool = False) -> WrittenGraphs:
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
        split: Split the decoder at its hidden state and also write ``projection.onnx``
            and ``shortlist.onnx`` (:mod:`.outputgraphs`), for a shortlist.
    """
    import onnx

    build_quant = quant if quant.at_build else QuantizeOptions(mode="none")
    if split and (output_ids is not None or untie_output or not (quant.at_build or quant.mode == "none")):
        raise ValueError("split graphs (a shortlist) go with neither a restricted output layer nor static int8")
    shared = SharedWeights(out / weights_file)
    files, quantized, table = {}, [], None
    graphs = [("encoder", build_encoder(w, build_quant)),
              ("decoder", build_decoder(w, build_quant, untie_output, output_ids, ragged, split))]
    if split:
        has_bias = output_table(w, build_quant)["bias"] is not None
        graphs += [("projection", build_projection(w, build_quant)),
                   ("shortlist", build_shortlist_projection(shortlist_kind(w, build_quant), w.shape.d_model, has_bias,
                                                            build_quant))]
    try:
        for name, graph in graphs:
            model = graph.model(shared, weights_file, f"edge-translator {name} for {w.shape.d_model}-d Marian")
            path = out / f"{name}.onnx"
            onnx.save_model(model, str(path))
            files[name] = path
            quantized += graph.quantized_nodes
        if split:  # identical bytes are stored once: these are the projection's own tensors
            table = {key: _placed(shared, array) for key, array in output_table(w, build_quant).items()
                     if array is not None}
    finally:
        shared.close()
    for path in files.values():
        onnx.checker.check_model(str(path))
    logger.info("wrote %s: %.1f MB stored for %.1f MB referenced", out, shared.stored / 1e6,
                shared.referenced / 1e6)
    return WrittenGraphs(files, out / weights_file, shared.stored, shared.referenced, quantized, table)


def _placed(shared: SharedWeights, array: np.ndarray) -> dict:
    """Store ``array`` in the weights file (or find its twin there) and say where it lies."""
    offset, _ = shared.add(array)
    return {"offset": offset, "dtype": np.dtype(array.dtype).str, "shape": list(array.shape)}
