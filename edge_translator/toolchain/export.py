"""Export a Marian model (a Hugging Face folder or hub id, or a Marian release) into a verified bundle.

Export = read, build, validate, quantize, check, save, with numpy, onnx and ONNX Runtime
alone: the checkpoint is read by :mod:`.sources` and the float32 graphs are proved against
a float64 numpy implementation of the model (:mod:`.reference`), so no PyTorch is needed.
The bundle is written to a staging directory beside OUT and moved into place only when
every check has passed, so a failed export never leaves a half-written bundle, and an
existing OUT is replaced only with ``force``.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..core import durable
from ..core.bundle import FORMAT, FORMAT_VERSION, MANIFEST, file_record, load_bundle
from ..core.decode import Seq2Seq
from ..core.errors import ExportError
from ..core.graphio import decoder_io, encoder_io, projection_io, shortlist_io
from ..core.tokenizer import Tokenizer
from .graphs import write_graphs
from .marian import MarianWeights
from .onnxbuild import OPSET
from .outputgraphs import shortlist_kind
from .quantize import QuantizeOptions, check_int8, runtime_requirements
from .shortlist import DEFAULT_FREQUENT, DEFAULT_TOP_K, ShortlistOptions
from .sources import check_source, open_source
from .validate import PARITY_FACTOR, PARITY_FLOOR, logits_parity_numpy

logger = logging.getLogger(__name__)

#: Target variants users can ask for, and the opus-mt tokens that select them.
TARGET_VARIANTS = {"zh-Hans": ">>cmn_Hans<<", "zh-Hant": ">>cmn_Hant<<"}


@dataclass(frozen=True)
class ExportOptions:
    """What :func:`export` writes and how it checks it."""

    quantize: QuantizeOptions = field(default_factory=QuantizeOptions)
    """Quantization of the bundle's graphs."""
    force: bool = False
    """Replace OUT if it exists."""
    name: str | None = None
    """Model name recorded in the manifest; defaults to the source directory's name."""
    validate: bool = True
    """Compare with the float64 reference and measure INT8 agreement (off only for debugging)."""
    parity_tolerance: float = PARITY_FACTOR
    """How many times the float32 reference's own logit error (against float64) the FP32
    graphs may show on this model, on top of ``parity_floor``."""
    parity_floor: float = PARITY_FLOOR
    """Absolute logit error the FP32 graphs may always show, however exact float32 is."""
    restrict_output: bool = False
    """Compute logits only for target-side pieces (those of ``target.spm``, plus ``</s>`` and
    ``<unk>``): the output layer reads fewer bytes per step. Measure on a trained model
    that it does not change the output before shipping such a bundle."""
    shortlist: bool = False
    """Also write a vocabulary shortlist (``shortlist.bin``): per source piece, the target pieces
    a translation may need, so that the runtime computes only those rows of the output layer."""
    shortlist_corpus: str | None = None
    """TSV of English–Chinese pairs the shortlist is counted on; ``None``: the model's own greedy
    translations of the English shipped with the toolchain."""
    shortlist_top_k: int = DEFAULT_TOP_K
    """Target pieces the shortlist keeps per source piece."""
    shortlist_frequent: int = DEFAULT_FREQUENT
    """Most frequent target tokens the shortlist always allows."""

    def __post_init__(self) -> None:
        if not (self.parity_tolerance >= 0 and self.parity_floor >= 0):  # NaN fails too
            raise ValueError(f"parity tolerance factor ({self.parity_tolerance}) and floor ({self.parity_floor}) "
                             "must be numbers of at least 0")
        if self.shortlist_corpus is not None and not self.shortlist:
            raise ValueError("a shortlist corpus is given but the shortlist is off; turn it on (--shortlist)")
        self.shortlist_options()

    def shortlist_options(self) -> ShortlistOptions:
        """The shortlist's sizes (checked: a bad one raises ``ValueError``)."""
        return ShortlistOptions(top_k=self.shortlist_top_k, frequent=self.shortlist_frequent)


