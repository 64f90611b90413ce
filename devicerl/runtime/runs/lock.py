"""One process per run folder: a lock file held for the run's whole life.

The lock is a POSIX record lock (``fcntl.lockf``) on ``RUN/.lock``. The kernel drops it when the
holder dies, however it dies (``kill -9`` included), so a lock left by a dead process is stale
by construction: the next run takes it and says so. Record locks belong to the process, not to
its file descriptors' copies, so device workers forked by the trainer never keep a run locked
after the trainer is gone. The file holds the holder's pid, host and command for the error a
second process gets.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from devicerl.errors import RunError
from devicerl.secrets import scrub

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"

#: Folders locked by this process: record locks do not exclude their own process, so a second
#: `RunLock` on the same folder in one process is refused here.
_HELD: set[str] = set()


class RunLock:
    """An exclusive lock on a run folder (`acquire` / `release`, or a context manager)."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        """Take the lock or raise `RunError` naming the process that holds it."""
        if self._fd is not None:
            return self
        key = os.path.realpath(self.folder)
        if key in _HELD:
            raise RunError(f"run folder {self.folder} is in use by this process")
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _describe(_read_holder(fd))
            os.close(fd)
            raise RunError(
                f"run folder {self.folder} is in use by {holder}; wait for it to finish or stop "
                "it (Ctrl-C / kill -TERM writes a checkpoint), then --resume"
            ) from None
        previous = _read_holder(fd)
        if previous and previous.get("pid") != os.getpid():
            log.warning(
                "run folder %s: taking over the stale lock of %s (that process is gone)",
                self.folder,
                _describe(previous),
            )
        _write_holder(fd)
        self._fd = fd
        _HELD.add(key)
        return self

    def release(self) -> None:
        """Drop the lock (the file stays; an unlocked lock file means nobody holds the run)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        _HELD.discard(os.path.realpath(self.folder))
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing drops the record lock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _read_holder(fd: int) -> dict[str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = os.read(fd, 4096)
        return json.loads(data) if data.strip() else {}
    except (OSError, ValueError):
        return {}


def _write_holder(fd: int) -> None:
    holder = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": scrub(" ".join(["devicerl", *sys.argv[1:]]))[:300],
    }
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, json.dumps(holder).encode())
    os.fsync(fd)


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    where = f" on {holder['host']}" if holder.get("host") else ""
    since = f" since {holder['started']}" if holder.get("started") else ""
    return f"process {holder.get('pid', '?')}{where}{since} ({holder.get('command', '?')})"
