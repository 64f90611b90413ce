"""The ``androidworld`` suite: AndroidWorld's task instances, as its server makes them.

Listing the suite asks the AndroidWorld server at ``$ANDROIDWORLD_URL`` to re-initialise its
suite (``/suite/reinitialize``) with the family, seed and number of combinations per task type
set by ``$ANDROIDWORLD_FAMILY`` (``android_world``: its 116 tasks; ``android``;
``information_retrieval``), ``$ANDROIDWORLD_SEED`` (30) and ``$ANDROIDWORLD_COMBINATIONS``
(1), the defaults of AndroidWorld's ``run.py``; then reads its task types and each instance's
goal. An instance is the task ``androidworld/<TaskType>/<index>``: the goal is its
instruction, AndroidWorld's step budget for the type its ``max_steps``
(`devicerl.tasks.androidworld_budgets`), ``androidworld`` its device
(`devicerl.envs.androidworld`), and the params say which instance of which suite it is, so
every device re-initialises its own server the same way. The instance seed a sampler draws
does not change an instance: an instance is its name (evaluate more instances with more
combinations).

A server that is unreachable, or that refuses, fails the listing in one line (`TaskError` /
`ConfigError`), before a run starts.
"""

from __future__ import annotations

import os

from devicerl.envs.androidworld.client import (
    URL_VARIABLE,
    AndroidWorldClient,
    Instance,
    SuiteParams,
    check_url,
)
from devicerl.errors import ConfigError, DeviceError, TaskError
from devicerl.records import Task
from devicerl.tasks.androidworld_budgets import STEP_BUDGETS

FAMILY_VARIABLE = "ANDROIDWORLD_FAMILY"
SEED_VARIABLE = "ANDROIDWORLD_SEED"
COMBINATIONS_VARIABLE = "ANDROIDWORLD_COMBINATIONS"
#: The budget of a task type AndroidWorld's source at the budgets' commit does not list.
DEFAULT_BUDGET = 20
#: Seconds each listing request may take (re-initialising makes every instance's parameters).
LIST_TIMEOUT_S = 120.0
DOCS = "docs/bring-your-benchmark.md#androidworld"


def server_url() -> str:
    """``$ANDROIDWORLD_URL``, or a one-line `ConfigError` saying to set it."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        raise ConfigError(
            f"androidworld tasks come from an AndroidWorld server: set {URL_VARIABLE} "
            f"(e.g. http://127.0.0.1:5000; {DOCS})"
        )
    return check_url(url, URL_VARIABLE)


def suite_params() -> SuiteParams:
    """The suite the variables ask for (AndroidWorld's ``run.py`` defaults otherwise)."""
    defaults = SuiteParams()
    numbers = {}
    for name, default in (
        (SEED_VARIABLE, defaults.seed),
        (COMBINATIONS_VARIABLE, defaults.combinations),
    ):
        raw = os.environ.get(name) or str(default)
        try:
            numbers[name] = int(raw)
        except ValueError:
            raise ConfigError(f"{name}={raw[:40]!r} is not an integer") from None
    family = os.environ.get(FAMILY_VARIABLE) or defaults.family
    try:
        return SuiteParams(family, numbers[SEED_VARIABLE], numbers[COMBINATIONS_VARIABLE])
    except ConfigError as e:
        raise ConfigError(f"{FAMILY_VARIABLE} / {COMBINATIONS_VARIABLE}: {e}") from None


def task_of(inst: Instance, goal: str) -> Task:
    """The `Task` of one instance."""
    budget = STEP_BUDGETS.get(inst.task_type, DEFAULT_BUDGET)
    name = f"androidworld/{inst.task_type}/{inst.task_idx}"
    return Task(name, goal, budget, "androidworld", inst.task_params)


def androidworld_tasks() -> list[Task]:
    """The ``androidworld`` suite (see the module doc)."""
    url, params = server_url(), suite_params()
    client = AndroidWorldClient(url, LIST_TIMEOUT_S)
    tasks = []
    try:
        client.reinitialize(params)
        for task_type in client.task_list():
            for idx in range(client.task_length(task_type)):
                inst = Instance(task_type, idx, params)
                tasks.append(task_of(inst, client.goal(inst)))
    except DeviceError as e:
        raise TaskError(f"androidworld: {e} ({URL_VARIABLE}; {DOCS})") from None
    finally:
        client.close()
    if not tasks:
        raise TaskError(f"androidworld: the server at {url} lists no tasks for {params}")
    return tasks


def androidworld_needs() -> list[str]:
    """What AndroidWorld tasks need (`devicerl tasks`), and whether this machine has it."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        state = f"{URL_VARIABLE} not set"
    else:
        state = f"{URL_VARIABLE}={url}: {_reachable(url)}"
    try:
        params = suite_params()
        suite = f"family {params.family}, seed {params.seed}, {params.combinations} per task"
    except ConfigError as e:
        suite = str(e)
    return [
        f"an AndroidWorld server (google-research/android_world server/android_server.py) "
        f"[{state}]",
        f"its suite: {suite} ({FAMILY_VARIABLE}, {SEED_VARIABLE}, {COMBINATIONS_VARIABLE})",
        f"the same emulator over adb for the androidworld device [{_adb_state()}]; several "
        "emulators: env.options servers: {serial: url}",
    ]


def _reachable(url: str) -> str:
    try:
        client = AndroidWorldClient(url, timeout_s=3.0)
    except ConfigError as e:
        return str(e)
    try:
        client.health()
        return "reachable"
    except (DeviceError, ConfigError) as e:
        return f"not reachable ({e})"
    finally:
        client.close()


def _adb_state() -> str:
    """The local adb server's online devices (the android device's default server)."""
    try:
        from devicerl.envs.android.adb import AdbClient, list_devices
    except ConfigError:
        return "adbutils missing: pip install 'devicerl[android]'"
    try:
        listed = list_devices(AdbClient("127.0.0.1", 5037, 3.0), "adb")
    except DeviceError:
        return "no adb server at 127.0.0.1:5037"
    online = [serial for serial, state in listed if state == "device"]
    return f"adb 127.0.0.1:5037: {', '.join(online) or 'no device online'}"
