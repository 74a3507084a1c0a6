"""The loaded model of the app, loaded and switched off the UI thread.

A :class:`ModelSession` owns the one :class:`~edge_translator.core.translator.Translator`
the window and the documents panel share. Its cache is a
:class:`~edge_translator.documents.journal.JobCache` over an in-memory LRU (or the user's
translation memory), so a document job can attach its journal to it while the window
keeps translating. Loading happens on a worker thread; the result comes back as a signal.
ONNX Runtime's threads do not spin between operators here: on a machine with few cores,
spinning threads take the time the UI thread needs, so the window stalls while a long text
translates, and translating with the window open gains nothing from them.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from ..core.cache import LRUCache
from ..core.errors import EdgeTranslatorError
from ..core.translator import Translator, resolve_model
from ..documents.journal import JobCache

logger = logging.getLogger(__name__)


class ModelSession(QObject):
    """The current model: ``translator`` and its ``cache``, or ``None`` while none is loaded."""

    loaded = Signal(object)
    """Emitted on the UI thread with the new :class:`Translator` once a load succeeded."""
    failed = Signal(str, str)
    """Emitted with the bundle path tried and a one-line reason when a load failed."""

    def __init__(self, parent: QObject | None = None, memory=None):
        """Args:
            parent: The Qt parent.
            memory: A persistent cache (a translation memory) to use instead of the LRU.
        """
        super().__init__(parent)
        self.translator: Translator | None = None
        self.cache = JobCache(memory if memory is not None else LRUCache(8192))
        self.path: Path | None = None
        self.threads: int | None = None
        self._lock = threading.Lock()

    def load(self, path: str | Path | None = None, threads: int | None = None) -> None:
        """Load a bundle (``None``: ``$EDGE_TRANSLATOR_MODEL``, then the embedded default) on
        a worker thread; :attr:`loaded` or :attr:`failed` follows. The previous model keeps
        serving until the new one is ready, then it is closed."""
        worker = threading.Thread(target=self._load, args=(path, threads), name="edge-translator-load",
                                  daemon=True)
        worker.start()

    def load_now(self, path: str | Path | None = None, threads: int | None = None) -> Translator:
        """Load on the calling thread (tests, and the first load before the window shows).

        Raises:
            EdgeTranslatorError: If the bundle is missing or corrupt.
        """
        box: dict = {}

        def load() -> None:
            try:
                box["translator"] = self._open(path, threads)
            except BaseException as exc:  # noqa: BLE001 - raised again on the calling thread
                box["error"] = exc

        worker = threading.Thread(target=load, name="edge-translator-load")
        worker.start()
        worker.join()
        if "error" in box:
            raise box["error"]
        self._swap(box["translator"], resolve_model(path), threads)
        return box["translator"]

    def _open(self, path, threads) -> Translator:
        """Load the bundle from a thread of lower priority than the UI's: the engine's worker
        and ONNX Runtime's threads are created here and inherit it, so on a machine with
        few cores the UI thread is scheduled first and never waits for a decoding step."""
        _lower_priority()
        translator = Translator.load(path, threads=threads, cache=self.cache, spin=False, memory="steady")
        try:
            translator.dictionary  # noqa: B018 - loaded here, not on the UI thread at the first lone word
        except EdgeTranslatorError as exc:
            logger.warning("%s", exc)
        return translator

    def _load(self, path, threads) -> None:
        try:
            translator = self._open(path, threads)
        except EdgeTranslatorError as exc:
            self.failed.emit(str(path or ""), str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - shown in a dialog, never a crash
            logger.exception("loading %s failed", path)
            self.failed.emit(str(path or ""), f"{type(exc).__name__}: {exc}")
            return
        self._swap(translator, resolve_model(path), threads)

    def _swap(self, translator: Translator, path: Path, threads: int | None) -> None:
        with self._lock:
            old, self.translator = self.translator, translator
            self.path, self.threads = path, threads
        self.loaded.emit(translator)
        if old is not None:
            threading.Thread(target=old.close, kwargs={"cancel": True}, daemon=True).start()

    def close(self) -> None:
        """Close the model (cancelling its work). Safe to call twice."""
        with self._lock:
            old, self.translator = self.translator, None
        if old is not None:
            old.close(cancel=True)


#: How much lower the translation threads run than the UI thread (a nice increment).
BACKGROUND_NICENESS = 5


def _lower_priority() -> None:
    """Lower the calling thread's scheduling priority, where the system allows it per thread
    (Linux); threads it creates inherit the lower priority."""
    if not hasattr(os, "setpriority") or not sys.platform.startswith("linux"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + BACKGROUND_NICENESS)
    except OSError:
        pass
