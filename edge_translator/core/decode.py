"""The model: a bundle's two ONNX Runtime sessions, with the calls and choices decoding is made of.

:class:`Seq2Seq` opens the encoder and decoder graphs with the runtime's session options
and runs them: the encoder once per batch, yielding every decoder layer's cross-attention
K/V; the decoder one step at a time, fed the new tokens and the self-attention K/V so far
(empty at the first step), returning the logits and the grown K/V. Decoding loops live
apart: :mod:`.greedybatch` (one batch, a step at a time) and :mod:`.search` (a list of
sources in one call, greedy or beam search).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from . import search
from .bundle import Bundle
from .cpu import check_runtime
from .errors import BundleError
from .graphio import (ATTENTION_MASK, CROSS_PREFIX, ENCODER_ATTENTION_MASK, HIDDEN, INPUT_IDS, LOGITS,
                      PAST_LENGTHS, cross_alignment, cross_key, cross_names, cross_value, is_ragged, is_split,
                      past_key, past_value, present_names, shortlist_io)
from .greedybatch import Hypothesis, RepetitionGuard
from .kvcache import BufferPool
from .logsoftmax import open_log_softmax
from .sessions import create_session, lean_malloc, onnxruntime
from .shortlist import BatchOutputs, OutputTable, read_shortlist

logger = logging.getLogger(__name__)

#: How ONNX Runtime holds memory between calls (see :meth:`Seq2Seq.load`).
MEMORY_MODES = ("arena", "steady", "shrink", "none")
#: The run option that makes an arena give back, when a call ends, what it no longer uses.
SHRINK_ARENA = "memory.enable_memory_arena_shrinkage"

#: Whether the encoder session's threads spin between operators. They do not: the encoder
#: runs once a batch, between the decoder's steps, and each session has a thread pool of
#: its own, whose threads spin on after a call, so on few cores the encoder's and the
#: decoder's would fight over the cores (docs/benchmarks.md). ONNX Runtime's process-wide
#: shared pool would avoid that, but once it exists ONNX Runtime refuses every session with
#: a pool of its own, in the whole process: its quantizer's, and any other library's.
ENCODER_SPINS = False


#: Threads of a split bundle's output-layer sessions: the caller's alone. A pool of their own
#: would fight the decoder's spinning threads for the cores between the two calls of every
#: step, as the encoder's would (:data:`ENCODER_SPINS`).
HEAD_THREADS = 1


class Seq2Seq:
    """The two ONNX Runtime sessions of a bundle and the decoding loops over them."""

    def __init__(self, encoder, decoder, bundle: Bundle, normalizer=None, projection=None, shortlisted=None):
        """Take ready sessions (or fakes with the same ``run`` method).

        Args:
            encoder: Session of the encoder graph.
            decoder: Session of the decoder graph.
            bundle: The bundle's manifest: ids, shapes and graph I/O names.
            normalizer: Session of :data:`.logsoftmax.GRAPH`, which greedy batches on IO
                binding use for their scores; ``None``: numpy computes them.
            projection, shortlisted: Sessions of a split bundle's output-layer graphs (the
                whole vocabulary; gathered rows), ``None`` when the decoder computes the logits.
        """
        self.encoder = encoder
        self.decoder = decoder
        self.normalizer = normalizer
        self.projection = projection
        self.shortlisted = shortlisted
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
        # the columns of the logits that hold the pad id (None: none does) and </s>
        if self.output_ids is None:
            self.pad_column, self.eos_column = bundle.pad_id, bundle.eos_id
        else:
            columns = {int(v): k for k, v in enumerate(self.output_ids)}
            self.pad_column = columns.get(bundle.pad_id)
            self.eos_column = columns[bundle.eos_id]
        self.logits_width = bundle.vocab_size if self.output_ids is None else len(self.output_ids)
        self.split = is_split(bundle.decoder.outputs)
        """Whether the decoder ends at the hidden state and the output layer runs apart
        (:attr:`projection`, or :attr:`shortlisted` on a batch's gathered rows)."""
        if self.split and (projection is None or shortlisted is None):
            raise ValueError("a split bundle's decoder needs its projection and shortlist sessions")
        self.shortlist = None
        """The bundle's candidate lists (:class:`.shortlist.Shortlist`), or ``None``."""
        self.output_table = None
        if self.split:
            layer = bundle.manifest.get("output_layer")
            if not isinstance(layer, dict):
                raise BundleError(f"{bundle.path / 'bundle.json'}: a split bundle needs 'output_layer'; "
                                  "export the bundle again")
            self.output_table = OutputTable.open(bundle.file(bundle.manifest.get("weights_file", "weights.bin")),
                                                 layer)
            if "shortlist" in bundle.manifest:
                self.shortlist = read_shortlist(bundle.path, bundle.manifest["shortlist"])
            names = shortlist_io(self.output_table.scale is not None, self.output_table.bias is not None)[0]
            if bundle.shortlist_graph is not None and tuple(names) != tuple(bundle.shortlist_graph.inputs):
                raise BundleError(f"{bundle.path / 'bundle.json'}: the shortlist graph's inputs "
                                  f"{list(bundle.shortlist_graph.inputs)} do not match the output layer; export again")
            self.weight_names = names[1:]
            """The shortlist graph's inputs for the gathered rows, in the order of :meth:`.shortlist.OutputTable.gather`."""
        self.ragged = is_ragged(bundle.decoder.inputs)
        """Whether the decoder graph takes each row's cached length (``GroupQueryAttention``,
        the cache written in place) rather than appending to a past of one length for all."""
        self.binds = hasattr(decoder, "io_binding")
        """Whether greedy batches run the decoder through IO binding over their own memory
        (:class:`.iobinding.BoundDecoder`); sessions without it (test fakes) are fed by ``run``."""
        self.cross_align = cross_alignment(encoder) if hasattr(encoder, "get_outputs") else None
        """The encoder's cross K/V hold the source length rounded up to a multiple of this."""
        self.binds_encoder = self.cross_align is not None and hasattr(encoder, "io_binding") and all(
            o.type == "tensor(float)" for o in encoder.get_outputs() if o.name.startswith(CROSS_PREFIX))
        """Whether greedy batches that bind the decoder (:attr:`binds`) also have the encoder
        write its cross K/V into their own memory (:func:`.iobinding.encode_bound`): real
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
        heads = {}
        if bundle.projection is not None:  # see HEAD_THREADS
            heads = {name: create_session(bundle.file(spec.file), HEAD_THREADS, False, arena)
                     for name, spec in (("projection", bundle.projection), ("shortlisted", bundle.shortlist_graph))}
        model = cls(create_session(bundle.file(bundle.encoder.file), threads, ENCODER_SPINS, arena),
                    create_session(bundle.file(bundle.decoder.file), threads, spin, arena), bundle,
                    open_log_softmax(spin, arena), **heads)
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
        pairs = [(self.bundle.encoder, self.encoder), (self.bundle.decoder, self.decoder)]
        if self.split:
            pairs += [(self.bundle.projection, self.projection), (self.bundle.shortlist_graph, self.shortlisted)]
        for spec, session in pairs:
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
        out = self.encoder.run(cross_names(self.layers), {INPUT_IDS: input_ids, ATTENTION_MASK: attention_mask},
                               *self._run_args(self.encoder_run_options))
        return out[: self.layers], out[self.layers:]

    def step(self, tokens: np.ndarray, mask: np.ndarray, past_k: list, past_v: list,
             cross_k: list, cross_v: list, outputs: BatchOutputs | None = None) -> tuple[np.ndarray, list, list]:
        """Run the decoder on new tokens [B, T]; return logits [B, T, V] and the grown K/V.

        With ``outputs`` (a split bundle's shortlist), the logits are those of its columns only.
        """
        feed = self.decoder_feed(tokens, mask, past_k, past_v, cross_k, cross_v)
        out = self.decoder.run([HIDDEN if self.split else LOGITS] + present_names(self.layers), feed,
                               *self._run_args())
        logits = self.project(out[0], outputs) if self.split else out[0]
        return logits, out[1: 1 + self.layers], out[1 + self.layers:]

    def project(self, hidden: np.ndarray, outputs: BatchOutputs | None = None) -> np.ndarray:
        """A split bundle's output layer on hidden states [B, T, D]: every column, or
        ``outputs``'s (the rows a batch's shortlist gathered)."""
        if outputs is None:
            return self.projection.run([LOGITS], {HIDDEN: hidden}, *self._run_args())[0]
        feed = {HIDDEN: hidden, **dict(zip(self.weight_names, outputs.feeds))}
        return self.shortlisted.run([LOGITS], feed, *self._run_args())[0]

    def output_columns(self, sources: list[list[int]], shortlist: bool = True) -> BatchOutputs | None:
        """The columns a batch of these sources computes under the bundle's shortlist;
        ``None`` (every column) without one or when ``shortlist`` is off."""
        if not shortlist or self.shortlist is None:
            return None
        return BatchOutputs(self.shortlist, self.output_table, sources, required=(self.bundle.eos_id,),
                            banned=(self.bundle.pad_id,))

    def decoder_feed(self, tokens: np.ndarray, mask: np.ndarray, past_k: list, past_v: list,
                     cross_k: list, cross_v: list) -> dict[str, np.ndarray]:
        """The decoder's inputs for :meth:`step`: every row's past is the whole array given."""
        feed = {INPUT_IDS: tokens, ENCODER_ATTENTION_MASK: mask}
        if self.ragged:
            feed[PAST_LENGTHS] = np.full(len(tokens), past_k[0].shape[2], np.int32)
        for i in range(self.layers):
            feed[past_key(i)] = past_k[i]
            feed[past_value(i)] = past_v[i]
            feed[cross_key(i)] = cross_k[i]
            feed[cross_value(i)] = cross_v[i]
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
    def columns(self, outputs: BatchOutputs | None = None) -> tuple[np.ndarray | None, int | None, int]:
        """``(ids, pad_column, eos_column)`` of the logits: the vocabulary id of each column
        (``None``: column k is id k), and the columns of the pad id (``None``: none) and of ``</s>``."""
        if outputs is None:
            return self.output_ids, self.pad_column, self.eos_column
        return outputs.ids, None, int(outputs.columns_of(self.bundle.eos_id))

    def next_tokens(self, logits: np.ndarray, allow_eos: bool | np.ndarray = True,
                    outputs: BatchOutputs | None = None) -> np.ndarray:
        """Greedy choice from [B, V] logits, never the pad id (nor ``</s>`` if not allowed:
        ``allow_eos`` is one answer for all rows, or one a row).

        With a restricted output layer or a batch's shortlist (``outputs``), column k of the
        logits is vocabulary id ``ids[k]`` (:meth:`columns`); the returned values are always
        vocabulary ids.
        """
        ids, pad_column, eos_column = self.columns(outputs)
        if pad_column is not None:
            logits[:, pad_column] = -np.inf
        if np.ndim(allow_eos):
            logits[~np.asarray(allow_eos, bool), eos_column] = -np.inf
        elif not allow_eos:
            logits[:, eos_column] = -np.inf
        best = logits.argmax(axis=-1)
        return best if ids is None else ids[best]

    def greedy(self, sources: list[list[int]], max_new_tokens: list[int], use_cache: bool = True,
               guard: RepetitionGuard | None = None, min_new_tokens: int = 0, shortlist: bool = True):
        """Greedy-decode a batch of sources together; yield ``(row, Hypothesis)`` as rows
        finish (see :func:`.search.greedy`)."""
        return search.greedy(self, sources, max_new_tokens, use_cache, guard, min_new_tokens, shortlist)

    def beam(self, sources: list[list[int]], max_new_tokens: list[int], beam_size: int,
             length_penalty: float | None = None, shortlist: bool = True):
        """Beam search; yield ``(row, Hypothesis)`` as each source finishes (see :func:`.search.beam`)."""
        return search.beam(self, sources, max_new_tokens, beam_size, length_penalty, shortlist)

    def greedy_all(self, sources: list[list[int]], max_new_tokens: list[int] | int, **kwargs) -> list[Hypothesis]:
        """Decode all sources as one batch and return hypotheses in input order (see
        :func:`.search.greedy_all`)."""
        return search.greedy_all(self, sources, max_new_tokens, **kwargs)


def open_model(path: str | Path, threads: int | None = None) -> Seq2Seq:
    """Load and verify a bundle directory and open its sessions."""
    from .bundle import load_bundle

    return Seq2Seq.load(load_bundle(path), threads)
