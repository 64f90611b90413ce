"""Subprocess workers: one process per device, screenshots through shared memory.

Each worker process leads its own process group (so a device's helpers, e.g. a browser, can
be killed with it), marks itself with ``DEVICERL_WORKER=1`` and the pool's tag, and answers
commands over a pipe. Only small pickled messages travel on the pipe; screenshots are copied
into a per-worker `multiprocessing.shared_memory` segment and the parent copies them out. A
thread in the worker sends heartbeats (carrying the worker's monotonic clock), and kills the
worker's process group if the parent has gone away.
"""

from __future__ import annotations

import contextlib
import glob
import multiprocessing as mp
import os
import pickle
import selectors
import signal
import struct
import sys
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np
import psutil

from devicerl.errors import ConfigError
from devicerl.pool.supervisor import exit_cause, kill_process_tree
from devicerl.pool.workers.base import (
    Command,
    DeviceHost,
    DeviceRecipe,
    Reply,
    Worker,
    WorkerBackend,
    enter_worker_process,
)
from devicerl.pool.workers.base import error_reply as _error_reply

_HEARTBEAT = b"h"
CLOSE = b"c"


@dataclass(frozen=True)
class _WorkerConfig:
    env_id: int
    recipe: DeviceRecipe
    tag: str
    shm_prefix: str
    sys_path: tuple[str, ...]
    heartbeat_interval_s: float


