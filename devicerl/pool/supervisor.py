"""Supervision of pool workers: deadlines, restarts with backoff, budgets, process-tree kills.

The pool asks the `Supervisor` three questions: when does this command time out
(`deadline`), is this worker's heartbeat stale (`stale`), and after a failure, when may the
device restart, if at all (`on_failure`). Restarts back off exponentially while a device keeps
failing, each device has a restart budget over a sliding window (after which it is retired),
and a pool-wide rate limit keeps a broken host from being hammered with restarts.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections import deque
from dataclasses import dataclass

import psutil

from devicerl.errors import ConfigError


@dataclass
class SupervisorConfig:
    """Supervision knobs (seconds unless named otherwise; ``None`` disables a limit)."""

    #: A step that takes longer is treated as a hang: the worker is killed and restarted.
    step_timeout: float | None = 60.0
    #: Deadline for a reset, including building the device in a fresh worker.
    reset_timeout: float | None = 120.0
    #: Restarts allowed per device within `restart_window_s`; one more retires the device.
    max_restarts: int | None = 10
    restart_window_s: float = 600.0
    #: Delay before the 2nd consecutive restart of a device; doubles each time (1st is at once).
    backoff_s: float = 0.5
    backoff_max_s: float = 30.0
    #: Pool-wide restarts per minute; further restarts wait (``None``: 4 per device per minute).
    max_restarts_per_minute: int | None = None
    #: Worker heartbeat period, and the silence after which a worker counts as frozen.
    heartbeat_interval_s: float = 1.0
    heartbeat_timeout_s: float | None = 30.0
    #: How long `close()` waits for a device to shut down before killing its processes.
    close_timeout_s: float = 5.0

    def __post_init__(self) -> None:
        for name in ("step_timeout", "reset_timeout", "heartbeat_timeout_s"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ConfigError(f"supervision.{name} must be > 0 or None, got {value}")
        if self.max_restarts is not None and self.max_restarts < 0:
            raise ConfigError(f"supervision.max_restarts must be >= 0, got {self.max_restarts}")
        if self.heartbeat_interval_s <= 0:
            raise ConfigError("supervision.heartbeat_interval_s must be > 0")
        if self.backoff_s < 0 or self.backoff_max_s < 0:
            raise ConfigError("supervision.backoff_s and backoff_max_s must be >= 0")


class Supervisor:
    """Restart bookkeeping for ``num_envs`` devices (all times are `time.monotonic`)."""

    def __init__(self, config: SupervisorConfig, num_envs: int) -> None:
        self.config = config
        self.per_minute = config.max_restarts_per_minute or 4 * num_envs
        self._history: list[deque[float]] = [deque() for _ in range(num_envs)]
        self._consecutive = [0] * num_envs
        self._tat = 0.0
        self.restarts = 0

    def deadline(self, kind: str, now: float) -> float | None:
        limit = self.config.step_timeout if kind == "step" else self.config.reset_timeout
        return None if limit is None else now + limit

    def stale(self, last_heartbeat: float, now: float) -> bool:
        limit = self.config.heartbeat_timeout_s
        return limit is not None and now - last_heartbeat > limit

    def on_success(self, env_id: int) -> None:
        """The device worked again: the next failure restarts it at once."""
        self._consecutive[env_id] = 0

    def on_failure(self, env_id: int, now: float) -> float | None:
        """When device ``env_id`` may restart, or None when its restart budget is spent."""
        cfg = self.config
        history = self._history[env_id]
        while history and now - history[0] > cfg.restart_window_s:
            history.popleft()
        if cfg.max_restarts is not None and len(history) >= cfg.max_restarts:
            return None
        history.append(now)
        self._consecutive[env_id] += 1
        k = self._consecutive[env_id]
        delay = 0.0 if k == 1 else min(cfg.backoff_max_s, cfg.backoff_s * 2 ** (k - 2))
        self.restarts += 1
        return self._rate_limited(now + delay)

    def _rate_limited(self, when: float) -> float:
        """The earliest time >= ``when`` that keeps restarts under the pool-wide rate.

        A generic cell-rate limiter: bursts of up to `per_minute` restarts, then one every
        ``60 / per_minute`` seconds.
        """
        interval = 60.0 / self.per_minute
        at = max(when, self._tat - (60.0 - interval))
        self._tat = max(self._tat, at) + interval
        return at


def kill_process_tree(pid: int, create_time: float | None = None, timeout: float = 3.0) -> int:
    """SIGKILL a process, all its descendants and its process group; returns how many died.

    Workers lead their own process group, so helpers that outlived the worker (a browser
    whose parent was killed) are found through the group. The group is only signalled while
    the leader is the process we started (same create time); otherwise, also when the leader
    goes while we look (a dead worker's parent reaps it), its members are found by a scan and
    killed one by one, so a recycled pid is never hit.
    """
    victims: list[psutil.Process] = []
    group_signalled = False
    try:
        leader = psutil.Process(pid)
        if create_time is None or abs(leader.create_time() - create_time) < 0.01:
            victims.append(leader)
            victims.extend(leader.children(recursive=True))
            if os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGKILL)
                group_signalled = True
    except (psutil.Error, OSError):
        pass
    if not group_signalled:
        victims.extend(_group_members(pid, create_time))
    victims = list({p.pid: p for p in victims}.values())
    for p in victims:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return _wait_dead(victims, timeout)


def _wait_dead(procs: list[psutil.Process], timeout: float) -> int:
    """Wait until every process is gone or a zombie (its parent, or init, reaps it)."""
    end = time.monotonic() + timeout
    alive = list(procs)
    while alive:
        alive = [p for p in alive if _running(p)]
        if not alive or time.monotonic() > end:
            break
        time.sleep(0.005)
    return len(procs) - len(alive)


def _running(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _group_members(pgid: int, not_before: float | None) -> list[psutil.Process]:
    """Processes still in process group ``pgid`` that were started after its leader."""
    found = []
    for p in psutil.process_iter(["create_time"]):
        try:
            if os.getpgid(p.pid) != pgid:
                continue
        except OSError:
            continue
        created = p.info.get("create_time")
        if not_before is None or (created is not None and created >= not_before - 0.01):
            found.append(p)
    return found


def exit_cause(exitcode: int | None) -> str:
    """A short human cause for a worker's exit code."""
    if exitcode is None:
        return "worker lost (no exit code)"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "unknown"
        return f"worker died (signal {-exitcode}, {name})"
    return f"worker exited with code {exitcode}"