def _versions() -> dict[str, str]:
    from importlib import metadata

    versions = {}
    for package in ("edge-translator", "onnx", "onnxruntime", "sentencepiece", "numpy"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def _targets(vocab: dict[str, int], where: Path) -> dict[str, dict]:
    targets = {name: {"token": token, "id": vocab[token]}
               for name, token in TARGET_VARIANTS.items() if token in vocab}
    if not targets:
        raise ExportError(
            f"{where / 'vocab.json'} has none of the target tokens {sorted(TARGET_VARIANTS.values())}; "
            "this exporter is for English→Chinese opus-mt models"
        )
    return targets


def _prepare_out(out: Path, force: bool) -> Path:
    """Refuse an existing OUT without ``force``; return a fresh staging directory beside it."""
    if out.exists() and not force:
        raise ExportError(f"{out} already exists; pass --force to overwrite it")
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} exists and is not a directory; choose another OUT")
    parent = out.parent if str(out.parent) else Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
        staging.chmod(0o755)
        return staging
    except OSError as exc:
        raise ExportError(f"cannot write to {parent} ({exc.strerror}); choose a writable OUT") from None


def _generation(src: Path, weights: MarianWeights) -> dict:
    config = {}
    path = src / "generation_config.json"
    if path.is_file():
        config = json.loads(path.read_text(encoding="utf-8"))
    forced = config.get("forced_eos_token_id")
    return {
        "forced_eos": forced is not None and forced == weights.shape.eos_id,
        "bad_words_ids": config.get("bad_words_ids", [[weights.shape.pad_id]]),
        "published_num_beams": config.get("num_beams"),
    }


def _manifest(name: str, src: Path, weights: MarianWeights, vocab: dict[str, int], quant: QuantizeOptions,
              generation: dict) -> dict:
    s = weights.shape
    enc_in, enc_out = encoder_io(s.decoder_layers)
    dec_in, dec_out = decoder_io(s.decoder_layers)
    targets = _targets(vocab, src)
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "model": {
            "name": name,
            "source": str(src),
            "source_language": "en",
            "target_language": "zh",
            "parameters": weights.parameter_count,
            "architecture": s.as_manifest(),
        },
        "targets": targets,
        "default_target": "zh-Hans" if "zh-Hans" in targets else next(iter(targets)),
        "special_ids": {"pad": s.pad_id, "eos": s.eos_id, "unk": vocab.get("<unk>", 1),
                        "decoder_start": s.decoder_start_id},
        "max_positions": s.max_positions,
        "vocab_size": int(weights.lm_head.shape[0]),
        "generation": generation,
        "tokenizer": {"source_spm": "source.spm", "target_spm": "target.spm", "vocab": "vocab.json"},
        "graphs": {
            "encoder": {"file": "encoder.onnx", "inputs": enc_in, "outputs": enc_out},
            "decoder": {"file": "decoder.onnx", "inputs": dec_in, "outputs": dec_out},
        },
        "weights_file": "weights.bin",
        "quantization": quant.as_manifest(),
        **({"runtime": needs} if (needs := runtime_requirements(quant)) else {}),
        "opset": OPSET,
        "tools": _versions(),
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def target_output_ids(local: Path, vocab: dict[str, int], eos: int, unk: int):
    """Vocabulary ids of the target SentencePiece model's pieces, plus ``</s>`` and ``<unk>``."""
    import numpy as np
    import sentencepiece

    proc = sentencepiece.SentencePieceProcessor()
    proc.Load(str(local / "target.spm"))
    ids = {vocab[p] for p in (proc.id_to_piece(i) for i in range(proc.get_piece_size())) if p in vocab}
    ids |= {eos, unk}
    return np.asarray(sorted(ids), dtype=np.int64)


def _write_manifest(directory: Path, manifest: dict) -> None:
    manifest["files"] = {p.name: file_record(p) for p in sorted(directory.iterdir())
                         if p.is_file() and p.name != MANIFEST}
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")


def _open(directory: Path, manifest: dict) -> tuple[Seq2Seq, Tokenizer]:
    _write_manifest(directory, manifest)
    bundle = load_bundle(directory)
    tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab, bundle.eos_id,
                               bundle.unk_id, bundle.pad_id)
    return Seq2Seq.load(bundle), tokenizer


#: The stages :func:`export` reports to its ``progress`` callback, in order.
STAGES = ("reading the checkpoint", "building the float32 graphs", "checking them against float64",
          "quantizing", "checking the quantized graphs", "counting the shortlist", "writing the bundle")


