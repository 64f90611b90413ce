"""A persistent verdict cache in SQLite, safe for many threads and processes at once.

Keys are hashes of the whole judge request (model, sampling parameters, prompt, few-shot
examples and every image), so a hit means "this exact question was answered before" - unlike
the reference, which kept one global set of already-seen screenshots and skipped them for
every later task. Only definite verdicts are stored: an ``unknown`` (API down, unreadable
reply) is asked again next time.

Each thread (and each process after a fork) uses its own connection; the database runs in WAL
mode with a busy timeout, so concurrent writers wait instead of failing.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from devicerl.errors import DataError
from devicerl.judges.base import Label

_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    key TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    rationale TEXT NOT NULL,
    model TEXT NOT NULL,
    created REAL NOT NULL
)
"""


class VerdictCache:
    """``get(key) -> (label, rationale) | None`` and ``put(key, label, rationale, model)``."""

    def __init__(self, path: str | Path, timeout_s: float = 30.0) -> None:
        self.path = Path(path).expanduser()
        self.timeout_s = timeout_s
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = self._conn()
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise DataError(f"judge cache {self.path}: cannot open ({e})") from None

    def _conn(self) -> sqlite3.Connection:
        pid = os.getpid()
        conn = getattr(self._local, "conn", None)
        if conn is None or self._local.pid != pid:  # new thread, or a forked child
            conn = sqlite3.connect(
                self.path, timeout=self.timeout_s, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout_s * 1000)}")
            self._local.conn, self._local.pid = conn, pid
            with self._lock:
                self._all.append(conn)
        return conn

    def get(self, key: str) -> tuple[Label, str] | None:
        try:
            row = (
                self._conn()
                .execute("SELECT label, rationale FROM verdicts WHERE key = ?", (key,))
                .fetchone()
            )
        except sqlite3.DatabaseError as e:
            raise DataError(f"judge cache {self.path}: read failed ({e})") from None
        if row is None:
            return None
        try:
            return Label(row[0]), row[1]
        except ValueError:
            return None  # a row from a future version: treat as a miss

    def put(self, key: str, label: Label, rationale: str, model: str) -> None:
        if label is Label.UNKNOWN:
            return
        try:
            self._conn().execute(
                "INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)",
                (key, label.value, rationale, model, time.time()),
            )
        except sqlite3.DatabaseError as e:
            raise DataError(f"judge cache {self.path}: write failed ({e})") from None

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for c in conns:
            c.close()
        self._local = threading.local()
