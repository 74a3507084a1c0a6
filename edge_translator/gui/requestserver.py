"""The running window's end of :mod:`.instance`: requests from later ``gui`` starts, as a signal.

The listening socket and each connection are non-blocking and watched by
``QSocketNotifier``, so the window never waits on a client. A connection sends one
line; the server answers ``ok`` once the request is queued and emits
:attr:`RequestServer.requested`. Anything else (another program on the socket, a line
over :data:`~.instance.MAX_REQUEST` bytes, a wrong token, a connection silent for
:data:`LINE_TIMEOUT_MS`) is closed without an answer.
"""

from __future__ import annotations

import logging
import socket

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Signal

from .instance import MAX_REQUEST, Channel, Request, listen

logger = logging.getLogger(__name__)

#: Milliseconds a connection may take to send its line.
LINE_TIMEOUT_MS = 5000


class _Connection(QObject):
    """One client: its socket, what it sent so far, and the notifier and timer watching it."""

    def __init__(self, sock: socket.socket, server: RequestServer):
        super().__init__(server)
        self.sock = sock
        self.server = server
        self.buffer = b""
        sock.setblocking(False)
        self.notifier = QSocketNotifier(sock.fileno(), QSocketNotifier.Type.Read, self)
        self.notifier.activated.connect(self._read)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.timeout.connect(self.close)
        self.timer.start(LINE_TIMEOUT_MS)

    def _read(self) -> None:
        try:
            chunk = self.sock.recv(MAX_REQUEST)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        self.buffer += chunk
        if b"\n" in self.buffer:
            request = Request.from_line(self.buffer.split(b"\n", 1)[0], self.server.token)
            if request is None:
                logger.warning("ignored a message on the window's channel that is not a request")
            else:
                try:
                    self.sock.setblocking(True)
                    self.sock.settimeout(1.0)
                    self.sock.sendall(b"ok\n")
                except OSError:
                    pass
                self.server.requested.emit(request)
            self.close()
        elif not chunk or len(self.buffer) > MAX_REQUEST:
            self.close()

    def close(self) -> None:
        self.notifier.setEnabled(False)
        self.timer.stop()
        self.sock.close()
        self.deleteLater()


class RequestServer(QObject):
    """Listens on the user's channel for requests from later ``gui`` starts."""

    requested = Signal(object)
    """A :class:`~.instance.Request` arrived."""

    def __init__(self, where: Channel, parent: QObject | None = None):
        """Listen on ``where``; the caller holds its lock.

        Raises:
            OSError: If the channel cannot be listened on.
        """
        super().__init__(parent)
        self.where = where
        self.sock, self.token = listen(where)
        self.sock.setblocking(False)
        self._notifier = QSocketNotifier(self.sock.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._accept)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                logger.warning("the window's channel: %s", exc)
                return
            _Connection(client, self)

    def close(self) -> None:
        """Stop listening and remove the socket (or port file)."""
        self._notifier.setEnabled(False)
        self.sock.close()
        try:
            self.where.path.unlink(missing_ok=True)
        except OSError:
            pass
