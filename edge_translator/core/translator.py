"""The translation facade: Translator, TranslateOptions and the model lookup.

``Translator.load()`` finds a bundle (argument, then ``EDGE_TRANSLATOR_MODEL``, then the
embedded default), verifies it and opens its sessions once. ``translate_iter`` yields
one :class:`SentenceResult` per sentence; ``translate`` joins them.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .bundle import Bundle, load_bundle
from .decode import LENGTH, RepetitionGuard, Seq2Seq
from .errors import BundleError, InputError
from .text import Segment, segment
from .tokenizer import Tokenizer

logger = logging.getLogger(__name__)

ENV_MODEL = "EDGE_TRANSLATOR_MODEL"
#: Name of the embedded default bundle under ``models/``.
DEFAULT_MODEL = "tatoeba-en-zh-small"


def models_dir() -> Path:
    """Where the embedded bundles live: inside the installed package, or the source tree."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "models", package.parent / "models"):
        if candidate.is_dir():
            return candidate
    return package / "models"


def resolve_model(path: str | Path | None = None) -> Path:
    """The bundle to use: ``path``, else ``$EDGE_TRANSLATOR_MODEL``, else the embedded default.

    Raises:
        BundleError: If no path is given and the embedded default is missing.
    """
    if path:
        return Path(path)
    env = os.environ.get(ENV_MODEL)
    if env:
        return Path(env)
    default = models_dir() / DEFAULT_MODEL
    if not default.is_dir():
        raise BundleError(
            f"the embedded default model is missing ({default}); reinstall edge-translator or "
            f"pass --model / set {ENV_MODEL} to a bundle made by `edge-translator export`"
        )
    return default


@dataclass(frozen=True)
class TranslateOptions:
    """How text is translated."""

    target: str | None = None
    """Target variant, ``"zh-Hans"`` or ``"zh-Hant"``; ``None`` means the bundle's default."""
    beam_size: int = 1
    """Beam width; 1 is greedy. Beam search follows transformers' ``generate(num_beams=k)``;
    the repetition guard applies to greedy decoding only."""
    max_length: int | None = None
    """Most new tokens per sentence; ``None`` derives it from the source length."""
    repetition_guard: bool = True
    """Stop a sentence whose output loops on one n-gram."""
    batch_size: int = 16
    """Sentences decoded together."""

    def __post_init__(self) -> None:
        if not 1 <= self.beam_size <= 16:
            raise ValueError(f"beam_size must be between 1 and 16, not {self.beam_size}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be at least 1, not {self.max_length}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size}")


@dataclass(frozen=True)
class SentenceResult:
    """One translated sentence."""

    source: str
    """The source sentence, as it appeared in the input."""
    text: str
    """Its translation."""
    ids: tuple[int, ...]
    """Output token ids (without ``</s>``)."""
    stop: str
    """Why decoding stopped: ``"eos"``, ``"length"``, ``"repetition"`` or ``"empty"``."""
    separator: str
    """Whitespace and line breaks that followed the sentence in the input, kept verbatim."""
    options: TranslateOptions
    """The options in effect."""


