"""Helpers for the pool tests: a device that owns a helper process, one that cannot be built,
and process-table checks."""

from __future__ import annotations

import re
import subprocess
import time

import psutil

from devicerl.envs.synthetic import SyntheticEnv, SyntheticOptions
from devicerl.errors import ConfigError
from devicerl.pool.workers.base import POOL_TAG_ENV

_MP_HELPERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


class HelperDevice(SyntheticEnv):
    """A synthetic device that starts a long-lived helper process, as a browser would."""

    def __init__(self, task=None, options: SyntheticOptions | None = None) -> None:
        super().__init__(task, options)
        self.helper = subprocess.Popen(["sleep", "1000"])


def refusing_device(task=None, options=None) -> SyntheticEnv:
    """A device whose construction fails in its worker (as a browser that cannot start)."""
    raise ConfigError("this device refuses to start")

    def _close(self) -> None:
        self.helper.kill()
        self.helper.wait()


def tagged_processes(tag: str) -> list[psutil.Process]:
    """Every process on the machine started by the pool with this tag (workers, helpers)."""
    found = []
    for p in psutil.process_iter():
        try:
            if p.environ().get(POOL_TAG_ENV) == tag and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def leftover_children(baseline: set[int]) -> list[str]:
    """Children of this process that are new since ``baseline`` and are not multiprocessing's
    own per-interpreter helpers (forkserver, resource tracker), plus any zombie child."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            zombie = p.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            continue
        if zombie or (p.pid not in baseline and not any(h in cmd for h in _MP_HELPERS)):
            out.append(f"{p.pid} {'zombie ' if zombie else ''}{cmd[:80]}")
    return out


def wait_clean(tag: str, baseline: set[int], timeout: float = 5.0) -> tuple[list, list]:
    """Poll until no tagged process and no new child remain (or ``timeout``)."""
    end = time.monotonic() + timeout
    while True:
        tagged, children = tagged_processes(tag), leftover_children(baseline)
        if (not tagged and not children) or time.monotonic() > end:
            return tagged, children
        time.sleep(0.1)


def children_now() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def episode_length(instruction: str) -> int:
    """The true length of a synthetic ``steps`` episode ("Take L steps")."""
    m = re.match(r"Take (\d+) steps", instruction)
    assert m, instruction
    return int(m.group(1))


def drive(pool, n_episodes: int, timeout_s: float = 10.0) -> list:
    """Tap the middle of every ready device until ``n_episodes`` trajectories came back."""
    from devicerl.actions import Action

    tap = Action.tap(0.5, 0.5)
    trajectories = []
    while len(trajectories) < n_episodes:
        ready = pool.recv(min_ready=1, timeout=timeout_s)
        assert ready, f"no device became ready within {timeout_s:.0f} s"
        trajectories += [r.trajectory for r in ready if r.trajectory is not None]
        ids = [r.env_id for r in ready if r.observation is not None]
        pool.send([tap] * len(ids), ids)
    return trajectories
