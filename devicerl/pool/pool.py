"""`EnvPool`: an asynchronous, supervised pool of devices.

``send(actions, env_ids)`` starts steps on those devices and returns at once;
``recv(min_ready=1, timeout=...)`` returns the results of whichever devices are ready, each
with its env id; ``step = send + recv``. When an episode ends the device resets at once to the
next (task, seed) from the task sampler, and the result carries both the finished `Trajectory`
(complete, handed out exactly once) and the first observation of the new episode.

Workers that die, hang (past ``step_timeout`` / ``reset_timeout``) or raise are killed with
their process tree and restarted with backoff; their in-flight episode is closed as
``EndReason.TRUNCATED`` with the cause. A device that spends its restart budget is retired and
the pool carries on with the others.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from devicerl.actions import Action
from devicerl.agents.base import ActionSample
from devicerl.envs.registry import EnvSpec
from devicerl.errors import ConfigError, DeviceError
from devicerl.pool.episodes import (
    PendingAction,
    Ready,
    after_step,
    finish,
    new_trajectory,
    step_record,
)
from devicerl.pool.supervisor import Supervisor, SupervisorConfig
from devicerl.pool.workers.base import Command, DeviceRecipe, Reply, Worker, WorkerBackend
from devicerl.pool.workers.serial import SerialBackend
from devicerl.pool.workers.subprocess import SubprocessBackend
from devicerl.records import EndReason, Observation, StepResult, Trajectory
from devicerl.tasks.base import Task, TaskInstance, TaskSampler

log = logging.getLogger(__name__)
_UNSET: Any = object()
_TICK_S = 0.05  # how often deadlines, heartbeats and due restarts are checked


class _State(str, Enum):
    RESETTING = "resetting"  # reset in flight (a fresh worker builds its device first)
    READY = "ready"  # observation waiting for delivery
    ACTING = "acting"  # observation delivered, waiting for the agent's action
    STEPPING = "stepping"  # step in flight
    RESTARTING = "restarting"  # waiting for its restart time after a failure
    IDLE = "idle"  # the task sampler is exhausted
    RETIRED = "retired"  # restart budget spent


_WAITING = (_State.RESETTING, _State.STEPPING, _State.RESTARTING)


@dataclass
class _Slot:
    env_id: int
    recipe: DeviceRecipe
    state: _State = _State.RESETTING
    worker: Worker | None = None
    deadline: float | None = None
    restart_at: float = 0.0
    instance: TaskInstance | None = None
    task: str | None = None  #: the task of the device's last episode
    reset_attempts: int = 0
    trajectory: Trajectory | None = None
    observation: Observation | None = None
    pending: PendingAction | None = None
    finished: Trajectory | None = None
    last: StepResult | None = None  #: the step that ended the last episode
    void_delivery: bool = False  # a delivered observation was voided by a failure


def _as_sampler(tasks: TaskSampler | Sequence[Task] | str | None, seed: int) -> TaskSampler:
    if tasks is None:
        raise ConfigError("EnvPool needs tasks: a TaskSampler, a list of Task or a task spec")
    if isinstance(tasks, TaskSampler) or callable(getattr(tasks, "next", None)):
        return tasks  # a sampler, or anything handing out instances (e.g. an episode planner)
    if isinstance(tasks, str):
        from devicerl.tasks.registry import resolve

        return TaskSampler(resolve(tasks), seed=seed)
    return TaskSampler(list(tasks), seed=seed)


def _as_recipes(envs: EnvSpec | str | Sequence[EnvSpec | str], num_envs: int | None):
    one = isinstance(envs, (EnvSpec, str))
    specs = [EnvSpec(e) if isinstance(e, str) else e for e in ([envs] if one else envs)]
    if not specs:
        raise ConfigError("EnvPool needs at least one device spec")
    n = num_envs if num_envs is not None else len(specs)
    if n < 1:
        raise ConfigError(f"num_envs must be >= 1, got {n}")
    if len(specs) not in (1, n):
        raise ConfigError(f"got {len(specs)} device specs for num_envs={n}; give 1 or {n}")
    recipes = [DeviceRecipe.from_spec(s) for s in specs]
    return recipes * n if len(recipes) == 1 else recipes


def make_backend(kind: str, **options: Any) -> WorkerBackend:
    """``serial``, ``subprocess``, ``ray`` or ``fleet``, with backend options (Ray is imported
    lazily)."""
    if kind == "serial":
        extra = set(options) - {"step_timeout", "reset_timeout"}
        if extra:
            raise ConfigError(
                f"serial workers take no options but the timeouts, got {sorted(extra)}"
            )
        return SerialBackend(**options)
    if kind == "subprocess":
        return SubprocessBackend(**options)
    if kind == "ray":
        from devicerl.pool.workers.ray import RayBackend

        return RayBackend(**options)
    if kind == "fleet":
        from devicerl.pool.workers.fleet import FleetBackend

        return FleetBackend(**options)
    raise ConfigError(f"unknown worker kind {kind!r}; use 'serial', 'subprocess', 'ray' or 'fleet'")


class EnvPool:
    """An asynchronous pool of ``num_envs`` devices built from `EnvSpec`s.

    ``worker`` is ``"subprocess"`` (default: one process per device, screenshots through
    shared memory), ``"ray"`` (Ray actors), ``"fleet"`` (the warm devices of a running fleet,
    `devicerl.pool.workers.fleet`; ``worker_options={"name": ...}``) or ``"serial"`` (in this
    process, for debugging; no timeouts). ``tasks`` is a `TaskSampler`, a task list or a task
    spec string. The first `recv` returns every device's first observation. Not thread-safe:
    use it from one thread.
    """

    def __init__(
        self,
        envs: EnvSpec | str | Sequence[EnvSpec | str],
        num_envs: int | None = None,
        tasks: TaskSampler | Sequence[Task] | str | None = None,
        *,
        worker: str = "subprocess",
        step_timeout: float | None = _UNSET,
        reset_timeout: float | None = _UNSET,
        supervision: SupervisorConfig | None = None,
        worker_options: dict[str, Any] | None = None,
        seed: int = 0,
    ) -> None:
        recipes = _as_recipes(envs, num_envs)
        self.sampler = _as_sampler(tasks, seed)
        config = supervision or SupervisorConfig()
        if step_timeout is not _UNSET:
            config = replace(config, step_timeout=step_timeout)
        if reset_timeout is not _UNSET:
            config = replace(config, reset_timeout=reset_timeout)
        options = dict(worker_options or {})
        if worker == "subprocess":
            options.setdefault("heartbeat_interval_s", config.heartbeat_interval_s)
        if worker == "serial":  # it times its commands itself (they run one after another)
            options.setdefault("step_timeout", config.step_timeout)
            options.setdefault("reset_timeout", config.reset_timeout)
        self.config = config
        self.worker_kind = worker
        self.backend = make_backend(worker, **options)
        self.supervisor = Supervisor(config, len(recipes))
        self.slots = [_Slot(i, r) for i, r in enumerate(recipes)]
        self.retired: dict[int, str] = {}
        self.counters: Counter[str] = Counter()
        self._out: deque[Ready] = deque()
        self._next_tick = 0.0
        self._closed = False
        try:
            for slot in self.slots:
                self._start(slot)
        except BaseException:
            self.close()
            raise

    @property
    def num_envs(self) -> int:
        return len(self.slots)

    # -- public API -------------------------------------------------------------------------
    def send(
        self,
        actions: Sequence[Action | ActionSample],
        env_ids: Sequence[int] | None = None,
        *,
        policy_version: int = 0,
        agent_time_s: float | Sequence[float] = 0.0,
    ) -> None:
        """Start one step on each of ``env_ids`` (default: all devices); returns at once.

        Each device must be waiting for an action (its observation was returned by `recv`).
        An action for a device whose observation was voided by a crash since is dropped.
        ``agent_time_s`` is each action's share of the agent's time (one value or one each).
        """
        self._check_open()
        ids = list(range(self.num_envs)) if env_ids is None else list(env_ids)
        if len(ids) != len(actions):
            raise ValueError(f"send: {len(actions)} actions for {len(ids)} env ids")
        one_time = isinstance(agent_time_s, (int, float))
        times = [agent_time_s] * len(ids) if one_time else list(agent_time_s)  # type: ignore
        if len(times) != len(ids):
            raise ValueError(f"send: {len(times)} agent times for {len(ids)} env ids")
        now_wall = time.time()
        for a, i, t in zip(actions, ids, times):
            slot = self._slot(i)
            if slot.state is not _State.ACTING:
                if slot.void_delivery:
                    slot.void_delivery = False
                    self.counters["dropped_actions"] += 1
                    continue
                raise RuntimeError(f"env {i} is not waiting for an action (it is {slot.state})")
            sample = a if isinstance(a, ActionSample) else ActionSample(a)
            slot.pending = PendingAction(sample, int(policy_version), float(t), now_wall)
            self._submit(slot, Command("step", action=sample.action))

    def recv(
        self, min_ready: int = 1, timeout: float | None = None, max_ready: int | None = None
    ) -> list[Ready]:
        """Results of whichever devices are ready, waiting until at least ``min_ready`` are
        (fewer when ``timeout`` seconds pass or when no more can come without an action: with
        every device waiting for an action it returns at once). Raises `DeviceError` once
        every device is retired."""
        self._check_open()
        end = None if timeout is None else time.monotonic() + timeout
        self._service(0.0)
        while len(self._out) < min_ready and self.busy:
            wait = None if end is None else end - time.monotonic()
            if wait is not None and wait <= 0:
                break
            self._service(wait)
        if not self._out and len(self.retired) == self.num_envs:
            causes = "; ".join(f"{i}: {c}" for i, c in sorted(self.retired.items()))
            raise DeviceError(f"all {self.num_envs} devices were retired ({causes})")
        return self._deliver(max_ready)

    def step(
        self,
        actions: Sequence[Action | ActionSample],
        env_ids: Sequence[int] | None = None,
        min_ready: int = 1,
        timeout: float | None = None,
        **send_kw: Any,
    ) -> list[Ready]:
        """`send` then `recv`."""
        self.send(actions, env_ids, **send_kw)
        return self.recv(min_ready=min_ready, timeout=timeout)

    @property
    def done(self) -> bool:
        """True when no device will produce anything more (all idle or retired, all handed out)."""
        return not self._out and all(s.state in (_State.IDLE, _State.RETIRED) for s in self.slots)

    def worker_pids(self) -> dict[int, int]:
        """Process id of each live worker, by env id (where workers are local processes)."""
        return {
            s.env_id: s.worker.pid
            for s in self.slots
            if s.worker is not None and s.worker.pid is not None
        }

    def episodes_in_progress(self) -> tuple[list[Trajectory], list[Trajectory]]:
        """``(running, ended)``: episodes being played (steps so far) and episodes that ended
        but wait for their device's next reset to be handed out by `recv`. A host that may be
        lost reports these, so finished work can leave it before the (possibly slow) reset.
        Reads only, so it may be called from another thread (it sees a recent snapshot)."""
        slots = list(self.slots)  # each attribute is read once: another thread may change it
        running = [t for t in (s.trajectory for s in slots) if t is not None]
        ended = [t for t in (s.finished for s in slots) if t is not None]
        return running, ended

    def stats(self) -> dict[str, Any]:
        """Device-side counters: steps, truncations, faults by cause, restarts, states (episodes
        and successes are counted by the collector, after judging)."""
        out: dict[str, Any] = dict(self.counters)
        out["restarts"] = self.supervisor.restarts
        out["retired"] = len(self.retired)
        out["states"] = dict(Counter(s.state.value for s in self.slots))
        return out

    def close(self) -> None:
        """Stop every worker (politely, then by force) and release shared memory."""
        if self._closed:
            return
        self._closed = True
        workers = [s.worker for s in self.slots if s.worker is not None]
        for w in workers:
            with contextlib.suppress(Exception):
                w.request_close()
        end = time.monotonic() + self.config.close_timeout_s
        for w in workers:
            with contextlib.suppress(Exception):
                w.close(timeout=max(0.0, end - time.monotonic()))
        for s in self.slots:
            s.worker = None
        self.backend.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    # -- event loop -------------------------------------------------------------------------
    def _service(self, wait: float | None) -> None:
        """Wait for replies (at most until the next supervision tick) and handle them."""
        now = time.monotonic()
        until_tick = max(0.0, self._next_tick - now)
        self._handle(self.backend.poll(until_tick if wait is None else min(wait, until_tick)))
        now = time.monotonic()
        if now >= self._next_tick:
            self._next_tick = now + _TICK_S
            self._supervise(now)

    def _handle(self, replies: list[tuple[Worker, Reply]]) -> None:
        for worker, reply in replies:
            slot = self.slots[worker.env_id]
            if slot.worker is worker:  # else: a reply from a worker already replaced
                self._on_reply(slot, reply)

    def _supervise(self, now: float) -> None:
        for slot in self.slots:
            if slot.state is _State.RESTARTING and now >= slot.restart_at:
                self._start(slot)
        overdue = [s for s in self.slots if s.deadline is not None and now > s.deadline]
        frozen = []
        if self.backend.sends_heartbeats:
            frozen = [
                s
                for s in self.slots
                if s.worker is not None and self.supervisor.stale(s.worker.last_heartbeat, now)
            ]
        if overdue or frozen:  # a reply or heartbeat may have come while we were busy
            self._handle(self.backend.poll(0.0))
            now = time.monotonic()
        for slot in overdue:
            if slot.deadline is not None and now > slot.deadline:
                kind = "step" if slot.state is _State.STEPPING else "reset"
                limit = self.config.step_timeout if kind == "step" else self.config.reset_timeout
                self.counters["timeouts"] += 1
                self._fail(slot, f"{kind} timed out after {limit:.1f}s")
        for slot in frozen:
            worker = slot.worker
            if worker is not None and self.supervisor.stale(worker.last_heartbeat, now):
                self.counters["heartbeat_failures"] += 1
                self._fail(slot, f"no heartbeat for {now - worker.last_heartbeat:.1f}s")

    @property
    def busy(self) -> bool:
        """Whether some device will produce a result without an action from the caller."""
        return any(s.state in _WAITING for s in self.slots)

    def _deliver(self, max_ready: int | None) -> list[Ready]:
        n = len(self._out) if max_ready is None else min(max_ready, len(self._out))
        out = [self._out.popleft() for _ in range(n)]
        for r in out:
            if r.observation is not None:
                slot = self.slots[r.env_id]
                slot.state, slot.void_delivery = _State.ACTING, False
        return out

    # -- transitions ------------------------------------------------------------------------
    def _start(self, slot: _Slot) -> None:
        try:
            slot.worker = self.backend.spawn(slot.env_id, slot.recipe)
        except OSError as e:  # out of processes, memory, file descriptors...
            self._fail(slot, f"worker could not start: {e}")
            return
        self._begin_reset(slot)

    def _submit(self, slot: _Slot, command: Command) -> None:
        assert slot.worker is not None
        slot.state = _State.STEPPING if command.kind == "step" else _State.RESETTING
        if self.backend.can_interrupt:
            slot.deadline = self.supervisor.deadline(command.kind, time.monotonic())
        slot.worker.submit(command)

    def _begin_reset(self, slot: _Slot) -> None:
        if slot.instance is None:
            slot.instance = self._next_instance(slot.env_id)
            slot.reset_attempts = 0
        if slot.instance is None:
            slot.state = _State.IDLE
            self._emit(slot, None)
            return
        slot.reset_attempts += 1
        task = slot.instance.task
        left = slot.task if slot.task not in (None, task.name) and self._leaves_tasks() else None
        self._submit(slot, Command("reset", task, slot.instance.seed, leave=left))

    def _next_instance(self, env_id: int) -> TaskInstance | None:
        """The sampler's next instance; a sampler that places instances by device (such as
        `devicerl.tasks.placement.TaskAffinity`) is told which device asks."""
        placed = getattr(self.sampler, "next_for", None)
        return placed(env_id) if callable(placed) else self.sampler.next()

    def _leaves_tasks(self) -> bool:
        """Whether a device the sampler moves to another task never gets the one it left again
        (`TaskAffinity`): then the reset tells the device it may reuse what it kept for it."""
        return bool(getattr(self.sampler, "leaves_tasks_for_good", False))

    def _on_reply(self, slot: _Slot, reply: Reply) -> None:
        slot.deadline = None
        if reply.kind == "lost" or reply.error is not None:
            if reply.fatal:
                raise ConfigError(f"device {slot.env_id} ({slot.recipe.label}): {reply.error}")
            cause = reply.error or "worker lost"
            self.counters["crashes" if reply.kind == "lost" else "errors"] += 1
            self._fail(slot, cause)
        elif reply.kind == "reset":
            self._on_reset(slot, reply)
        else:
            self._on_step(slot, reply)

    def _on_reset(self, slot: _Slot, reply: Reply) -> None:
        inst = slot.instance
        assert inst is not None and reply.observation is not None
        slot.instance = None
        slot.task = inst.task.name
        slot.trajectory = new_trajectory(inst, reply, slot.env_id, slot.recipe.label)
        slot.observation = reply.observation
        slot.state = _State.READY
        self.supervisor.on_success(slot.env_id)
        last, slot.last = slot.last, None
        ready = Ready(slot.env_id, None, last)
        ready.observation, ready.first = reply.observation, True
        ready.task, ready.seed, ready.plan = inst.task.name, inst.seed, inst.plan
        ready.oracle = reply.oracle
        ready.trajectory, slot.finished = slot.finished, None
        self._out.append(ready)

    def _on_step(self, slot: _Slot, reply: Reply) -> None:
        pending, traj = slot.pending, slot.trajectory
        assert pending is not None and traj is not None and slot.observation is not None
        traj.steps.append(step_record(slot.observation, pending, reply))
        slot.pending = None
        self.counters["steps"] += 1
        result = reply.result
        assert result is not None
        if result.done:
            finish(traj, result)
            slot.finished, slot.trajectory, slot.last = traj, None, result
            self._begin_reset(slot)
            return
        slot.observation = result.observation
        slot.state = _State.READY
        self._out.append(after_step(slot.env_id, result))

    def _fail(self, slot: _Slot, cause: str) -> None:
        """The worker died, hung or raised: kill it, close its episode, schedule a restart."""
        log.warning("device %d (%s): %s", slot.env_id, slot.recipe.label, cause)
        if slot.worker is not None:
            slot.worker.kill()
            slot.worker = None
        if slot.state is _State.ACTING:
            slot.void_delivery = True
        elif slot.state is _State.READY:
            self._void_undelivered(slot.env_id)
        traj = self._interrupted(slot, cause)
        slot.deadline, slot.pending, slot.observation, slot.last = None, None, None, None
        when = self.supervisor.on_failure(slot.env_id, time.monotonic())
        if when is None:
            slot.state = _State.RETIRED
            self.retired[slot.env_id] = cause
            log.error("device %d retired after too many restarts: %s", slot.env_id, cause)
        else:
            slot.state, slot.restart_at = _State.RESTARTING, when
            self._next_tick = min(self._next_tick, when)
        self._emit(slot, traj)

    def _interrupted(self, slot: _Slot, cause: str) -> Trajectory | None:
        """The trajectory cut short by a failure (or a reset that failed twice), if any."""
        traj, slot.trajectory = slot.trajectory, None
        if traj is not None:
            traj.final_observation = slot.observation
            if slot.pending is not None:
                traj.extras["interrupted_action"] = slot.pending.sample.action.to_dict()
        elif slot.instance is not None and slot.reset_attempts >= 2:
            inst, slot.instance = slot.instance, None
            traj = new_trajectory(inst, None, slot.env_id, slot.recipe.label)
            cause = f"reset failed twice: {cause}"
        if traj is None:
            return None
        self.counters["truncated"] += 1
        return traj.end(EndReason.TRUNCATED, success=False, cause=cause)

    def _emit(self, slot: _Slot, traj: Trajectory | None) -> None:
        """Hand out what a device with nothing to act on has: finished or cut episodes, and
        its retirement."""
        items = [t for t in (slot.finished, traj) if t is not None]
        slot.finished = None
        retired = slot.state is _State.RETIRED
        for t in items or ([None] if retired else []):
            self._out.append(Ready(slot.env_id, None, trajectory=t, retired=retired))

    def _void_undelivered(self, env_id: int) -> None:
        """A failure made the device's undelivered observation meaningless: drop it."""
        kept: deque[Ready] = deque()
        for r in self._out:
            if r.env_id == env_id and r.observation is not None:
                if r.trajectory is None:
                    continue
                r.observation, r.first = None, False
            kept.append(r)
        self._out = kept

    # -- helpers ----------------------------------------------------------------------------
    def _slot(self, env_id: int) -> _Slot:
        if not 0 <= env_id < self.num_envs:
            raise IndexError(f"env id {env_id} out of range [0, {self.num_envs})")
        return self.slots[env_id]

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("EnvPool is closed")

    def __repr__(self) -> str:
        return f"EnvPool(num_envs={self.num_envs}, worker={self.worker_kind!r})"
