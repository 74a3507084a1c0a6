"""Give an existing bundle a vocabulary shortlist, offline, without the PyTorch weights.

``export --shortlist`` needs the Hugging Face model; a user with only a bundle (the embedded
model, one downloaded from elsewhere) has the weights in ``weights.bin`` already. This cuts
the decoder graph at the final hidden state: the nodes that only serve the logits (the
output layer, its row quantization) move, unchanged, into ``projection.onnx``; the shortlist
graph is built as the exporter builds it; every tensor is written into a new
``weights.bin`` (stored once, as the exporter stores them), and ``shortlist.bin`` is counted
as export counts it. The weights do not change, so neither does the output without the
shortlist. A bundle that already has one gets its lists counted again.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
from pathlib import Path

import numpy as np

from ..core import durable
from ..core.bundle import MANIFEST, file_record, load_bundle, read_manifest
from ..core.errors import BundleError, InputError
from ..core.graphio import HIDDEN, LOGITS, decoder_io, projection_io, shortlist_io
from ..core.tokenizer import Tokenizer
from .outputgraphs import DYNAMIC, FLOAT, ROWWISE, build_shortlist_projection
from .shortlist import ShortlistOptions, read_corpus, shortlist_for_bundle
from .weightsfile import SharedWeights, tensor_proto

logger = logging.getLogger(__name__)

#: The output layer's operator → how the shortlist graph computes it.
KINDS = {"MatMulIntegerToFloat": ROWWISE, "DynamicQuantizeMatMul": DYNAMIC, "Gemm": FLOAT}


def add_shortlist(path: str | Path, out: str | Path | None = None, corpus: str | Path | None = None,
                  options: ShortlistOptions | None = None, english: str | Path | None = None) -> Path:
    """Write a copy of the bundle at ``path`` with a shortlist into ``out`` (default: replace it).

    Args:
        corpus: Count the lists on these pairs.
        english: Otherwise, on the model's own translations of this English (one sentence a
            line; default: the corpus shipped with the toolchain), e.g. the documents it will
            translate.

    Raises:
        BundleError: If the bundle is not one whose output layer a shortlist can gather from.
        InputError: If ``corpus`` is not a usable pairs file, or ``out`` exists.
    """
    path = Path(path)
    bundle = load_bundle(path)
    manifest = read_manifest(path)
    pairs = read_corpus(corpus) if corpus is not None else None
    if corpus is not None and english is not None:
        raise InputError("give either pairs (--corpus) or English (--english) to count the lists on, not both")
    sentences = None
    if english is not None:
        from .shortlistcurve import read_english

        sentences = (read_english(english), str(english))
    if manifest.get("output_vocabulary"):
        raise BundleError(f"{path} has a restricted output layer; a shortlist replaces it: export the model "
                          "again with --shortlist instead of --restrict-output")
    if manifest.get("quantization", {}).get("activation_code_peak", 64) != 64 and \
            manifest.get("quantization", {}).get("mode") == "rowwise":
        raise BundleError(f"{path} uses the old 127-step activation codes; run `edge-translator upgrade {path}` first")
    target = Path(out) if out is not None else path
    if out is not None and target.exists():
        raise InputError(f"{target} exists; choose a new directory, or leave --out out to replace the bundle")
    staging = target.parent / f".{target.name}.shortlist-{secrets.token_hex(4)}"
    shutil.copytree(path, staging)
    try:
        if bundle.projection is None:
            _split(staging, manifest, bundle.num_layers)
        staged = dict(read_manifest(staging))
        staged.pop("shortlist", None)
        _write_manifest(staging, staged)
        special = staged["special_ids"]
        tokenizer = Tokenizer.load(staging / "source.spm", staging / "target.spm", staging / "vocab.json",
                                   special["eos"], special["unk"], special["pad"])
        from ..core.decode import Seq2Seq

        model = None if pairs is not None else Seq2Seq.load(load_bundle(staging))
        target_id = staged["targets"][staged["default_target"]]["id"]
        staged["shortlist"] = shortlist_for_bundle(staging, model, tokenizer, target_id, pairs,
                                                   str(corpus) if corpus is not None else None,
                                                   options or ShortlistOptions(), sentences)
        _write_manifest(staging, staged)
        from .validate import shortlist_agreement

        staged.setdefault("validation", {})["shortlist_agreement"] = shortlist_agreement(
            Seq2Seq.load(load_bundle(staging)), tokenizer, target_id)
        _write_manifest(staging, staged)
        load_bundle(staging)
        durable.fsync_tree(staging)  # whole on the disk before it takes the name
        if target.exists():
            old = target.parent / f".{target.name}.old-{secrets.token_hex(4)}"
            os.replace(target, old)
            os.replace(staging, target)
            durable.fsync_dir(target.parent)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, target)
            durable.fsync_dir(target.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("shortlist added: %s", target)
    return target


def _split(directory: Path, manifest: dict, layers: int) -> None:
    """Cut the staged decoder at its hidden state and write the three graphs and a new weights file."""
    import onnx

    weights_file = manifest.get("weights_file", "weights.bin")
    encoder = onnx.load(str(directory / manifest["graphs"]["encoder"]["file"]), load_external_data=True)
    decoder = onnx.load(str(directory / manifest["graphs"]["decoder"]["file"]), load_external_data=True)
    projection, kind, table = _cut(decoder, directory)
    d_model = int(table["weight"].shape[1])
    shortlist = build_shortlist_projection(kind, d_model, table["bias"] is not None and kind == ROWWISE).model(
        _NoWeights(), weights_file, f"edge-translator shortlist for {d_model}-d Marian")
    (directory / weights_file).unlink()
    shared = SharedWeights(directory / weights_file)
    try:
        for name, model in (("encoder", encoder), ("decoder", decoder), ("projection", projection),
                            ("shortlist", shortlist)):
            _externalize(model, shared, weights_file)
            onnx.save_model(model, str(directory / f"{name}.onnx"))
        placed = {key: _placed(shared, array) for key, array in table.items() if array is not None}
    finally:
        shared.close()
    for name in ("encoder", "decoder", "projection", "shortlist"):
        onnx.checker.check_model(str(directory / f"{name}.onnx"))
    graphs = dict(manifest["graphs"])
    dec_in, dec_out = decoder_io(layers, ragged="past_lengths" in graphs["decoder"]["inputs"], split=True)
    graphs["decoder"] = dict(graphs["decoder"], inputs=dec_in, outputs=dec_out)
    for name, (inputs, outputs) in (("projection", projection_io()),
                                    ("shortlist", shortlist_io("scale" in placed, "bias" in placed))):
        graphs[name] = {"file": f"{name}.onnx", "inputs": inputs, "outputs": outputs}
    manifest = dict(manifest, graphs=graphs, output_layer={"kind": kind, **placed},
                    storage={"stored_bytes": shared.stored, "referenced_bytes": shared.referenced})
    _write_manifest(directory, manifest)


class _NoWeights:
    """The shortlist graph has no initializer large enough to go to the weights file."""

    def add(self, array):
        raise AssertionError("the shortlist graph holds no large weight")


def _cut(decoder, directory: Path):
    """Move the nodes that only make the logits out of ``decoder`` (edited in place) into a
    graph of their own; return it, the layer's kind and its tensors (:func:`.outputgraphs.output_table`'s keys)."""
    from onnx import NodeProto, TensorProto, helper

    graph = decoder.graph
    nodes = [NodeProto() for _ in graph.node]
    for copy, node in zip(nodes, graph.node):
        copy.CopyFrom(node)
    producer = {out: k for k, node in enumerate(nodes) for out in node.output}
    inits = {t.name: t for t in graph.initializer}

    def ancestors(names) -> set[int]:
        seen, stack = set(), list(names)
        while stack:
            k = producer.get(stack.pop())
            if k is not None and k not in seen:
                seen.add(k)
                stack.extend(nodes[k].input)
        return seen

    outputs = [o.name for o in graph.output]
    if LOGITS not in outputs:
        raise BundleError(f"{directory}: the decoder has no logits output; export the bundle again")
    layer = [n for n in nodes if n.name == "lm_head"]
    if len(layer) != 1 or layer[0].op_type not in KINDS:
        raise BundleError(f"{directory}: its output layer is not one a shortlist can gather from (fp32, int8 "
                          "or int8r); export the model again with --shortlist")
    kind = KINDS[layer[0].op_type]
    hidden = _activation(layer[0], nodes, producer)
    rest = ancestors([o for o in outputs if o != LOGITS] + [hidden])
    head_ids = sorted(ancestors([LOGITS]) - rest)
    head = [nodes[k] for k in head_ids]
    made = {out for n in head for out in n.output}
    frontier = {i for n in head for i in n.input if i and i not in made and i not in inits}
    if frontier != {hidden}:
        raise BundleError(f"{directory}: the output layer reads more than the hidden state ({sorted(frontier)}); "
                          "export the model again with --shortlist")
    table = _table(kind, head, layer[0], inits)
    d_model = int(table["weight"].shape[1])
    hidden_info = helper.make_tensor_value_info(HIDDEN, TensorProto.FLOAT, ["batch", "new_length", d_model])
    logits_info = [o for o in graph.output if o.name == LOGITS][0]
    projection = helper.make_graph(head, "projection", [hidden_info], [logits_info],
                                   list({i: inits[i] for n in head for i in n.input if i in inits}.values()))
    for node in projection.node:  # the hidden state is the projection's input
        for k, name in enumerate(node.input):
            if name == hidden:
                node.input[k] = HIDDEN
    # the decoder without them, the hidden state an output
    kept = [n for k, n in enumerate(nodes) if k not in set(head_ids)]
    kept.append(helper.make_node("Identity", [hidden], [HIDDEN], name="decoder.hidden"))
    others = [o for o in graph.output if o.name != LOGITS]
    outputs_kept = [hidden_info] + list(others)
    used = {i for n in kept for i in n.input}
    initializers = [t for t in graph.initializer if t.name in used]
    new_graph = helper.make_graph(kept, graph.name, list(graph.input), outputs_kept, initializers)
    graph.CopyFrom(new_graph)
    model = helper.make_model(projection, opset_imports=list(decoder.opset_import), producer_name="edge-translator",
                              doc_string=f"edge-translator projection for {d_model}-d Marian")
    model.ir_version = decoder.ir_version
    return model, kind, table


def _activation(layer, nodes, producer) -> str:
    """The tensor the output layer multiplies: the decoder's final hidden state."""
    x = layer.input[0]
    if layer.op_type == "MatMulIntegerToFloat":  # codes = QuantizeLinear(Div(h, peak))
        x = nodes[producer[nodes[producer[x]].input[0]]].input[0]
    elif layer.op_type == "Gemm":  # Reshape(h) to [B*T, D]
        x = nodes[producer[x]].input[0]
    return x


