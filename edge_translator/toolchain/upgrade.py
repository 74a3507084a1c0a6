"""Bring a bundle made by an earlier exporter up to date, in place: int8r activation codes of
127 steps, and fused ``SkipLayerNormalization`` nodes, each found in the bundle itself.

int8r bundles exported before ``activation_code_peak: 64`` quantize each row of activations
to 127 steps around a zero point of 128 (codes 0..255). x86 CPUs without VNNI (AVX2, and
AVX-512 without VNNI) add pairs of uint8 x int8 products into a saturating int16, and two
such products do not fit, so on those CPUs those bundles compute some products wrongly
and their outputs differ from a VNNI machine's. Today's exporter uses 64 steps around 64
(see :data:`.onnxbuild.ROW_CODE_UNIT`).

The weights themselves do not change: only the constants around them do, and each
``SkipLayerNormalization`` becomes the ``Add`` and ``LayerNormalization`` that the exporter
now writes (found by reading the graphs, whatever the manifest says and whatever the
scheme: the fused kernel is slower on ONNX Runtime's CPU). Every
``QuantizeLinear`` that makes row codes gets the unit 1/64 and the zero point 64, every
``MatMulIntegerToFloat`` the zero point 64, and each weight-scale vector (stored divided by
127) is rescaled to the weight scale divided by 64. The result is the graph today's exporter
writes for the same weights, with each scale within one float32 rounding of it (the
exporter's own scale was rounded once more on the way in). No PyTorch weights are needed,
which is the point: it works on an offline machine, on the bundle alone.
"""

from __future__ import annotations

import logging
import os
import shutil
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core import durable
from ..core.bundle import MANIFEST, file_record, load_bundle, read_manifest
from ..core.errors import BundleError
from .onnxbuild import ROW_CODE_UNIT, ROW_ZERO_POINT
from .quantize import QuantizeOptions
from .weightsfile import save_shared

logger = logging.getLogger(__name__)

#: The constants of the codes before the upgrade: 127 steps around 128.
OLD_PEAK, OLD_ZERO_POINT = 127, 128
UNIT_NAME, ZERO_POINT_NAME = "c.row_unit", "c.row_zero_point"


@dataclass(frozen=True)
class UpgradeReport:
    """What :func:`upgrade_bundle` did."""

    path: Path
    """The bundle directory written (the input itself unless ``out`` was given)."""
    upgraded: bool
    """``False`` when the bundle was already current (nothing was written)."""
    row_quantizers: int = 0
    """``QuantizeLinear`` nodes whose unit and zero point changed."""
    matmuls: int = 0
    """``MatMulIntegerToFloat`` nodes whose activation zero point and weight scale changed."""
    layer_norms: int = 0
    """``SkipLayerNormalization`` nodes written as ``Add`` and ``LayerNormalization``."""


def needs_upgrade(manifest: dict) -> bool:
    """Whether a bundle's manifest describes int8r codes of 127 steps (made before the change)."""
    quantization = manifest.get("quantization") or {}
    return quantization.get("mode") == "rowwise" and quantization.get("activation_code_peak") != 64


def fused_layer_norms(bundle) -> int:
    """``SkipLayerNormalization`` nodes in a bundle's graphs (read from the graphs themselves)."""
    import onnx

    specs = [s for s in (bundle.encoder, bundle.decoder, bundle.projection, bundle.shortlist_graph) if s is not None]
    return sum(node.op_type == "SkipLayerNormalization"
               for spec in specs for node in onnx.load(str(bundle.file(spec.file)), load_external_data=False).graph.node)


