"""Ray workers: one Ray actor per device, anywhere in a Ray cluster.

Each actor builds its device from the same `DeviceRecipe` and runs commands with the same
`execute` as the other backends; replies (screenshots included) travel through Ray's object
store. A dead actor (its process killed, its node lost) surfaces as an error on its pending
call, which the pool turns into a truncated episode and a restart. On this machine's
processes (same host) a kill also takes the actor's process tree. ``ray`` is imported lazily.

Place actors with ``actor_options`` (e.g. ``{"resources": {"phone_host": 1}}``) and join an
existing cluster with ``address``; the pool itself is the same for one laptop or many hosts.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from typing import Any

import numpy as np
import psutil

from devicerl.errors import ConfigError
from devicerl.pool.supervisor import kill_process_tree
from devicerl.pool.workers.base import (
    Command,
    DeviceHost,
    DeviceRecipe,
    Reply,
    Worker,
    WorkerBackend,
    enter_worker_process,
)


def _host_id() -> tuple[str, float]:
    """Identifies a machine (hostname and boot time), to tell whether a pid is local."""
    return socket.gethostname(), round(psutil.boot_time())


class EnvActor:
    """The actor body (wrapped with ``ray.remote`` by `RayBackend`)."""

    def __init__(self, recipe: DeviceRecipe, tag: str) -> None:
        enter_worker_process(tag)
        self.host = DeviceHost(recipe)

    def where(self) -> tuple[int, float, tuple[str, float]]:
        pid = os.getpid()
        return pid, psutil.Process(pid).create_time(), _host_id()

    def run(self, command: Command) -> Reply:
        return self.host.run(command)

    def close(self) -> None:
        self.host.close()


class RayWorker(Worker):
    """Parent-side handle of one device actor."""

    def __init__(self, backend: RayBackend, env_id: int, recipe: DeviceRecipe) -> None:
        super().__init__(env_id, recipe)
        self.backend = backend
        self.actor = backend.actor_cls.remote(recipe, backend.tag)
        self._where_ref = self.actor.where.remote()
        self._where: tuple[int, float, tuple[str, float]] | None = None
        self._close_ref: Any = None

    def _locate(self, timeout: float = 0.0) -> tuple[int, float, tuple[str, float]] | None:
        if self._where is None:
            ray = self.backend.ray
            ready, _ = ray.wait([self._where_ref], timeout=timeout)
            if ready:
                with contextlib.suppress(Exception):
                    self._where = ray.get(ready[0])
        return self._where

    @property
    def pid(self) -> int | None:
        where = self._locate(timeout=0.0)
        return where[0] if where and where[2] == self.backend.host else None

    def submit(self, command: Command) -> None:
        self.backend.pending[self.actor.run.remote(command)] = self

    def kill(self) -> None:
        self.backend.forget(self)
        where = self._locate(timeout=0.0)
        if where is not None and where[2] == self.backend.host:
            kill_process_tree(where[0], where[1])
        with contextlib.suppress(Exception):
            self.backend.ray.kill(self.actor, no_restart=True)

    def request_close(self) -> None:
        self.backend.forget(self)
        self._close_ref = self.actor.close.remote()

    def close(self, timeout: float = 5.0) -> None:
        ray = self.backend.ray
        ref = self._close_ref or self.actor.close.remote()
        try:
            done, _ = ray.wait([ref], timeout=timeout)
        except Exception:
            done = []
        if not done:
            self.kill()
            return
        self.backend.forget(self)
        with contextlib.suppress(Exception):
            ray.kill(self.actor, no_restart=True)


class RayBackend(WorkerBackend):
    """Devices as Ray actors.

    ``address``: a cluster to join (None starts a local one unless Ray is already running);
    ``num_cpus``: CPUs reserved per actor (fractional, so many devices fit a few cores);
    ``actor_options``: more ``ray.remote`` options (resources, scheduling strategy);
    ``init_kwargs``: extra ``ray.init`` arguments. A cluster the pool started is shut down by
    `close`.
    """

    def __init__(
        self,
        address: str | None = None,
        num_cpus: float = 0.1,
        actor_options: dict[str, Any] | None = None,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        try:
            import ray
        except ImportError:
            raise ConfigError("worker='ray' needs Ray: pip install 'devicerl[ray]'") from None
        self.ray = ray
        self.owns_cluster = not ray.is_initialized()
        if self.owns_cluster:
            kwargs = {"include_dashboard": False, "log_to_driver": False, **(init_kwargs or {})}
            # "local": a cluster of our own, never a stray one left on this machine
            ray.init(address=address or "local", **kwargs)
        options = {"num_cpus": num_cpus, "max_restarts": 0, **(actor_options or {})}
        self.actor_cls = ray.remote(EnvActor).options(**options)
        self.pending: dict[Any, RayWorker] = {}
        self.host = _host_id()
        self.tag = uuid.uuid4().hex

    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        return RayWorker(self, env_id, recipe)

    def forget(self, worker: RayWorker) -> None:
        for ref in [r for r, w in self.pending.items() if w is worker]:
            del self.pending[ref]

    def poll(self, timeout: float | None) -> list[tuple[Worker, Reply]]:
        ray = self.ray
        if not self.pending:
            if timeout:
                time.sleep(timeout)
            return []
        refs = list(self.pending)
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready:  # then everything else that is already done
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        out: list[tuple[Worker, Reply]] = []
        for ref in ready:
            worker = self.pending.pop(ref)
            out.append((worker, self._get(ref)))
            worker.last_heartbeat = time.monotonic()
        return out

    def _get(self, ref: Any) -> Reply:
        try:
            reply: Reply = self.ray.get(ref)
        except Exception as e:  # the actor died (process killed, node lost)
            first = (str(e).strip().splitlines() or [""])[0][:200]
            return Reply("lost", error=f"worker died ({type(e).__name__}: {first})")
        obs = reply.shown
        if obs is not None and obs.screenshot is not None:  # release the object store copy
            obs.screenshot = np.array(obs.screenshot)
        return reply

    def close(self) -> None:
        self.pending.clear()
        if self.owns_cluster and self.ray.is_initialized():
            self.ray.shutdown()
