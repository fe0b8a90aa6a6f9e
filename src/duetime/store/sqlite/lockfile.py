"""One node per SQLite file: ``duetime serve`` holds an exclusive ``flock`` on ``<db>.lock``
for its whole life. SQLite itself would let a second node open the file and both would run the
engine — two promoters, two reapers, deliveries made twice. The kernel drops the lock when the
process dies, however it dies, so a crash never leaves a stale lock behind.

Other commands (``duetime migrate``, ``tenant create``) do not take it: they are short single
transactions SQLite serializes with the node's own.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from duetime.errors import ConfigError


class NodeLock:
    """The exclusive lock beside a SQLite database file; :meth:`acquire` or ``ConfigError``."""

    def __init__(self, db_path: Path) -> None:
        self.db_path = db_path
        self.path = db_path.with_name(db_path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> NodeLock:
        """Take the lock and write this process's id into the file. Raises ``ConfigError``
        naming the holder's pid when another process has it."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise ConfigError(
                f"the SQLite database {self.db_path} is in use by another duetime "
                f"serve (pid {holder}); one node per SQLite file — use PostgreSQL for several"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        """Drop the lock (idempotent). The file stays: removing it would race a new holder."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
