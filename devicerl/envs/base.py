"""`DeviceEnv`: the device API every backend (synthetic, browser, Android) implements.

The base class owns the episode rules so every device behaves the same:
- an invalid action is a no-op that the step's info records (``info["invalid_action"]``);
- "task complete" / "task impossible" end the episode (success comes from the task's check);
- the episode is truncated at the task's step budget (``info["end_reason"] == "max_steps"``);
- reward is sparse: 1.0 on the step where the task is solved, else 0.0; the device's own raw
  reward is kept in ``info["raw_reward"]``;
- an answer (``ANSWER``) is recorded, not performed: `DeviceEnv.answer` holds the episode's
  last one for the task's own check, which runs after the step as after any other; it ends
  nothing by itself;
- a type the device cannot perform (`DeviceEnv.unsupported`, e.g. OPEN_APP on a browser) is an
  invalid action, recorded with the device's reason.

`step` applies these rules once for every backend; a backend implements `_reset` and `_step`
(one action -> the observation and the task's `TaskStatus`), either directly (to fuse them into
one round trip, as the browser does) or through the default `_step`, which calls `_act`,
`_observe` and `_status`. `_check_action` turns actions the device cannot perform into invalid
ones (no-ops) before the rules see them; a backend's `_act` never sees an invalid, terminal or
answer action.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from devicerl.actions import Action, ActionType
from devicerl.errors import TaskError
from devicerl.records import EndReason, Observation, StepResult, Task, TaskStatus

__all__ = ["DeviceEnv", "TaskStatus", "performed", "set_task_resolver"]

#: Turns a task name into a `Task`. Task names belong to the suites in `devicerl.tasks`, a layer
#: above the devices, which installs its resolver when imported (devices never import it).
_task_resolver: Callable[[str], Task] | None = None


def set_task_resolver(resolver: Callable[[str], Task] | None) -> None:
    """Install how devices turn task names (``reset("miniwob/click-test")``) into `Task`s."""
    global _task_resolver
    _task_resolver = resolver


class DeviceEnv(ABC):
    """A device that runs tasks: ``reset(task, seed) -> Observation``, ``step(action)``."""

    #: Registry name of the backend (set by subclasses).
    name: str = "device"
    #: Action types this device cannot perform -> why (they become invalid actions).
    unsupported: ClassVar[dict[ActionType, str]] = {}

    def __init__(self, task: Task | str | None = None) -> None:
        self.default_task = task
        self.task: Task | None = None
        self.seed: int | None = None
        self.steps_taken = 0
        self.episode_over = True
        #: The episode's last answer (the text of its last ANSWER action), None before one.
        self.answer: str | None = None
        self._closed = False

    # -- hooks ------------------------------------------------------------------------------
    @abstractmethod
    def _reset(self, task: Task, seed: int) -> Observation:
        """Start ``task`` from a clean state, deterministically from ``seed``."""

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        """Perform ``action`` unless it is invalid or terminal; return what the device shows
        then and the task's own verdict. Extra facts go into the status's ``info``."""
        if performed(action):
            self._act(action)
        return self._observe(), self._status()

    def _check_action(self, action: Action) -> Action:
        """``action``, or an invalid action when this device cannot perform it."""
        reason = self.unsupported.get(action.type)
        if reason is not None:
            return Action.invalid(raw=action.to_json(), reason=reason)
        return action

    def _act(self, action: Action) -> None:
        """Perform a non-terminal, valid action on the device (used by the default `_step`)."""
        raise NotImplementedError

    def _observe(self) -> Observation:
        """The current observation (used by the default `_step`)."""
        raise NotImplementedError

    def _status(self) -> TaskStatus:
        """The task's own success check for the current state (used by the default `_step`)."""
        raise NotImplementedError

    def _close(self) -> None:  # noqa: B027 - optional hook
        """Release the device's resources."""

    def resolve_task(self, task: Task | str | None) -> Task:
        """Turn a task name into a `Task` (subclasses may accept more forms)."""
        task = task if task is not None else self.default_task
        if task is None:
            raise TaskError(f"{self.name}: reset() needs a task (no default task configured)")
        if isinstance(task, Task):
            return task
        if _task_resolver is None:
            raise TaskError(
                f"{self.name}: task name {task!r} needs the task registry (import devicerl.tasks)"
                " or a Task"
            )
        return _task_resolver(task)

    @property
    def screen_size(self) -> tuple[int, int]:
        """(width, height) of observations, in pixels."""
        raise NotImplementedError

    # -- public API ---------------------------------------------------------------------------
    def reset(self, task: Task | str | None = None, seed: int | None = None) -> Observation:
        """Start an episode of ``task`` (or the default task) deterministically from ``seed``."""
        self._check_open()
        self.task = self.resolve_task(task)
        self.seed = int(seed) if seed is not None else self._next_seed()
        self.steps_taken = 0
        self.episode_over = False
        self.answer = None
        obs = self._reset(self.task, self.seed)
        obs.step = 0
        return obs

    def oracle(self) -> Any:
        """The current episode's solution when its task knows one (as BrowserGym's ``cheat``:
        e.g. a web-skills page's plan of taps and texts), else None. For demonstrators only: it
        is never part of an observation and never stored."""
        return None

    def leave(self, task: str) -> None:  # noqa: B027 - optional hook
        """A hint: this device will not be reset to ``task`` (a name) again. A device that keeps
        state per task (a page per task) may reuse it for the next task; others ignore it."""

    def step(self, action: Action) -> StepResult:
        """Apply ``action`` and return the next observation, reward and episode flags."""
        self._check_open()
        if self.episode_over or self.task is None:
            raise RuntimeError(
                f"{self.name}: step() called before reset() or after the episode ended"
            )
        t0 = time.perf_counter()
        action = self._check_action(action)
        if action.type is ActionType.ANSWER:
            self.answer = action.text
        obs, status = self._step(action)
        return self._finish_step(action, obs, status, time.perf_counter() - t0)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._close()

    # -- helpers ----------------------------------------------------------------------------
    def _finish_step(
        self, action: Action, obs: Observation, status: TaskStatus, device_time_s: float
    ) -> StepResult:
        """The episode rules (see the module doc), applied to what the device reported."""
        assert self.task is not None
        self.steps_taken += 1
        obs.step = self.steps_taken
        info: dict[str, Any] = dict(status.info)
        info["raw_reward"] = status.raw_reward
        info["success"] = bool(status.success)
        info["device_time_s"] = device_time_s
        if action.is_invalid:
            info["invalid_action"] = action.reason or "invalid action"
        terminated = status.done or status.success or action.is_terminal
        truncated = not terminated and self.steps_taken >= self.task.max_steps
        if status.success:
            info["end_reason"] = EndReason.SUCCESS.value
        elif status.done:
            info["end_reason"] = EndReason.FAILURE.value
        elif action.is_terminal:
            info["end_reason"] = EndReason.AGENT_ENDED.value
        elif truncated:
            info["end_reason"] = EndReason.MAX_STEPS.value
        self.episode_over = terminated or truncated
        reward = 1.0 if status.success else 0.0
        return StepResult(obs, reward, terminated, truncated, info)

    def _next_seed(self) -> int:
        import random

        return random.randrange(2**31)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.name}: device is closed")

    def __enter__(self) -> DeviceEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # best effort; close() is the contract
        with contextlib.suppress(Exception):
            self.close()


def performed(action: Action) -> bool:
    """Whether a device acts on ``action``: not when it is invalid (a no-op), terminal (the
    rules end the episode) or an answer (recorded in `DeviceEnv.answer`)."""
    return not (action.is_invalid or action.is_terminal or action.type is ActionType.ANSWER)