def upgrade_bundle(path: str | Path, out: str | Path | None = None) -> UpgradeReport:
    """Rewrite an old int8r bundle's activation constants; see the module docstring.

    Args:
        path: The bundle directory (verified against its checksums first).
        out: Write the upgraded bundle here (a new directory) and leave ``path`` as it is;
            ``None``: replace ``path`` itself, only once the new bundle is complete and loads.

    Returns:
        What was done; an up-to-date bundle is left alone (``upgraded`` is ``False``).

    Raises:
        BundleError: When ``path`` is not a bundle, is corrupt, is not an int8r bundle,
            ``out`` exists already, or the graphs do not have the shape of an int8r export.
            Nothing is written then.
    """
    import onnx

    source = Path(path)
    bundle = load_bundle(source)  # refuses a missing or corrupt bundle with a one-line error
    manifest = bundle.manifest
    codes = needs_upgrade(manifest)
    try:
        fused = fused_layer_norms(bundle)
    except Exception as exc:  # noqa: BLE001 - onnx's parse errors are many
        raise BundleError(f"{source}: a graph cannot be read ({str(exc).splitlines()[0] if str(exc) else exc}); "
                          "export the model again") from None
    if not codes and not fused:
        return UpgradeReport(source, upgraded=False)
    target = Path(out) if out is not None else source
    if out is not None and target.exists():
        raise BundleError(f"{target} exists already: give a new directory, or leave out --out to upgrade in place")
    parent = target.resolve().parent
    staging = parent / f".{target.name}.upgrade-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        staging.mkdir()  # not mkdtemp: its 0700 would lock out a daemon's user from the bundle
    except OSError as exc:
        raise BundleError(f"cannot write next to {target} ({exc.strerror}): choose a writable --out") from None
    if out is None:
        shutil.copymode(source, staging)
    try:
        models, counts = {}, [0, 0, 0]
        for name, spec in (("encoder", bundle.encoder), ("decoder", bundle.decoder)):
            model = onnx.load(str(bundle.file(spec.file)), load_external_data=True)
            quantizers, matmuls = rewrite_codes(model, str(bundle.file(spec.file))) if codes else (0, 0)
            counts[0] += quantizers
            counts[1] += matmuls
            counts[2] += unfuse_layer_norms(model)
            models[Path(spec.file).stem] = model
        weights_file = _weights_file(manifest)
        files, shared = save_shared(models, staging, weights_file)
        for path_ in files.values():
            onnx.checker.check_model(str(path_))
        for entry in source.iterdir():  # the tokenizer, the vocabulary, a model card, ...
            if not (staging / entry.name).exists() and entry.name != MANIFEST:
                copy = shutil.copytree if entry.is_dir() else shutil.copyfile
                copy(entry, staging / entry.name)
        manifest = _upgraded_manifest(manifest, staging, shared.stored, shared.referenced, codes, counts[2])
        _write_manifest(staging, manifest)
        load_bundle(staging)
        _replace(staging, target, in_place=out is None)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    logger.info("upgraded %s: %d row quantizers, %d integer matmuls, %d layer norms", target, *counts)
    return UpgradeReport(target, True, *counts)


def unfuse_layer_norms(model) -> int:
    """Write each ``SkipLayerNormalization`` as the ``Add`` and ``LayerNormalization`` that
    today's exporter writes (:meth:`.onnxbuild.GraphBuilder.add_norm`: faster on ONNX Runtime's
    CPU kernels), with the same names and constants; return how many there were."""
    from onnx import helper

    graph, count = model.graph, 0
    for node in [n for n in graph.node if n.op_type == "SkipLayerNormalization"]:
        epsilon = next(a.f for a in node.attribute if a.name == "epsilon")
        total = helper.make_node("Add", list(node.input[:2]), [f"{node.name}.add:out"], name=f"{node.name}.add")
        norm = helper.make_node("LayerNormalization", [total.output[0], *node.input[2:4]], [node.output[0]],
                                name=node.name, axis=-1, epsilon=epsilon)
        at = list(graph.node).index(node)
        graph.node.remove(node)
        graph.node.insert(at, norm)
        graph.node.insert(at, total)
        count += 1
    return count


