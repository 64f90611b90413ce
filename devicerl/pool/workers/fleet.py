"""A warm fleet: devices that outlive runs, and the pool backend that attaches to them.

`Fleet` (``devicerl fleet up``) builds N devices from one recipe, each in its own process,
opens every warm-up task once on each (its pages loaded, its renderer and caches warm) and
keeps them until stopped. A run whose pool uses `FleetBackend` (``env.worker: fleet``) attaches
to them instead of starting devices: no browser launch and no cold page in the run's time.
Between runs a device keeps its state (pages, caches); each run resets every episode as usual.

Transport: one Unix socket per device (in a short folder of their own, `FleetFolder.sockets`,
mode 0700), authenticated with a random key kept in the fleet's folder
(``$XDG_CACHE_HOME/devicerl/fleets/NAME``, default ``~/.cache``; folder 0700, key 0600;
multiprocessing's HMAC challenge): only the folder's owner can drive the devices, and a
device unpickles only what an authenticated peer sent. The messages after that are those of a
subprocess worker (`devicerl.pool.workers.subprocess`): commands, replies, heartbeats and
screenshots through shared memory. A device serves one run at a time; another run asking for
it is refused in one line.

Supervision stays the run's: its pool watches heartbeats and deadlines as for its own workers.
Restarting a device kills its process; the fleet starts a fresh one (cold, not warmed) in its
place and the pool's worker waits for it (at most the reset timeout).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import multiprocessing as mp
import os
import re
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import (
    Connection,
    Listener,
    answer_challenge,
    deliver_challenge,
    wait,
)
from pathlib import Path
from typing import Any

import psutil

from devicerl.errors import ConfigError
from devicerl.pool.supervisor import kill_process_tree
from devicerl.pool.workers.base import (
    Command,
    DeviceHost,
    DeviceRecipe,
    Reply,
    Worker,
    enter_worker_process,
)
from devicerl.pool.workers.subprocess import (
    ConnectionWorker,
    FrameWriter,
    SelectorBackend,
    kill_own_group,
    main_module_hidden,
    serve_commands,
)
from devicerl.tasks.base import Task

log = logging.getLogger(__name__)

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
#: How long a run waits for a device's answer when it attaches (seconds).
ATTACH_TIMEOUT_S = 10.0


def fingerprint(recipe: DeviceRecipe) -> str:
    """What a device is, as text both sides can compare: its factory and its arguments."""
    factory = recipe.factory
    if not isinstance(factory, str):
        factory = f"{getattr(factory, '__module__', '')}:{getattr(factory, '__qualname__', '')}"
    text = re.sub(r" at 0x[0-9a-f]+", "", f"{factory} {recipe.kwargs!r}")
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def fleets_root() -> Path:
    """The folder holding every fleet's folder."""
    return Path(os.environ.get("XDG_CACHE_HOME") or "~/.cache").expanduser() / "devicerl" / "fleets"


