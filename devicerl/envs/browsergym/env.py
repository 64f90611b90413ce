"""`BrowserGymEnv`: any registered ``browsergym/...`` task as a device.

BrowserGym pins ``playwright==1.44`` (we resolve a newer one), so its code runs in its own
environment through a foreign device (`devicerl.envs.foreign`): the adapter
`devicerl.envs.browsergym.remote` over there, the translation of our actions into BrowserGym
action strings here (`devicerl.envs.browsergym.actions`). The environment is found in the
cache `devicerl.envs.foreign.venv` keeps (``devicerl env browsergym`` builds it once) unless
``python`` names one (with more benchmark packages, for instance).

Chromium is the system's (``find_chromium``: nothing is downloaded). A task whose benchmark's
servers are not configured is refused in one line before anything starts
(`devicerl.envs.browsergym.benchmarks`). Reward, termination and BrowserGym's task info come
back in the step's info (``task_info``, ``browsergym_action``, ``last_action_error``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devicerl.actions import Action
from devicerl.envs.browser.launcher import find_chromium
from devicerl.envs.browsergym.actions import NOOP, Unmappable, to_browsergym
from devicerl.envs.browsergym.benchmarks import benchmark_of
from devicerl.envs.browsergym.options import BrowserGymOptions
from devicerl.envs.foreign.env import ForeignEnv
from devicerl.envs.foreign.options import ForeignOptions
from devicerl.envs.foreign.venv import find_env
from devicerl.errors import ConfigError, TaskError
from devicerl.records import Observation, Task
from devicerl.secrets import register as register_secret

#: BrowserGym's environment as ``devicerl env browsergym`` builds it (MiniWoB++ and open-ended
#: tasks; other benchmarks need their package installed into an environment of your own).
REQUIREMENTS = ("browsergym-core==0.14.3", "browsergym-miniwob==0.14.3")
#: The foreign side of the device.
REMOTE = f"{Path(__file__).with_name('remote.py')}:BrowserGymDevice"
#: Variables whose values are secrets although their names do not say so.
_SECRETS = ("SNOW_INSTANCE_PWD",)


def browsergym_python(python: str | None) -> str:
    """``python``, or the cached BrowserGym environment's interpreter; refuses in one line when
    there is none."""
    if python:
        return python
    found = find_env(REQUIREMENTS)
    if found is None:
        raise ConfigError(
            "browsergym devices run in BrowserGym's own environment: build it once with "
            "`devicerl env browsergym`, or pass python=PATH"
        )
    return str(found)


class BrowserGymEnv(ForeignEnv):
    """``make("browsergym/miniwob.click-test")``: a BrowserGym task as a device."""

    name = "browsergym"

    def __init__(
        self, task: Task | str | None = None, options: BrowserGymOptions | None = None
    ) -> None:
        opts = options if options is not None else BrowserGymOptions()
        register_secret(*_SECRETS)
        remote = {"chromium": find_chromium(opts.chromium), "miniwob_url": opts.miniwob_url}
        super().__init__(task, ForeignOptions(browsergym_python(opts.python), REMOTE, remote))
        self.browsergym = opts
        self._code = NOOP
        #: The episode's first page (where ``home`` goes).
        self.start_url = ""

    @property
    def label(self) -> str:
        return "browsergym device"

    def resolve_task(self, task: Task | str | None) -> Task:
        """Any ``browsergym/...`` name runs, listed by our suite or not (AgentLab's step
        budget and action set for its benchmark)."""
        task = task if task is not None else self.default_task
        if isinstance(task, str):
            try:
                return super().resolve_task(task)
            except TaskError:
                bench = benchmark_of(task)
                params = {"action_subsets": list(bench.action_subsets)}
                return Task(task, max_steps=bench.max_steps, env=self.name, params=params)
        return super().resolve_task(task)

    def _reset(self, task: Task, seed: int) -> Observation:
        bench = benchmark_of(task.name)
        missing = bench.missing()
        if missing:
            raise ConfigError(
                f"{task.name} needs {', '.join(missing)} ({bench.name}: {bench.needs()}; "
                "docs/bring-your-benchmark.md)"
            )
        if bench.name == "openended" and not (task.params.get("task_kwargs") or {}).get(
            "start_url"
        ):
            raise TaskError(f"{task.name} needs params task_kwargs.start_url (and a goal)")
        if "action_subsets" not in task.params:
            task = Task(
                task.name, task.instruction, task.max_steps, task.env,
                {**task.params, "action_subsets": list(bench.action_subsets)},
            )  # fmt: skip
        obs = super()._reset(task, seed)
        self.start_url = str(obs.extras.get("url") or "")
        return obs

    def _check_action(self, action: Action) -> Action:
        """The action's BrowserGym string is chosen here; one the benchmark's action set
        cannot express becomes an invalid action (a recorded no-op)."""
        assert self.last_observation is not None
        available = self.reset_info.get("action_set") or ()
        try:
            obs, url = self.last_observation, self.start_url
            self._code = to_browsergym(action, obs, available, url, self.answer)
        except Unmappable as e:
            self._code = NOOP
            return Action.invalid(action.describe(), str(e))
        return action

    def encode_action(self, action: Action) -> dict[str, Any]:
        return {"code": self._code}

    def _step(self, action: Action):
        obs, status = super()._step(action)
        self._code = NOOP
        return obs, status
