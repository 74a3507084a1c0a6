"""Prove an exported bundle computes what the model computes, and measure what INT8 changes.

* Logits parity: the FP32 graphs and a float32 run of the numpy reference
  (:mod:`.reference`) are both measured against the reference in float64, on varied
  sentences, with all decoder tokens at once and step by step through the K/V cache. A
  model with large activations amplifies rounding, so the graphs are judged against float32's own error on that model, not a fixed figure.
* Greedy agreement: the FP32 graphs choose the float32 reference's greedy tokens, except
  at float ties.
* INT8 agreement: greedy output of the INT8 graphs against the FP32 graphs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from ..core.decode import Seq2Seq
from ..core.graphio import ATTENTION_MASK, INPUT_IDS, LAST_HIDDEN_STATE
from ..core.tokenizer import Tokenizer
from .marian import MarianWeights

logger = logging.getLogger(__name__)

#: The FP32 graphs may differ from float64 by this many times what the float32 reference does.
#: Correct graphs measure 1.0-1.3 times (most of float32's error on a large-activation
#: model is shared by both); a missing attention or embedding scale 1,000 times and more.
PARITY_FACTOR = 4.0
#: ... plus this absolute floor, so that a model whose float32 reference error is tiny
#: (3e-6 for well-scaled weights) is held to the 1e-4 that float32 graphs reliably meet.
PARITY_FLOOR = 1e-4

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
class Divergence:
    """The first step of one sentence where the FP32 graphs choose another greedy token."""

    sentence: int
    step: int
    reference_token: int
    onnx_token: int
    shortfall: float
    """How far the float64 logit of the worse of the two tokens lies below float64's best."""

    def as_manifest(self) -> dict:
        """One entry of ``validation.fp32_parity.greedy.divergences``."""
        return {"sentence": self.sentence, "step": self.step, "reference_token": self.reference_token,
                "onnx_token": self.onnx_token, "fp64_shortfall": self.shortfall}


@dataclass(frozen=True)
class ParityReport:
    """Largest absolute differences between the FP32 graphs, float32 reference and float64."""

    sentences: int
    decoder_tokens: int
    fp32_logit_error: float
    """float32 reference against float64: how much this model amplifies rounding."""
    onnx_logit_error_full: float
    """FP32 graphs against float64, all decoder tokens in one call, empty cache."""
    onnx_logit_error_cached: float
    """FP32 graphs against float64, one token per call through the K/V cache."""
    onnx_fp32_logit_diff: float
    """FP32 graphs against float32 reference directly (full and cached)."""
    fp32_hidden_error: float
    """Encoder output of float32 reference against float64, over real (unpadded) positions."""
    onnx_hidden_error: float
    """Encoder output of the FP32 graphs against float64, over real positions."""
    greedy_steps: int
    """Greedy tokens compared per sentence."""
    divergences: tuple[Divergence, ...]
    """For each sentence whose greedy tokens differ from the float32 reference's, the first such step."""

    @property
    def onnx_logit_error(self) -> float:
        """The larger of the two FP32-graph figures against float64."""
        return max(self.onnx_logit_error_full, self.onnx_logit_error_cached)

    def bound(self, factor: float, floor: float) -> float:
        """The largest FP32-graph logit error accepted: ``factor`` × float32 reference's own + ``floor``."""
        return factor * self.fp32_logit_error + floor

    def problems(self, factor: float, floor: float) -> list[str]:
        """Why the FP32 graphs are not as exact as the float32 reference on this model; empty if they are.

        The logits must lie within :meth:`bound` of float64, and of the float32 reference (most
        float32 rounding is common to both implementations, so this catches smaller
        faults on models with large activations). Greedy tokens must equal
        the float32 reference's, except at a tie: a sentence may differ only at a step where float64
        puts both chosen tokens within the bound of its best logit. That is strict: logits
        each within the bound could swap two tokens up to twice the bound apart, and a
        third token that float64 prefers to both counts against the tie.
        """
        bound = self.bound(factor, floor)
        found = []
        if not self.onnx_logit_error <= bound:
            found.append(
                f"FP32 graphs differ from float64 by {self.onnx_logit_error:.3g} in logits where the float32 "
                f"reference differs by {self.fp32_logit_error:.3g} (allowed: {factor:g} x {self.fp32_logit_error:.3g}"
                f" + {floor:g} = {bound:.3g})"
            )
        if not self.onnx_fp32_logit_diff <= bound:
            # Both are float32 implementations of one model: most rounding error is common to
            # them, so their own difference is the sharper test of a wrong graph.
            found.append(
                f"FP32 graphs differ from the float32 reference by {self.onnx_fp32_logit_diff:.3g} in logits "
                f"(allowed: {factor:g} x {self.fp32_logit_error:.3g} + {floor:g} = {bound:.3g})"
            )
        wrong = [d for d in self.divergences if not d.shortfall <= bound]
        if wrong:
            d = wrong[0]
            found.append(
                f"greedy tokens differ from the float32 reference on {len(wrong)} of {self.sentences} sentences, "
                f"not at a tie (sentence {d.sentence + 1}, step {d.step + 1}: token {d.onnx_token} instead of "
                f"{d.reference_token}, {d.shortfall:.3g} below float64's best logit, allowed {bound:.3g})"
            )
        return found

    def as_manifest(self, factor: float, floor: float) -> dict:
        """The ``validation.fp32_parity`` block of ``bundle.json``."""
        bound = self.bound(factor, floor)
        return {
            "reference": "numpy Marian forward pass in float64 (edge_translator.toolchain.reference), fed its float32 "
                         "run's greedy tokens",
            "sentences": self.sentences,
            "decoder_tokens": self.decoder_tokens,
            "max_abs_logit_diff": self.onnx_logit_error,
            "max_abs_logit_diff_full": self.onnx_logit_error_full,
            "max_abs_logit_diff_cached": self.onnx_logit_error_cached,
            "reference_fp32_max_abs_logit_diff": self.fp32_logit_error,
            "onnx_vs_reference_fp32_max_abs_logit_diff": self.onnx_fp32_logit_diff,
            "max_abs_encoder_diff": self.onnx_hidden_error,
            "reference_fp32_max_abs_encoder_diff": self.fp32_hidden_error,
            "tolerance_factor": factor,
            "tolerance_floor": floor,
            "allowed_abs_logit_diff": bound,
            "greedy": {
                "steps": self.greedy_steps,
                "identical": self.sentences - len(self.divergences),
                "near_ties": sum(d.shortfall <= bound for d in self.divergences),
                "divergences": [d.as_manifest() for d in self.divergences],
            },
        }