def rewrite_codes(model, where: str = "the graph") -> tuple[int, int]:
    """Rewrite one loaded ONNX model's row codes from 127 to 64 steps; return the counts
    of ``QuantizeLinear`` and ``MatMulIntegerToFloat`` nodes changed.

    Raises:
        BundleError: When a constant is not what an int8r export of 127 steps writes.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    matmuls = [n for n in graph.node if n.op_type == "MatMulIntegerToFloat"]
    codes = {n.input[0] for n in matmuls}
    quantizers = [n for n in graph.node if n.op_type == "QuantizeLinear" and n.output[0] in codes]
    if not matmuls or len(quantizers) != len(codes):
        raise BundleError(f"{where} does not look like an int8r export: each MatMulIntegerToFloat must read the "
                          "codes of a QuantizeLinear")

    def value(name: str) -> np.ndarray:
        if name not in inits:
            raise BundleError(f"{where}: {name} is not a constant; this graph was not written by edge-translator")
        return numpy_helper.to_array(inits[name])

    def expect(name: str, wanted: float) -> None:
        found = value(name)
        if found.size != 1 or not np.isclose(float(found.reshape(())), wanted, rtol=1e-6):
            raise BundleError(f"{where}: {name} is {found.reshape(-1)[:1]}, not {wanted:g} as in a 127-step int8r "
                              "export")

    _set(graph, inits, UNIT_NAME, np.asarray(ROW_CODE_UNIT, np.float32))
    _set(graph, inits, ZERO_POINT_NAME, np.asarray(ROW_ZERO_POINT, np.uint8))
    old = set()
    for node in quantizers:
        expect(node.input[1], 1 / OLD_PEAK)
        expect(node.input[2], OLD_ZERO_POINT)
        old.update(node.input[1:3])
        node.input[1], node.input[2] = UNIT_NAME, ZERO_POINT_NAME
    factor = np.float64(OLD_PEAK) * ROW_CODE_UNIT
    rescaled_outputs: set[str] = set()
    for node in matmuls:
        expect(node.input[4], OLD_ZERO_POINT)
        old.add(node.input[4])
        node.input[4] = ZERO_POINT_NAME
        scale = node.input[3]
        if scale in inits:  # the weight scale / 127, stored
            new_name = scale.removesuffix(".scale_127") + ".scale_b"
            if new_name not in inits:
                rescaled = (value(scale).astype(np.float64) * factor).astype(np.float32)
                _set(graph, inits, new_name, rescaled)
            node.input[3] = new_name
            old.add(scale)
            continue
        if scale in rescaled_outputs:  # a second reader of a division already rewritten
            continue
        divide = producers.get(scale)  # the tied output layer: Div(embedding scales, 127)
        if divide is None or divide.op_type != "Div":
            raise BundleError(f"{where}: the weight scale of {node.name} is neither a constant nor a division by "
                              f"{OLD_PEAK}")
        expect(divide.input[1], OLD_PEAK)
        old.add(divide.input[1])
        name = divide.name.replace("scale_127", "scale_b")
        replacement = helper.make_node("Mul", [divide.input[0], UNIT_NAME], [f"{name}:out"], name=name)
        graph.node.insert(list(graph.node).index(divide), replacement)
        graph.node.remove(divide)
        rescaled_outputs.add(replacement.output[0])
        for consumer in graph.node:
            for k, tensor in enumerate(consumer.input):
                if tensor == divide.output[0]:
                    consumer.input[k] = replacement.output[0]
    used = {name for node in graph.node for name in node.input}
    for name in old - used:
        graph.initializer.remove(inits.pop(name))
    return len(quantizers), len(matmuls)


def _set(graph, inits: dict, name: str, array: np.ndarray) -> None:
    from onnx import numpy_helper

    if name in inits:
        graph.initializer.remove(inits[name])
    inits[name] = numpy_helper.from_array(array, name)
    graph.initializer.append(inits[name])


def _weights_file(manifest: dict) -> str:
    onnx_files = {"encoder.onnx", "decoder.onnx"}
    others = [name for name in manifest.get("files", {}) if name.endswith(".bin") and name not in onnx_files
              and name != (manifest.get("output_vocabulary") or {}).get("file")]
    return others[0] if len(others) == 1 else "weights.bin"


def _upgraded_manifest(manifest: dict, staging: Path, stored: int, referenced: int, codes: bool,
                       layer_norms: int) -> dict:
    import onnx

    from .. import __version__
    from ..core.sessions import onnxruntime

    manifest = dict(manifest)
    what = []
    if codes:
        quantization = dict(manifest["quantization"])
        current = QuantizeOptions(mode="rowwise").as_manifest()
        for key in ("activations", "activation_code_peak"):
            quantization[key] = current[key]
        manifest["quantization"] = quantization
        what.append(f"int8r activation codes of {OLD_PEAK} steps around {OLD_ZERO_POINT} rewritten to "
                    f"{ROW_ZERO_POINT} steps around {ROW_ZERO_POINT}")
    if layer_norms:
        what.append(f"{layer_norms} SkipLayerNormalization nodes written as Add and LayerNormalization")
    manifest["upgraded"] = {"edge-translator": __version__, "onnx": onnx.__version__,
                            "onnxruntime": onnxruntime().__version__, "what": "; ".join(what) + "; weights unchanged"}
    validation = dict(manifest.get("validation") or {})
    for key in ("int8_agreement", "batch_invariance"):  # measured on the graphs before the upgrade
        if key in validation:
            validation[key] = dict(validation[key], before_upgrade=True)
    manifest["validation"] = validation
    manifest["storage"] = {"stored_bytes": stored, "referenced_bytes": referenced}
    manifest["files"] = {name: file_record(staging / name) for name in manifest["files"]}
    return manifest


def _write_manifest(directory: Path, manifest: dict) -> None:
    import json

    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    read_manifest(directory)


def _replace(staging: Path, target: Path, in_place: bool) -> None:
    """Move the finished bundle into place; in place, the old one is removed only after. The
    bundle's files and folders are fsynced before the rename, its parent folder after."""
    durable.fsync_tree(staging)
    if not in_place:
        os.replace(staging, target)
        durable.fsync_dir(target.parent)
        return
    old = staging.with_name(staging.name + ".old")
    os.replace(target, old)
    try:
        os.replace(staging, target)
    except BaseException:
        os.replace(old, target)
        raise
    durable.fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)
