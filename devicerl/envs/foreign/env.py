"""`ForeignEnv`: a device whose own code runs under another Python interpreter.

The device object the pool's worker hosts is this class, in our environment; the device it
stands for runs in a child process under ``python`` (another virtual environment, with
packages that conflict with ours), behind `ForeignProcess`. So a foreign device joins the same
pool, supervision, truncation, restart and Ray placement as every other device: to the pool it
is a `DeviceEnv` like the others, and the child lives and dies with the worker that hosts it.

``make("foreign", python=PATH, device="my_env.py:MyDevice", options={...})`` runs any device
class written to the plain-data protocol (`devicerl.envs.foreign.remote`); device kinds built
on it (`devicerl.envs.browsergym`) subclass it and translate actions their own way
(`encode_action`). Every action, invalid and terminal ones included, is sent to the foreign
device, which performs the valid, non-terminal ones and observes after each; the episode rules
(`DeviceEnv`) are applied here, on what it reports.
"""

from __future__ import annotations

from typing import Any

from devicerl.actions import Action
from devicerl.envs.base import DeviceEnv
from devicerl.envs.foreign.options import ForeignOptions
from devicerl.envs.foreign.plain import observation_from_plain, status_from_plain, task_to_plain
from devicerl.envs.foreign.process import ForeignProcess
from devicerl.envs.foreign.remote import ProtocolError
from devicerl.errors import ConfigError, DeviceError
from devicerl.records import Observation, Task, TaskStatus


class ForeignEnv(DeviceEnv):
    """A `DeviceEnv` whose device runs in another interpreter (see the module doc)."""

    name = "foreign"

    def __init__(self, task: Task | str | None = None, options: ForeignOptions | None = None):
        super().__init__(task)
        if options is None:
            raise ConfigError("a foreign device needs its options: python and device")
        self.options = options
        self.process = ForeignProcess(
            options.python, options.device, dict(options.options), self.label
        )
        self.last_observation: Observation | None = None
        #: What the foreign side said about the episode at its reset (not an observation).
        self.reset_info: dict[str, Any] = {}

    @property
    def label(self) -> str:
        return f"foreign device {self.options.device}"

    @property
    def versions(self) -> dict[str, str]:
        """Package versions the foreign side reported when it started (``python`` included)."""
        return dict(self.process.versions)

    @property
    def screen_size(self) -> tuple[int, int]:
        if self.last_observation is None:
            raise DeviceError(f"{self.label}: no screen before the first reset")
        return self.last_observation.screen_size

    def encode_action(self, action: Action) -> dict[str, Any]:
        """What the foreign device receives for ``action`` (here: the action's JSON record)."""
        return action.to_dict()

    def _reset(self, task: Task, seed: int) -> Observation:
        message = {"op": "reset", "task": task_to_plain(task), "seed": seed}
        answer, blob = self.process.call(message)
        self.reset_info = dict(answer.get("info") or {})
        obs = self._read(lambda: observation_from_plain(answer.get("observation"), blob))
        self.last_observation = obs
        return obs

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        answer, blob = self.process.call({"op": "step", "action": self.encode_action(action)})
        obs = self._read(lambda: observation_from_plain(answer.get("observation"), blob))
        status = self._read(lambda: status_from_plain(answer.get("status")))
        self.last_observation = obs
        return obs, status

    def _read(self, decode: Any) -> Any:
        try:
            return decode()
        except (ProtocolError, ValueError, TypeError) as e:
            raise DeviceError(f"{self.label} sent bad data: {e}") from None

    def process_ids(self) -> list[int]:
        """The foreign process (tests check that none outlives its device)."""
        return [self.process.pid]

    def _close(self) -> None:
        self.process.close()