@dataclass(frozen=True)
class FleetFolder:
    """Where a named fleet keeps its sockets, key and description (under ``root``, resolved
    where the folder is named: a device process gets it whole)."""

    name: str
    root: Path = field(default_factory=fleets_root)

    def __post_init__(self) -> None:
        if not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"fleet name {self.name[:60]!r}: use 1-40 letters, digits, '-' or '_'"
            )

    @property
    def path(self) -> Path:
        return self.root / self.name

    @property
    def sockets(self) -> Path:
        """The folder of the devices' sockets: short, since a Unix socket's path must fit in
        about 100 bytes (``/tmp/devicerl-fleet-UID-HASH``, the hash of `path`; mode 0700)."""
        digest = hashlib.sha256(str(self.path).encode()).hexdigest()[:12]
        return Path("/tmp") / f"devicerl-fleet-{os.getuid()}-{digest}"

    def socket(self, index: int) -> Path:
        return self.sockets / f"device-{index}.sock"

    @property
    def key_file(self) -> Path:
        return self.path / "key"

    @property
    def info_file(self) -> Path:
        return self.path / "fleet.json"

    def create(self) -> bytes:
        """Fresh folders (mode 0700) with a new key (mode 0600); returns the key."""
        if self.sockets.is_symlink() or (
            self.sockets.exists() and self.sockets.stat().st_uid != os.getuid()
        ):
            raise ConfigError(f"{self.sockets} is not this user's folder: remove it first")
        self.remove()
        self.path.mkdir(parents=True, mode=0o700)
        self.sockets.mkdir(mode=0o700)
        key = secrets.token_bytes(32)
        fd = os.open(self.key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        return key

    def info(self) -> dict[str, Any]:
        """The running fleet's description; a one-line error when none is up under the name."""
        hint = f"start one with: devicerl fleet up --config CONFIG --name {self.name}"
        try:
            info = json.loads(self.info_file.read_text())
        except (OSError, ValueError):
            raise ConfigError(f"no fleet named {self.name!r} is up; {hint}") from None
        if not psutil.pid_exists(int(info.get("pid", -1))):
            raise ConfigError(f"fleet {self.name!r} is not running (it left its folder); {hint}")
        return info

    def key(self) -> bytes:
        return self.key_file.read_bytes()

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        shutil.rmtree(self.sockets, ignore_errors=True)


# -- the device side -------------------------------------------------------------------------
@dataclass(frozen=True)
class _DeviceConfig:
    folder: FleetFolder
    index: int
    recipe: DeviceRecipe
    warm: tuple[Task, ...]
    key: bytes
    tag: str
    heartbeat_interval_s: float


def _watch_parent(parent: int) -> None:
    """The fleet's process gone, the device goes too (with its browser). (The device's parent
    process is multiprocessing's fork server, hence the fleet's pid.)"""
    try:
        fleet = psutil.Process(parent)
        while fleet.is_running() and fleet.status() != psutil.STATUS_ZOMBIE:
            time.sleep(1.0)
    except psutil.Error:
        pass
    kill_own_group()


def _warm(host: DeviceHost, tasks: Sequence[Task], index: int) -> None:
    for i, task in enumerate(tasks):
        reply = host.run(Command("reset", task, seed=i))
        if reply.error:
            if reply.fatal:
                print(f"fleet device {index}: {reply.error}", file=sys.stderr, flush=True)
                sys.exit(2)
            log.warning("fleet device %d: warming %s: %s", index, task.name, reply.error)


def _device_main(cfg: _DeviceConfig, parent: int, warm: bool) -> None:
    """Entry point of a fleet device: build, warm, then serve one run after another."""
    enter_worker_process(cfg.tag)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the fleet's process handles Ctrl-C
    signal.signal(signal.SIGTERM, lambda *_: kill_own_group())
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    host = DeviceHost(cfg.recipe)
    t0 = time.perf_counter()
    if warm:
        _warm(host, cfg.warm, cfg.index)
    warm_s = time.perf_counter() - t0
    path = cfg.folder.socket(cfg.index)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    listener = Listener(str(path), "AF_UNIX", authkey=cfg.key)
    print(f"fleet device {cfg.index} ready (warm-up {warm_s:.1f}s)", file=sys.stderr, flush=True)
    hello = {"pid": os.getpid(), "fingerprint": fingerprint(cfg.recipe)}
    sessions = 0
    while True:
        try:
            conn = listener.accept()
        except (OSError, EOFError, mp.AuthenticationError) as e:
            log.warning("fleet device %d: refused a connection: %s", cfg.index, e)
            continue
        sessions += 1
        prefix = f"drl_fl{cfg.tag[:6]}_{cfg.index}_{sessions}_"
        frames = FrameWriter(prefix)
        try:
            conn.send_bytes(json.dumps({**hello, "shm_prefix": prefix}).encode())
            serve_commands(conn, host, frames, cfg.heartbeat_interval_s, on_lost=lambda: None)
        except OSError:  # the run went away mid-answer: wait for the next one
            pass
        finally:
            frames.close()
            conn.close()


class Fleet:
    """N devices built from ``recipe`` in processes of their own, each warmed on ``warm``
    (one reset per task), served on the fleet folder's sockets until `stop`; a device whose
    process dies is started again (not warmed)."""

    def __init__(
        self,
        name: str,
        recipe: DeviceRecipe,
        devices: int,
        warm: Sequence[Task] = (),
        heartbeat_interval_s: float = 1.0,
    ) -> None:
        if devices < 1:
            raise ConfigError(f"a fleet needs at least one device, got {devices}")
        self.folder = FleetFolder(name)
        self.recipe, self.devices, self.warm = recipe, devices, tuple(warm)
        self.heartbeat_interval_s = heartbeat_interval_s
        self.ctx: Any = mp.get_context("forkserver")
        self.ctx.set_forkserver_preload(["devicerl.pool.workers.subprocess", "devicerl.envs"])
        self.processes: list[Any] = []
        self.restarts = 0
        self._cfgs: list[_DeviceConfig] = []

    def start(self, timeout_s: float = 600.0) -> float:
        """Start and warm every device; returns the seconds it took. Refuses a name that a
        running fleet holds."""
        try:
            info: dict[str, Any] | None = self.folder.info()
        except ConfigError:  # none up under this name: ours to take
            info = None
        if info is not None:
            raise ConfigError(
                f"fleet {self.folder.name!r} is already up (pid {info['pid']}); stop it with "
                f"devicerl fleet down --name {self.folder.name}"
            )
        t0 = time.perf_counter()
        key = self.folder.create()
        tag = uuid.uuid4().hex
        self._cfgs = [
            _DeviceConfig(
                self.folder, i, self.recipe, self.warm, key, tag, self.heartbeat_interval_s
            )
            for i in range(self.devices)
        ]
        self.processes = [self._spawn(i, warm=True) for i in range(self.devices)]
        end = time.monotonic() + timeout_s
        while not all(self.folder.socket(i).exists() for i in range(self.devices)):
            dead = [i for i, p in enumerate(self.processes) if not p.is_alive()]
            if dead:
                self.stop()
                raise ConfigError(f"fleet device {dead[0]} could not start (its error above)")
            if time.monotonic() > end:
                self.stop()
                raise ConfigError(f"the fleet's devices were not warm within {timeout_s:.0f}s")
            time.sleep(0.1)
        info = {
            "pid": os.getpid(),
            "devices": self.devices,
            "device": self.recipe.label,
            "fingerprint": fingerprint(self.recipe),
            "warm_tasks": [t.name for t in self.warm],
        }
        tmp = self.folder.info_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=1))
        tmp.replace(self.folder.info_file)
        return time.perf_counter() - t0

    def _spawn(self, index: int, warm: bool) -> Any:
        p = self.ctx.Process(
            target=_device_main,
            args=(self._cfgs[index], os.getpid(), warm),
            name=f"devicerl-fleet-{index}",
            daemon=True,
        )
        with main_module_hidden():
            p.start()
        return p

    def watch(self, seconds: float) -> None:
        """Serve for ``seconds``, starting again any device whose process died."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            wait([p.sentinel for p in self.processes], timeout=min(left, 1.0))
            for i, p in enumerate(self.processes):
                if not p.is_alive():
                    log.warning(
                        "fleet device %d stopped (exit %s); starting it again", i, p.exitcode
                    )
                    p.join(0)
                    self.restarts += 1
                    self.processes[i] = self._spawn(i, warm=False)

    @contextlib.contextmanager
    def watching(self) -> Iterator[Fleet]:
        """`watch` on a background thread while the block runs (a fleet served from a
        process that does other work: a benchmark, a test)."""
        done = threading.Event()

        def serve() -> None:
            while not done.is_set():
                self.watch(0.2)

        thread = threading.Thread(target=serve, name="devicerl-fleet-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join(5.0)

    def stop(self) -> None:
        """Stop every device (with its browser) and remove the fleet's folder."""
        for p in self.processes:
            if p.is_alive() and p.pid is not None:
                kill_process_tree(p.pid)
            p.join(2.0)
        self.folder.remove()


