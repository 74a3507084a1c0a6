"""The translation facade: Translator, TranslateOptions and the model lookup.

``Translator.load()`` finds a bundle (argument, then ``EDGE_TRANSLATOR_MODEL``, then the
embedded default), verifies it and opens its sessions once, under one engine that
every call shares. ``submit`` returns a :class:`Submission` at once; ``translate_iter``
yields one :class:`SentenceResult` per sentence from it; ``translate`` joins them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .bundle import Bundle, load_bundle
from .cache import CachedTranslation, CacheKey, LRUCache, TranslationCache
from .decode import Seq2Seq
from .dictionary import Dictionary, DictionaryEntry
from .engine import Engine, EngineOptions, Priority
from .errors import BundleError, InputError
from .greedybatch import LENGTH, RepetitionGuard
from .locations import DEFAULT_MODEL, ENV_MODEL, models_dir, resolve_model  # noqa: F401 - re-exported
from .sessions import physical_cores
from .punctuation import chinese_punctuation
from .text import Segment, segment
from .unwrap import unwrap_edits
from .ticket import Outcome, Request, Ticket, Timing
from .tokenizer import Tokenizer

logger = logging.getLogger(__name__)

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
    shortlist: bool = True
    """Restrict each sentence to the bundle's vocabulary shortlist, when it has one: the
    output layer computes only the candidates of its source pieces (faster; docs/models.md
    gives how often the output differs). ``False``: the whole vocabulary."""
    dictionary: bool = True
    """Answer a lone word or short term (up to three words, no sentence punctuation) with
    the English→Chinese dictionary's best headword when it knows it; otherwise, and for
    anything longer, the model translates (:meth:`Translator.lookup` gives every entry)."""
    unwrap: bool = True
    """Join the lines that only wrap a paragraph (text copied from a PDF, an e-mail, a
    terminal) before cutting sentences, so each sentence is read whole and the paragraph
    comes back as one (:mod:`.unwrap` gives the rule). ``False``: every line break ends a
    sentence."""

    def __post_init__(self) -> None:
        if not 1 <= self.beam_size <= 16:
            raise ValueError(f"beam_size must be between 1 and 16, not {self.beam_size}")
        if self.max_length is not None and self.max_length < 1:
            raise ValueError(f"max_length must be at least 1, not {self.max_length}")


@dataclass(frozen=True)
class SentenceResult:
    """One translated sentence."""

    source: str
    """The source sentence, as it appeared in the input (wrapped lines and all)."""
    text: str
    """Its translation."""
    ids: tuple[int, ...]
    """Output token ids (without ``</s>``)."""
    stop: str
    """Why decoding stopped: ``"eos"``, ``"length"``, ``"repetition"`` or ``"empty"``;
    ``"dictionary"`` when the dictionary answered a lone word or term (nothing was decoded)."""
    separator: str
    """Whitespace and line breaks that followed the sentence in the input, kept verbatim,
    except a line break that only wrapped the paragraph: it reads as a space."""
    options: TranslateOptions
    """The options in effect."""
    span: tuple[int, int] = (0, 0)
    """Where ``source`` sits in the submitted text: ``text[start:end]``."""
    score: float = float("nan")
    """Mean log-probability of the output tokens: near 0 is confident, below about -1.0
    is doubtful (docs/python-api.md#results says how it tracks quality; NaN for a blank sentence)."""
    timing: Timing | None = None
    """Time spent waiting and decoding (``None`` when nothing was decoded: empty or cached)."""
    cached: bool = False
    """Whether the translation came from the cache."""


_DEFAULT_CACHE = object()


class Submission:
    """Text handed to the engine: iterate it for results; it knows how many sentences it holds.

    It is returned by :meth:`Translator.submit` once the text is validated and segmented,
    while the work goes on in the engine. Iterate it once.
    """

    def __init__(self, translator: Translator, segments: list[Segment], options: TranslateOptions,
                 order: str, ready: list[SentenceResult | None], ticket: Ticket | None,
                 rows: dict[int, int], keys: dict[int, CacheKey], sources: list[str]):
        self.options = options
        """The options in effect."""
        self.order = order
        """``"input"`` or ``"completion"``."""
        self._translator = translator
        self._segments = segments
        self._ready = ready
        self._ticket = ticket
        self._rows = rows          # segment index -> ticket row
        self._keys = keys          # segment index -> cache key
        self._sources = sources    # segment index -> its text as the input has it

    def __len__(self) -> int:
        return len(self._segments)

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._ticket is not None and self._ticket.cancelled

    def cache_key(self, index: int) -> CacheKey | None:
        """The key sentence ``index`` is cached under once decoded (``None`` for a blank one):
        with a result that was not cached, the pair a caller can move to another memory."""
        return self._keys.get(index)

    def cancel(self) -> None:
        """Stop this submission's remaining work; others sharing its batches go on."""
        if self._ticket is not None:
            self._ticket.cancel()

    def __iter__(self) -> Iterator[SentenceResult]:
        """Yield each sentence's result as soon as it is done (see :attr:`order`).

        Raises:
            TranslationFailed: If the runtime failed on a batch holding this submission.
        """
        if self.order == "completion":
            yield from (r for r in self._ready if r is not None)
            if self._ticket is not None:
                by_row: dict[int, list[int]] = {}
                for index, row in self._rows.items():
                    by_row.setdefault(row, []).append(index)
                for outcome in self._ticket.completed():
                    for index in by_row[outcome.index]:
                        yield self._finish(index, outcome)
            return
        for index, ready in enumerate(self._ready):
            if ready is not None:
                yield ready
                continue
            outcome = self._ticket.get(self._rows[index])  # type: ignore[union-attr]
            if outcome is None:
                return  # cancelled
            yield self._finish(index, outcome)

    def _finish(self, index: int, outcome: Outcome) -> SentenceResult:
        hyp = outcome.hypothesis
        text = chinese_punctuation(self._translator.tokenizer.decode(hyp.ids))
        if hyp.stop == LENGTH:
            logger.warning("translation of %r reached the length limit (%d tokens)",
                           self._segments[index].text[:60], len(hyp.ids))
        cache = self._translator.cache
        if cache is not None:
            cache.put(self._keys[index], CachedTranslation(text, hyp.ids, hyp.stop, hyp.score))
        seg = self._segments[index]
        return SentenceResult(self._sources[index], text, hyp.ids, hyp.stop, seg.separator, self.options,
                              seg.span, hyp.score, outcome.timing)


class Translator:
    """Translates English text with one model bundle. Safe to share between threads:
    every call goes through one :class:`~.engine.Engine`, whose workers alone run the
    sessions, so concurrent calls share batches instead of competing for cores."""

    def __init__(self, bundle: Bundle, model: Seq2Seq | Sequence[Seq2Seq], tokenizer: Tokenizer,
                 cache=_DEFAULT_CACHE, engine: EngineOptions | None = None):
        """Take ready parts; use :meth:`load` to open a bundle.

        Args:
            bundle: The bundle's manifest.
            model: Its sessions (or fakes with the same ``run`` method); or one copy of them
                per engine worker.
            tokenizer: Its tokenizer.
            cache: A :class:`~.cache.TranslationCache`; by default an in-memory LRU of
                4,096 sentences; ``None`` turns caching off.
            engine: Batch size, queue bound and other scheduler options.
        """
        self.bundle = bundle
        self.engine = Engine(model, engine)
        self.model = self.engine.model
        self.tokenizer = tokenizer
        self.cache: TranslationCache | None = LRUCache() if cache is _DEFAULT_CACHE else cache
        self._dictionary: Dictionary | None = None
        self._dictionary_error: BundleError | None = None
        self._dictionary_lock = threading.Lock()
        self._dictionary_warned = False
        self.model_id = model_identity(bundle)
        """The bundle's identity, from its files' checksums (part of every cache key)."""

    @classmethod
    def load(cls, path: str | Path | None = None, threads: int | None = None, cache=_DEFAULT_CACHE,
             engine: EngineOptions | None = None, spin: bool = True, memory: str = "arena",
             workers: int = 1) -> Translator:
        """Find, verify and open a bundle.

        Args:
            path: Bundle directory; see :func:`resolve_model` for the fallbacks.
            threads: ONNX Runtime intra-op threads of each worker (by default the physical
                cores shared among the workers, at least one each).
            cache: See :meth:`__init__`; ``None`` turns caching off.
            engine: Scheduler options (batch size, queue bound, ...).
            spin: Let the decoder's ONNX Runtime threads spin between operators (see
                :func:`~.sessions.session_options`); a process whose other threads must
                answer at once (the desktop app's UI thread) turns it off.
            memory: ``"arena"`` (fastest; for short runs), ``"steady"`` (memory follows
                the work in hand: for long-running processes; it sets the process's malloc
                thresholds), ``"shrink"`` or ``"none"``; see :meth:`~.decode.Seq2Seq.load`.
            workers: Engine workers, each with its own copy of the sessions (its weights
                too: memory grows by about the bundle's size a worker), decoding batches
                side by side. Several workers of one thread keep a few cores busier under
                many callers or a batch job than one worker of all threads; a lone sentence
                decodes faster on one worker with every thread (docs/engine.md).

        Raises:
            BundleError: If the bundle is missing or corrupt.
            ValueError: If ``workers`` is below 1.
        """
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        bundle = load_bundle(resolve_model(path))
        tokenizer = Tokenizer.load(bundle.source_spm, bundle.target_spm, bundle.vocab,
                                   bundle.eos_id, bundle.unk_id, bundle.pad_id)
        if threads is None and workers > 1:
            threads = max(1, physical_cores() // workers)
        models = [Seq2Seq.load(bundle, threads, spin, memory) for _ in range(workers)]
        return cls(bundle, models if workers > 1 else models[0], tokenizer, cache, engine)

    def _target(self, options: TranslateOptions) -> tuple[str, int]:
        name = options.target or self.bundle.default_target
        variant = self.bundle.targets.get(name)
        if variant is None:
            raise ValueError(f"target {name!r} is not offered by this model; choose one of "
                             f"{sorted(self.bundle.targets)}")
        return name, variant.id

    def _limit(self, source_len: int, options: TranslateOptions) -> int:
        limit = options.max_length or 2 * source_len + 10
        return max(1, min(limit, self.bundle.max_positions))

    def _segments(self, text: str, options: TranslateOptions) -> list[Segment]:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, not {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InputError(f"text is not valid Unicode (a lone surrogate at character {exc.start}); "
                             "pass UTF-8 text") from None
        edits = unwrap_edits(text, self._is_word) if options.unwrap else ()
        return segment(text, self.tokenizer, self.bundle.max_positions - 2, edits)

    def submit(self, text: str, options: TranslateOptions | None = None, *,
               priority: Priority = Priority.INTERACTIVE, order: str = "input", block: bool = True,
               timeout: float | None = None) -> Submission:
        """Validate and segment ``text``, queue its sentences, and return at once.

        Sentences found in the cache, and blank ones, are ready immediately; a sentence
        that occurs twice is decoded once.

        Args:
            text: The text to translate.
            options: Target and decoding options.
            priority: ``Priority.INTERACTIVE`` (a person waits) or ``Priority.BULK``.
            order: Iterate results in ``"input"`` order or in ``"completion"`` order.
            block: When the engine's queue is full, wait (``True``) or raise ``Busy``.
            timeout: Most seconds to wait for room in the queue.

        Raises:
            TypeError: If ``text`` is not a string.
            InputError: If ``text`` holds characters that are not valid Unicode.
            ValueError: If the options ask for a target the model does not offer, or
                ``order`` is unknown.
            Busy: If the queue is full and ``block`` is false (or ``timeout`` passed).
        """
        options = options or TranslateOptions()
        if order not in ("input", "completion"):
            raise ValueError(f"order must be 'input' or 'completion', not {order!r}")
        target, target_id = self._target(options)
        segments = self._segments(text, options)
        term = self._term(text, options, target)
        guard = RepetitionGuard() if options.repetition_guard else None
        shortlist = options.shortlist and self.model.shortlist is not None  # one cache key where it changes nothing
        ready: list[SentenceResult | None] = [None] * len(segments)
        requests: list[Request] = []
        rows: dict[int, int] = {}
        keys: dict[int, CacheKey] = {}
        first_row: dict[CacheKey, int] = {}
        sources = [text[seg.span[0]:seg.span[1]] for seg in segments]
        for i, (seg, source) in enumerate(zip(segments, sources)):
            span = seg.span
            if not seg.text.strip():
                ready[i] = SentenceResult(source, "", (), "empty", seg.separator, options, span)
                continue
            if term is not None:  # the text is this one word or term, and the dictionary knows it
                ready[i] = SentenceResult(source, term, (), "dictionary", seg.separator, options, span)
                continue
            key = CacheKey(self.model_id, " ".join(seg.text.split()), target, options.beam_size,
                           options.max_length, options.repetition_guard, shortlist)
            keys[i] = key
            hit = self.cache.get(key) if self.cache is not None else None
            if hit is not None:
                ready[i] = SentenceResult(source, chinese_punctuation(hit.text), hit.ids, hit.stop, seg.separator,
                                          options, span, hit.score, None, True)
            elif key in first_row:
                rows[i] = first_row[key]
            else:
                source = self.tokenizer.encode(seg.text, target_id)
                rows[i] = first_row[key] = len(requests)
                requests.append(Request(tuple(source), self._limit(len(source), options), options.beam_size,
                                        guard, shortlist))
        ticket = self.engine.submit(requests, priority, block=block, timeout=timeout) if requests else None
        return Submission(self, segments, options, order, ready, ticket, rows, keys, sources)

    @property
    def dictionary(self) -> Dictionary | None:
        """The English→Chinese dictionary, loaded on first use; ``None`` for a model of another
        language pair.

        Raises:
            BundleError: If the dictionary's files are missing or damaged.
        """
        if not (self.bundle.source_language == "en" and self.bundle.target_language.startswith("zh")):
            return None
        with self._dictionary_lock:
            if self._dictionary is None and self._dictionary_error is None:
                try:
                    self._dictionary = Dictionary.load()
                except BundleError as exc:
                    self._dictionary_error = exc
            if self._dictionary_error is not None:
                raise self._dictionary_error
            return self._dictionary

    def lookup(self, term: str) -> list[DictionaryEntry]:
        """The dictionary's entries for an English word or term of up to three words, best
        first (headwords in both scripts, pinyin, glosses); ``[]`` when it does not know it.

        Raises:
            TypeError: If ``term`` is not a string.
            BundleError: If the dictionary's files are missing or damaged, or the model's
                language pair has no dictionary.
        """
        if not isinstance(term, str):
            raise TypeError(f"term must be str, not {type(term).__name__}")
        dictionary = self.dictionary
        if dictionary is None:
            raise BundleError(f"there is no dictionary for {self.bundle.source_language}→"
                              f"{self.bundle.target_language}; only English→Chinese models have one")
        return dictionary.lookup(term)

    def _usable_dictionary(self) -> Dictionary | None:
        """The dictionary, or ``None`` (said once in the log) when it cannot be loaded: the
        model translates then."""
        try:
            return self.dictionary
        except BundleError as exc:
            if not self._dictionary_warned:
                self._dictionary_warned = True
                logger.warning("the dictionary cannot be used, so the model translates words too: %s", exc)
            return None

    def _term(self, text: str, options: TranslateOptions, target: str) -> str | None:
        """The dictionary's answer when ``text`` is a lone word or short term it knows."""
        if not options.dictionary or not is_term(text):
            return None
        dictionary = self._usable_dictionary()
        return dictionary.best(text, target) if dictionary is not None else None

    def _is_word(self, word: str) -> bool:
        dictionary = self._usable_dictionary()
        return dictionary.is_word(word) if dictionary is not None else False

    def translate_iter(self, text: str, options: TranslateOptions | None = None) -> Iterator[SentenceResult]:
        """Translate ``text`` lazily, one sentence at a time, in input order.

        Work starts on iteration; closing the generator cancels the work not done yet.

        Raises:
            TypeError: If ``text`` is not a string.
            InputError: If ``text`` holds characters that are not valid Unicode.
            ValueError: If the options ask for a target the model does not offer.
        """
        submission = self.submit(text, options)
        try:
            yield from submission
        finally:
            submission.cancel()

    def translate(self, text: str, options: TranslateOptions | None = None) -> str:
        """Translate ``text``; paragraph breaks and surrounding whitespace are kept."""
        return join_results(self.translate_iter(text, options))

    def translate_batch(self, texts: list[str], options: TranslateOptions | None = None) -> list[str]:
        """Translate many texts at once: their sentences share batches. One output per text."""
        submissions: list[Submission] = []
        try:
            for text in texts:
                submissions.append(self.submit(text, options))
            return [join_results(s) for s in submissions]
        finally:
            for submission in submissions:
                submission.cancel()

    def close(self, cancel: bool = False) -> None:
        """Finish (or cancel) queued work and stop the engine's worker. Safe to call twice."""
        self.engine.close(cancel=cancel)

    def __enter__(self) -> Translator:
        return self

    def __exit__(self, *exc) -> None:
        self.close(cancel=exc[0] is not None)


#: What a lone word or short term holds: one to three words (letters, digits, ' and -), nothing else.
_TERM = re.compile(r"\s*[^\W_][\w'’-]*(?:[ \t]+[^\W_][\w'’-]*){0,2}\s*")


def is_term(text: str) -> bool:
    """Whether ``text`` is a lone word or short term the dictionary may answer: up to three
    words on one line, with no sentence punctuation (a sentence goes to the model)."""
    return len(text) <= 80 and _TERM.fullmatch(text) is not None and "\n" not in text.strip() and \
        any(ch.isalpha() for ch in text)


def model_identity(bundle: Bundle) -> str:
    """A bundle's identity: a digest of its files' checksums, known without loading it (the
    ``model`` of cache keys, and the checksum a corpus job writes on every row)."""
    files = bundle.manifest.get("files", {})
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


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
