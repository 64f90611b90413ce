"""`AndroidWorldEnv`: AndroidWorld's tasks on our ADB device (``make("androidworld", ...)``).

Two parts act on one emulator: AndroidWorld's server (`devicerl.envs.androidworld.client`)
owns the task (its suite, goal, initialisation, score and tear-down), and our `AndroidEnv`
owns the screen (screenshots and UI elements over ADB, as on any phone). An episode:

- reset: tear down a task this device left initialised; re-initialise the server's suite with
  the instance's family, seed and combinations (every reset: a server that restarted holds its
  default suite again); read the instance's goal, which must be the instruction the suite was
  listed with (`TaskError` otherwise: the servers of a fleet disagree on what the instance
  is); ``POST /task/initialize``; then the Android reset (HOME, settle, observe), as
  AndroidWorld starts its tasks on the home screen after initialising them;
- each action takes one path. The server executes ANSWER (``{"action_type": "answer"}``: its
  ``interaction_cache``, which the information-retrieval tasks' checker reads, and the overlay
  that shows the answer) and OPEN_APP (``{"action_type": "open_app"}``: AndroidWorld's own
  table of app names, the names its goals use, e.g. "Pro Expense", where our launcher
  matching would miss; a name outside its table goes to ``monkey -p NAME``, so it is never
  an invalid action here). Everything else goes over ADB as on the android device: taps,
  swipes, typing, keys, long presses (a held ``input swipe``), waits (a sleep of the action's
  duration; AndroidWorld's own wait sleeps one second). Task complete / impossible send
  nothing (AndroidWorld's ``status`` action does nothing either) and end the episode;
- on the episode's last step (the agent ended it, or the step budget is spent) the device asks
  ``GET /task/score`` and tears the task down. As AndroidWorld's suite runner counts it
  (``agent_successful = task_successful if done else 0``), only an episode the agent ended
  can succeed: success is a score of 1.0 (every part of a composite task), ``raw_reward`` the
  score; the step's info keeps the score (``androidworld_score``) either way. The task-native
  judge reads that success (``judge.kind: native``), no model involved.

Failures: the server unreachable or failing (HTTP 5xx) mid-episode raises a `DeviceError`, so
the pool truncates the episode (never a failure) and restarts the device, whose next reset
re-initialises the suite. A tear-down that fails after the score was read keeps the verdict,
says so in the step's info and is retried by the next reset.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.envs.android.env import AndroidEnv
from devicerl.envs.androidworld.client import (
    URL_VARIABLE,
    AndroidWorldClient,
    Instance,
    check_url,
)
from devicerl.envs.androidworld.options import AndroidWorldOptions
from devicerl.envs.base import DeviceEnv
from devicerl.errors import ConfigError, DeviceError, TaskError
from devicerl.records import Observation, Task, TaskStatus


class AndroidWorldEnv(AndroidEnv):
    """AndroidWorld tasks on an emulator its server controls (see the module doc).

    ``servers`` maps adb serials to their AndroidWorld servers (``{emulator-5554:
    http://127.0.0.1:5000}``): the device claims a free one of those serials, as the android
    device claims any free device, and talks to that serial's server. Without it, the one
    server at ``$ANDROIDWORLD_URL`` (one emulator). ``server_timeout_s`` bounds each request
    (initialising a task restores app data: seconds to a minute). Every other option is the
    android device's (`AndroidEnv`), except ``snapshot``: loaded after AndroidWorld's
    initialisation, a snapshot would undo it.
    """

    name = "androidworld"

    def __init__(
        self, task: Task | str | None = None, options: AndroidWorldOptions | None = None
    ) -> None:
        o = options if options is not None else AndroidWorldOptions()
        self.servers = {str(k): check_url(u, f"servers[{k}]") for k, u in (o.servers or {}).items()}
        self.default_url: str | None = None
        if self.servers:
            picked = [o.serial] if o.serial else o.serials
            unknown = [s for s in picked or () if s not in self.servers]
            if unknown:
                raise ConfigError(f"androidworld: serial {unknown[0]!r} has no entry in servers")
            if o.serials is None:
                o = dataclasses.replace(o, serials=tuple(self.servers))
        else:
            url = os.environ.get(URL_VARIABLE)
            if not url:
                raise ConfigError(
                    f"androidworld: no AndroidWorld server: set {URL_VARIABLE} (one emulator) or "
                    "the device option servers: {serial: url}"
                )
            self.default_url = check_url(url, URL_VARIABLE)
        super().__init__(task, o)
        self.server_timeout_s = o.server_timeout_s
        self._clients: dict[str, AndroidWorldClient] = {}
        #: The task this device initialised and has not torn down, on its server.
        self._open: tuple[AndroidWorldClient, Instance] | None = None
        self._sent: dict[str, Any] | None = None  # what the server executed this step

    # -- the server -----------------------------------------------------------------------------
    def _server(self) -> AndroidWorldClient:
        """The server of the emulator this device is connected to."""
        url = self.servers.get(str(self._live().serial), self.default_url)
        assert url is not None  # serials are restricted to the servers' keys
        if url not in self._clients:
            self._clients[url] = AndroidWorldClient(url, self.server_timeout_s)
        return self._clients[url]

    def _tear_down_open(self) -> None:
        if self._open is not None:
            server, inst = self._open
            server.tear_down(inst)
            self._open = None

    def _execute(self, command: dict[str, Any]) -> None:
        assert self._open is not None
        self._open[0].execute(command)
        self._sent = command

    # -- DeviceEnv hooks ----------------------------------------------------------------------
    def _reset(self, task: Task, seed: int) -> Observation:
        inst = Instance.of(task)
        self._connect()
        server = self._server()
        self._tear_down_open()
        server.reinitialize(inst.suite)
        goal = server.goal(inst)
        if task.instruction is not None and task.instruction != goal:
            raise TaskError(
                f"{task.name}: {server.url} gives the goal {goal[:80]!r}, but the suite was "
                f"listed with {task.instruction[:80]!r} (do the servers run the same "
                "AndroidWorld version with the same suite settings?)"
            )
        server.initialize(inst)
        self._open = (server, inst)
        self.task = dataclasses.replace(task, instruction=goal)
        return super()._reset(self.task, seed)

    def _check_action(self, action: Action) -> Action:
        """OPEN_APP is the server's (its name table), not resolved on the phone here."""
        if action.type is ActionType.OPEN_APP:
            return DeviceEnv._check_action(self, action)
        return super()._check_action(action)

    def _act(self, action: Action) -> None:
        if action.type is ActionType.OPEN_APP:
            self._execute({"action_type": "open_app", "app_name": action.app})
            time.sleep(self.step_settle_s)
        else:
            super()._act(action)

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        assert self.task is not None
        self._sent = None
        if action.type is ActionType.ANSWER:
            self._execute({"action_type": "answer", "text": action.text})
        obs, status = super()._step(action)
        if self._sent is not None:
            status.info["androidworld_action"] = self._sent
        if action.is_terminal or self.steps_taken + 1 >= self.task.max_steps:
            status = self._verdict(action, status)
        return obs, status

    def _verdict(self, action: Action, status: TaskStatus) -> TaskStatus:
        """AndroidWorld's score of the episode's last step; the task is torn down."""
        assert self._open is not None
        server, inst = self._open
        score = server.score(inst)
        info = {**status.info, "androidworld_score": score}
        try:
            self._tear_down_open()
        except DeviceError as e:  # the verdict stands; the next reset tears it down
            info["androidworld_tear_down_error"] = str(e)
        counts = action.is_terminal
        return TaskStatus(success=counts and score >= 1.0, raw_reward=score if counts else 0.0,
                          info=info)  # fmt: skip

    def _close(self) -> None:
        with contextlib.suppress(DeviceError, ConfigError):
            self._tear_down_open()
        for client in self._clients.values():
            client.close()
        super()._close()