def export(src: str | Path, out: str | Path, options: ExportOptions | None = None, progress=None) -> Path:
    """Export, validate and save a bundle.

    Args:
        src: A local Hugging Face MarianMT directory, a Marian release (folder or ``.zip``),
            or a hub id (downloaded through huggingface_hub's cache when online).
        out: The bundle directory to create.
        options: Quantization, overwrite and validation settings.
        progress: Called with (stage, stage number, number of stages) as the work goes on
            (:data:`STAGES`).

    Returns:
        The bundle directory.

    Raises:
        ExportError: If the source is unusable, OUT exists without ``force``, OUT is not
            writable, the FP32 graphs are less exact than a float32 reference (see
            :func:`logits_parity_checked`), or a weight is not quantized as asked.
        InputError: If ``shortlist_corpus`` is missing, unreadable, empty or not a pairs TSV
            (checked before anything is built).
    """
    options = options or ExportOptions()
    quant = options.quantize
    out = Path(out)
    check_source(src)  # a missing file fails at once, before the long work

    def stage(name: str) -> None:
        if progress is not None:
            progress(name, STAGES.index(name), len(STAGES))

    corpus = None
    if options.shortlist and options.shortlist_corpus is not None:
        from .shortlist import read_corpus

        corpus = read_corpus(options.shortlist_corpus)  # before the long work: a bad file fails at once
    staging = _prepare_out(out, options.force)
    scratch = Path(tempfile.mkdtemp(prefix="edge-translator-source-"))
    try:
        stage("reading the checkpoint")
        weights, local = open_source(src, scratch)
        vocab = json.loads((local / "vocab.json").read_text(encoding="utf-8"))
        name = options.name or (Path(str(src)).stem if str(src).lower().endswith(".zip") else Path(str(src)).name)
        manifest = _manifest(name, local, weights, vocab, quant, _generation(local, weights))
        target_id = manifest["targets"][manifest["default_target"]]["id"]
        output_ids = None
        if options.restrict_output:
            output_ids = target_output_ids(local, vocab, weights.shape.eos_id, manifest["special_ids"]["unk"])
            output_ids.astype("<i4").tofile(staging / "output_ids.bin")
            manifest["output_vocabulary"] = {"file": "output_ids.bin", "size": len(output_ids),
                                             "source": "target.spm pieces, </s> and <unk>"}
        split = options.shortlist
        if split:
            if output_ids is not None:
                raise ExportError("--shortlist and --restrict-output do not go together; choose one")
            kind = shortlist_kind(weights, quant)  # before the long work: a scheme without it fails at once
        with tempfile.TemporaryDirectory(prefix="edge-translator-fp32-") as tmp:
            fp32_dir = Path(tmp)
            if quant.bits is not None and output_ids is not None:
                raise ExportError(f"a restricted output layer works with int8 and float32 bundles, not {quant.mode}")
            for directory in {staging, fp32_dir}:
                for file in ("source.spm", "target.spm"):
                    shutil.copyfile(local / file, directory / file)
                # written, not copied: one form whatever the source's spacing, so that the same
                # model gives the same bundle from a Hugging Face folder and from a Marian release
                (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
            fp32_manifest = dict(manifest, quantization={"mode": "none"})
            fp32_manifest.pop("output_vocabulary", None)
            reference_dir = staging if quant.mode == "none" and output_ids is None and not split else fp32_dir
            stage("building the float32 graphs")
            written = write_graphs(weights, QuantizeOptions(mode="none"), reference_dir)
            fp32_model, tokenizer = _open(reference_dir, fp32_manifest)
            validation: dict = {}
            if options.validate:
                stage("checking them against float64")
                parity = logits_parity_checked(weights, fp32_model, tokenizer, target_id, options.parity_tolerance,
                                               options.parity_floor)
                validation["fp32_parity"] = parity
            if quant.mode == "none" and split:
                written = write_graphs(weights, quant, staging, split=True)
                _split_manifest(manifest, weights, kind, written)
            if quant.mode == "none" and output_ids is not None:
                written = write_graphs(weights, quant, staging, output_ids=output_ids)
                restricted, _ = _open(staging, manifest)
                from .validate import int8_agreement

                validation["restriction_agreement"] = int8_agreement(fp32_model, restricted, tokenizer, target_id)
            if quant.mode != "none":
                stage("quantizing")
                written = _quantize(weights, quant, fp32_dir, staging, fp32_model, tokenizer, target_id,
                                    output_ids, split)
                if split:
                    _split_manifest(manifest, weights, kind, written)
                check_int8(written.files, quant)
                validation["int8_check"] = {"passed": True, "quantized_nodes": len(written.quantized_nodes)}
                if options.validate:
                    stage("checking the quantized graphs")
                    int8_model, _ = _open(staging, manifest)
                    from .validate import batch_invariance, int8_agreement

                    validation["int8_agreement"] = int8_agreement(fp32_model, int8_model, tokenizer, target_id)
                    validation["batch_invariance"] = batch_invariance(int8_model, tokenizer, target_id)
            manifest["storage"] = {"stored_bytes": written.stored_bytes,
                                   "referenced_bytes": written.referenced_bytes}
            manifest["validation"] = validation
            if options.shortlist:
                stage("counting the shortlist")
                manifest["shortlist"] = _shortlist(staging, manifest, options, corpus, target_id)
                shortlisted, _ = _open(staging, manifest)
                from .validate import shortlist_agreement

                validation["shortlist_agreement"] = shortlist_agreement(shortlisted, tokenizer, target_id)
            stage("writing the bundle")
            _write_manifest(staging, manifest)
        load_bundle(staging)
        durable.fsync_tree(staging)  # whole on the disk before it takes the name
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
        durable.fsync_dir(out.parent)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    logger.info("exported %s to %s", src, out)
    return out


def _shortlist(staging: Path, manifest: dict, options: ExportOptions, corpus, target_id: int) -> dict:
    """Write ``shortlist.bin`` into the finished staging bundle (before its final manifest, which
    then lists and checksums it) and return the manifest entry. Without a corpus, the staged
    bundle itself translates the toolchain's English."""
    from .shortlist import shortlist_for_bundle

    if corpus is None:
        model, tokenizer = _open(staging, manifest)
    else:  # counted on the corpus: no need for the graphs
        special = manifest["special_ids"]
        model, tokenizer = None, Tokenizer.load(staging / "source.spm", staging / "target.spm", staging / "vocab.json",
                                                special["eos"], special["unk"], special["pad"])
    return shortlist_for_bundle(staging, model, tokenizer, target_id, corpus, options.shortlist_corpus,
                                options.shortlist_options())


def logits_parity_checked(weights: MarianWeights, fp32_model: Seq2Seq, tokenizer: Tokenizer, target_id: int,
                          factor: float = PARITY_FACTOR, floor: float = PARITY_FLOOR) -> dict:
    """Run :func:`.validate.logits_parity_numpy` and fail the export unless the graphs are as
    exact as a float32 implementation of the model.

    Returns:
        The ``validation.fp32_parity`` block of ``bundle.json``.

    Raises:
        ExportError: One line naming the measured errors, the allowed bound and the way out.
    """
    report = logits_parity_numpy(weights, fp32_model, tokenizer, target_id)
    problems = report.problems(factor, floor)
    if problems:
        raise ExportError(
            f"{'; '.join(problems)}: the export is likely wrong for this model; please report it, or allow "
            f"FACTOR times the float32 reference's own error with --parity-tolerance FACTOR (now {factor:g})"
        )
    return report.as_manifest(factor, floor)


def _split_manifest(manifest: dict, weights: MarianWeights, kind: str, written) -> None:
    """Point the manifest at split graphs: the decoder ending at the hidden state, the two
    output-layer graphs, and where ``weights.bin`` holds the rows a shortlist gathers.
    (New objects, not edits: the FP32 reference's manifest is a shallow copy of this one.)"""
    layers = weights.shape.decoder_layers
    dec_in, dec_out = decoder_io(layers, split=True)
    table = written.output_table
    graphs = dict(manifest["graphs"])
    graphs["decoder"] = {"file": "decoder.onnx", "inputs": dec_in, "outputs": dec_out}
    for name, (inputs, outputs) in (("projection", projection_io()),
                                    ("shortlist", shortlist_io("scale" in table, "bias" in table))):
        graphs[name] = {"file": f"{name}.onnx", "inputs": inputs, "outputs": outputs}
    manifest["graphs"] = graphs
    manifest["output_layer"] = {"kind": kind, **table}


def _quantize(weights: MarianWeights, quant: QuantizeOptions, fp32_dir: Path, staging: Path,
              fp32_model: Seq2Seq, tokenizer: Tokenizer, target_id: int, output_ids=None, split: bool = False):
    if quant.at_build:
        return write_graphs(weights, quant, staging, output_ids=output_ids, split=split)
    from .calibrate import quantize_static_graphs

    return quantize_static_graphs(weights, staging, quant, fp32_model, tokenizer, target_id, output_ids)
