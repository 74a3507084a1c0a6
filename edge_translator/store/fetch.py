"""Download one file over HTTPS (``models add https://...``), whole or not at all.

The bytes go to a partial file beside the destination, which is renamed only when the
length the server announced has arrived; a dropped connection, a short body or an HTTP
error end in one line and leave nothing behind.
"""

from __future__ import annotations

import http.client
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from ..core import durable
from ..core.errors import EdgeTranslatorError

logger = logging.getLogger(__name__)

#: Seconds a connection may stay silent before the download is given up.
TIMEOUT_S = 60.0
CHUNK = 1 << 20


class DownloadError(EdgeTranslatorError):
    """A download that did not arrive whole."""

    exit_code = 8


def is_url(source: str) -> bool:
    """Whether ``source`` is an http(s) URL."""
    return source.lower().startswith(("https://", "http://"))


def file_name(url: str) -> str:
    """The last path segment of ``url`` (what the downloaded file is called)."""
    name = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
    return name or "download"


def download(url: str, dest: Path, progress: Callable[[int, int | None], None] | None = None,
             timeout: float = TIMEOUT_S) -> Path:
    """Fetch ``url`` into ``dest``.

    Args:
        url: An ``https://`` (or ``http://``) URL.
        dest: The file to write; it must not exist.
        progress: Called with (bytes so far, total bytes or ``None`` when the server does not say).
        timeout: Seconds of silence before giving up.

    Returns:
        ``dest``.

    Raises:
        DownloadError: One line: the server could not be reached, answered an error, or the
            body stopped short.
    """
    dest = Path(dest)
    host = urllib.parse.urlparse(url).netloc or url
    part = dest.with_name(f".{dest.name}.{os.getpid()}.part")
    request = urllib.request.Request(url, headers={"User-Agent": "edge-translator"})
    done, total = 0, None
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, open(part, "wb") as out:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)
        if total is not None and done != total:
            raise DownloadError(f"the download of {url} stopped after {done} of {total} bytes; run the command "
                                "again")
        durable.replace(part, dest)  # fsynced, renamed, its folder fsynced
    except urllib.error.HTTPError as exc:
        part.unlink(missing_ok=True)
        raise DownloadError(f"{host} answered {exc.code} {exc.reason} for {url}; check the address") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        part.unlink(missing_ok=True)
        if isinstance(exc, (ConnectionError, TimeoutError, http.client.HTTPException)) or done:
            raise DownloadError(f"the download of {url} broke off after {done} bytes ({_reason(exc)}); run the "
                                "command again") from None
        raise DownloadError(f"cannot reach {host} ({_reason(exc)}); on a machine without a network, copy the "
                            "file here and run `edge-translator models add FILE`") from None
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    logger.info("downloaded %s (%d bytes)", url, done)
    return dest


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc
    return str(reason).splitlines()[0] if str(reason) else type(exc).__name__