class FrameWriter:
    """Worker side: copies frames into a shared-memory segment (a new one when they grow)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.shm: SharedMemory | None = None
        self.count = 0

    def put(self, frame: np.ndarray) -> tuple[str, tuple[int, ...]]:
        if self.shm is None or self.shm.size < frame.nbytes:
            if self.shm is not None:
                self.shm.close()  # the parent unlinks it when it sees the new name
            self.count += 1
            self.shm = SharedMemory(f"{self.prefix}{self.count}", create=True, size=frame.nbytes)
        np.copyto(np.ndarray(frame.shape, np.uint8, self.shm.buf), frame, casting="no")
        return self.shm.name, frame.shape

    def close(self) -> None:
        if self.shm is not None:
            self.shm.close()


class FrameReader:
    """Parent side: copies frames out of a worker's segment and owns (unlinks) segments."""

    def __init__(self) -> None:
        self.shm: SharedMemory | None = None

    def get(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        if self.shm is None or self.shm.name != name:
            self.release()
            self.shm = SharedMemory(name)
        return np.ndarray(shape, np.uint8, self.shm.buf).copy()

    def release(self) -> None:
        shm, self.shm = self.shm, None
        if shm is not None:
            shm.close()
            with contextlib.suppress(FileNotFoundError):
                shm.unlink()


def _heartbeat(
    conn: Connection,
    lock: threading.Lock,
    stop: threading.Event,
    period: float,
    on_lost: Callable[[], None],
) -> None:
    while not stop.wait(period):
        try:
            with lock:
                conn.send_bytes(_HEARTBEAT + struct.pack("d", time.monotonic()))
        except OSError:
            on_lost()
            return


def kill_own_group() -> None:
    with contextlib.suppress(OSError):
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
    os._exit(1)


def serve_commands(
    conn: Connection,
    host: DeviceHost,
    frames: FrameWriter,
    heartbeat_interval_s: float,
    on_lost: Callable[[], None],
) -> None:
    """Answer the commands arriving on ``conn`` with ``host``'s device until the other end
    closes it or says close, sending heartbeats meanwhile (``on_lost``: what to do when the
    other end is gone while a heartbeat is sent)."""
    lock, stop = threading.Lock(), threading.Event()
    threading.Thread(
        target=_heartbeat, args=(conn, lock, stop, heartbeat_interval_s, on_lost), daemon=True
    ).start()
    try:
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                break
            if data == CLOSE:
                break
            _send(conn, lock, frames, host.run(pickle.loads(data)))
    finally:
        stop.set()


def _worker_main(conn: Connection, cfg: _WorkerConfig) -> None:
    """Entry point of a worker process: a parent gone takes the device's helpers down."""
    enter_worker_process(cfg.tag)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    signal.signal(signal.SIGTERM, lambda *_: kill_own_group())
    sys.path[:] = list(cfg.sys_path)
    frames = FrameWriter(cfg.shm_prefix)
    host = DeviceHost(cfg.recipe)
    try:
        serve_commands(conn, host, frames, cfg.heartbeat_interval_s, kill_own_group)
    finally:
        host.close()
        frames.close()


def _send(conn: Connection, lock: threading.Lock, frames: FrameWriter, reply: Reply) -> None:
    meta = None
    obs = reply.shown
    if obs is not None and obs.screenshot is not None:
        meta = frames.put(obs.screenshot)
        obs.screenshot = None
    try:
        data = pickle.dumps((reply, meta), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as e:
        data = pickle.dumps((_error_reply(reply.kind, e), None))
    with lock:
        conn.send_bytes(data)


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """Start processes without re-running the caller's ``__main__`` in them.

    spawn/forkserver children normally import the main script first: a script without an
    ``if __name__ == "__main__"`` guard would start pools recursively, and one that imports a
    large library would pay for it in every worker. Workers need nothing from ``__main__``
    (device factories are resolved by module path), so it is hidden while a worker starts.
    """
    main = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = main


class ConnectionWorker(Worker):
    """Parent-side handle of a device process answering on a connection (heartbeats,
    pickled replies, screenshots through the shared-memory segments named ``shm_prefix*``):
    what a started worker process and an attached fleet device share."""

    def __init__(
        self,
        backend: SelectorBackend,
        env_id: int,
        recipe: DeviceRecipe,
        conn: Connection,
        pid: int | None,
        shm_prefix: str,
    ) -> None:
        super().__init__(env_id, recipe)
        self.backend, self.conn, self._pid, self.shm_prefix = backend, conn, pid, shm_prefix
        try:
            self.create_time: float | None = psutil.Process(pid).create_time() if pid else None
        except psutil.Error:
            self.create_time = None
        self.frames = FrameReader()
        self.dead = self.closing = False
        backend.selector.register(self.conn, selectors.EVENT_READ, self)

    @property
    def pid(self) -> int | None:
        return self._pid

    def submit(self, command: Command) -> None:
        with contextlib.suppress(OSError):  # a dead worker is reported by poll() (EOF)
            self.conn.send_bytes(pickle.dumps(command, protocol=pickle.HIGHEST_PROTOCOL))

    def receive(self) -> Reply | None:
        """Read one message: a heartbeat updates `last_heartbeat`; a reply is returned. (The
        selector is level-triggered, so anything still buffered is reported again.)"""
        try:
            data = self.conn.recv_bytes()
        except (EOFError, OSError):
            return self._lost()
        if data[:1] == _HEARTBEAT:
            sent = struct.unpack("d", data[1:9])[0]
            self.last_heartbeat = max(self.last_heartbeat, sent)
            return None
        self.last_heartbeat = time.monotonic()
        return self._decode(data)

    def _decode(self, data: bytes) -> Reply:
        reply, meta = pickle.loads(data)
        obs = reply.shown
        if meta is not None and obs is not None:
            obs.screenshot = self.frames.get(*meta)
        return reply

    def _lost(self) -> Reply:
        self._detach()
        return Reply("lost", error="its connection closed")

    def _detach(self) -> None:
        if not self.dead:
            self.dead = True
            with contextlib.suppress(KeyError, ValueError):
                self.backend.selector.unregister(self.conn)

    def kill(self) -> None:
        self._detach()
        if self._pid is not None:
            kill_process_tree(self._pid, self.create_time)
        self._cleanup()

    def request_close(self) -> None:
        if not self.dead and not self.closing:
            self.closing = True
            with contextlib.suppress(OSError):
                self.conn.send_bytes(CLOSE)

    def _cleanup(self) -> None:
        self.conn.close()
        self.frames.release()
        for path in glob.glob(f"/dev/shm/{self.shm_prefix}*"):  # segments we never saw
            with contextlib.suppress(OSError):
                SharedMemory(os.path.basename(path)).unlink()


class SubprocessWorker(ConnectionWorker):
    """Parent-side handle of one worker process it starts."""

    def __init__(self, backend: SubprocessBackend, env_id: int, recipe: DeviceRecipe) -> None:
        backend.generation += 1
        cfg = _WorkerConfig(
            env_id,
            recipe,
            backend.tag,
            f"drl_{backend.tag[:8]}_{env_id}_{backend.generation}_",
            tuple(sys.path),
            backend.heartbeat_interval_s,
        )
        conn, child = backend.ctx.Pipe()
        self.process = backend.ctx.Process(
            target=_worker_main, args=(child, cfg), name=f"devicerl-worker-{env_id}", daemon=True
        )
        try:
            with main_module_hidden():
                self.process.start()
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            conn.close()
            raise ConfigError(
                f"device {recipe.label!r} cannot be sent to a worker process ({e}); register "
                "its factory as a 'module:attr' string or a module-level callable"
            ) from None
        finally:
            child.close()
        super().__init__(backend, env_id, recipe, conn, self.process.pid, cfg.shm_prefix)

    def _lost(self) -> Reply:
        self._detach()
        self.process.join(timeout=1.0)
        return Reply("lost", error=exit_cause(self.process.exitcode))

    def kill(self) -> None:
        super().kill()
        self.process.join(timeout=2.0)
        with contextlib.suppress(ValueError):
            self.process.close()

    def close(self, timeout: float = 5.0) -> None:
        self.request_close()
        if not self.dead:
            self.process.join(timeout)
        self.kill()


class SelectorBackend(WorkerBackend):
    """Workers on connections, waited on together with one selector."""

    sends_heartbeats = True

    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()

    def poll(self, timeout: float | None) -> list[tuple[Worker, Reply]]:
        if not self.selector.get_map():
            if timeout:
                time.sleep(timeout)
            return []
        out: list[tuple[Worker, Reply]] = []
        for key, _ in self.selector.select(timeout):
            worker: ConnectionWorker = key.data
            reply = worker.receive()
            if reply is not None:
                out.append((worker, reply))
        return out

    def close(self) -> None:
        self.selector.close()


class SubprocessBackend(SelectorBackend):
    """Workers as local processes.

    ``start_method``: forkserver (default: fast starts from a clean, preloaded server), spawn
    or fork.
    """

    def __init__(
        self,
        start_method: str = "forkserver",
        heartbeat_interval_s: float = 1.0,
    ) -> None:
        if start_method not in mp.get_all_start_methods():
            raise ConfigError(
                f"start method {start_method!r} is not available here; "
                f"use one of {mp.get_all_start_methods()}"
            )
        super().__init__()
        self.ctx: Any = mp.get_context(start_method)
        if start_method == "forkserver":
            self.ctx.set_forkserver_preload(["devicerl.pool.workers.subprocess", "devicerl.envs"])
        self.heartbeat_interval_s = heartbeat_interval_s
        self.tag = uuid.uuid4().hex
        self.generation = 0

    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        return SubprocessWorker(self, env_id, recipe)
