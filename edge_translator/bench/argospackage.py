"""An argos package of a bundle's model, for LibreTranslate: CTranslate2's converter on a
Hugging Face MarianMT checkpoint, its SentencePiece models and ``metadata.json``.

An argos package is a self-describing directory: ``metadata.json`` (languages, version,
type), ``model/`` (a CTranslate2 model) and ``sentencepiece.model`` (argos's one tokenizer
model); argos finds installed ones under its packages directory. An opus-mt-shaped model
needs more than argos reads: the target-language token and ``</s>`` around the source
pieces, and the target SentencePiece model for the output. They are written into
``metadata.json`` under ``opus_mt`` (argos ignores keys it does not know), and the
launcher's tokenizer patch (:mod:`.ltlauncher`) reads them.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

from ..core.bundle import Bundle
from ..core.errors import ExportError, require

logger = logging.getLogger(__name__)

#: ``argos_version`` written into metadata.json (the argos-translate-lt release LibreTranslate 1.9.6 pins).
ARGOS_VERSION = "1.12"
#: Language names argos shows; codes it does not know are shown as the code.
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}
#: The file that records what a package was built from, so that a later run reuses it.
STAMP = "edge-bench-stamp.json"


def package_name(bundle: Bundle) -> str:
    """The package's directory name under argos's packages directory, e.g. ``translate-en_zh-tatoeba-en-zh-small``."""
    return f"translate-{bundle.source_language}_{bundle.target_language}-{bundle.name}"


def package_metadata(bundle: Bundle, quantization: str) -> dict:
    """``metadata.json`` of the package of ``bundle``'s model.

    Args:
        bundle: The bundle the model comes from.
        quantization: CTranslate2's quantization of ``model/``.
    """
    target = bundle.targets[bundle.default_target]
    src, tgt = bundle.source_language, bundle.target_language
    return {
        "package_version": "1.0", "argos_version": ARGOS_VERSION, "type": "translate",
        "from_code": src, "from_name": LANGUAGE_NAMES.get(src, src),
        "to_code": tgt, "to_name": LANGUAGE_NAMES.get(tgt, tgt), "links": [],
        "opus_mt": {"source_prefix": [target.token], "source_suffix": ["</s>"],
                    "source_spm": "sentencepiece.model", "target_spm": "target.spm"},
        "edge_translator": {"bundle": bundle.name, "scheme": bundle.scheme, "ct2_quantization": quantization},
    }


def package_stamp(bundle: Bundle, quantization: str, hf_dir: Path | None) -> dict:
    """What identifies a package's content: the bundle's weights, the checkpoint, the quantization."""
    return {"bundle": bundle.name, "weights_sha256": bundle.manifest["files"]["weights.bin"]["sha256"],
            "checkpoint": str(hf_dir) if hf_dir else "unbundled", "quantization": quantization}


def convert_ct2(hf_dir: Path, out: Path, quantization: str = "int8") -> Path:
    """Convert a MarianMT checkpoint with CTranslate2's converter, keeping its decoder start.

    CTranslate2 starts a Marian decoder from a zero embedding, assuming (as in the
    opus-mt releases) that the ``<pad>`` row, transformers' decoder start, is zero. In a
    model whose pad row is not zero (the embedded demo model's is not) CTranslate2 would
    then compute another first step and translate differently. The pad row, scaled as
    every embedding is, is therefore added to the decoder's first position encoding in
    the converted copy: position 0 is only ever read with the start token, so the
    converted model computes what transformers (and the bundle) compute.

    Raises:
        MissingDependencyError: Without ctranslate2, torch or transformers (extra 'bench').
    """
    ctranslate2 = require("ctranslate2", "bench")
    torch = require("torch", "bench")

    class _Converter(ctranslate2.converters.TransformersConverter):
        def load_model(self, model_class, model_name_or_path, **kwargs):
            model = super().load_model(model_class, model_name_or_path, **kwargs)
            decoder, config = model.model.decoder, model.config
            scale = config.d_model ** 0.5 if config.scale_embedding else 1.0
            with torch.no_grad():
                decoder.embed_positions.weight[0] += scale * decoder.embed_tokens.weight[config.decoder_start_token_id]
            return model

    return Path(_Converter(str(hf_dir)).convert(str(out), quantization=quantization, force=True))


def build_package(bundle: Bundle, hf_dir: Path, out: Path, quantization: str = "int8") -> Path:
    """Write the argos package of ``bundle``'s model into ``out`` (replaced if there).

    Args:
        bundle: The bundle (its SentencePiece models, target token and languages).
        hf_dir: A MarianMT checkpoint of the same model (see :func:`.unbundle.unbundle`).
        out: The package directory to write, inside argos's packages directory.
        quantization: CTranslate2's quantization (``int8`` as LibreTranslate's packages ship).
    """
    if not (hf_dir / "config.json").is_file():
        raise ExportError(f"{hf_dir} has no config.json: give a MarianMT checkpoint directory")
    staging = out.with_name(out.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    convert_ct2(hf_dir, staging / "model", quantization)
    shutil.copyfile(bundle.source_spm, staging / "sentencepiece.model")
    shutil.copyfile(bundle.target_spm, staging / "target.spm")
    (staging / "metadata.json").write_text(json.dumps(package_metadata(bundle, quantization), indent=2) + "\n")
    (staging / "README.md").write_text(f"{bundle.name}, converted by edge-translator bench-serve from {hf_dir} "
                                       f"with CTranslate2's converter ({quantization}); for benchmarks only.\n")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    logger.info("wrote the argos package %s", out)
    return out


def ensure_package(bundle: Bundle, packages_dir: Path, checkpoints: Path, hf_dir: Path | None = None,
                   quantization: str = "int8") -> Path:
    """The installed argos package of ``bundle``'s model, built only when missing or stale.

    Args:
        bundle: The bundle whose model LibreTranslate should run.
        packages_dir: argos's packages directory (``ARGOS_PACKAGES_DIR``).
        checkpoints: Where the checkpoint unbundled from ``bundle`` is kept.
        hf_dir: A MarianMT checkpoint of the same model; ``None`` unbundles ``bundle``
            (its weights dequantized: :mod:`edge_translator.toolchain.unbundle`).
        quantization: CTranslate2's quantization.

    Returns:
        The package directory.
    """
    out = packages_dir / package_name(bundle)
    stamp = package_stamp(bundle, quantization, hf_dir)
    if (out / STAMP).is_file() and json.loads((out / STAMP).read_text()) == stamp:
        return out
    if hf_dir is None:
        from ..toolchain.unbundle import unbundle

        hf_dir = unbundle(bundle.path, checkpoints / bundle.name, force=True)
    build_package(bundle, Path(hf_dir), out, quantization)
    (out / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
    return out
