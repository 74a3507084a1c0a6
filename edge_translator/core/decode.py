"""Encoder-decoder inference on ONNX Runtime: KV-cached greedy decoding in batches.

The encoder runs once per batch and yields every decoder layer's cross-attention K/V.
Each decoder step feeds one new token per row with the self-attention K/V so far
(empty at the first step) and gets back the logits and the grown K/V. The pad logit is
masked, as the model's ``bad_words_ids`` require, and a finished row leaves the batch.
Greedy batches keep their K/V, cross K/V and logits in memory of their own, which the
decoder reads and writes through IO binding (:mod:`.kvcache`), not in ONNX Runtime's arena.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .bundle import Bundle
from .cpu import check_runtime
from .errors import BundleError
from .kvcache import BoundDecoder, BufferPool, compaction_order, cross_alignment, encode_bound
from .logsoftmax import open_log_softmax
from .sessions import create_session, lean_malloc, onnxruntime

logger = logging.getLogger(__name__)

#: How ONNX Runtime holds memory between calls (see :meth:`Seq2Seq.load`).
MEMORY_MODES = ("arena", "steady", "shrink", "none")
#: The run option that makes an arena give back, when a call ends, what it no longer uses.
SHRINK_ARENA = "memory.enable_memory_arena_shrinkage"

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


#: Whether the encoder session's threads spin between operators. They do not: the encoder
#: runs once a batch, between the decoder's steps, and each session has a thread pool of
#: its own, whose threads spin on after a call; on 2 cores the encoder's and the decoder's
#: then fought over the cores. Without the encoder's spinning, greedy decoding of 64
#: tokens at batch 1 went from 549 to 657 tokens/s (q4) and from 381 to 445 (int8r), and
#: batches of 16 and 64 stayed within the noise (Intel Xeon, AVX-512 VNNI, 2 vCPUs, full
#: opus-mt-en-zh shape; both models in one process, alternating, medians of 3). ONNX
#: Runtime's process-wide shared pool was faster still (740 for q4), but once it exists
#: ONNX Runtime refuses every session with a pool of its own, in the whole process: its
#: quantizer's, and any other library's.
ENCODER_SPINS = False


class Seq2Seq:
    """The two ONNX Runtime sessions of a bundle and the decoding loops over them."""

    def __init__(self, encoder, decoder, bundle: Bundle, normalizer=None):
        """Take ready sessions (or fakes with the same ``run`` method).

        Args:
            encoder: Session of the encoder graph.
            decoder: Session of the decoder graph.
            bundle: The bundle's manifest: ids, shapes and graph I/O names.
            normalizer: Session of :data:`.logsoftmax.GRAPH`, which greedy batches on IO
                binding use for their scores; ``None``: numpy computes them.
        """
        self.encoder = encoder
        self.decoder = decoder
        self.normalizer = normalizer
        self.bundle = bundle
        self.run_options = None
        """``onnxruntime.RunOptions`` passed to every call, or ``None``."""
        self.encoder_run_options = None
        """``onnxruntime.RunOptions`` of the encoder's calls, or ``None``."""
        self.layers = bundle.num_layers
        self.heads = bundle.num_heads
        self.head_dim = bundle.head_dim
        self.forced_eos = bool(bundle.manifest.get("generation", {}).get("forced_eos", False))
        self.output_ids = bundle.output_ids
        if self.output_ids is None:
            self._pad_column, self._eos_column = bundle.pad_id, bundle.eos_id
        else:
            columns = {int(v): k for k, v in enumerate(self.output_ids)}
            self._pad_column = columns.get(bundle.pad_id)
            self._eos_column = columns[bundle.eos_id]
        self.logits_width = bundle.vocab_size if self.output_ids is None else len(self.output_ids)
        self.ragged = "past_lengths" in bundle.decoder.inputs
        """Whether the decoder graph takes each row's cached length (``GroupQueryAttention``,
        the cache written in place) rather than appending to a past of one length for all."""
        self.binds = hasattr(decoder, "io_binding")
        """Whether greedy batches run the decoder through IO binding over their own memory
        (:class:`.kvcache.BoundDecoder`); sessions without it (test fakes) are fed by ``run``."""
        self.cross_align = cross_alignment(encoder) if hasattr(encoder, "get_outputs") else None
        """The encoder's cross K/V hold the source length rounded up to a multiple of this."""
        self.binds_encoder = self.cross_align is not None and hasattr(encoder, "io_binding") and all(
            o.type == "tensor(float)" for o in encoder.get_outputs() if o.name.startswith("cross_"))
        """Whether greedy batches that bind the decoder (:attr:`binds`) also have the encoder
        write its cross K/V into their own memory (:func:`.kvcache.encode_bound`): real
        sessions whose cross K/V are float32, of a shape known before the call."""
        self.buffers = BufferPool()
        """The mapped buffers finished greedy batches left for the next ones."""
        self._check_io()

    @classmethod
    def load(cls, bundle: Bundle, threads: int | None = None, spin: bool = True, memory: str = "arena") -> Seq2Seq:
        """Open the bundle's graphs with the runtime's session options.

        Args:
            bundle: The verified bundle.
            threads: Intra-op threads (physical cores by default).
            spin: See :func:`.sessions.session_options`; the decoder's (the encoder's
                threads never spin: :data:`ENCODER_SPINS`).
            memory: ``"arena"``: ONNX Runtime keeps the largest buffers any call needed
                (fastest). ``"steady"``, for long-running processes (the daemon, the desktop
                app, document jobs): the decoder keeps its arena (its steps need the same
                buffers again and again), the encoder's gives back what a call used when it
                ends (its intermediates grow with the batch and the source length, and an
                arena keeps the largest it ever had), and :func:`.sessions.lean_malloc`
                makes what is freed leave the process (the whole process's malloc settings).
                ``"shrink"``: every arena gives back what a call no longer uses when it
                ends; ``"none"``: no arena (with :func:`.sessions.lean_malloc` too).

        Warns (one line) when the bundle's weight scheme is slow on this CPU, and refuses one
        that needs a newer ONNX Runtime (see :func:`.cpu.check_runtime`).
        """
        warning = check_runtime(bundle.manifest, where=str(bundle.path))
        if warning:
            logger.warning(warning)
        if memory not in MEMORY_MODES:
            raise ValueError(f"memory must be one of {MEMORY_MODES}, not {memory!r}")
        arena = memory != "none"
        model = cls(create_session(bundle.file(bundle.encoder.file), threads, ENCODER_SPINS, arena),
                    create_session(bundle.file(bundle.decoder.file), threads, spin, arena), bundle,
                    open_log_softmax(spin, arena))
        if memory in ("steady", "none"):
            lean_malloc()
        if memory in ("steady", "shrink"):
            ort = onnxruntime()
            shrink = ort.RunOptions()
            shrink.add_run_config_entry(SHRINK_ARENA, "cpu:0")
            model.encoder_run_options = shrink
            if memory == "shrink":
                model.run_options = shrink
        return model

    def release_buffers(self) -> None:
        """Give the buffers that finished greedy batches left for the next ones back to the
        system (each is unmapped once no batch holds it); the engine calls it when idle."""
        self.buffers.clear()

    def _check_io(self) -> None:
        for spec, session in ((self.bundle.encoder, self.encoder), (self.bundle.decoder, self.decoder)):
            if not hasattr(session, "get_inputs"):
                continue
            found = tuple(i.name for i in session.get_inputs())
            if set(found) != set(spec.inputs):
                raise BundleError(
                    f"{self.bundle.file(spec.file)} has inputs {found} but bundle.json lists "
                    f"{spec.inputs}; the bundle is inconsistent, export it again"
                )

    # -- graph calls ------------------------------------------------------------------
    def encode(self, input_ids: np.ndarray, attention_mask: np.ndarray) -> tuple[list, list]:
        """Run the encoder; return per-layer cross K and cross V, each [B, H, S, Dh]."""
        names = [f"cross_key.{i}" for i in range(self.layers)] + [f"cross_value.{i}" for i in range(self.layers)]
        out = self.encoder.run(names, {"input_ids": input_ids, "attention_mask": attention_mask},
                               *self._run_args(self.encoder_run_options))
        return out[: self.layers], out[self.layers:]

    def step(self, tokens: np.ndarray, mask: np.ndarray, past_k: list, past_v: list,
             cross_k: list, cross_v: list) -> tuple[np.ndarray, list, list]:
        """Run the decoder on new tokens [B, T]; return logits [B, T, V] and the grown K/V."""
        feed = self.decoder_feed(tokens, mask, past_k, past_v, cross_k, cross_v)
        names = (["logits"] + [f"present_key.{i}" for i in range(self.layers)]
                 + [f"present_value.{i}" for i in range(self.layers)])
        out = self.decoder.run(names, feed, *self._run_args())
        return out[0], out[1: 1 + self.layers], out[1 + self.layers:]

    def decoder_feed(self, tokens: np.ndarray, mask: np.ndarray, past_k: list, past_v: list,
                     cross_k: list, cross_v: list) -> dict[str, np.ndarray]:
        """The decoder's inputs for :meth:`step`: every row's past is the whole array given."""
        feed = {"input_ids": tokens, "encoder_attention_mask": mask}
        if self.ragged:
            feed["past_lengths"] = np.full(len(tokens), past_k[0].shape[2], np.int32)
        for i in range(self.layers):
            feed[f"past_key.{i}"] = past_k[i]
            feed[f"past_value.{i}"] = past_v[i]
            feed[f"cross_key.{i}"] = cross_k[i]
            feed[f"cross_value.{i}"] = cross_v[i]
        return feed

    def _run_args(self, options=None) -> tuple:
        options = options if options is not None else self.run_options
        return () if options is None else (options,)

    def empty_cache(self, batch: int) -> list[np.ndarray]:
        """Self-attention K or V of length zero, one per layer."""
        return [np.zeros((batch, self.heads, 0, self.head_dim), np.float32) for _ in range(self.layers)]

    def pad(self, sources: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """Right-pad id lists into ``(input_ids, attention_mask)`` int64 arrays."""
        width = max(len(s) for s in sources)
        ids = np.full((len(sources), width), self.bundle.pad_id, np.int64)
        mask = np.zeros((len(sources), width), np.int64)
        for row, source in enumerate(sources):
            ids[row, : len(source)] = source
            mask[row, : len(source)] = 1
        return ids, mask

    # -- decoding -----------------------------------------------------------------------
    def next_tokens(self, logits: np.ndarray, allow_eos: bool | np.ndarray = True) -> np.ndarray:
        """Greedy choice from [B, V] logits, never the pad id (nor ``</s>`` if not allowed:
        ``allow_eos`` is one answer for all rows, or one a row).

        With a restricted output layer, column k of the logits is vocabulary id
        ``output_ids[k]``; the returned values are always vocabulary ids.
        """
        if self._pad_column is not None:
            logits[:, self._pad_column] = -np.inf
        if np.ndim(allow_eos):
            logits[~np.asarray(allow_eos, bool), self._eos_column] = -np.inf
        elif not allow_eos:
            logits[:, self._eos_column] = -np.inf
        best = logits.argmax(axis=-1)
        return best if self.output_ids is None else self.output_ids[best]

    def greedy(self, sources: list[list[int]], max_new_tokens: list[int], use_cache: bool = True,
               guard: RepetitionGuard | None = None, min_new_tokens: int = 0):
        """Greedy-decode a batch of sources together; yield ``(row, Hypothesis)`` as rows finish.

        Args:
            sources: Source id lists (target token, pieces, ``</s>``).
            max_new_tokens: Per-source limit on generated tokens (``</s>`` included).
            use_cache: Feed the K/V cache; ``False`` re-runs the whole prefix each step
                (slow; for checking that cached decoding is exact).
            guard: Stop rows caught in a loop; ``None`` disables it.
            min_new_tokens: Forbid ``</s>`` before this many tokens (as ``generate`` does;
                used by benchmarks to decode a fixed number of tokens).

        Yields:
            ``(index into sources, Hypothesis)``, in the order rows finish. Closing the
            generator stops decoding.
        """
        if not sources:
            return
        batch = GreedyBatch(self, sources, max_new_tokens, [guard] * len(sources), use_cache, min_new_tokens)
        while not batch.done:
            yield from batch.step()

    def beam(self, sources: list[list[int]], max_new_tokens: list[int], beam_size: int,
             length_penalty: float | None = None):
        """Beam search with K/V-cache reordering, as transformers' ``generate(num_beams=k)`` does it.

        It follows ``generate`` step for step: log-softmax scores (pad masked, ``</s>``
        forced at the last position when the model asks for it, renormalized if the model's
        generation config says so), the top ``2k`` continuations of all beams, finished
        hypotheses scored by ``sum log p / length ** length_penalty``, and the same
        early-stopping test (``early_stopping=False``).

        Yields:
            ``(index into sources, Hypothesis)`` as each source finishes.
        """
        if not sources:
            return
        k = beam_size
        generation = self.bundle.manifest.get("generation", {})
        penalty = generation.get("length_penalty", 1.0) if length_penalty is None else length_penalty
        renormalize = bool(generation.get("renormalize_logits", False))
        input_ids, mask = self.pad(sources)
        cross_k, cross_v = self.encode(input_ids, mask)
        expand = np.repeat(np.arange(len(sources)), k)
        cross_k = [c[expand] for c in cross_k]
        cross_v = [c[expand] for c in cross_v]
        mask = mask[expand]
        past_k, past_v = self.empty_cache(len(expand)), self.empty_cache(len(expand))
        active = list(range(len(sources)))           # source index of each active block of k rows
        limits = np.asarray(max_new_tokens)
        running = np.full((len(sources), k, 0), 0, np.int64)  # generated tokens per beam
        running_scores = np.full((len(sources), k), -1e9, np.float32)
        running_scores[:, 0] = 0.0
        finished: list[list[tuple[float, tuple[int, ...], str]]] = [[] for _ in sources]
        tokens = np.full((len(expand), 1), self.bundle.decoder_start_id, np.int64)
        eos = self.bundle.eos_id
        step = 0
        while active:
            logits, past_k, past_v = self.step(tokens, mask, past_k, past_v, cross_k, cross_v)
            scores = _log_softmax(logits[:, -1, :].astype(np.float32))
            if self._pad_column is not None:
                scores[:, self._pad_column] = -np.inf
            vocab = scores.shape[-1]
            keep_blocks, reorder, next_tokens = [], [], []
            new_running, new_scores = [], []
            for block, src in enumerate(active):
                rows = slice(block * k, (block + 1) * k)
                block_scores = scores[rows]
                last = step + 1 >= limits[src]
                if self.forced_eos and last:
                    block_scores = np.full_like(block_scores, -np.inf)
                    block_scores[:, self._eos_column] = 0.0
                if renormalize:
                    block_scores = _log_softmax(block_scores)
                total = (block_scores + running_scores[src][:, None]).reshape(-1)
                top = _topk(total, 2 * k)
                beams, columns = top // vocab, top % vocab
                ids = columns if self.output_ids is None else self.output_ids[columns]
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
            width = step + 1
            grown = np.zeros((len(sources), k, width), np.int64)
            grown[keep_blocks] = np.stack(new_running)
            running = grown
            running_scores[keep_blocks] = np.stack(new_scores)
            active = keep_blocks
            tokens = np.asarray(next_tokens, np.int64).reshape(-1, 1)
            step += 1

    def greedy_all(self, sources: list[list[int]], max_new_tokens: list[int] | int, **kwargs) -> list[Hypothesis]:
        """Decode all sources as one batch and return hypotheses in input order."""
        if isinstance(max_new_tokens, int):
            max_new_tokens = [max_new_tokens] * len(sources)
        results: list[Hypothesis | None] = [None] * len(sources)
        for row, hyp in self.greedy(sources, max_new_tokens, **kwargs):
            results[row] = hyp
        return results  # type: ignore[return-value]


class GreedyBatch:
    """One batch in greedy decoding, advanced a step at a time.

    A scheduler can interleave several such batches, drop rows whose owner cancelled,
    deliver each row as soon as it finishes, and seat new rows in a batch that is decoding
    (:meth:`admit`, with a ragged decoder graph). The encoder runs on the first step.
    """

    def __init__(self, model: Seq2Seq, sources: list[list[int]], max_new_tokens: list[int],
                 guards: list[RepetitionGuard | None] | None = None, use_cache: bool = True,
                 min_new_tokens: int = 0):
        """Prepare a batch; nothing runs until :meth:`step`.

        Args:
            model: The sessions to run.
            sources: Source id lists (target token, pieces, ``</s>``).
            max_new_tokens: Per-source limit on generated tokens (``</s>`` included).
            guards: Per-source repetition guard, or ``None`` for none.
            use_cache: Feed the K/V cache (``False`` re-runs the prefix; for tests).
            min_new_tokens: Forbid ``</s>`` before this many tokens.
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
            self._bound.admit(cross_k, cross_v, mask, row_capacity)
            start = np.full((len(sources), 1), model.bundle.decoder_start_id, np.int64)
            self.tokens = np.concatenate([self.tokens, start])
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
                                       ragged=model.ragged, cross_buffer=buffer)
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
                                                          self.cross_k, self.cross_v)
        else:
            empty = model.empty_cache(len(self.rows))
            logits, _, _ = model.step(self.prefix, self.mask, empty, empty, self.cross_k, self.cross_v)
        last_logits = logits[:, -1, :]
        # next_tokens masks pad (and eos) in place, so the normalisation comes first; the
        # chosen token is never a masked one, so its logit is the model's own.
        if self._bound is not None and self._bound.normalizer is not None:
            log_probs, log_norm = self._bound.log_probs()[:, -1, :], None
        else:
            log_probs, log_norm = last_logits, _log_normalizer(last_logits, self._scratch_for(last_logits))
        allow_eos = self.steps - self._joined[self.rows] >= self.min_new_tokens if self.min_new_tokens else True
        chosen = model.next_tokens(last_logits, allow_eos=allow_eos)
        columns = chosen if model.output_ids is None else np.searchsorted(model.output_ids, chosen)
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
    and faults in each time: on the full-shape vocabulary (65,001) this part of a step fell
    from 5.3 to 1.7 ms at 16 rows and from 12.1 to 6.5 ms at 64 (Intel Xeon, medians of 50).
    """
    peak = logits.max(axis=-1, keepdims=True)
    np.subtract(logits, peak, out=scratch)
    np.exp(scratch, out=scratch)
    return (np.log(scratch.sum(axis=-1)) + peak[:, 0]).astype(np.float64)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    peak = x.max(axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    shifted = x - peak
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _topk(values: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` largest values, largest first."""
    part = np.argpartition(-values, k - 1)[:k]
    return part[np.argsort(-values[part], kind="stable")]


def open_model(path: str | Path, threads: int | None = None) -> Seq2Seq:
    """Load and verify a bundle directory and open its sessions."""
    from .bundle import load_bundle

    return Seq2Seq.load(load_bundle(path), threads)
