"""Exact-equality checks of decoded ids that survive float near-ties, and only those.

Two decoders that compute the same function can still pick different tokens where two
candidates score within float rounding of each other: a different CPU kernel (AVX2 or
AVX-512), batch shape or thread count moves the last bits. Where two outputs differ,
these helpers rescore both under one reference model and accept the difference only if
it is such a tie (within :data:`TIE_TOLERANCE`); any other difference fails the test.
Ties are counted, so a test can report how many it met.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

#: Largest score difference (log-probability) that counts as float noise.
TIE_TOLERANCE = 1e-4

#: ``next_logprobs(source_ids, prefix_ids) -> [V]`` log-probabilities of the next token
#: after the decoder start id and ``prefix_ids``.
NextLogprobs = Callable[[Sequence[int], Sequence[int]], np.ndarray]


@dataclass
class TieCounter:
    """How many outputs were compared, equal, and different only by a near-tie."""

    name: str
    compared: int = 0
    equal: int = 0
    ties: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return (f"{self.name}: {self.equal} of {self.compared} identical, {len(self.ties)} near-tie(s)"
                + (f" ({'; '.join(self.ties[:3])})" if self.ties else ""))


def _with_end(ids: Sequence[int], ended_with_eos: bool, eos: int) -> list[int]:
    return list(ids) + ([eos] if ended_with_eos else [])


def greedy_tie(source: Sequence[int], ours: Sequence[int], reference: Sequence[int], eos: int,
               next_logprobs: NextLogprobs, ours_ended: bool = True, reference_ended: bool = True,
               tolerance: float = TIE_TOLERANCE) -> tuple[bool, str]:
    """Is the first difference between two greedy outputs a near-tie under the reference model?

    Greedy decoding picks the best next token, so two correct greedy decoders can differ
    only where, after their common prefix, the two tokens they chose score within
    float noise of each other. Everything after that point legitimately differs.

    Args:
        source: The source ids both decoded.
        ours, reference: Output ids without ``</s>``.
        eos: The ``</s>`` id.
        next_logprobs: The reference model's next-token log-probabilities.
        ours_ended, reference_ended: Whether each output ended with ``</s>`` (else it was cut).

    Returns:
        ``(is_tie, description)``.
    """
    a, b = _with_end(ours, ours_ended, eos), _with_end(reference, reference_ended, eos)
    d = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    if d >= len(a) or d >= len(b):
        return False, f"one output is cut where the other goes on (position {d})"
    scores = next_logprobs(source, a[:d])
    gap = abs(float(scores[a[d]]) - float(scores[b[d]]))
    return gap <= tolerance, f"position {d}: tokens {a[d]} vs {b[d]} differ by {gap:.2e} in log-probability"


def beam_margin(source: Sequence[int], beams: int, max_new_tokens: int, next_logprobs: NextLogprobs, eos: int,
                pad: int | None, forced_eos: bool, length_penalty: float = 1.0) -> tuple[float, list[int]]:
    """Replay a beam search under the reference model and find its closest decision.

    The replay follows the beam search of ``generate(num_beams=k)`` (and of the runtime):
    the top ``2k`` continuations of all beams, the top-``k`` of them that end in
    ``</s>`` become finished hypotheses scored ``sum log p / length ** penalty``, the best
    ``k`` others go on, and a source is done when no running beam can beat the worst
    of ``k`` finished ones. Two correct implementations can part only where one of
    these comparisons is within float noise, so the smallest gap met in any of them is
    what decides whether a difference is a near-tie.

    Returns:
        ``(smallest gap, best output ids without </s>)``.
    """
    running = [([], 0.0)] + [([], -1e9)] * (beams - 1)
    finished: list[tuple[float, list[int]]] = []
    margin = np.inf
    for step in range(max_new_tokens):
        last = step + 1 >= max_new_tokens
        length = step + 1
        totals = []
        for seq, score in running:
            scores = np.array(next_logprobs(source, seq), dtype=np.float64)
            if pad is not None:
                scores[pad] = -np.inf
            if forced_eos and last:
                scores = np.full_like(scores, -np.inf)
                scores[eos] = 0.0
            totals.append(scores + score)
        flat = np.concatenate(totals)
        vocab = len(totals[0])
        order = np.argsort(-flat, kind="stable")[: 2 * beams + 1]
        top = flat[order]

        def gap(i: int, j: int) -> float:
            return float(top[i] - top[j]) if j < len(top) and np.isfinite(top[j]) else np.inf

        # Which continuations are considered at all: rank 2k-1 against rank 2k.
        margin = min(margin, gap(2 * beams - 1, 2 * beams))
        ends = [int(index) % vocab == eos or last for index in order]
        # Which may finish: only the top k; it matters where an end meets a non-end at rank k.
        if ends[beams - 1] != ends[beams]:
            margin = min(margin, gap(beams - 1, beams))
        # Which go on: the k-th against the (k+1)-th of the continuations that do not end.
        going = [rank for rank in range(2 * beams) if not ends[rank]]
        if len(going) > beams:
            margin = min(margin, gap(going[beams - 1], going[beams]))
        order = order[: 2 * beams]
        candidates = []
        for rank, index in enumerate(order):
            beam, token = divmod(int(index), vocab)
            seq = running[beam][0] + [token]
            if ends[rank] and rank < beams and np.isfinite(flat[index]):
                finished.append((float(flat[index]) / length ** length_penalty, seq))
            elif not ends[rank]:
                candidates.append((seq, float(flat[index])))
        finished.sort(key=lambda f: -f[0])
        if len(finished) > beams:
            margin = min(margin, finished[beams - 1][0] - finished[beams][0])
        finished = finished[:beams]
        running = candidates[:beams]
        if last or not running:
            break
        if len(finished) == beams:
            best_running = running[0][1] / length ** length_penalty
            margin = min(margin, abs(best_running - finished[-1][0]))
            if best_running <= finished[-1][0]:
                break
    best = finished[0][1] if finished else []
    return margin, best[:-1] if best and best[-1] == eos else best


def beam_tie(ours: Sequence[int], reference: Sequence[int], replay: Callable[[], tuple[float, list[int]]],
             tolerance: float = TIE_TOLERANCE) -> tuple[bool, str]:
    """Is a difference between two beam-search results explained by a near-tie?

    It is when the replay under the reference model (see :func:`beam_margin`) meets a
    decision within ``tolerance`` and lands on one of the two results.

    Args:
        replay: Runs :func:`beam_margin` for this source.
    """
    gap, best = replay()
    lands = list(best) in (list(ours), list(reference))
    return gap <= tolerance and lands, (f"closest beam decision differs by {gap:.2e} in score; the replay "
                                        f"{'lands on one of them' if lands else 'gives a third result'}")


def assert_equal_or_tie(counter: TieCounter, source, ours, reference, tie) -> None:
    """Count one comparison; fail unless the outputs are equal or ``tie()`` says near-tie."""
    counter.compared += 1
    if list(ours) == list(reference):
        counter.equal += 1
        return
    is_tie, why = tie()
    assert is_tie, f"real difference, not a near-tie: {why}\n ours {list(ours)}\n reference {list(reference)}"
    counter.ties.append(why)


def torch_next_logprobs(model, decoder_start: int, pad_id: int | None = None) -> NextLogprobs:
    """Next-token log-probabilities of a PyTorch Marian model, teacher-forced (float64 softmax)."""
    import torch

    cache: dict = {}

    def next_logprobs(source, prefix):
        key = (tuple(source), tuple(prefix))
        if key not in cache:
            with torch.no_grad():
                out = model(input_ids=torch.tensor([list(source)]),
                            attention_mask=torch.ones(1, len(source), dtype=torch.long),
                            decoder_input_ids=torch.tensor([[decoder_start, *prefix]]))
            logits = out.logits[0, -1].double()
            cache[key] = torch.log_softmax(logits, dim=-1).numpy()
        return cache[key]

    return next_logprobs


def onnx_next_logprobs(seq) -> NextLogprobs:
    """Next-token log-probabilities of an ONNX :class:`Seq2Seq`, one row, whole prefix at once."""

    encoded: dict = {}

    def next_logprobs(source, prefix):
        ids, mask = seq.pad([list(source)])
        if tuple(source) not in encoded:
            encoded[tuple(source)] = seq.encode(ids, mask)
        cross_k, cross_v = encoded[tuple(source)]
        tokens = np.asarray([[seq.bundle.decoder_start_id, *prefix]], np.int64)
        empty = seq.empty_cache(1)
        logits, _, _ = seq.step(tokens, mask, empty, empty, cross_k, cross_v)
        row = logits[0, -1].astype(np.float64)
        row = row - row.max()
        return row - np.log(np.exp(row).sum())

    return next_logprobs
