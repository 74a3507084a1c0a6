"""Find, read and verify a model bundle: one self-describing directory.

A bundle holds ``bundle.json`` (the manifest), two ONNX graphs (``encoder.onnx`` and
``decoder.onnx``), the weights they share (``weights.bin``), the two SentencePiece
models and the joint vocabulary. A bundle with a vocabulary shortlist also holds
``shortlist.bin`` and two output-layer graphs (``projection.onnx``, ``shortlist.onnx``),
its decoder ending at the hidden state. The manifest records the sha256 and size of every
file; :func:`load_bundle` refuses a bundle whose files do not match it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BundleError

logger = logging.getLogger(__name__)

MANIFEST = "bundle.json"
FORMAT = "edge-translator-bundle"
FORMAT_VERSION = 1


#: ``export --quantize`` names → the quantization mode a manifest records (``int8`` is dynamic
#: INT8; static comes from ``--calibrate``). Here, not in the toolchain, so that a build without
#: the toolchain still parses the command line and names schemes.
SCHEME_MODES = {"int8": "dynamic", "int8r": "rowwise", "q8": "q8", "q4": "q4", "none": "none"}
#: What ``edge-translator export`` writes without ``--quantize``: INT8 with per-row activations
#: (batch-invariant on any CPU).
DEFAULT_SCHEME = "int8r"
#: Weights per block of the block-quantized schemes (q8, q4) unless told otherwise.
DEFAULT_BLOCK_SIZE = 64
_SCHEMES = {mode: name for name, mode in SCHEME_MODES.items()}


def scheme_name(mode: str) -> str:
    """The ``export --quantize`` name of a manifest's quantization mode (``rowwise`` →
    ``int8r``); an unknown mode is returned as it is."""
    return _SCHEMES.get(mode, mode)


@dataclass(frozen=True)
class GraphSpec:
    """One ONNX graph of a bundle and its input and output names."""

    file: str
    """File name inside the bundle directory."""
    inputs: tuple[str, ...]
    """Graph input names, in order."""
    outputs: tuple[str, ...]
    """Graph output names, in order."""


@dataclass(frozen=True)
class TargetVariant:
    """A target language variant the model can produce, and the token that asks for it."""

    name: str
    """Variant name users pass, e.g. ``"zh-Hans"``."""
    token: str
    """Vocabulary token prefixed to the source, e.g. ``">>cmn_Hans<<"``."""
    id: int
    """Vocabulary id of :attr:`token`."""


@dataclass(frozen=True)
class Bundle:
    """The parsed manifest of a verified bundle directory."""

    path: Path
    """The bundle directory."""
    name: str
    """Model name, e.g. ``"opus-mt-en-zh"``."""
    source_language: str
    """Source language code."""
    target_language: str
    """Target language code."""
    targets: dict[str, TargetVariant]
    """Target variants by name."""
    default_target: str
    """Name of the variant used when none is asked for."""
    pad_id: int
    """Padding id; also never generated."""
    eos_id: int
    """End-of-sentence id."""
    unk_id: int
    """Unknown-piece id."""
    decoder_start_id: int
    """First decoder input id."""
    max_positions: int
    """Number of positions the model accepts, in tokens, special tokens included."""
    vocab_size: int
    """Number of vocabulary ids (logits per step)."""
    num_layers: int
    """Number of decoder layers (pairs of self-attention caches)."""
    num_heads: int
    """Decoder attention heads."""
    head_dim: int
    """Size of one attention head."""
    encoder: GraphSpec
    """The encoder graph."""
    decoder: GraphSpec
    """The one-step decoder graph."""
    quantization: dict[str, Any]
    """How the weights were quantized (``{"mode": "none"}`` for FP32)."""
    manifest: dict[str, Any] = field(repr=False)
    """The whole manifest, for figures recorded at export."""
    projection: GraphSpec | None = None
    """Bundles whose decoder ends at the hidden state (those with a shortlist): the whole
    output layer's graph; ``None`` when the decoder computes the logits itself."""
    shortlist_graph: GraphSpec | None = None
    """With :attr:`projection`: the output layer's graph on gathered rows."""

    def file(self, name: str) -> Path:
        """Return the path of a file of this bundle."""
        return self.path / name

    @property
    def scheme(self) -> str:
        """The weight scheme by the name ``export --quantize`` takes: ``int8r``, ``int8``,
        ``q8``, ``q4`` or ``none`` (the quantization mode itself for one it does not know)."""
        return scheme_name(str(self.quantization.get("mode", "none")))

    @property
    def output_ids(self):
        """Vocabulary ids of the logits' columns when the output layer is restricted, else ``None``."""
        spec = self.manifest.get("output_vocabulary")
        if not spec:
            return None
        import numpy as np

        ids = np.fromfile(self.file(spec["file"]), dtype="<i4").astype(np.int64)
        if len(ids) != spec.get("size"):
            raise BundleError(f"{self.file(spec['file'])} holds {len(ids)} ids, bundle.json says {spec.get('size')}")
        return ids

    @property
    def source_spm(self) -> Path:
        """The source-side SentencePiece model."""
        return self.file(self.manifest["tokenizer"]["source_spm"])

    @property
    def target_spm(self) -> Path:
        """The target-side SentencePiece model."""
        return self.file(self.manifest["tokenizer"]["target_spm"])

    @property
    def vocab(self) -> Path:
        """The joint vocabulary (piece → id, JSON)."""
        return self.file(self.manifest["tokenizer"]["vocab"])


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Return the hex sha256 of a file, read in chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def file_record(path: Path) -> dict[str, Any]:
    """Return the manifest record (sha256 and size) of one file."""
    return {"sha256": sha256_file(path), "size": path.stat().st_size}