class Translator:
    """Translates English text with one model bundle. Safe to share between threads."""

    def __init__(self, bundle: Bundle, model: Seq2Seq, tokenizer: Tokenizer, cache_size: int = 4096):
        """Take ready parts; use :meth:`load` to open a bundle."""
        self.bundle = bundle
        self.model = model
        self.tokenizer = tokenizer
        self._cache: OrderedDict = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()

    @classmethod
    def load(cls, path: str | Path | None = None, threads: int | None = None) -> Translator:
        """Find, verify and open a bundle.

        Args:
            path: Bundle directory; see :func:`resolve_model` for the fallbacks.
            threads: ONNX Runtime intra-op threads (physical cores by default).

        Raises:
            BundleError: If the bundle is missing or corrupt.
        """
        bundle = load_bundle(resolve_model(path))
        tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab,
                                   bundle.eos_id, bundle.unk_id, bundle.pad_id)
        return cls(bundle, Seq2Seq.load(bundle, threads), tokenizer)

    def _target_id(self, options: TranslateOptions) -> int:
        name = options.target or self.bundle.default_target
        variant = self.bundle.targets.get(name)
        if variant is None:
            raise ValueError(f"target {name!r} is not offered by this model; choose one of "
                             f"{sorted(self.bundle.targets)}")
        return variant.id

    def _limit(self, source_len: int, options: TranslateOptions) -> int:
        limit = options.max_length or 2 * source_len + 10
        return max(1, min(limit, self.bundle.max_positions))

    def _segments(self, text: str) -> list[Segment]:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"text is not valid Unicode (a lone surrogate at character {exc.start}); "
                             "pass UTF-8 text") from None
        return segment(text, self.tokenizer, self.bundle.max_positions - 2)

    def translate_iter(self, text: str, options: TranslateOptions | None = None) -> Iterator[SentenceResult]:
        """Translate ``text`` lazily, one sentence at a time, in input order.

        Work starts on iteration; closing the generator stops the work not done yet.

        Raises:
            TypeError: If ``text`` is not a string.
            InputError: If ``text`` holds characters that are not valid Unicode.
            ValueError: If the options ask for a target the model does not offer.
        """
        options = options or TranslateOptions()
        target_id = self._target_id(options)
        segments = self._segments(text)
        for start in range(0, len(segments), options.batch_size):
            yield from self._translate_segments(segments[start: start + options.batch_size], target_id, options)

    def _translate_segments(self, segments: list[Segment], target_id: int,
                            options: TranslateOptions) -> Iterator[SentenceResult]:
        """Translate segments (cache first, then batches sorted by length); yield in order."""
        guard = RepetitionGuard() if options.repetition_guard else None
        results: list[SentenceResult | None] = [None] * len(segments)
        todo: list[tuple[int, tuple]] = []
        for i, seg in enumerate(segments):
            if not seg.text.strip():
                results[i] = SentenceResult(seg.text, "", (), "empty", seg.separator, options)
                continue
            key = (" ".join(seg.text.split()), target_id, options.max_length, options.repetition_guard,
                   options.beam_size)
            with self._lock:
                hit = self._cache.get(key)
                if hit is not None:
                    self._cache.move_to_end(key)
            if hit is not None:
                results[i] = SentenceResult(seg.text, hit[0], hit[1], hit[2], seg.separator, options)
            else:
                todo.append((i, key))
        sources = {i: self.tokenizer.encode(segments[i].text, target_id) for i, _ in todo}
        todo.sort(key=lambda item: len(sources[item[0]]))
        emitted = 0
        for start in range(0, len(todo), options.batch_size):
            batch = todo[start: start + options.batch_size]
            ids = [sources[i] for i, _ in batch]
            limits = [self._limit(len(s), options) for s in ids]
            if options.beam_size > 1:
                decoded = self.model.beam(ids, limits, options.beam_size)
            else:
                decoded = self.model.greedy(ids, limits, guard=guard)
            try:
                for row, hyp in decoded:
                    i, key = batch[row]
                    text = self.tokenizer.decode(hyp.ids)
                    if hyp.stop == LENGTH:
                        logger.warning("translation of %r reached the length limit (%d tokens)",
                                       segments[i].text[:60], len(hyp.ids))
                    with self._lock:
                        self._cache[key] = (text, hyp.ids, hyp.stop)
                        while len(self._cache) > self._cache_size:
                            self._cache.popitem(last=False)
                    seg = segments[i]
                    results[i] = SentenceResult(seg.text, text, hyp.ids, hyp.stop, seg.separator, options)
            finally:
                decoded.close()
            while emitted < len(results) and results[emitted] is not None:
                yield results[emitted]
                emitted += 1
        yield from results[emitted:]  # type: ignore[misc]

    def translate(self, text: str, options: TranslateOptions | None = None) -> str:
        """Translate ``text``; paragraph breaks and surrounding whitespace are kept."""
        return join_results(self.translate_iter(text, options))

    def translate_batch(self, texts: list[str], options: TranslateOptions | None = None) -> list[str]:
        """Translate many texts at once: their sentences share batches. One output per text."""
        options = options or TranslateOptions()
        target_id = self._target_id(options)
        owners, segments = [], []
        for n, text in enumerate(texts):
            for seg in self._segments(text):
                owners.append(n)
                segments.append(seg)
        per_text: list[list[SentenceResult]] = [[] for _ in texts]
        window = options.batch_size * 16
        for start in range(0, len(segments), window):
            chunk = segments[start: start + window]
            for k, result in enumerate(self._translate_segments(chunk, target_id, options)):
                per_text[owners[start + k]].append(result)
        return [join_results(results) for results in per_text]


def render(results) -> Iterator[str]:
    """Output text for a stream of results, as soon as each arrives.

    Chinese sentences are joined without spaces; line breaks, blank lines, and leading
    and trailing whitespace of the input come back unchanged.
    """
    held = None
    for result in results:
        if held is not None and ("\n" in held.separator or not held.text):
            yield held.separator
        yield result.text
        held = result
    if held is not None:
        yield held.separator


def join_results(results) -> str:
    """Reassemble sentence results into one string (see :func:`render`)."""
    return "".join(render(results))
