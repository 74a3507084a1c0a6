"""What every HTTP API of the daemon does with text: submit it to the engine, watch it, collect it.

All three APIs (LibreTranslate, DeepL, our own) come here, so limits, deadlines, client
disconnects, a full queue and HTML are handled once. Each request's texts go to the one
shared :class:`~edge_translator.core.translator.Translator` with interactive priority, so
concurrent requests share batches. A single watchdog thread cancels the submissions of
requests that pass their deadline or whose client went away.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ..core.engine import Priority
from ..core.errors import Busy, EngineClosed, InputError, TranslationFailed
from ..core.markup import Markup, plan, render, texts_to_translate
from ..core.translator import SentenceResult, Submission, TranslateOptions, Translator, join_results
from ..documents.glossary import Glossary, Slot
from .http import HTTPError

logger = logging.getLogger(__name__)

#: Seconds a client is told to wait when the queue is full.
RETRY_AFTER_BUSY = 2


@dataclass(frozen=True)
class Limits:
    """What one request may ask for."""

    char_limit: int = 20_000
    """Most characters of text in one request (all items together); 0 means unlimited."""
    batch_limit: int = 64
    """Most texts in one request."""
    timeout: float = 60.0
    """Most seconds a request's translation may take before it is cancelled (503)."""


class Watchdog:
    """One thread that cancels submissions past their deadline or of disconnected clients.

    It looks every ``interval`` seconds while requests are being answered, and sleeps
    without waking while none are (an idle daemon on a board should cost nothing).
    """

    def __init__(self, interval: float = 0.05):
        self._interval = interval
        self._watched: dict[int, tuple[list[Submission], float, Callable[[], bool] | None, list[str]]] = {}
        self._lock = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._ids = iter(range(1 << 62))

    def watch(self, submissions: list[Submission], deadline: float,
              gone: Callable[[], bool] | None) -> tuple[int, list[str]]:
        """Start watching; returns a handle for :meth:`release` and a list that gets the reason
        (``"timeout"`` or ``"disconnected"``) if the submissions are cancelled."""
        reason: list[str] = []
        with self._lock:
            handle = next(self._ids)
            self._watched[handle] = (submissions, deadline, gone, reason)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="edge-translator-watchdog", daemon=True)
                self._thread.start()
            self._lock.notify_all()
        return handle, reason

    def release(self, handle: int) -> None:
        """Stop watching (the request is answered)."""
        with self._lock:
            self._watched.pop(handle, None)

    def close(self) -> None:
        with self._lock:
            self._stopped = True
            self._lock.notify_all()

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._stopped or self._watched)  # idle: no wake-ups
                if self._stopped:
                    return
                self._lock.wait(self._interval)  # a request is in flight: look again soon
                if self._stopped:
                    return
            try:
                self._check()
            except Exception:  # noqa: BLE001 - the watchdog must outlive any one request
                logger.exception("the request watchdog hit an error; it goes on")

    def _check(self) -> None:
        now = time.monotonic()
        with self._lock:
            entries = list(self._watched.items())
        for handle, (submissions, deadline, gone, reason) in entries:
            why = "timeout" if now > deadline else None
            if why is None and gone is not None:
                try:
                    why = "disconnected" if gone() else None
                except Exception:  # noqa: BLE001 - a broken probe must not stop the watchdog
                    why = None
            if why is None:
                continue
            reason.append(why)
            for submission in submissions:
                submission.cancel()
            self.release(handle)