def _field(manifest: dict[str, Any], path: Path, *keys: str) -> Any:
    value: Any = manifest
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise BundleError(
                f"{path / MANIFEST}: field {'.'.join(keys)!r} is missing; "
                "re-export the bundle with `edge-translator export`"
            )
        value = value[key]
    return value


def read_manifest(path: str | Path) -> dict[str, Any]:
    """Read and check the format of a bundle's manifest, without verifying files.

    Args:
        path: The bundle directory.

    Returns:
        The manifest as a dict.

    Raises:
        BundleError: If the directory or manifest is missing, unreadable, or of
            another format or version.
    """
    path = Path(path)
    if not path.is_dir():
        raise BundleError(
            f"model bundle {path} does not exist or is not a directory; "
            "pass --model with a bundle made by `edge-translator export`"
        )
    manifest_path = path / MANIFEST
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BundleError(
            f"{manifest_path} is missing: {path} is not a model bundle; "
            "pass --model with a bundle made by `edge-translator export`"
        ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BundleError(
            f"{manifest_path} is not valid JSON ({exc}); the bundle is corrupt, export it again"
        ) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{manifest_path} is not an {FORMAT} manifest; export the model again")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise BundleError(
            f"{manifest_path}: format_version {version!r} is not supported by this "
            f"edge-translator (it reads version {FORMAT_VERSION}); re-export the model "
            "or upgrade edge-translator"
        )
    return manifest


def verify_files(path: Path, manifest: dict[str, Any]) -> None:
    """Check every file listed in the manifest against its recorded size and sha256.

    Raises:
        BundleError: Naming the first file that is missing or differs.
    """
    files = _field(manifest, path, "files")
    if not isinstance(files, dict) or not files:
        raise BundleError(f"{path / MANIFEST}: 'files' lists no files; export the bundle again")
    for name, record in files.items():
        file_path = path / name
        if not file_path.is_file():
            raise BundleError(
                f"{file_path} is missing from the bundle; copy the whole bundle directory again"
            )
        size = file_path.stat().st_size
        if size != record.get("size"):
            raise BundleError(
                f"{file_path} has {size} bytes but the manifest records {record.get('size')}: "
                "the file is truncated or corrupt; copy the bundle again"
            )
        if sha256_file(file_path) != record.get("sha256"):
            raise BundleError(
                f"{file_path} does not match its sha256 in {MANIFEST}: the file is corrupt "
                "or was modified; copy the bundle again"
            )


def _graph(manifest: dict[str, Any], path: Path, name: str) -> GraphSpec:
    graph = _field(manifest, path, "graphs", name)
    try:
        return GraphSpec(graph["file"], tuple(graph["inputs"]), tuple(graph["outputs"]))
    except (KeyError, TypeError):
        raise BundleError(
            f"{path / MANIFEST}: graphs.{name} needs 'file', 'inputs' and 'outputs'; "
            "export the bundle again"
        ) from None


def load_bundle(path: str | Path, verify: bool = True) -> Bundle:
    """Read a bundle directory and, by default, verify every file's checksum.

    Args:
        path: The bundle directory.
        verify: Check sizes and sha256 of all files (on by default).

    Returns:
        The parsed :class:`Bundle`.

    Raises:
        BundleError: If the bundle is missing, corrupt or of another format.
    """
    path = Path(path)
    manifest = read_manifest(path)
    if verify:
        verify_files(path, manifest)
    targets = {}
    for name, spec in _field(manifest, path, "targets").items():
        targets[name] = TargetVariant(name, spec["token"], int(spec["id"]))
    special = _field(manifest, path, "special_ids")
    arch = _field(manifest, path, "model", "architecture")
    graphs = _field(manifest, path, "graphs")
    if not isinstance(graphs, dict):
        raise BundleError(f"{path / MANIFEST}: 'graphs' must be an object; export the bundle again")
    if ("projection" in graphs) != ("shortlist" in graphs):
        raise BundleError(f"{path / MANIFEST}: a split bundle needs both the 'projection' and the 'shortlist' "
                          "graphs; export the bundle again")
    default_target = manifest.get("default_target") or next(iter(targets), "")
    if targets and default_target not in targets:
        raise BundleError(
            f"{path / MANIFEST}: default_target {default_target!r} is not one of {sorted(targets)}"
        )
    return Bundle(
        path=path,
        name=_field(manifest, path, "model", "name"),
        source_language=_field(manifest, path, "model", "source_language"),
        target_language=_field(manifest, path, "model", "target_language"),
        targets=targets,
        default_target=default_target,
        pad_id=int(special["pad"]),
        eos_id=int(special["eos"]),
        unk_id=int(special["unk"]),
        decoder_start_id=int(special["decoder_start"]),
        max_positions=int(_field(manifest, path, "max_positions")),
        vocab_size=int(_field(manifest, path, "vocab_size")),
        num_layers=int(arch["decoder_layers"]),
        num_heads=int(arch["decoder_attention_heads"]),
        head_dim=int(arch["d_model"]) // int(arch["decoder_attention_heads"]),
        encoder=_graph(manifest, path, "encoder"),
        decoder=_graph(manifest, path, "decoder"),
        quantization=dict(manifest.get("quantization") or {"mode": "none"}),
        manifest=manifest,
        projection=_graph(manifest, path, "projection") if "projection" in graphs else None,
        shortlist_graph=_graph(manifest, path, "shortlist") if "shortlist" in graphs else None,
    )
