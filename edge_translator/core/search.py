"""One-shot search: decode a list of sources in one call, greedily or by beam search.

:func:`greedy` and :func:`greedy_all` run one :class:`.greedybatch.GreedyBatch` to the
end; :func:`beam` follows transformers' ``generate(num_beams=k)`` step for step, with
K/V-cache reordering. ``model`` is a :class:`.decode.Seq2Seq` (whose ``greedy``,
``greedy_all`` and ``beam`` methods call these).
"""

from __future__ import annotations

import numpy as np

from .greedybatch import EOS, LENGTH, GreedyBatch, Hypothesis, RepetitionGuard


def greedy(model, sources: list[list[int]], max_new_tokens: list[int], use_cache: bool = True,
           guard: RepetitionGuard | None = None, min_new_tokens: int = 0, shortlist: bool = True):
    """Greedy-decode a batch of sources together; yield ``(row, Hypothesis)`` as rows finish.

    Args:
        model: The sessions to run (a :class:`.decode.Seq2Seq`).
        sources: Source id lists (target token, pieces, ``</s>``).
        max_new_tokens: Per-source limit on generated tokens (``</s>`` included).
        use_cache: Feed the K/V cache; ``False`` re-runs the whole prefix each step
            (slow; for checking that cached decoding is exact).
        guard: Stop rows caught in a loop; ``None`` disables it.
        min_new_tokens: Forbid ``</s>`` before this many tokens (as ``generate`` does;
            used by benchmarks to decode a fixed number of tokens).
        shortlist: Restrict each row to its candidates when the bundle has a shortlist.

    Yields:
        ``(index into sources, Hypothesis)``, in the order rows finish. Closing the
        generator stops decoding.
    """
    if not sources:
        return
    batch = GreedyBatch(model, sources, max_new_tokens, [guard] * len(sources), use_cache, min_new_tokens,
                        shortlist)
    while not batch.done:
        yield from batch.step()