def _sources(tokenizer: Tokenizer, model: Seq2Seq, sentences, target_id: int) -> list[list[int]]:
    """Encode sentences, cutting any that exceed the model's positions (small test models)."""
    limit = model.bundle.max_positions
    sources = [tokenizer.encode(s, target_id) for s in sentences]
    return [s if len(s) <= limit else s[: limit - 1] + [tokenizer.eos_id] for s in sources]


def _max_diff(a: np.ndarray, b: np.ndarray, where: np.ndarray | None = None) -> float:
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return float((diff if where is None else diff[where]).max())


def _divergences(reference_ids: np.ndarray, onnx_ids: list[tuple[int, ...]], fp64_logits: np.ndarray,
                 excluded: list[int]) -> tuple[Divergence, ...]:
    """The first differing step of each sentence, with float64's view of the two choices.

    ``reference_ids[:, t]`` and ``onnx_ids[row][t]`` are chosen after the same prefix, the one
    ``fp64_logits[:, t]`` was computed on, until they first differ.
    """
    found = []
    for row, (theirs, ours) in enumerate(zip(reference_ids.tolist(), onnx_ids)):
        ours = list(ours[: len(theirs)]) + [-1] * (len(theirs) - len(ours))
        step = next((t for t, (a, b) in enumerate(zip(theirs, ours)) if a != b), None)
        if step is None:
            continue
        logits = fp64_logits[row, step].copy()
        logits[excluded] = -np.inf  # greedy here never chooses pad or </s>
        chosen = [logits[theirs[step]], logits[ours[step]] if ours[step] >= 0 else -np.inf]
        found.append(Divergence(row, step, theirs[step], ours[step], float(logits.max() - min(chosen))))
    return tuple(found)