class Service:
    """Translation for the HTTP APIs: checks limits, submits, watches, collects."""

    def __init__(self, translator: Translator, limits: Limits | None = None, repetition_guard: bool = True):
        self.translator = translator
        self.repetition_guard = repetition_guard
        """Stop a looping sentence early (:class:`.TranslateOptions`); off only in benchmarks."""
        self.limits = limits or Limits()
        self.watchdog = Watchdog()
        self._lock = threading.Lock()
        self._in_flight = 0
        self.characters = 0
        """Characters translated since start (DeepL's usage counter)."""
        self.on_sentence: Callable[[SentenceResult], object] | None = None
        """Called with every sentence delivered (metrics)."""

    # -- limits ---------------------------------------------------------------------------
    def check(self, texts: list[str]) -> int:
        """Refuse a request over the item or character limit; return its character count.

        Raises:
            HTTPError: 400 stating the limit.
        """
        if len(texts) > self.limits.batch_limit:
            raise HTTPError(400, f"too many texts: {len(texts)} in one request; the limit is "
                                 f"{self.limits.batch_limit}")
        chars = sum(len(t) for t in texts)
        if self.limits.char_limit and chars > self.limits.char_limit:
            raise HTTPError(400, f"request of {chars} characters exceeds the limit of {self.limits.char_limit} "
                                 "characters; split the text into smaller requests")
        return chars

    # -- in-flight accounting (for a graceful stop) ---------------------------------------
    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    @property
    def in_flight(self) -> int:
        """Requests being answered now."""
        with self._lock:
            return self._in_flight

    # -- translation ----------------------------------------------------------------------
    def deadline(self) -> float:
        """When a request starting now must be done (``time.monotonic()`` seconds)."""
        return time.monotonic() + self.limits.timeout

    def submit(self, texts: list[str], target: str, deadline: float, unwrap: bool = True) -> list[Submission]:
        """Queue every text with interactive priority (``unwrap``: see :attr:`.TranslateOptions.unwrap`).

        The first text does not wait for room in the queue: a full queue answers at once.
        The request's later texts wait for room (the request's own earlier texts make it)
        until ``deadline``.

        Raises:
            HTTPError: 503 (with ``Retry-After``) when the queue is full or the server stops;
                400 for text the core refuses.
        """
        options = TranslateOptions(target=target, repetition_guard=self.repetition_guard, unwrap=unwrap)
        submissions: list[Submission] = []
        try:
            for text in texts:
                wait = max(0.0, deadline - time.monotonic()) if submissions else None
                submissions.append(self.translator.submit(text, options, priority=Priority.INTERACTIVE,
                                                          block=wait is not None, timeout=wait))
        except Busy:
            self._cancel(submissions)
            if submissions:
                raise self._stopped([]) from None
            raise HTTPError(503, "the translation queue is full; retry shortly",
                            (("Retry-After", str(RETRY_AFTER_BUSY)),)) from None
        except EngineClosed:
            self._cancel(submissions)
            raise HTTPError(503, "the server is shutting down", (("Retry-After", str(RETRY_AFTER_BUSY)),
                                                                   ("Connection", "close"))) from None
        except (InputError, ValueError) as exc:
            self._cancel(submissions)
            raise HTTPError(400, str(exc)) from None
        return submissions

    def translate(self, texts: list[str], target: str, markup: Markup | None = None,
                  gone: Callable[[], bool] | None = None, unchanged: list[bool] | None = None,
                  glossary: Glossary | None = None) -> list[str]:
        """Translate each text (plain, or HTML or XML whose markup is kept); one string per text.

        All of a request's text is submitted together under one deadline, so its
        sentences share batches; in HTML, a sentence across inline elements is translated
        whole (:func:`~edge_translator.core.markup.plan`), and texts that repeat (in one
        document or across them) are translated once.

        Args:
            texts: The texts of one request.
            target: A bundle target name.
            markup: Treat each text as markup (:data:`~edge_translator.core.markup.HTML` or
                ``XML``, perhaps with ignored tags): only what it translates changes.
            gone: Returns true once the client has disconnected (its work is then cancelled).
            unchanged: Per text, whether to give it back as it is (already in the target
                language) instead of translating it.
            glossary: Terms translated exactly as given (see :meth:`_glossed`).

        Raises:
            HTTPError: 503 on timeout or a full queue, 500 when the runtime fails, 400 for bad text.
        """
        if unchanged is not None and any(unchanged):
            todo = [text for text, keep in zip(texts, unchanged) if not keep]
            done = iter(self.translate(todo, target, markup, gone, glossary=glossary) if todo else [])
            return [text if keep else next(done) for text, keep in zip(texts, unchanged)]
        deadline = self.deadline()
        if markup is not None:
            documents = [plan(text, markup) for text in texts]
            units = list(dict.fromkeys(unit for document in documents for unit in texts_to_translate(document)))
        else:
            units = texts
        if glossary is not None:
            translated = self._glossed(units, target, glossary, gone, deadline)
        else:
            results = self._collect(self.submit(units, target, deadline), gone, deadline)
            translated = [join_results(sentences) for sentences in results]
        self._count(texts)
        if markup is None:
            return translated
        table = dict(zip(units, translated))
        return [render(text, document, table) for text, document in zip(texts, documents)]

    def _glossed(self, texts: list[str], target: str, glossary: Glossary, gone, deadline: float) -> list[str]:
        """Translate with the glossary's terms masked by placeholders and put back after.

        A text whose placeholder the model lost is translated again with the other
        placeholder style, as the document job does. If that loses one too, the text is
        translated once more without the lost terms masked, and then, if still something
        is lost (a URL, say), plainly: a term the model may translate its own way is
        better than an answer missing words, or no answer.
        """
        out: list[str | None] = [None] * len(texts)
        todo: dict[int, tuple[Glossary | None, int]] = {i: (glossary, 0) for i in range(len(texts))}
        while todo:
            masked = {i: g.mask(texts[i], style=style % 2) if g is not None else None
                      for i, (g, style) in todo.items()}
            for i, m in masked.items():
                if m is not None and m.slots and _only_placeholders(m):  # a bare term: nothing for the model
                    out[i] = todo[i][0].unmask(m.text, m).text
            order = [i for i in todo if out[i] is None]
            if not order:
                break
            submitted = [masked[i].text if masked[i] is not None else texts[i] for i in order]
            results = self._collect(self.submit(submitted, target, deadline), gone, deadline)
            retry: dict[int, tuple[Glossary | None, int]] = {}
            for i, sentences in zip(order, results):
                g, style = todo[i]
                translation = join_results(sentences)
                if g is None:
                    out[i] = translation
                    continue
                restored = g.unmask(translation, masked[i])
                if not restored.missing:
                    out[i] = restored.text
                elif style == 0:
                    retry[i] = (g, 1)
                elif style == 1:
                    retry[i] = (_without(g, restored.missing), 2)  # placeholder style 0 again, fewer terms
                else:
                    retry[i] = (None, 0)
            todo = retry
        return [text or "" for text in out]

    def stream(self, texts: list[str], target: str, gone: Callable[[], bool] | None = None, unwrap: bool = True
               ) -> Iterator[tuple[int, SentenceResult]]:
        """Submit now (so a full queue or bad text raises here), then return a generator of
        ``(text index, sentence)`` as each sentence is done, text by text in input order.

        Closing the generator cancels what is left.
        """
        deadline = self.deadline()
        return self._stream(self.submit(texts, target, deadline, unwrap), texts, gone, deadline)

    def _stream(self, submissions: list[Submission], texts: list[str], gone, deadline: float):
        handle, reason = self.watchdog.watch(submissions, deadline, gone)
        try:
            for k, submission in enumerate(submissions):
                count = 0
                for result in submission:
                    count += 1
                    yield k, self._seen(result)
                if count < len(submission):
                    raise self._stopped(reason)
            self._count(texts)
        except TranslationFailed as exc:
            raise HTTPError(500, f"translation failed: {exc}") from None
        finally:
            self.watchdog.release(handle)
            self._cancel(submissions)

    def _collect(self, submissions: list[Submission], gone, deadline: float) -> list[list[SentenceResult]]:
        handle, reason = self.watchdog.watch(submissions, deadline, gone)
        try:
            results = [[self._seen(r) for r in submission] for submission in submissions]
        except TranslationFailed as exc:
            self._cancel(submissions)
            raise HTTPError(500, f"translation failed: {exc}") from None
        finally:
            self.watchdog.release(handle)
        if any(len(got) < len(submission) for got, submission in zip(results, submissions)):
            raise self._stopped(reason)
        return results

    def _count(self, texts: list[str]) -> None:
        with self._lock:
            self.characters += sum(len(t) for t in texts)

    def _seen(self, result: SentenceResult) -> SentenceResult:
        if self.on_sentence is not None:
            self.on_sentence(result)
        return result

    def _stopped(self, reason: list[str]) -> HTTPError:
        if reason and reason[0] == "disconnected":
            return HTTPError(499, "client disconnected")
        return HTTPError(503, f"the translation took longer than the {self.limits.timeout:g} s limit; retry "
                              "with less text or later", (("Retry-After", str(RETRY_AFTER_BUSY)),))

    @staticmethod
    def _cancel(submissions: list[Submission]) -> None:
        for submission in submissions:
            submission.cancel()

    def close(self) -> None:
        self.watchdog.close()


def _only_placeholders(masked) -> bool:
    """Whether a masked text is placeholders and punctuation only (a term, a URL, alone)."""
    rest = masked.text
    for slot in masked.slots:
        rest = rest.replace(slot.placeholder, " ")
    return not any(ch.isalnum() for ch in rest)


def _without(glossary: Glossary, lost: tuple[Slot, ...]) -> Glossary | None:
    """The glossary less the terms whose placeholders were lost; ``None`` when that leaves
    nothing to try (the lost slot was a URL or an address, which every glossary masks)."""
    def hit(entry) -> bool:
        return any(s.kind == "term" and (entry.source == s.source or (entry.source == entry.source.lower()
                                                                      and entry.source == s.source.lower()))
                   for s in lost)
    kept = tuple(e for e in glossary.entries if e.regex or not hit(e))
    if len(kept) == len(glossary.entries):
        return None
    return Glossary(kept)
