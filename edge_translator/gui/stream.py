"""One interactive translation at a time, streamed sentence by sentence to the UI thread.

:class:`TranslationStream` submits the text on the calling (UI) thread, which returns at
once, and iterates the :class:`~edge_translator.core.translator.Submission` on a worker
thread. Each result crosses back to the UI thread as a queued signal tagged with its run,
and a slot there drops whatever belongs to a run that was cancelled or replaced: once
:meth:`TranslationStream.cancel` returns, no signal of that run is emitted.
"""

from __future__ import annotations

import logging
import threading
import time

from PySide6.QtCore import QObject, Qt, Signal, Slot

from ..core.engine import Priority
from ..core.errors import Busy, EdgeTranslatorError

logger = logging.getLogger(__name__)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class TranslationStream(QObject):
    """Translate one text at a time; starting a new run cancels the one before."""

    sentence = Signal(object)
    """A :class:`~edge_translator.core.translator.SentenceResult`, in input order."""
    finished = Signal(dict)
    """All sentences are done: ``tokens``, ``seconds``, ``tokens_per_second``,
    ``sentences`` and ``cached`` (sentences that came from the cache)."""
    failed = Signal(str)
    """The run stopped on an error; a one-line reason."""
    sized = Signal(int)
    """The number of sentences of the run, once it is known (before its first sentence)."""

    # Internal: worker thread -> UI thread, tagged with the run they belong to.
    _result = Signal(int, object)
    _done = Signal(int, dict)
    _error = Signal(int, str)
    _sized = Signal(int, int)

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._run = 0
        self._live = False
        self.submission = None
        """The :class:`Submission` of the current run (``None`` before any, or when it is queued
        from the worker because the engine's queue was full)."""
        self.total = 0
        """Sentences in the current run."""
        self.done = 0
        """Sentences of the current run delivered so far."""
        self._worker: threading.Thread | None = None
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._result.connect(self._on_result, Qt.QueuedConnection)
        self._done.connect(self._on_done, Qt.QueuedConnection)
        self._error.connect(self._on_error, Qt.QueuedConnection)
        self._sized.connect(self._on_sized, Qt.QueuedConnection)

    @property
    def running(self) -> bool:
        """Whether a run was started and has not finished, failed or been cancelled."""
        return self._live

    @property
    def active(self) -> bool:
        """Whether the worker thread of the latest run is still alive (it may be winding down
        after a cancel)."""
        return self._worker is not None and self._worker.is_alive()

    def start(self, translator, text: str, options=None) -> int | None:
        """Cancel the current run and start translating ``text``.

        Args:
            translator: The loaded :class:`~edge_translator.core.translator.Translator`.
            text: The text to translate.
            options: :class:`~edge_translator.core.translator.TranslateOptions`, or ``None``.

        Returns:
            The number of sentences; 0 when the engine's queue is full and the text is
            submitted from the worker as soon as there is room (:attr:`sized` follows);
            ``None`` when the text was refused (:attr:`failed` follows with the reason).
        """
        self.cancel()
        self._run += 1
        run = self._run
        self._cancel = cancel = threading.Event()
        self.done = 0
        self.total = 0
        deferred = False
        try:
            submission = translator.submit(text, options, priority=Priority.INTERACTIVE, block=False)
        except Busy:
            # The queue is full (a document job is feeding it): wait for room on the worker.
            submission, deferred = None, True
        except (EdgeTranslatorError, ValueError, TypeError) as exc:
            self._live = True
            self._error.emit(run, _one_line(exc))
            return None
        self.submission = submission
        self._live = True
        if not deferred:
            self.total = len(submission)
            self._sized.emit(run, self.total)
        self._worker = threading.Thread(target=self._iterate, name="edge-translator-stream", daemon=True,
                                        args=(run, cancel, translator, text, options, submission))
        self._worker.start()
        return self.total

    def cancel(self) -> None:
        """Stop the current run: its remaining sentences are dropped and nothing more of it
        is emitted. Safe to call when nothing runs."""
        self._live = False
        self._cancel.set()
        with self._lock:
            submission = self.submission
        if submission is not None:
            submission.cancel()

    def _iterate(self, run: int, cancel: threading.Event, translator, text, options, submission) -> None:
        started = time.perf_counter()
        tokens = sentences = cached = 0
        try:
            if submission is None:
                submission = translator.submit(text, options, priority=Priority.INTERACTIVE)
                with self._lock:
                    if run == self._run:
                        self.submission = submission
                self._sized.emit(run, len(submission))
                if cancel.is_set():
                    submission.cancel()
                    return
            for result in submission:
                if cancel.is_set():
                    break
                sentences += 1
                if result.timing is not None:
                    tokens += len(result.ids)
                elif result.cached:
                    cached += 1
                self._result.emit(run, result)
        except EdgeTranslatorError as exc:
            self._error.emit(run, _one_line(exc))
            return
        except Exception as exc:  # noqa: BLE001 - shown in a dialog, never a crash
            logger.exception("translation failed")
            self._error.emit(run, f"{type(exc).__name__}: {_one_line(exc)}")
            return
        if cancel.is_set():
            return
        if sentences < len(submission):
            self._error.emit(run, "the translation stopped before the end: the model was closed or switched; "
                                  "translate again")
            return
        seconds = time.perf_counter() - started
        self._done.emit(run, {"tokens": tokens, "seconds": seconds,
                              "tokens_per_second": tokens / seconds if seconds > 0 and tokens else 0.0,
                              "sentences": sentences, "cached": cached})

    def _current(self, run: int) -> bool:
        return run == self._run and self._live and not self._cancel.is_set()

    @Slot(int, int)
    def _on_sized(self, run: int, total: int) -> None:
        if self._current(run):
            self.total = total
            self.sized.emit(total)

    @Slot(int, object)
    def _on_result(self, run: int, result) -> None:
        if self._current(run):
            self.done += 1
            self.sentence.emit(result)

    @Slot(int, dict)
    def _on_done(self, run: int, info: dict) -> None:
        if self._current(run):
            self._live = False
            self.finished.emit(info)

    @Slot(int, str)
    def _on_error(self, run: int, message: str) -> None:
        if self._current(run):
            self._live = False
            self.failed.emit(message)