def beam(model, sources: list[list[int]], max_new_tokens: list[int], beam_size: int,
         length_penalty: float | None = None, shortlist: bool = True):
    """Beam search with K/V-cache reordering, as transformers' ``generate(num_beams=k)`` does it.

    It follows ``generate`` step for step: log-softmax scores (pad masked, ``</s>``
    forced at the last position when the model asks for it, renormalized if the model's
    generation config says so), the top ``2k`` continuations of all beams, finished
    hypotheses scored by ``sum log p / length ** length_penalty``, and the same
    early-stopping test (``early_stopping=False``). Under a bundle's shortlist (unless
    ``shortlist`` is off) each beam scores only its source's candidates, normalised over them.

    Yields:
        ``(index into sources, Hypothesis)`` as each source finishes.
    """
    if not sources:
        return
    k = beam_size
    generation = model.bundle.manifest.get("generation", {})
    penalty = generation.get("length_penalty", 1.0) if length_penalty is None else length_penalty
    renormalize = bool(generation.get("renormalize_logits", False))
    input_ids, mask = model.pad(sources)
    cross_k, cross_v = model.encode(input_ids, mask)
    expand = np.repeat(np.arange(len(sources)), k)
    cross_k = [c[expand] for c in cross_k]
    cross_v = [c[expand] for c in cross_v]
    mask = mask[expand]
    outputs = model.output_columns([sources[s] for s in expand], shortlist)
    column_ids, pad_column, eos_column = model.columns(outputs)
    past_k, past_v = model.empty_cache(len(expand)), model.empty_cache(len(expand))
    active = list(range(len(sources)))           # source index of each active block of k rows
    limits = np.asarray(max_new_tokens)
    running = np.full((len(sources), k, 0), 0, np.int64)  # generated tokens per beam
    running_scores = np.full((len(sources), k), -1e9, np.float32)
    running_scores[:, 0] = 0.0
    finished: list[list[tuple[float, tuple[int, ...], str]]] = [[] for _ in sources]
    tokens = np.full((len(expand), 1), model.bundle.decoder_start_id, np.int64)
    eos = model.bundle.eos_id
    step = 0
    while active:
        logits, past_k, past_v = model.step(tokens, mask, past_k, past_v, cross_k, cross_v, outputs)
        last_logits = logits[:, -1, :].astype(np.float32)
        if outputs is not None:
            outputs.restrict(last_logits)
        scores = _log_softmax(last_logits)
        if pad_column is not None:
            scores[:, pad_column] = -np.inf
        vocab = scores.shape[-1]
        keep_blocks, reorder, next_tokens = [], [], []
        new_running, new_scores = [], []
        for block, src in enumerate(active):
            rows = slice(block * k, (block + 1) * k)
            block_scores = scores[rows]
            last = step + 1 >= limits[src]
            if model.forced_eos and last:
                block_scores = np.full_like(block_scores, -np.inf)
                block_scores[:, eos_column] = 0.0
            if renormalize:
                block_scores = _log_softmax(block_scores)
            total = (block_scores + running_scores[src][:, None]).reshape(-1)
            top = _topk(total, 2 * k)
            beams, columns = top // vocab, top % vocab
            ids = columns if column_ids is None else column_ids[columns]
            hits = (ids == eos) | last
            length = step + 1
            for rank in range(k):  # only the top k candidates may finish
                if hits[rank] and np.isfinite(total[top[rank]]):
                    seq = tuple(int(t) for t in running[src, beams[rank]]) + (int(ids[rank]),)
                    stop = EOS if ids[rank] == eos and not last else LENGTH
                    finished[src].append((float(total[top[rank]]) / length ** penalty, seq, stop))
            finished[src] = sorted(finished[src], key=lambda f: -f[0])[:k]
            candidate = total[top] + hits * np.float32(-1e9)
            alive = np.argsort(-candidate, kind="stable")[:k]
            done = bool(last)
            if not done and len(finished[src]) == k:
                done = float(candidate[alive[0]]) / length ** penalty <= finished[src][-1][0]
            if done:
                best = finished[src][0] if finished[src] else (0.0, (), LENGTH)
                ids_out = best[1][:-1] if best[1] and best[1][-1] == eos else best[1]
                yield src, Hypothesis(tuple(ids_out), best[2])
                continue
            keep_blocks.append(src)
            reorder.extend(block * k + beams[r] for r in alive)
            next_tokens.extend(int(ids[r]) for r in alive)
            new_running.append(np.concatenate([running[src, beams[alive]], ids[alive, None]], axis=1))
            new_scores.append(candidate[alive])
        if not keep_blocks:
            break
        idx = np.asarray(reorder, np.int64)
        past_k = [p[idx] for p in past_k]
        past_v = [p[idx] for p in past_v]
        cross_k = [c[idx] for c in cross_k]
        cross_v = [c[idx] for c in cross_v]
        mask = mask[idx]
        if outputs is not None:
            outputs.keep(idx)
        width = step + 1
        grown = np.zeros((len(sources), k, width), np.int64)
        grown[keep_blocks] = np.stack(new_running)
        running = grown
        running_scores[keep_blocks] = np.stack(new_scores)
        active = keep_blocks
        tokens = np.asarray(next_tokens, np.int64).reshape(-1, 1)
        step += 1


def greedy_all(model, sources: list[list[int]], max_new_tokens: list[int] | int, **kwargs) -> list[Hypothesis]:
    """Decode all sources as one batch and return hypotheses in input order."""
    if isinstance(max_new_tokens, int):
        max_new_tokens = [max_new_tokens] * len(sources)
    results: list[Hypothesis | None] = [None] * len(sources)
    for row, hyp in greedy(model, sources, max_new_tokens, **kwargs):
        results[row] = hyp
    return results  # type: ignore[return-value]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    peak = x.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    shifted = x - peak
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _topk(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first."""
    part = np.argpartition(-values, k - 1)[:k]
    return part[np.argsort(-values[part], kind="stable")]
