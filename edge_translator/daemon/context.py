"""What an API handler is given: the application's state, as a protocol.

The handlers (:mod:`.libre`, :mod:`.deepl`, :mod:`.native`) take this instead of the
application class, so that the application imports them and they never import it back.
"""

from __future__ import annotations

from typing import Protocol

from ..core.translator import Translator
from .documents import DocumentStore
from .glossaries import GlossaryStore
from .http import Request
from .languages import Targets
from .limits import Access
from .metrics import Metrics
from .service import Service


class Context(Protocol):
    """The parts of :class:`~.app.App` a handler reads."""

    translator: Translator
    """The loaded model; its engine is shared by every request."""
    service: Service
    """Translation with the request limits, deadlines and markup."""
    targets: Targets
    """The model's target variants and how API language codes map onto them."""
    access: Access
    """API keys and rate limits."""
    metrics: Metrics
    """The Prometheus registry."""
    started: float
    """When the application started (``time.time()``)."""
    draining: bool
    """Whether the server is shutting down (new work is refused with 503)."""
    glossaries: GlossaryStore
    """DeepL glossaries, by owner (:mod:`.glossaries`)."""
    documents: DocumentStore
    """Uploaded documents and the worker that translates them."""

    def admit(self, request: Request, key: str | None, how: str = "pass api_key") -> str:
        """Check the API key and the rate limit (403, 429); ``how`` says how this API passes a key."""
