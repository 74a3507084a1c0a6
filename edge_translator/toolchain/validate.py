"""Prove an exported bundle computes what PyTorch computes, and measure what INT8 changes.

* Logits parity: the FP32 graphs against ``MarianMTModel`` on varied sentences, both with
  all decoder tokens at once and step by step through the K/V cache.
* INT8 agreement: greedy output of the INT8 graphs against the FP32 graphs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..core.decode import Seq2Seq
from ..core.tokenizer import Tokenizer

logger = logging.getLogger(__name__)

#: Varied sentences: short, long, numbers, punctuation, casing, and characters outside
#: the vocabulary.
VALIDATION_SENTENCES = (
    "Hi.",
    "Where is the train station?",
    "The meeting starts at 9:30 a.m. on Monday, 12 March 2024, in room 101.",
    "It costs $1,299.99 (about 9,400 yuan) — a 3.5% rise since version 2.0.1.",
    "Wait... what?! \"Really,\" she said; 'yes' [no] {maybe}.",
    "The parrot emoji 🦜 and the symbol ∮ are rare; so is the letter ǅ.",
    "Café, naïve, résumé and Zürich keep their accents.",
    "I love 北京 and its people.",
    "PLEASE READ THE MANUAL BEFORE USING THIS MACHINE.",
    "Send an e-mail to help@example.com or visit https://example.com/docs?id=42.",
    "After the long winter had finally ended, the farmers returned to their fields, repaired "
    "the fences that the storms had broken, planted wheat and barley in neat rows, and waited "
    "patiently for the rain that would decide whether the year would bring plenty or hunger.",
    "1 2 3 4 5 6 7 8 9 10",
)


@dataclass(frozen=True)
class ParityReport:
    """Largest absolute logit differences between ONNX and PyTorch."""

    sentences: int
    decoder_tokens: int
    max_abs_logit_diff_full: float
    """All decoder tokens in one call, empty cache."""
    max_abs_logit_diff_cached: float
    """One token per call through the K/V cache."""
    max_abs_hidden_diff: float
    """Encoder output, over real (unpadded) positions."""

    @property
    def max_abs_logit_diff(self) -> float:
        """The larger of the two logit figures."""
        return max(self.max_abs_logit_diff_full, self.max_abs_logit_diff_cached)

    def as_manifest(self) -> dict:
        """The ``validation.fp32_parity`` block of ``bundle.json``."""
        return {
            "reference": "transformers MarianMTModel (PyTorch, float32)",
            "sentences": self.sentences,
            "decoder_tokens": self.decoder_tokens,
            "max_abs_logit_diff": self.max_abs_logit_diff,
            "max_abs_logit_diff_full": self.max_abs_logit_diff_full,
            "max_abs_logit_diff_cached": self.max_abs_logit_diff_cached,
            "max_abs_encoder_diff": self.max_abs_hidden_diff,
        }


def _sources(tokenizer: Tokenizer, model: Seq2Seq, sentences, target_id: int) -> list[list[int]]:
    """Encode sentences, cutting any that exceed the model's positions (small test models)."""
    limit = model.bundle.max_positions
    sources = [tokenizer.encode(s, target_id) for s in sentences]
    return [s if len(s) <= limit else s[: limit - 1] + [tokenizer.eos_id] for s in sources]


def logits_parity(torch_model, onnx_model: Seq2Seq, tokenizer: Tokenizer, target_id: int,
                  sentences=VALIDATION_SENTENCES, new_tokens: int = 16) -> ParityReport:
    """Compare FP32 ONNX logits with PyTorch on a padded batch, teacher-forced.

    The decoder inputs are PyTorch's own greedy output, so every compared position is
    one that real decoding visits.
    """
    import torch

    sources = _sources(tokenizer, onnx_model, sentences, target_id)
    input_ids, mask = onnx_model.pad(sources)
    start = onnx_model.bundle.decoder_start_id
    with torch.no_grad():
        generated = torch_model.generate(
            input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(mask),
            num_beams=1, do_sample=False, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
            max_length=None,
        )
        decoder_ids = generated[:, :new_tokens].numpy().astype(np.int64)
        decoder_ids[:, 0] = start
        reference = torch_model(input_ids=torch.from_numpy(input_ids), attention_mask=torch.from_numpy(mask),
                                decoder_input_ids=torch.from_numpy(decoder_ids))
        ref_logits = reference.logits.numpy()
        ref_hidden = reference.encoder_last_hidden_state.numpy()

    hidden = onnx_model.encoder.run(["last_hidden_state"], {"input_ids": input_ids, "attention_mask": mask})[0]
    hidden_diff = float(np.abs(hidden - ref_hidden)[mask.astype(bool)].max())
    cross_k, cross_v = onnx_model.encode(input_ids, mask)
    batch = len(sources)
    empty = onnx_model.empty_cache(batch)
    full, _, _ = onnx_model.step(decoder_ids, mask, empty, empty, cross_k, cross_v)
    full_diff = float(np.abs(full - ref_logits).max())
    past_k, past_v = onnx_model.empty_cache(batch), onnx_model.empty_cache(batch)
    cached_diff = 0.0
    for t in range(decoder_ids.shape[1]):
        logits, past_k, past_v = onnx_model.step(decoder_ids[:, t: t + 1], mask, past_k, past_v, cross_k, cross_v)
        cached_diff = max(cached_diff, float(np.abs(logits[:, 0] - ref_logits[:, t]).max()))
    report = ParityReport(batch, int(decoder_ids.size), full_diff, cached_diff, hidden_diff)
    logger.info("FP32 parity: %s", report)
    return report


def int8_agreement(fp32: Seq2Seq, int8: Seq2Seq, tokenizer: Tokenizer, target_id: int,
                   sentences=VALIDATION_SENTENCES, max_new_tokens: int = 32) -> dict:
    """How often INT8 greedy output equals FP32 greedy output.

    Returns:
        ``sentences``, ``identical`` (count and share of sentences with equal output),
        ``token_agreement`` (share of FP32 positions where INT8 has the same token) and
        ``mean_first_divergence`` (tokens before the first difference).
    """
    sources = _sources(tokenizer, fp32, sentences, target_id)
    reference = fp32.greedy_all(sources, max_new_tokens)
    candidate = int8.greedy_all(sources, max_new_tokens)
    identical, matched, total, divergence = 0, 0, 0, []
    for ref, cand in zip(reference, candidate):
        identical += ref.ids == cand.ids
        matched += sum(a == b for a, b in zip(ref.ids, cand.ids))
        total += max(len(ref.ids), len(cand.ids))
        first = next((k for k, (a, b) in enumerate(zip(ref.ids, cand.ids)) if a != b),
                     min(len(ref.ids), len(cand.ids)))
        divergence.append(first)
    result = {
        "reference": "FP32 graphs of this export, greedy",
        "sentences": len(sources),
        "max_new_tokens": max_new_tokens,
        "identical": identical,
        "identical_share": round(identical / len(sources), 4),
        "token_agreement": round(matched / max(total, 1), 4),
        "mean_first_divergence": round(float(np.mean(divergence)), 2),
    }
    logger.info("INT8 agreement: %s", result)
    return result
