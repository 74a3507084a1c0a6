"""Static INT8 (QDQ) quantization with ONNX Runtime, calibrated on English sentences.

The FP32 graphs run over the calibration sentences; the encoder's inputs and every
decoder step's inputs (through the K/V cache, as real decoding feeds them) are handed to
``onnxruntime.quantization.quantize_static``, which records activation ranges (min/max)
and writes QDQ graphs. Their weights are then written into one shared weights file.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path

import numpy as np

from ..core.decode import Seq2Seq
from ..core.errors import ExportError, require
from ..core.graphio import ATTENTION_MASK, INPUT_IDS
from ..core.sessions import onnxruntime
from ..core.tokenizer import Tokenizer
from .graphs import WrittenGraphs, write_graphs
from .marian import MarianWeights
from .quantize import QuantizeOptions
from .weightsfile import save_shared

logger = logging.getLogger(__name__)

#: Nodes never quantized statically: position tables are exact sinusoids.
ALWAYS_EXCLUDED = ("encoder.embed_positions.gather", "decoder.embed_positions.gather")


def read_calibration(path: Path, limit: int) -> list[str]:
    """Non-empty lines of a UTF-8 text file, at most ``limit``.

    Raises:
        ExportError: If the file is missing, not UTF-8, or has no sentences.
    """
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ExportError(f"calibration file {path} does not exist") from None
    except UnicodeDecodeError as exc:
        raise ExportError(f"calibration file {path} is not UTF-8 text (byte {exc.start})") from None
    sentences = [line.strip() for line in lines if line.strip()][:limit]
    if not sentences:
        raise ExportError(f"calibration file {path} has no sentences; give one English sentence per line")
    return sentences


def calibration_feeds(model: Seq2Seq, tokenizer: Tokenizer, target_id: int, sentences: list[str],
                      batch: int = 8, steps: int = 12) -> tuple[list[dict], list[dict]]:
    """Inputs that the encoder and decoder see when translating ``sentences``."""
    limit = model.bundle.max_positions
    encoder_feeds, decoder_feeds = [], []
    for start in range(0, len(sentences), batch):
        sources = [tokenizer.encode(s, target_id)[:limit] for s in sentences[start:start + batch]]
        ids, mask = model.pad(sources)
        encoder_feeds.append({INPUT_IDS: ids, ATTENTION_MASK: mask})
        cross_k, cross_v = model.encode(ids, mask)
        past_k, past_v = model.empty_cache(len(sources)), model.empty_cache(len(sources))
        tokens = np.full((len(sources), 1), model.bundle.decoder_start_id, np.int64)
        for _ in range(steps):
            decoder_feeds.append(model.decoder_feed(tokens, mask, past_k, past_v, cross_k, cross_v))
            logits, past_k, past_v = model.step(tokens, mask, past_k, past_v, cross_k, cross_v)
            tokens = model.next_tokens(logits[:, -1]).reshape(-1, 1).astype(np.int64)
    return encoder_feeds, decoder_feeds


def quantize_static_graphs(weights: MarianWeights, out: Path, quant: QuantizeOptions, model: Seq2Seq,
                           tokenizer: Tokenizer, target_id: int, output_ids=None) -> WrittenGraphs:
    """Write QDQ-quantized ``encoder.onnx`` and ``decoder.onnx`` into ``out``.

    QDQ gives each tensor one quantization, so the output projection gets its own INT8
    weight instead of sharing the embedding's: static bundles are larger than dynamic ones.
    """
    onnxruntime()  # telemetry off before the first import
    q = require("onnxruntime.quantization", "export")
    import onnx

    sentences = read_calibration(quant.calibration, quant.calibration_limit)
    encoder_feeds, decoder_feeds = calibration_feeds(model, tokenizer, target_id, sentences)
    op_types = []
    if "MatMul" in quant.op_types:
        op_types += ["MatMul", "Gemm"]
    if "Gather" in quant.op_types:
        op_types.append("Gather")
    models = {}
    with tempfile.TemporaryDirectory(prefix="edge-translator-qdq-") as tmp:
        fp32_dir = Path(tmp) / "fp32"
        fp32_dir.mkdir()
        write_graphs(weights, QuantizeOptions(mode="none"), fp32_dir, untie_output=True, output_ids=output_ids)
        for name, feeds in (("encoder", encoder_feeds), ("decoder", decoder_feeds)):
            reader = _Reader(feeds)
            target = Path(tmp) / f"{name}.onnx"
            try:
                q.quantize_static(
                    str(fp32_dir / f"{name}.onnx"), str(target), reader, quant_format=q.QuantFormat.QDQ,
                    per_channel=quant.per_channel, weight_type=q.QuantType.QInt8,
                    activation_type=q.QuantType.QUInt8, op_types_to_quantize=op_types,
                    nodes_to_exclude=list(quant.exclude_nodes) + list(ALWAYS_EXCLUDED),
                    calibrate_method=q.CalibrationMethod.MinMax, use_external_data_format=True,
                    extra_options={"MatMulConstBOnly": True, "WeightSymmetric": True},
                )
            except Exception as exc:  # noqa: BLE001 - the quantizer raises many types
                raise ExportError(f"static quantization of {name} failed ({exc})") from None
            models[name] = onnx.load(str(target))
        files, shared = save_shared(models, out)
    quantized = [n.name for m in models.values() for n in m.graph.node if n.op_type == "DequantizeLinear"]
    return WrittenGraphs(files, out / "weights.bin", shared.stored, shared.referenced, quantized)


class _Reader:
    """A CalibrationDataReader over a list of feeds."""

    def __init__(self, feeds: list[dict]):
        self._feeds = iter(feeds)

    def get_next(self):
        return next(self._feeds, None)

    def rewind(self):  # pragma: no cover - part of the reader protocol
        pass
