"""What a drag or a drop carries: the local files, whichever widget it lands on."""

from __future__ import annotations

from pathlib import Path


def local_files(event) -> list[Path]:
    """The local files a drag or drop event carries (none for other URLs or no URLs)."""
    mime = event.mimeData() if hasattr(event, "mimeData") else None
    if mime is None or not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile()]