def stop_fleet(name: str, timeout_s: float = 30.0) -> int:
    """Ask the fleet ``name``'s process to stop (SIGTERM) and wait until it removed its
    folder; returns its pid."""
    folder = FleetFolder(name)
    pid = int(folder.info()["pid"])
    os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + timeout_s
    while folder.info_file.exists() and time.monotonic() < end:
        time.sleep(0.1)
    return pid


# -- the run's side --------------------------------------------------------------------------
def check_fleet(name: str, recipe: DeviceRecipe, devices: int) -> None:
    """One line (`ConfigError`) unless the fleet ``name`` is up with at least ``devices``
    devices built from ``recipe``."""
    folder = FleetFolder(name)
    info = folder.info()
    if devices > info["devices"]:
        raise ConfigError(
            f"fleet {name!r} has {info['devices']} devices; the run asks for more "
            f"(env.num_envs must be at most {info['devices']})"
        )
    if info["fingerprint"] != fingerprint(recipe):
        raise ConfigError(
            f"fleet {name!r} runs other devices ({info['device']}, other options) than this "
            "run's env section; start the fleet from this config"
        )


def _connect(folder: FleetFolder, index: int, key: bytes, timeout_s: float) -> Connection:
    """An authenticated connection to device ``index``, waiting up to ``timeout_s`` for one
    being started again; OSError when it does not come back, ConfigError when it is busy."""
    end = time.monotonic() + timeout_s
    while True:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(folder.socket(index)))
            conn = Connection(sock.detach())
        except OSError as e:  # not listening (yet): it is being started again
            sock.close()
            if time.monotonic() > end:
                raise TimeoutError(
                    f"fleet {folder.name!r} device {index} did not answer within "
                    f"{timeout_s:.0f}s ({e})"
                ) from None
            time.sleep(0.1)
            continue
        try:
            if not conn.poll(max(0.5, end - time.monotonic())):  # it serves another run
                raise ConfigError(
                    f"fleet {folder.name!r} device {index} is in use by another run (a device "
                    "serves one run at a time)"
                )
            answer_challenge(conn, key)
            deliver_challenge(conn, key)
            return conn
        except (EOFError, ConnectionError):  # a device dying as we came: try the next one
            conn.close()
            if time.monotonic() > end:
                raise TimeoutError(f"fleet {folder.name!r} device {index} hung up") from None
            time.sleep(0.1)
        except BaseException:
            conn.close()
            raise


