"""The worker interface every pool backend implements, and what all backends share.

A *worker* hosts one device (a `DeviceEnv` built from an `EnvSpec`) and runs commands on it:
``reset(task, seed)`` and ``step(action)``. The pool talks to workers through a *backend*
(serial, subprocess or Ray) with two calls: `Worker.submit` starts a command and returns at
once; `WorkerBackend.poll` returns the replies of whichever workers finished. A worker that
disappears answers with a ``lost`` reply naming the cause. Every backend executes commands
with the same function, `execute`, so all three behave identically apart from transport, and
every worker process starts the same way (`enter_worker_process`).
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from devicerl.actions import Action
from devicerl.envs.base import DeviceEnv
from devicerl.envs.registry import EnvSpec, Factory, build, lookup
from devicerl.errors import ConfigError, DeviceError, TaskError
from devicerl.records import Observation, StepResult
from devicerl.tasks.base import Task

#: Environment variable that carries the pool's tag into workers and their children.
POOL_TAG_ENV = "DEVICERL_POOL"


def enter_worker_process(tag: str) -> None:
    """Mark this process as a pool worker (``DEVICERL_WORKER=1``, the pool's tag) and make it
    lead its own process group, so the device's helpers (a browser) die with it."""
    os.environ["DEVICERL_WORKER"] = "1"
    os.environ[POOL_TAG_ENV] = tag
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)


@dataclass(frozen=True)
class DeviceRecipe:
    """What a worker needs to build its device, resolved in the parent (picklable)."""

    factory: Factory | str
    kwargs: dict[str, Any]
    label: str

    @classmethod
    def from_spec(cls, spec: EnvSpec) -> DeviceRecipe:
        factory, extra = lookup(spec.name)
        return cls(factory, {**extra, "options": spec.options}, spec.name)

    def make(self) -> DeviceEnv:
        return build(self.factory, dict(self.kwargs))


@dataclass
class Command:
    """A command for a worker: ``reset`` (task, seed; ``leave``: the name of a task this
    device will not play again, `DeviceEnv.leave`) or ``step`` (action)."""

    kind: str
    task: Task | None = None
    seed: int | None = None
    action: Action | None = None
    leave: str | None = None


@dataclass
class Reply:
    """A worker's answer.

    ``kind`` is ``reset`` (``observation``: the episode's first one), ``step`` (``result``: the
    device's `StepResult`, as it returned it), either with ``error`` set when the device raised,
    or ``lost`` (the worker is gone; ``error`` says why). ``elapsed_s`` is the time spent inside
    the worker.
    """

    kind: str
    observation: Observation | None = None
    result: StepResult | None = None
    error: str | None = None
    #: True for errors a restart cannot fix (bad configuration, unknown task).
    fatal: bool = False
    elapsed_s: float = 0.0
    #: The device's traceback, for an error reply.
    traceback: str = ""
    #: A reset's `DeviceEnv.oracle` (the episode's solution, for demonstrators; never stored).
    oracle: Any = None

    @property
    def shown(self) -> Observation | None:
        """The observation this reply carries (a reset's, or the step result's)."""
        return self.result.observation if self.result is not None else self.observation


def execute(env: DeviceEnv, command: Command) -> Reply:
    """Run one command on a device; exceptions become error replies (never raised)."""
    t0 = time.perf_counter()
    try:
        if command.kind == "reset":
            if command.leave is not None:
                env.leave(command.leave)
            obs = env.reset(command.task, command.seed)
            return Reply("reset", obs, elapsed_s=time.perf_counter() - t0, oracle=env.oracle())
        if command.kind == "step":
            assert command.action is not None
            result = env.step(command.action)
            return Reply("step", result=result, elapsed_s=time.perf_counter() - t0)
        raise ConfigError(f"unknown worker command {command.kind!r}")
    except Exception as e:
        return error_reply(command.kind, e, time.perf_counter() - t0)


def error_reply(kind: str, e: BaseException, elapsed_s: float = 0.0, building: bool = False):
    """An error reply. Config and task errors are fatal, and so is any error other than a
    `DeviceError` while building the device (a bad argument will not fix itself)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
    fatal = isinstance(e, (ConfigError, TaskError)) or (building and not isinstance(e, DeviceError))
    return Reply(
        kind,
        error=f"{type(e).__name__}: {msg}",
        fatal=fatal,
        elapsed_s=elapsed_s,
        traceback="".join(traceback.format_exception(e))[-4000:],
    )


class DeviceHost:
    """Owns one device inside a worker: builds it on the first command, then runs commands.

    Every backend hosts its device through this class, so they all behave the same.
    """

    def __init__(self, recipe: DeviceRecipe) -> None:
        self.recipe = recipe
        self.env: DeviceEnv | None = None

    def run(self, command: Command) -> Reply:
        if self.env is None:
            try:
                self.env = self.recipe.make()
            except Exception as e:
                return error_reply(command.kind, e, building=True)
        return execute(self.env, command)

    def close(self) -> None:
        env, self.env = self.env, None
        if env is not None:
            with contextlib.suppress(Exception):
                env.close()


class Worker(ABC):
    """One device behind some transport. Not thread-safe; owned by one pool."""

    def __init__(self, env_id: int, recipe: DeviceRecipe) -> None:
        self.env_id = env_id
        self.recipe = recipe
        #: Last time the worker showed it was alive (a reply or a heartbeat), `time.monotonic`.
        self.last_heartbeat = time.monotonic()

    @property
    def pid(self) -> int | None:
        """The process id hosting the device, when there is one on this machine."""
        return None

    @abstractmethod
    def submit(self, command: Command) -> None:
        """Start ``command``; its reply comes back through the backend's `poll`."""

    @abstractmethod
    def kill(self) -> None:
        """Stop the worker at once, with every process it started."""

    def request_close(self) -> None:  # noqa: B027 - optional hook
        """Ask the device to shut down, without waiting (lets a pool close workers in parallel)."""

    @abstractmethod
    def close(self, timeout: float = 5.0) -> None:
        """Close the device politely, then kill whatever is left after ``timeout``."""


class WorkerBackend(ABC):
    """Creates workers of one kind and waits on all of them at once."""

    #: Whether a hung command can be interrupted (by killing the worker).
    can_interrupt: bool = True
    #: Whether workers send heartbeats while busy (so a frozen one can be told from a slow one).
    sends_heartbeats: bool = False

    @abstractmethod
    def spawn(self, env_id: int, recipe: DeviceRecipe) -> Worker:
        """Start a worker for device ``env_id`` (asynchronously where the transport allows)."""

    @abstractmethod
    def poll(self, timeout: float | None) -> list[tuple[Worker, Reply]]:
        """Replies of whichever workers finished, waiting up to ``timeout`` seconds for one."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the backend holds (after every worker was closed)."""