def _table(kind: str, head, layer, inits) -> dict:
    """The output layer's weight [V, D], per-row scale [V] and bias [V] (or ``None``), read from its nodes."""
    from onnx import numpy_helper

    producer = {out: node for node in head for out in node.output}

    def constant(name: str):
        if name in inits:
            return numpy_helper.to_array(inits[name])
        node = producer.get(name)
        if node is not None and node.op_type in ("Transpose", "Gather") and node.input[0] in inits:
            return constant(node.input[0])  # the stored [V, D] table behind the layer's view of it
        if node is not None and node.op_type == "Mul":  # scale x the codes' unit: the stored scale
            return constant(next(i for i in node.input if i in inits and numpy_helper.to_array(inits[i]).ndim == 1))
        raise BundleError(f"the output layer's input {name} is not a stored weight; export the model again")

    adds = [n for n in head if n.op_type == "Add" and layer.output[0] in n.input]
    if kind == FLOAT:
        return {"weight": constant(layer.input[1]), "scale": None, "bias": constant(layer.input[2])}
    if kind == DYNAMIC:
        return {"weight": constant(layer.input[1]), "scale": constant(layer.input[2]),
                "bias": constant(layer.input[4]) if len(layer.input) > 4 and layer.input[4] else None}
    bias = None
    if adds:
        other = [i for i in adds[0].input if i != layer.output[0]][0]
        bias = constant(other)
    return {"weight": constant(layer.input[1]), "scale": constant(layer.input[3]), "bias": bias}


def _externalize(model, shared: SharedWeights, weights_file: str) -> None:
    """Store a model's initializers in the shared weights file (small ones inline)."""
    from onnx import numpy_helper

    tensors = [tensor_proto(t.name, numpy_helper.to_array(t), shared, weights_file) for t in model.graph.initializer]
    del model.graph.initializer[:]
    model.graph.initializer.extend(tensors)


def _placed(shared: SharedWeights, array: np.ndarray) -> dict:
    offset, _ = shared.add(array)
    return {"offset": offset, "dtype": np.dtype(array.dtype).str, "shape": list(array.shape)}


def _write_manifest(directory: Path, manifest: dict) -> None:
    import json

    manifest["files"] = {p.name: file_record(p) for p in sorted(directory.iterdir())
                         if p.is_file() and p.name != MANIFEST}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
