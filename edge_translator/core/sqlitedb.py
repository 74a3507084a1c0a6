"""How every SQLite file of ours is opened: WAL, ``synchronous=NORMAL`` and a busy timeout.

The translation memory, a document job's journal and the daemon's glossary store are each
one SQLite file that several threads, and for the memory several processes (the desktop
app, ``docs`` and ``serve --tm``), may write at once. So each connection:

- runs in WAL mode: readers never wait for a writer, and a writer appends to the ``-wal``
  file, so a power cut can never leave a half-written page in the database;
- uses ``synchronous=NORMAL``, the usual level with WAL: a commit is not fsynced, the WAL is
  at each checkpoint. A power cut may lose the last transactions, never corrupt the file
  (``kill -9`` of the process loses nothing committed: the data is in the OS already);
- waits up to :data:`BUSY_TIMEOUT` seconds for another writer instead of failing with
  "database is locked".

WAL needs shared memory beside the file, which some file systems (network shares, FUSE
mounts without locking) cannot give; SQLite then refuses it. The file is still used, in
the rollback-journal mode with ``synchronous=FULL`` (every commit fsynced; readers wait
for writers), and a warning says so once per file. Several machines must never share one
file over the network: SQLite's locking cannot be trusted there.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

logger = logging.getLogger(__name__)

#: Seconds a connection waits for another writer before "database is locked".
BUSY_TIMEOUT = 30.0

_warned: set[str] = set()
_warned_lock = threading.Lock()


def connect(path: str | Path, timeout: float = BUSY_TIMEOUT) -> sqlite3.Connection:
    """Open (or create) the SQLite file ``path`` the way the module docstring says.

    The connection is in autocommit mode (``isolation_level=None``: transactions are
    begun explicitly) and may be used from any thread (callers hold their own lock or keep
    one connection per thread).

    Raises:
        sqlite3.Error: If the file cannot be opened or is not a database.
    """
    db = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        db.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")  # the same as timeout=, stated
        mode = str(db.execute("PRAGMA journal_mode=WAL").fetchone()[0]).lower()
        if mode == "wal":
            db.execute("PRAGMA synchronous=NORMAL")
        else:
            db.execute("PRAGMA synchronous=FULL")
            with _warned_lock:
                first = str(path) not in _warned
                _warned.add(str(path))
            if first:
                logger.warning("%s: this file system cannot hold SQLite's WAL mode (a network share?), so it "
                               "runs with a %s journal and every commit fsynced; keep it on a local disk for "
                               "speed and safety", path, mode)
    except BaseException:
        db.close()
        raise
    return db
