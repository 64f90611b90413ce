"""Graceful stop: the first SIGINT / SIGTERM asks a long job to stop at its next safe point.

A trainer polls `GracefulStop.requested` between updates, finishes the update in progress,
writes a checkpoint and the agent, closes its devices and returns; the command then exits with
128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM), as a shell expects. A second
signal while stopping raises `KeyboardInterrupt` at once (the previous checkpoint stays valid).
Handlers are installed only in the main thread and restored on exit.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequested(Exception):
    """Raised inside a phase that cannot pause (evaluation) to leave it early."""


class GracefulStop:
    """Context manager that turns SIGINT / SIGTERM into a stop request."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal number (0 when no stop was requested)."""
        return 128 + self.signum if self.signum is not None else 0

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Ask for a stop as the signal ``signum`` would (for callers without signals)."""
        if self.signum is None:
            self.signum = signum

    def check(self) -> None:
        """Raise `StopRequested` when a stop was asked for."""
        if self.requested:
            raise StopRequested(self.name)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            name = signal.Signals(signum).name
            log.warning("second %s: stopping now, without a checkpoint", name)
            self._restore()
            raise KeyboardInterrupt
        self.signum = signum
        log.warning(
            "%s: finishing the current update, then writing a checkpoint (again to stop now)",
            signal.Signals(signum).name,
        )

    def _restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def __enter__(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        self._restore()
