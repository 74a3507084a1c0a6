"""One desktop window per user: a second ``edge-translator gui`` hands its request over and exits.

The first app to start holds a lock file (Qt's ``QLockFile``: a crashed app's pid no
longer holds it) and listens on a channel of the user's own; a later start finds the lock
taken and sends its :class:`Request` as one JSON line, and the window answers ``ok`` as
soon as it has queued it. Both ends are plain sockets, so the sender needs no Qt and no
display: ``gui --clipboard`` bound to a key hands over in the time Python takes to start
(and the desktop build carries no QtNetwork).

- Unix: a Unix socket in ``$XDG_RUNTIME_DIR`` (a folder only the user may enter), else in
  the temporary folder with a per-uid name, the socket file itself mode 0600.
- Windows (no Unix sockets in Python there): a TCP socket on 127.0.0.1 whose port and a
  random token the window writes to a file in the user's own local app-data folder; a
  request must carry the token.

A window that holds the lock but does not answer within the wait (it hangs, or is still
starting) makes the sender fail in one line rather than start a second window.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

#: What a request may translate: nothing (just show the window), the clipboard, or the X11
#: PRIMARY selection (what is selected, without a copy).
SOURCES = ("show", "clipboard", "selection")
#: Bytes of one request line, at most.
MAX_REQUEST = 4096


@dataclass(frozen=True)
class Request:
    """What a ``gui`` start asks of the window."""

    source: str = "show"
    """One of :data:`SOURCES`."""
    copy: bool = False
    """Put the translation on the clipboard when it is done (``--copy``)."""

    @classmethod
    def asked(cls, clipboard: bool, selection: bool, copy: bool) -> Request:
        """The request of ``gui``'s flags: ``--clipboard``, ``--selection``, ``--copy``."""
        return cls("clipboard" if clipboard else "selection" if selection else "show", copy)

    def to_line(self, token: str = "") -> bytes:
        return json.dumps({"source": self.source, "copy": self.copy, "token": token}).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes, token: str = "") -> Request | None:
        """The request a line holds, ``None`` for anything else (another program, a bad line,
        a wrong token)."""
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if (not isinstance(data, dict) or data.get("source") not in SOURCES or not isinstance(data.get("copy"), bool)
                or not secrets.compare_digest(str(data.get("token", "")), token)):
            return None
        return cls(data["source"], data["copy"])


@dataclass(frozen=True)
class Channel:
    """Where this user's window listens."""

    path: Path
    """The Unix socket, or (TCP) the file holding ``port token``."""
    tcp: bool = False

    @property
    def lock(self) -> Path:
        """The lock file the running window holds."""
        return self.path.with_name(self.path.name + ".lock")


def channel() -> Channel:
    """This user's channel (see the module docstring)."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "edge-translator"
        return Channel(base / "gui.port", tcp=True)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_dir():
        return Channel(Path(runtime) / "edge-translator-gui")
    return Channel(Path(tempfile.gettempdir()) / f"edge-translator-gui-{os.getuid()}")


def claim(where: Channel):
    """Take the lock if no window holds it.

    Returns:
        The held ``QLockFile`` (keep it for the app's lifetime), or ``None`` when a
        running window holds it.
    """
    from PySide6.QtCore import QLockFile

    where.lock.parent.mkdir(parents=True, exist_ok=True)
    lock = QLockFile(str(where.lock))
    lock.setStaleLockTime(0)  # only a dead owner makes it stale, never its age
    return lock if lock.tryLock(0) else None


def hand_over(where: Channel, request: Request, wait: float = 5.0) -> bool:
    """Send ``request`` to the running window, trying for up to ``wait`` seconds (it may
    still be starting). Returns whether it answered ``ok``."""
    deadline = time.monotonic() + wait
    while True:
        try:
            if _send(where, request, max(deadline - time.monotonic(), 0.1)) == b"ok":
                return True
        except (OSError, ValueError) as exc:
            logger.debug("hand-over: %s", exc)
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def hand_over_now(where: Channel, request: Request, wait: float = 2.0) -> bool:
    """One try at handing ``request`` to a window that is listening now, before anything of
    Qt is imported: the common case of a shortcut bound to ``gui --selection``. ``False``
    when no window listens, or it does not answer ``ok`` within ``wait`` seconds: the caller
    then takes the lock's path (:func:`claim`, :func:`hand_over`), which starts a window or
    says which one does not answer."""
    try:
        return _send(where, request, wait) == b"ok"
    except (OSError, ValueError) as exc:
        logger.debug("hand-over before Qt: %s", exc)
        return False


def _send(where: Channel, request: Request, timeout: float) -> bytes:
    token = ""
    if where.tcp:
        port, token = where.path.read_text(encoding="ascii").split()
        sock = socket.create_connection(("127.0.0.1", int(port)), timeout=timeout)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(str(where.path))
        except OSError:
            sock.close()
            raise
    with sock:
        sock.sendall(request.to_line(token))
        reply = b""
        while not reply.endswith(b"\n") and len(reply) < 64:
            chunk = sock.recv(64)
            if not chunk:
                break
            reply += chunk
        return reply.strip()


def listen(where: Channel) -> tuple[socket.socket, str]:
    """The window's listening socket on ``where`` (the caller holds the lock) and the
    token requests must carry (empty for a Unix socket).

    Raises:
        OSError: If it cannot listen.
    """
    if where.tcp:
        sock = socket.create_server(("127.0.0.1", 0))
        token = secrets.token_hex(16)
        where.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = where.path.with_name(where.path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(f"{sock.getsockname()[1]} {token}\n")
        os.replace(temporary, where.path)
        return sock, token
    where.path.unlink(missing_ok=True)  # a crashed window's socket: the lock says it is dead
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        old = os.umask(0o177)
        try:
            sock.bind(str(where.path))
        finally:
            os.umask(old)
        sock.listen(8)
    except OSError:
        sock.close()
        raise
    return sock, ""
