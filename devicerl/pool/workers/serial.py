"""The in-process serial backend: the same components in one process, for debugging."""

from __future__ import annotations

import time

from devicerl.pool.workers.base import (
    Command,
    DeviceHost,
    DeviceRecipe,
    Reply,
    Worker,
    WorkerBackend,
)


class SerialWorker(Worker):
    """Runs the device in this process; commands execute during `SerialBackend.poll`."""

    def __init__(self, env_id: int, recipe: DeviceRecipe) -> None:
        super().__init__(env_id, recipe)
        self.host = DeviceHost(recipe)
        self.pending: Command | None = None
        self.closed = False

    def submit(self, command: Command) -> None:
        self.pending = command

    def run_pending(self) -> Reply:
        command, self.pending = self.pending, None
        assert command is not None
        return self.host.run(command)

    def kill(self) -> None:
        self.pending = None
        self.close()

    def close(self, timeout: float = 5.0) -> None:
        self.closed = True
        self.host.close()


class SerialBackend(WorkerBackend):
    """In-process workers for debugging: one command at a time, no timeouts, no isolation.

    A hung device hangs the caller, and a device that kills its process kills the caller.
    """

    can_interrupt = False

    def __init__(self) -> None:
        self.workers: list[SerialWorker] = []

    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        worker = SerialWorker(env_id, recipe)
        self.workers.append(worker)
        return worker

    def poll(self, timeout: float | None) -> list[tuple[Worker, Reply]]:
        self.workers = [w for w in self.workers if not w.closed]
        busy = [w for w in self.workers if w.pending is not None]
        if not busy:
            if timeout:
                time.sleep(min(timeout, 0.05))
            return []
        out: list[tuple[Worker, Reply]] = []
        for w in busy:
            out.append((w, w.run_pending()))
            w.last_heartbeat = time.monotonic()
        return out
