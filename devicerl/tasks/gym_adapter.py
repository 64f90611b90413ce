"""A gymnasium view of any `DeviceEnv` (it passes ``gymnasium.utils.env_checker.check_env``).

Observations are ``{"screenshot": HxWx3 uint8, "instruction": str, "step": int}``; actions are
``{"action_type": int, "touch": (x, y), "lift": (x, y), "text": str, "duration": (d,)}`` with
``action_type`` indexing `devicerl.actions.VALID_TYPES` (AitW's seven keep indices 0-6; the
newer types follow). ``touch`` is a long press's point, ``duration`` how long it holds or a
wait lasts as a share of `MAX_DURATION_S` (in [0, 1] like the points; absent: the default),
``text`` the typed text, the answer or the app to open. A
dict the `Action` cannot take (an empty app name, a zero duration) becomes an invalid action,
which the device records as a no-op. Tasks come from a `TaskSampler`; the gymnasium seed seeds
both the sampler and the task instance, so equal seeds give equal episodes.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from devicerl.actions import (
    DEFAULT_PRESS_S,
    DEFAULT_WAIT_S,
    MAX_DURATION_S,
    TEXT_TYPES,
    VALID_TYPES,
    Action,
    ActionType,
)
from devicerl.envs.base import DeviceEnv
from devicerl.records import Observation
from devicerl.tasks.base import Task, TaskSampler

_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
_MAX_TEXT = 256


class GymDeviceEnv(gym.Env):
    """Wraps a `DeviceEnv` and a task list as a `gymnasium.Env`."""

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(
        self,
        device: DeviceEnv,
        tasks: Sequence[Task],
        render_mode: str | None = None,
        max_steps: int = 1000,
    ) -> None:
        self.device = device
        self.tasks = list(tasks)
        self.render_mode = render_mode
        w, h = device.screen_size
        self.observation_space = spaces.Dict(
            {
                "screenshot": spaces.Box(0, 255, (h, w, 3), np.uint8),
                "instruction": spaces.Text(_MAX_TEXT, charset=_CHARSET),
                "step": spaces.Discrete(max_steps + 1),
            }
        )
        self.action_space = spaces.Dict(
            {
                "action_type": spaces.Discrete(len(VALID_TYPES)),
                "touch": spaces.Box(0.0, 1.0, (2,), np.float32),
                "lift": spaces.Box(0.0, 1.0, (2,), np.float32),
                "text": spaces.Text(_MAX_TEXT, min_length=0, charset=_CHARSET),
                "duration": spaces.Box(0.0, 1.0, (1,), np.float32),
            }
        )
        self._sampler = TaskSampler(self.tasks, seed=0)
        self._last: Observation | None = None

    def _to_gym(self, obs: Observation) -> dict[str, Any]:
        shot = obs.screenshot
        if shot is None:
            w, h = obs.screen_size
            shot = np.zeros((h, w, 3), np.uint8)
        text = "".join(c for c in obs.instruction if c in _CHARSET)[:_MAX_TEXT]
        return {"screenshot": np.array(shot), "instruction": text, "step": int(obs.step)}

    @staticmethod
    def to_action(action: dict[str, Any]) -> Action:
        """Gym action dict -> `Action` (an invalid one when the dict's values do not fit)."""
        kind = VALID_TYPES[int(action["action_type"])]
        try:
            return _action(kind, action)
        except ValueError as e:
            return Action.invalid(f"gym action {kind.value}", str(e))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            self._sampler = TaskSampler(self.tasks, seed=seed)
        inst = self._sampler.next()
        assert inst is not None
        obs = self.device.reset(inst.task, int(self.np_random.integers(2**31)))
        self._last = obs
        return self._to_gym(obs), {"task": inst.task.name, "instruction": obs.instruction}

    def step(self, action: dict[str, Any]) -> tuple[dict[str, Any], float, bool, bool, dict]:
        result = self.device.step(self.to_action(action))
        self._last = result.observation
        return (
            self._to_gym(result.observation),
            float(result.reward),
            bool(result.terminated),
            bool(result.truncated),
            # Timings differ run to run; gymnasium expects equal infos for equal seeds.
            {k: v for k, v in result.info.items() if not k.endswith("_time_s")},
        )

    def render(self) -> np.ndarray | None:
        if self.render_mode == "rgb_array" and self._last is not None:
            return self._to_gym(self._last)["screenshot"]
        return None

    def close(self) -> None:
        self.device.close()


def _action(kind: ActionType, action: dict[str, Any]) -> Action:
    def point(key: str) -> list[float]:
        return np.clip(np.asarray(action[key], dtype=float), 0, 1).tolist()

    def seconds(default: float) -> float:
        share = action.get("duration")
        if share is None:
            return default
        return MAX_DURATION_S * float(np.asarray(share, dtype=float).reshape(-1)[0])

    text = str(action.get("text", ""))
    if kind is ActionType.DUAL_POINT:
        return Action.swipe(*point("touch"), *point("lift"))
    if kind is ActionType.LONG_PRESS:
        return Action.long_press(*point("touch"), seconds(DEFAULT_PRESS_S))
    if kind is ActionType.WAIT:
        return Action.wait(seconds(DEFAULT_WAIT_S))
    if kind is ActionType.OPEN_APP:
        return Action.open_app(text)
    if kind in TEXT_TYPES:
        return Action(kind, text=text)
    return Action(kind)