def logits_parity_numpy(weights: MarianWeights, onnx_model: Seq2Seq, tokenizer: Tokenizer, target_id: int,
                        sentences=VALIDATION_SENTENCES, new_tokens: int = 16) -> ParityReport:
    """Measure the FP32 graphs and a numpy float32 run against numpy float64 on a padded batch.

    Both references are :class:`.reference.MarianReference`, the model's forward pass as
    transformers computes it. The decoder inputs are the float32 reference's greedy output
    (pad and ``</s>`` never chosen for ``new_tokens``), so every compared position is one
    that real decoding visits; the FP32 graphs then decode greedily on their own under the
    same rules.
    """
    from .reference import MarianReference

    sources = _sources(tokenizer, onnx_model, sentences, target_id)
    input_ids, mask = onnx_model.pad(sources)
    pad, eos = onnx_model.bundle.pad_id, onnx_model.bundle.eos_id
    single = MarianReference(weights, np.float32)
    decoder_ids = single.greedy(input_ids, mask, new_tokens, banned=(pad, eos))
    ref_logits, ref_hidden = single.forward(input_ids, mask, decoder_ids)
    exact_logits, exact_hidden = MarianReference(weights, np.float64).forward(input_ids, mask, decoder_ids)

    real = mask.astype(bool)
    hidden = onnx_model.encoder.run([LAST_HIDDEN_STATE], {INPUT_IDS: input_ids, ATTENTION_MASK: mask})[0]
    cross_k, cross_v = onnx_model.encode(input_ids, mask)
    batch = len(sources)
    empty = onnx_model.empty_cache(batch)
    full, _, _ = onnx_model.step(decoder_ids, mask, empty, empty, cross_k, cross_v)
    past_k, past_v = onnx_model.empty_cache(batch), onnx_model.empty_cache(batch)
    cached = np.empty_like(full)
    for t in range(decoder_ids.shape[1]):
        logits, past_k, past_v = onnx_model.step(decoder_ids[:, t: t + 1], mask, past_k, past_v, cross_k, cross_v)
        cached[:, t] = logits[:, 0]
    onnx_greedy = [h.ids for h in onnx_model.greedy_all(sources, new_tokens, min_new_tokens=new_tokens)]
    report = ParityReport(
        sentences=batch, decoder_tokens=int(decoder_ids.size),
        fp32_logit_error=_max_diff(ref_logits, exact_logits),
        onnx_logit_error_full=_max_diff(full, exact_logits),
        onnx_logit_error_cached=_max_diff(cached, exact_logits),
        onnx_fp32_logit_diff=max(_max_diff(full, ref_logits), _max_diff(cached, ref_logits)),
        fp32_hidden_error=_max_diff(ref_hidden, exact_hidden, real),
        onnx_hidden_error=_max_diff(hidden, exact_hidden, real),
        greedy_steps=new_tokens - 1,
        divergences=_divergences(decoder_ids[:, 1:], onnx_greedy, exact_logits, [pad, eos]),
    )
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


def shortlist_agreement(model: Seq2Seq, tokenizer: Tokenizer, target_id: int, sentences=VALIDATION_SENTENCES,
                        max_new_tokens: int = 32) -> dict:
    """How often greedy output under the bundle's shortlist equals the whole vocabulary's, and
    whether it is the same for a sentence alone as in a batch with the others.

    Returns:
        ``sentences``, ``identical`` (equal to the whole vocabulary's output), ``batch_differ``
        (sentences whose shortlist output differs between the batch and one at a time) and
        ``mean_columns`` (columns a sentence alone computes).
    """
    sources = _sources(tokenizer, model, sentences, target_id)
    full = model.greedy_all(sources, max_new_tokens, shortlist=False)
    batched = model.greedy_all(sources, max_new_tokens)
    alone = [model.greedy_all([source], max_new_tokens)[0] for source in sources]
    columns = [model.output_columns([source]).width for source in sources]
    result = {
        "sentences": len(sources),
        "max_new_tokens": max_new_tokens,
        "identical": sum(a.ids == b.ids for a, b in zip(full, batched)),
        "batch_differ": sum(a.ids != b.ids for a, b in zip(batched, alone)),
        "mean_columns": round(float(np.mean(columns)), 1),
        "vocabulary": model.bundle.vocab_size,
    }
    logger.info("shortlist agreement: %s", result)
    return result


def batch_invariance(model: Seq2Seq, tokenizer: Tokenizer, target_id: int, sentences=VALIDATION_SENTENCES,
                     max_new_tokens: int = 32) -> dict:
    """Whether a sentence decodes the same alone as in a padded batch with the others.

    Returns:
        ``sentences``, ``differ`` (sentences whose greedy ids differ between the batch and
        one at a time), ``max_abs_logit_diff`` (first step, batch against alone) and the CPU
        it was measured on: the answer depends on the CPU's kernels.
    """
    from ..core.cpu import cpu_name

    sources = _sources(tokenizer, model, sentences, target_id)
    batched = model.greedy_all(sources, max_new_tokens)
    alone = [model.greedy_all([source], max_new_tokens)[0] for source in sources]
    ids, mask = model.pad(sources)
    first = _first_logits(model, ids, mask)
    single = np.concatenate([_first_logits(model, *model.pad([source])) for source in sources])
    result = {
        "sentences": len(sources),
        "differ": sum(a.ids != b.ids for a, b in zip(batched, alone)),
        "max_abs_logit_diff": _max_diff(first, single),
        "cpu": cpu_name(),
    }
    logger.info("batch invariance: %s", result)
    return result


def _first_logits(model: Seq2Seq, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The first decoder step's logits [B, V] for padded sources."""
    cross_k, cross_v = model.encode(ids, mask)
    start = np.full((len(ids), 1), model.bundle.decoder_start_id, dtype=np.int64)
    empty = model.empty_cache(len(ids))
    logits = model.step(start, mask, empty, list(empty), cross_k, cross_v)[0]
    return logits[:, -1]