class FleetWorker(ConnectionWorker):
    """Device ``env_id`` of a running fleet, attached over its socket."""

    def __init__(self, backend: FleetBackend, env_id: int, recipe: DeviceRecipe) -> None:
        folder = backend.folder
        check_fleet(folder.name, recipe, env_id + 1)
        conn = _connect(folder, env_id, folder.key(), backend.attach_timeout_s)
        try:
            if not conn.poll(backend.attach_timeout_s):
                raise TimeoutError(f"fleet {folder.name!r} device {env_id} sent no greeting")
            hello = json.loads(conn.recv_bytes())
        except BaseException:
            conn.close()
            raise
        super().__init__(backend, env_id, recipe, conn, int(hello["pid"]), hello["shm_prefix"])

    def _lost(self) -> Reply:
        self._detach()
        return Reply("lost", error="its fleet device closed the connection")

    def close(self, timeout: float = 5.0) -> None:
        """Let go of the device (it stays up for the next run); kill it only when it does not
        hang up within ``timeout`` (stuck in a command)."""
        self.request_close()
        end = time.monotonic() + timeout
        try:
            while self.conn.poll(max(0.0, end - time.monotonic())):
                self.conn.recv_bytes()  # heartbeats, a late reply: until the device hangs up
        except (EOFError, OSError):
            self._detach()
            self._cleanup()
            return
        self.kill()


class FleetBackend(SelectorBackend):
    """Workers that are the devices of the running fleet ``name``."""

    def __init__(self, name: str = "default", attach_timeout_s: float = ATTACH_TIMEOUT_S) -> None:
        super().__init__()
        self.folder = FleetFolder(name)
        self.attach_timeout_s = attach_timeout_s
        self.folder.info()  # a missing fleet is refused before any device is asked for

    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        return FleetWorker(self, env_id, recipe)
