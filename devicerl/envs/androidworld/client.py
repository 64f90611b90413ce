"""A client of AndroidWorld's HTTP server, and the task instances it serves.

The server is google-research/android_world's ``server/android_server.py`` (FastAPI, marked
experimental), read at commit d9c569f764b3a5629321858de03ff653d0f24056. FastAPI takes a
handler's scalar arguments from the query string, so every route is called with query
parameters except ``POST /execute_action``, whose argument is a dict: a JSON body holding a
``JSONAction``'s fields (``android_world/env/json_action.py``). The routes used here:

- ``GET /suite/reinitialize?n_task_combinations=&seed=&task_family=``: a new suite, made by
  ``suite_utils.create_suite`` (each task type instantiated ``n_task_combinations`` times with
  parameters drawn from a seed derived from ``seed``, the type and the index), replacing the
  server's; an unknown family is HTTP 400;
- ``GET /suite/task_list?max_index=-1`` (every task type, sorted), ``GET
  /suite/task_length?task_type=`` (its instances);
- ``GET /task/goal``, ``POST /task/initialize``, ``GET /task/score`` (``{"score": float}``,
  ``TaskEval.is_successful``), ``POST /task/tear_down``, each with ``task_type`` and
  ``task_idx``;
- ``POST /execute_action`` with ``{"action_type": "answer", "text": ...}`` (stored as the
  environment's ``interaction_cache``, which the information-retrieval tasks' checker reads)
  or ``{"action_type": "open_app", "app_name": ...}`` (``adb_utils.launch_app``: AndroidWorld's
  own table of app names);
- ``GET /health``.

An exception inside a handler (a task that fails to initialise, an unknown task type, a second
``initialize`` before ``tear_down``) is FastAPI's HTTP 500; a missing or mistyped parameter is
its HTTP 422. Here: an unreachable server raises `DeviceCrashed`, one that does not answer in
time `DeviceTimeout`, an HTTP 5xx `DeviceError` (the pool truncates the episode and restarts the
device), any other refusal `ConfigError` (our request or the server's version is wrong: a
restart would not help), and an answer that is not the JSON the route returns `DeviceCrashed`.
The server has no authentication: keep it on loopback or a private network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from devicerl.errors import ConfigError, DeviceCrashed, DeviceError, DeviceTimeout, TaskError
from devicerl.records import Task

if TYPE_CHECKING:  # httpx loads when a client is made, so `devicerl --help` stays fast
    import httpx

#: The commit of google-research/android_world whose server these routes follow.
SOURCE_COMMIT = "d9c569f764b3a5629321858de03ff653d0f24056"
#: The server the suite is listed from, and a device's server when it names none.
URL_VARIABLE = "ANDROIDWORLD_URL"
#: Task families the server's ``TaskRegistry.get_registry`` knows and this device runs; the
#: MiniWoB++ families start off the home screen and end on the page's reward, which the
#: server does not expose per step (use devicerl's own MiniWoB++ or BrowserGym's for them).
FAMILIES = ("android_world", "android", "information_retrieval")
#: A task type is a Python class name on the server.
_TASK_TYPE = re.compile(r"[A-Za-z_]\w{0,127}")
_URL = re.compile(r"https?://[^\s/?#]+(/[^\s?#]*)?")


@dataclass(frozen=True)
class SuiteParams:
    """Which suite the server makes (``/suite/reinitialize``): AndroidWorld's ``run.py``
    defaults are family ``android_world``, seed 30 and one combination per task type."""

    family: str = "android_world"
    seed: int = 30
    combinations: int = 1

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ConfigError(
                f"AndroidWorld task family {self.family!r} is not one of {', '.join(FAMILIES)}"
                " (MiniWoB++ runs on devicerl's miniwob/* or BrowserGym's devices)"
            )
        if self.combinations < 1:
            raise ConfigError(f"AndroidWorld combinations must be >= 1, got {self.combinations}")


@dataclass(frozen=True)
class Instance:
    """One task instance of a suite: ``task_idx`` of ``task_type``'s instances."""

    task_type: str
    task_idx: int
    suite: SuiteParams

    @classmethod
    def of(cls, task: Task) -> Instance:
        """The instance a task of the ``androidworld`` suite stands for (its params)."""
        p = task.params
        try:
            suite = SuiteParams(str(p["family"]), int(p["seed"]), int(p["combinations"]))
            inst = cls(str(p["task_type"]), int(p["task_idx"]), suite)
        except (KeyError, TypeError, ValueError) as e:
            raise TaskError(
                f"task {task.name} is not an AndroidWorld instance (params need task_type, "
                f"task_idx, family, seed, combinations: {e})"
            ) from None
        check_task_type(inst.task_type)
        return inst

    @property
    def query(self) -> dict[str, Any]:
        return {"task_type": self.task_type, "task_idx": self.task_idx}

    @property
    def task_params(self) -> dict[str, Any]:
        """What a `Task` of this instance carries in its params."""
        s = self.suite
        return {**self.query, "family": s.family, "seed": s.seed, "combinations": s.combinations}

    def __str__(self) -> str:
        return f"{self.task_type}/{self.task_idx}"


