"""A gymnasium view of any `DeviceEnv` (it passes ``gymnasium.utils.env_checker.check_env``).

Observations are ``{"screenshot": HxWx3 uint8, "instruction": str, "step": int}``; actions are
``{"action_type": int, "touch": (x, y), "lift": (x, y), "text": str}`` with ``action_type``
indexing `devicerl.actions.VALID_TYPES`. Tasks come from a `TaskSampler`; the gymnasium seed
seeds both the sampler and the task instance, so equal seeds give equal episodes.
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from devicerl.actions import VALID_TYPES, Action, ActionType
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
        """Gym action dict -> `Action`."""
        kind = VALID_TYPES[int(action["action_type"])]
        if kind is ActionType.DUAL_POINT:
            touch = np.clip(np.asarray(action["touch"], dtype=float), 0, 1)
            lift = np.clip(np.asarray(action["lift"], dtype=float), 0, 1)
            return Action.swipe(*touch.tolist(), *lift.tolist())
        if kind is ActionType.TYPE:
            return Action.type_text(str(action.get("text", "")))
        return Action(kind)

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
