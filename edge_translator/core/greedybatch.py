"""Greedy decoding of one batch, a step at a time, and what a row's decoding returns.

:class:`GreedyBatch` runs the encoder on its first step, then one decoder step a call:
each feeds one new token per row with the self-attention K/V so far and gets back the
logits. The pad logit is masked, as the model's ``bad_words_ids`` require, and a finished
row leaves the batch. On real sessions the batch keeps its K/V, cross K/V and logits in
memory of its own, which the decoder reads and writes through IO binding
(:mod:`.iobinding`), not in ONNX Runtime's arena.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .iobinding import BoundDecoder, BoundHead, encode_bound
from .kvcache import compaction_order

#: Why a row stopped: it produced ``</s>``, reached its length limit, or looped.
EOS, LENGTH, REPETITION = "eos", "length", "repetition"


@dataclass(frozen=True)
class Hypothesis:
    """The decoded ids of one source and why decoding stopped."""

    ids: tuple[int, ...]
    """Output ids, without the decoder start id and without ``</s>``."""
    stop: str
    """``"eos"``, ``"length"`` or ``"repetition"``."""
    score: float = field(default=float("nan"), compare=False)
    """Mean log-probability of the output tokens (``</s>`` included when produced, but not a
    token that a forced ``</s>`` or the repetition guard dropped; NaN when there is none):
    near 0 is confident, very negative is doubtful. Not compared: it moves in the last bits
    with the batch shape."""


@dataclass(frozen=True)
class RepetitionGuard:
    """Stops a row whose output ends in one n-gram repeated many times."""

    max_ngram: int = 4
    """Longest repeated unit that is looked for, in tokens."""
    min_span: int = 12
    """A loop must cover at least this many tokens (and at least 3 repeats) to stop a row."""

    def loop_start(self, ids: list[int]) -> int | None:
        """Index where the repeated tail begins after its first copy, or ``None``."""
        for n in range(1, self.max_ngram + 1):
            repeats = max(3, -(-self.min_span // n))
            span = n * repeats
            if len(ids) < span:
                continue
            tail = ids[-span:]
            unit = tail[:n]
            if all(tail[k] == unit[k % n] for k in range(span)):
                return len(ids) - span + n
        return None


class GreedyBatch:
    """One batch in greedy decoding, advanced a step at a time.

    A scheduler can interleave several such batches, drop rows whose owner cancelled,
    deliver each row as soon as it finishes, and seat new rows in a batch that is decoding
    (:meth:`admit`, with a ragged decoder graph). The encoder runs on the first step.
    """

    def __init__(self, model, sources: list[list[int]], max_new_tokens: list[int],
                 guards: list[RepetitionGuard | None] | None = None, use_cache: bool = True,
                 min_new_tokens: int = 0, shortlist: bool = True):
        """Prepare a batch; nothing runs until :meth:`step`.

        Args:
            model: The sessions to run (a :class:`.decode.Seq2Seq`).
            sources: Source id lists (target token, pieces, ``</s>``).
            max_new_tokens: Per-source limit on generated tokens (``</s>`` included).
            guards: Per-source repetition guard, or ``None`` for none.
            use_cache: Feed the K/V cache (``False`` re-runs the prefix; for tests).
            min_new_tokens: Forbid ``</s>`` before this many tokens.
            shortlist: Restrict each row to its own candidates when the bundle has a
                shortlist (the batch computes the union's columns only).
        """
        if not sources:
            raise ValueError("a batch needs at least one source")
        if len(max_new_tokens) != len(sources):
            raise ValueError("max_new_tokens needs one limit per source")
        self.model = model
        self.sources = sources
        self.limits = np.asarray(max_new_tokens)
        self.guards = list(guards) if guards is not None else [None] * len(sources)
        self.use_cache = use_cache
        self.min_new_tokens = min_new_tokens
        self.rows = np.arange(len(sources))
        self.columns = model.output_columns(sources, shortlist)
        """The columns this batch computes (:class:`.shortlist.BatchOutputs`), or ``None``: every one."""
        self.outputs: list[list[int]] = [[] for _ in sources]
        self.logprobs: list[list[float]] = [[] for _ in sources]
        """Per row, the log-probability of each kept token (and of ``</s>`` when produced)."""
        self.steps = 0
        self._joined = np.zeros(len(sources), np.int64)  # the step each row joined at
        self._started = False
        self._scratch: np.ndarray | None = None
        self._bound: BoundDecoder | None = None

    @property
    def done(self) -> bool:
        """Whether every row has finished or been dropped."""
        return len(self.rows) == 0

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def can_admit(self) -> bool:
        """Whether :meth:`admit` can seat rows now: before the first step always, then only
        while decoding through a ragged decoder graph on IO binding (each row at its own
        position)."""
        return not self._started or (self._bound is not None and self._bound.ragged and not self.done)

    def admit(self, sources: list[list[int]], max_new_tokens: list[int],
              guards: list[RepetitionGuard | None] | None = None, row_capacity: int = 0) -> list[int]:
        """Seat more rows in this batch (continuous batching): they decode from the next step on.

        Their encoder runs now, on them alone; their outputs are the ones they would get in
        a batch of their own, to the same float near-ties as any two batches.

        Args:
            sources, max_new_tokens, guards: As for the constructor, for the new rows.
            row_capacity: Rows to lay the batch's buffers out for when they must grow (the
                scheduler's batch size), so that later rows join without a copy.

        Returns:
            The new rows' indices, as :meth:`step` reports them.

        Raises:
            ValueError: If the arguments do not match, or the batch cannot take rows
                (:attr:`can_admit`).
        """
        if not sources:
            raise ValueError("admit needs at least one source")
        if len(max_new_tokens) != len(sources) or (guards is not None and len(guards) != len(sources)):
            raise ValueError("admit needs one limit (and one guard, if any) per source")
        if not self.can_admit:
            raise ValueError("this batch cannot take rows while it decodes (a finished batch, or a decoder "
                             "graph without per-row positions)")
        first = len(self.sources)
        new = np.arange(first, first + len(sources))
        if self._started:
            model = self.model
            ids, mask = model.pad(sources)
            cross_k, cross_v = model.encode(ids, mask)
            if self.columns is not None:
                self.columns.admit(sources)
            self._bound.admit(cross_k, cross_v, mask, row_capacity)
            start = np.full((len(sources), 1), model.bundle.decoder_start_id, np.int64)
            self.tokens = np.concatenate([self.tokens, start])
        elif self.columns is not None:
            self.columns.admit(sources)
        self.sources = self.sources + list(sources)
        self.limits = np.concatenate([self.limits, np.asarray(max_new_tokens, self.limits.dtype)])
        self.guards += list(guards) if guards is not None else [None] * len(sources)
        self.outputs += [[] for _ in sources]
        self.logprobs += [[] for _ in sources]
        self._joined = np.concatenate([self._joined, np.full(len(sources), self.steps, np.int64)])
        self.rows = np.concatenate([self.rows, new])
        return [int(r) for r in new]

    def _start(self) -> None:
        model = self.model
        input_ids, self.mask = model.pad(self.sources)
        batch = len(self.sources)
        buffer = None
        if self.use_cache and model.binds and model.binds_encoder:  # the cross K/V go straight into its memory
            buffer, self.cross_k, self.cross_v = encode_bound(model.encoder, input_ids, self.mask, model.layers,
                                                              model.heads, model.head_dim, model.cross_align,
                                                              model.encoder_run_options or model.run_options,
                                                              model.buffers)
        else:
            self.cross_k, self.cross_v = model.encode(input_ids, self.mask)
        if self.use_cache and model.binds and self.cross_k[0].dtype == np.float32:  # what the buffers hold
            # The batch's memory is its own from here (the encoder's outputs, if it made any, go back to the arena).
            self._bound = BoundDecoder(model.decoder, self.cross_k, self.cross_v, self.mask, model.logits_width,
                                       model.run_options, model.buffers, normalizer=model.normalizer,
                                       ragged=model.ragged, cross_buffer=buffer,
                                       head=BoundHead(model, self.columns) if model.split else None)
            self.cross_k = self.cross_v = self.past_k = self.past_v = []
        else:
            self.past_k, self.past_v = model.empty_cache(batch), model.empty_cache(batch)
        self.prefix = np.full((batch, 1), model.bundle.decoder_start_id, np.int64)
        self.tokens = self.prefix
        self._started = True

    def _scratch_for(self, logits: np.ndarray) -> np.ndarray:
        """A buffer shaped like ``logits``, made once a batch (rows only ever leave)."""
        rows, width = logits.shape
        scratch = self._scratch
        if scratch is None or scratch.shape[0] < rows or scratch.shape[1] != width or scratch.dtype != logits.dtype:
            scratch = self._scratch = np.empty((rows, width), logits.dtype)
        return scratch[:rows]

    def _keep(self, keep: list[int]) -> None:
        """Keep only these slots (positions in the running batch, ascending); the rows past
        the kept ones fill the places that the others left (:func:`.kvcache.compaction_order`)."""
        if len(keep) == len(self.rows):
            return
        idx = compaction_order(keep, len(self.rows))
        self.rows = self.rows[idx]
        if self.columns is not None:
            self.columns.keep(idx)
        if not self._started:
            return
        if not keep:  # done: hand the batch's memory on now, whoever still holds the batch
            if self._bound is not None:
                self._bound.release()
            self._bound, self._scratch = None, None
            self.cross_k = self.cross_v = self.past_k = self.past_v = []
            return
        self.tokens = self.tokens[idx]
        if self._bound is not None:  # it holds the batch's mask and K/V
            self._bound.keep(idx)
            return
        self.mask = self.mask[idx]
        self.cross_k = [c[idx] for c in self.cross_k]
        self.cross_v = [c[idx] for c in self.cross_v]
        self.past_k = [p[idx] for p in self.past_k]
        self.past_v = [p[idx] for p in self.past_v]
        self.prefix = self.prefix[idx]

    def drop(self, rows) -> None:
        """Stop decoding these rows (indices into the sources); their work is discarded."""
        gone = set(int(r) for r in rows)
        self._keep([slot for slot, row in enumerate(self.rows) if int(row) not in gone])

    def step(self) -> list[tuple[int, Hypothesis]]:
        """Run one decoder step (and the encoder first); return the rows that finished."""
        if self.done:
            return []
        if not self._started:
            self._start()
        model = self.model
        if self._bound is not None:
            logits = self._bound.step(self.tokens)
        elif self.use_cache:
            logits, self.past_k, self.past_v = model.step(self.tokens, self.mask, self.past_k, self.past_v,
                                                          self.cross_k, self.cross_v, self.columns)
        else:
            empty = model.empty_cache(len(self.rows))
            logits, _, _ = model.step(self.prefix, self.mask, empty, empty, self.cross_k, self.cross_v, self.columns)
        last_logits = logits[:, -1, :]
        if self.columns is not None:  # each row to its own candidates: its batch-mates' do not matter
            self.columns.restrict(last_logits)
        # next_tokens masks pad (and eos) in place, so the normalisation comes first; the
        # chosen token is never a masked one, so its logit is the model's own.
        if self._bound is not None and self._bound.normalizer is not None:
            log_probs, log_norm = self._bound.log_probs()[:, -1, :], None
        else:
            log_probs, log_norm = last_logits, _log_normalizer(last_logits, self._scratch_for(last_logits))
        allow_eos = self.steps - self._joined[self.rows] >= self.min_new_tokens if self.min_new_tokens else True
        chosen = model.next_tokens(last_logits, allow_eos=allow_eos, outputs=self.columns)
        ids = model.columns(self.columns)[0]
        columns = chosen if ids is None else np.searchsorted(ids, chosen)
        chosen_logprob = log_probs[np.arange(len(chosen)), columns].astype(np.float64)
        if log_norm is not None:
            chosen_logprob -= log_norm
        self.steps += 1
        eos, finished, keep = model.bundle.eos_id, [], []
        for slot, row in enumerate(self.rows):
            out, logprobs = self.outputs[row], self.logprobs[row]
            token = int(chosen[slot])
            last = len(out) + 1 >= self.limits[row]
            stop = None
            if token == eos:
                stop = EOS
                logprobs.append(float(chosen_logprob[slot]))
            elif last and model.forced_eos:
                stop = LENGTH  # generate() forces </s> in the last allowed position: the token is not kept
            else:
                out.append(token)
                logprobs.append(float(chosen_logprob[slot]))
                guard = self.guards[row]
                if last:
                    stop = LENGTH
                elif guard is not None and (cut := guard.loop_start(out)) is not None:
                    del out[cut:], logprobs[cut:]
                    stop = REPETITION
            if stop is None:
                keep.append(slot)
            else:
                score = math.fsum(logprobs) / len(logprobs) if logprobs else float("nan")
                finished.append((int(row), Hypothesis(tuple(out), stop, score)))
        tokens = chosen.reshape(-1, 1).astype(np.int64)
        self.tokens = tokens
        if not self.use_cache:  # only the uncached path runs the prefix again (rows that join do not mix with it)
            self.prefix = np.concatenate([self.prefix, tokens], axis=1)
        self._keep(keep)
        return finished


def _log_normalizer(logits: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """``log(sum(exp(row)))`` of each row of ``logits``, as float64; ``scratch`` (same shape,
    C-contiguous) is overwritten.

    The same arithmetic as ``np.exp(logits - peak).sum(-1)``, so the same bits, but into one
    buffer a batch instead of a new B x V array every step, which numpy takes from the OS
    and faults in each time.
    """
    peak = logits.max(axis=-1, keepdims=True)
    np.subtract(logits, peak, out=scratch)
    np.exp(scratch, out=scratch)
    return (np.log(scratch.sum(axis=-1)) + peak[:, 0]).astype(np.float64)