def check_task_type(name: str) -> str:
    if not _TASK_TYPE.fullmatch(name):
        raise TaskError(f"AndroidWorld task type {name[:80]!r} is not a class name")
    return name


def check_url(url: str, what: str) -> str:
    """``url`` without a trailing slash, or a one-line `ConfigError` naming ``what``."""
    if not isinstance(url, str) or not _URL.fullmatch(url.strip()):
        raise ConfigError(f"{what}: {url!r} is not an http(s) URL of an AndroidWorld server")
    return url.strip().rstrip("/")


class AndroidWorldClient:
    """One AndroidWorld server (see the module doc for the routes and the errors)."""

    def __init__(
        self, url: str, timeout_s: float = 300.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        import httpx

        self.url = check_url(url, "AndroidWorld server")
        self._http = httpx.Client(base_url=self.url, timeout=timeout_s, transport=transport)

    # -- suite ----------------------------------------------------------------------------------
    def health(self) -> None:
        self._call("GET", "/health")

    def reinitialize(self, suite: SuiteParams) -> None:
        query = {"n_task_combinations": suite.combinations, "seed": suite.seed}
        self._call("GET", "/suite/reinitialize", {**query, "task_family": suite.family})

    def task_list(self) -> list[str]:
        types = self._field(self._call("GET", "/suite/task_list", {"max_index": -1}), "task_list")
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            raise DeviceCrashed(f"AndroidWorld server {self.url}: task_list is not a list of names")
        return [check_task_type(t) for t in types]

    def task_length(self, task_type: str) -> int:
        answer = self._call("GET", "/suite/task_length", {"task_type": task_type})
        return self._typed(answer, "length", int)

    # -- one instance -----------------------------------------------------------------------
    def goal(self, inst: Instance) -> str:
        return self._typed(self._call("GET", "/task/goal", inst.query), "goal", str)

    def initialize(self, inst: Instance) -> None:
        self._call("POST", "/task/initialize", inst.query)

    def score(self, inst: Instance) -> float:
        """AndroidWorld's programmatic check of the device's state: 1.0 solved, 0.0 not, the
        share of parts done for a composite task."""
        return float(self._typed(self._call("GET", "/task/score", inst.query), "score", float))

    def tear_down(self, inst: Instance) -> None:
        self._call("POST", "/task/tear_down", inst.query)

    def execute(self, action: dict[str, Any]) -> None:
        """Have the server execute a JSONAction (its fields as a dict)."""
        self._call("POST", "/execute_action", body=action)

    def close(self) -> None:
        self._http.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _call(
        self,
        method: str,
        route: str,
        query: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> Any:
        import httpx

        where = f"AndroidWorld server {self.url}: {method} {route}"
        try:
            r = self._http.request(method, route, params=query, json=body)
        except httpx.TimeoutException:
            raise DeviceTimeout(f"{where}: no answer in time") from None
        except httpx.TransportError as e:
            raise DeviceCrashed(f"{where}: unreachable ({type(e).__name__}: {e})") from None
        if r.status_code >= 500:
            raise DeviceError(f"{where} failed: HTTP {r.status_code} {_detail(r)}")
        if r.status_code >= 400:
            raise ConfigError(f"{where} refused: HTTP {r.status_code} {_detail(r)}")
        try:
            return r.json()
        except ValueError:
            raise DeviceCrashed(f"{where}: the answer is not JSON ({r.text[:80]!r})") from None

    def _field(self, answer: Any, key: str) -> Any:
        if not isinstance(answer, dict) or key not in answer:
            raise DeviceCrashed(f"AndroidWorld server {self.url}: answered without {key!r}")
        return answer[key]

    def _typed(self, answer: Any, key: str, kind: type) -> Any:
        value = self._field(answer, key)
        ok = isinstance(value, (int, float)) if kind is float else isinstance(value, kind)
        if not ok or (kind is int and isinstance(value, bool)):
            raise DeviceCrashed(
                f"AndroidWorld server {self.url}: {key!r} is {type(value).__name__}, not "
                f"{kind.__name__}"
            )
        return value


def _detail(response: httpx.Response) -> str:
    """FastAPI's ``detail`` (or the body), short and on one line."""
    try:
        detail: Any = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    return " ".join(str(detail).split())[:300]
