"""The in-process serial backend: the same components in one process, for debugging."""

from __future__ import annotations

import contextlib
import queue
import threading
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
    """Runs the device in this process, each command on a thread of its own that
    `SerialBackend.poll` starts (one command of the backend at a time)."""

    def __init__(self, env_id: int, recipe: DeviceRecipe) -> None:
        super().__init__(env_id, recipe)
        self.host = DeviceHost(recipe)
        self.pending: Command | None = None
        self.running: Command | None = None
        self.started = self.submitted = 0.0
        self.closed = False
        self._thread: threading.Thread | None = None

    def submit(self, command: Command) -> None:
        self.pending, self.submitted = command, time.monotonic()

    def start(self, done: queue.Queue[tuple[SerialWorker, Reply]]) -> None:
        """Run the pending command on a new thread; its reply goes to ``done``."""
        command, self.pending = self.pending, None
        assert command is not None
        self.running, self.started = command, time.monotonic()

        def run() -> None:
            done.put((self, self.host.run(command)))

        self._thread = threading.Thread(target=run, name=f"device-{self.env_id}", daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """Stop the device: closed at once when idle; a command still running cannot be stopped
        inside this process, so its thread is left to finish (or hang) on its own, and the
        device is closed beside it without waiting."""
        self.pending, self.closed = None, True
        if self._thread is not None and self._thread.is_alive():
            threading.Thread(target=self.host.close, daemon=True).start()
        else:
            self.host.close()

    def close(self, timeout: float = 5.0) -> None:
        self.pending, self.closed = None, True
        if self._thread is not None:
            self._thread.join(timeout)
        closer = threading.Thread(target=self.host.close, daemon=True)
        closer.start()
        closer.join(timeout)


class SerialBackend(WorkerBackend):
    """In-process workers for debugging: one command at a time, in the order submitted, no
    isolation (a device that kills its process kills the caller).

    The configured timeouts hold as with the other backends, counted from when a command
    starts (it may wait for the commands before it): a command past its limit makes its
    worker answer ``lost`` with the cause, the pool restarts the device, and the next command
    starts."""

    can_interrupt = False  # the backend times its commands itself, from their start

    def __init__(self, step_timeout: float | None = None, reset_timeout: float | None = None):
        self.limits = {"step": step_timeout, "reset": reset_timeout}
        self.workers: list[SerialWorker] = []
        self._done: queue.Queue[tuple[SerialWorker, Reply]] = queue.Queue()
        self._running: SerialWorker | None = None

    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        worker = SerialWorker(env_id, recipe)
        self.workers.append(worker)
        return worker

    def poll(self, timeout: float | None) -> list[tuple[Worker, Reply]]:
        end = time.monotonic() + (timeout or 0.0)
        out: list[tuple[Worker, Reply]] = []
        while True:
            self._start_next()
            if self._running is None:
                if timeout and not out:
                    time.sleep(min(timeout, 0.05))
                return out
            worker = self._running
            assert worker.running is not None
            limit = self.limits.get(worker.running.kind)
            over = None if limit is None else worker.started + limit
            wait = time.monotonic() if out else end  # replies in hand: take only what is done
            wait = wait if over is None else min(wait, over)
            with contextlib.suppress(queue.Empty):
                done, reply = self._done.get(timeout=max(0.0, wait - time.monotonic()))
                if done is worker:
                    self._running = None
                if not done.closed:
                    done.last_heartbeat = time.monotonic()
                    out.append((done, reply))
                continue
            if over is not None and time.monotonic() >= over:
                kind = worker.running.kind
                out.append((worker, Reply("lost", error=f"{kind} timed out after {limit:.1f}s")))
                worker.kill()
                self._running = None
                continue
            return out

    def _start_next(self) -> None:
        """Start the oldest pending command when none runs."""
        self.workers = [w for w in self.workers if not w.closed]
        if self._running is not None and not self._running.closed:
            return
        self._running = None
        waiting = [w for w in self.workers if w.pending is not None]
        if waiting:
            self._running = min(waiting, key=lambda w: w.submitted)
            self._running.start(self._done)
