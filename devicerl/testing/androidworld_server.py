"""A stand-in for AndroidWorld's HTTP server on loopback, with a few scripted tasks.

It follows google-research/android_world's ``server/android_server.py`` at commit
d9c569f764b3a5629321858de03ff653d0f24056 route by route, as FastAPI serves it: the same paths
and methods; scalar arguments from the query string (``task_type``, ``task_idx``,
``max_index``, ``go_home``...), parsed as FastAPI parses them (a missing or mistyped one is HTTP
422 with FastAPI's ``detail`` list); ``/execute_action``'s JSON body made into a ``JSONAction``
(``env/json_action.py``: an unknown action type or field fails); the same answers (``{"goal":
...}``, ``{"score": ...}``, ``{"status": "success", "message": ...}``); an exception inside a
handler is HTTP 500 ``Internal Server Error``, an unknown family on ``/suite/reinitialize``
HTTP 400. The suite behaves as ``suite_utils.create_suite`` makes it (each task type
instantiated ``n_task_combinations`` times, instance ``i`` drawing its parameters from the seed
``sha256(f"{seed}_{name}_{i}") % 2**32``, sorted by name; the server starts with seed 42 and 2
combinations), and its instances as ``task_evals/task_eval.py``'s ``TaskEval`` (initialising
clears ``interaction_cache`` and fails when already initialised; scoring fails before
initialising; tearing down ends it). Executing ``answer`` stores the text as
``interaction_cache`` and ``status`` does nothing, as ``env/interface.py`` does;
``open_app`` starts the activity AndroidWorld's name table (``env/adb_utils.py``, the entries
`APPS` copies) gives for the name, with the table's ``re.match`` rule, through the device's
shell (``am start -n``), else ``monkey -p NAME 1``.

What differs: the emulator is a `devicerl.testing.fake_adb.FakeDevice` (shared with the fake
adb server the device under test uses), the tasks are scripted (`SCRIPTED_TASKS`: their goals
and checks read that device and the answer, not app databases), no overlay is drawn for an
answer, and the other action types are not executed here (HTTP 500). Faults: `stop` takes the
server down (connections refused), `start` brings it back on the same port holding its
starting suite, as a restarted server would. `events` records every initialise and tear-down.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from devicerl.testing.fake_adb import FakeDevice

#: AndroidWorld's app-name patterns -> activities, for the apps the scripted tasks use.
APPS = {
    "camera": "com.android.camera2/com.android.camera.CameraLauncher",
    "clock": "com.google.android.deskclock/com.android.deskclock.DeskClock",
    "contacts": "com.google.android.contacts/com.android.contacts.activities.PeopleActivity",
    "settings|system settings": "com.android.settings/.Settings",
    "dialer|phone": (
        "com.google.android.dialer/com.google.android.dialer.extensions.GoogleDialtactsActivity"
    ),
    "markor": "net.gsantner.markor/net.gsantner.markor.activity.MainActivity",
}
#: JSONAction's fields and action types (``env/json_action.py``).
ACTION_FIELDS = {"action_type", "index", "x", "y", "text", "direction", "goal_status",
                 "app_name", "keycode", "clear_text"}  # fmt: skip
ACTION_TYPES = {"click", "double_tap", "scroll", "swipe", "input_text", "navigate_home",
                "navigate_back", "keyboard_enter", "open_app", "status", "wait", "long_press",
                "answer", "unknown"}  # fmt: skip
FAMILIES = ("android_world", "android", "information_retrieval", "miniwob", "miniwob_subset")


@dataclass(frozen=True)
class ScriptedTask:
    """A task type: a goal template, parameters drawn from a seeded RNG, and a check that
    scores the device and the answer (``check(device, answer, params) -> score``)."""

    name: str
    template: str
    params: Callable[[random.Random], dict[str, Any]]
    check: Callable[[FakeDevice, str, dict[str, Any]], float]
    retrieval: bool = False  #: an information-retrieval task (scored by the answer)


def _package(activity: str | None) -> str:
    return (activity or "").split("/", 1)[0]


SCRIPTED_TASKS = (
    ScriptedTask(
        "OpenAppTaskEval",
        "Open the {app_name} app. Clear any pop-ups that may appear by granting all "
        "permissions that are required.",
        lambda rng: {"app_name": rng.choice(["camera", "clock", "contacts", "settings"])},
        lambda dev, answer, p: float(
            _package(dev.foreground) == _package(_activity(p["app_name"]))
        ),
    ),
    ScriptedTask(
        "MarkorCreateNote",
        "Create a new note in Markor named {file_name} with the following text: {text}",
        lambda rng: {
            "file_name": f"note_{rng.randrange(1000)}.md",
            "text": rng.choice(["buy milk", "call Ada", "water the plants"]),
        },
        lambda dev, answer, p: float(
            _package(dev.foreground) == "net.gsantner.markor" and p["text"] in dev.typed
        ),
    ),
    ScriptedTask(
        "SumRetrieval",
        "What is {a} plus {b}? Answer with the number only.",
        lambda rng: {"a": rng.randrange(100), "b": rng.randrange(100)},
        lambda dev, answer, p: float(answer.strip() == str(p["a"] + p["b"])),
        retrieval=True,
    ),
)


def _activity(app_name: str) -> str | None:
    """AndroidWorld's ``get_adb_activity``: the first pattern that matches the name's start."""
    for pattern, activity in APPS.items():
        if re.match(pattern.lower(), app_name.lower()):
            return activity
    return None


@dataclass
class _Instance:
    """One instance of a task type (AndroidWorld's ``TaskEval``)."""

    task: ScriptedTask
    params: dict[str, Any]
    initialized: bool = False

    @property
    def goal(self) -> str:
        return self.task.template.format(**self.params)


class _Refused(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass
class _Route:
    handler: Callable[..., Any]
    #: query parameter -> (type, default); no default: required.
    query: dict[str, tuple[type, Any]] = field(default_factory=dict)
    body: bool = False


_REQUIRED = object()
_TASK = {"task_type": (str, _REQUIRED), "task_idx": (int, _REQUIRED)}
_SUITE = {"n_task_combinations": (int, 2), "seed": (int, 42), "task_family": (str, "android_world")}


class AndroidWorldStandIn:
    """``with AndroidWorldStandIn(device) as server: ... server.url ...`` (module doc)."""

    def __init__(
        self,
        device: FakeDevice,
        tasks: tuple[ScriptedTask, ...] = SCRIPTED_TASKS,
        host: str = "127.0.0.1",
    ) -> None:
        self.device, self.tasks, self.host = device, tasks, host
        self.port = 0
        self.events: list[tuple[str, str, int]] = []  #: ("initialize"|"tear_down", type, idx)
        #: (method, path, query, JSON body or None) of every request
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.interaction_cache = ""
        self._lock = threading.RLock()
        self._httpd: ThreadingHTTPServer | None = None
        self._suite: dict[str, list[_Instance]] = {}
        t = _TASK
        self.routes = {
            ("POST", "/reset"): _Route(self._reset, {"go_home": (bool, _REQUIRED)}),
            ("GET", "/screenshot"): _Route(
                self._screenshot, {"wait_to_stabilize": (bool, _REQUIRED)}
            ),
            ("POST", "/execute_action"): _Route(self._execute, body=True),
            ("GET", "/suite/task_list"): _Route(self._task_list, {"max_index": (int, _REQUIRED)}),
            ("GET", "/suite/task_length"): _Route(
                lambda task_type: {"length": len(self._suite[task_type])},
                {"task_type": (str, _REQUIRED)},
            ),
            ("GET", "/suite/reinitialize"): _Route(self._reinitialize, _SUITE),
            ("POST", "/task/initialize"): _Route(self._initialize, t),
            ("POST", "/task/tear_down"): _Route(self._tear_down, t),
            ("GET", "/task/score"): _Route(self._score, t),
            ("GET", "/task/goal"): _Route(lambda **q: {"goal": self._instance(**q).goal}, t),
            ("GET", "/task/template"): _Route(
                lambda **q: {"template": self._instance(**q).task.template}, t
            ),
            ("POST", "/close"): _Route(lambda: {"status": "success"}),
            ("GET", "/health"): _Route(lambda: {"status": "success"}),
        }

    # -- life ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> AndroidWorldStandIn:
        """Serve (again, on the same port after `stop`), holding the starting suite."""
        with self._lock:
            self._suite = self._make_suite(2, 42, "android_world")
            self.interaction_cache = ""
        self._httpd = ThreadingHTTPServer((self.host, self.port), self._handler())
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """The server goes down: connections are refused until `start`."""
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    def __enter__(self) -> AndroidWorldStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def count(self, event: str) -> int:
        """How many times ``event`` (``initialize`` or ``tear_down``) happened."""
        return sum(e[0] == event for e in self.events)

    def goal(self, task_type: str, task_idx: int) -> str:
        """The goal of an instance of the suite the server holds now."""
        with self._lock:
            return self._instance(task_type, task_idx).goal

    # -- the suite ------------------------------------------------------------------------------
    def _make_suite(self, n: int, seed: int, family: str) -> dict[str, list[_Instance]]:
        suite = {}
        for task in self.tasks:
            if family == "information_retrieval" and not task.retrieval:
                continue
            if family in ("android", "miniwob", "miniwob_subset") and task.retrieval:
                continue
            instances = []
            for i in range(n):
                key = f"{seed}_{task.name}_{i}".encode()
                instance_seed = int(hashlib.sha256(key).hexdigest(), 16) % 2**32
                params = {**task.params(random.Random(instance_seed)), "seed": instance_seed}
                instances.append(_Instance(task, params))
            suite[task.name] = instances
        return dict(sorted(suite.items()))

    def _instance(self, task_type: str, task_idx: int) -> _Instance:
        return self._suite[task_type][task_idx]  # KeyError / IndexError: HTTP 500

    # -- handlers -----------------------------------------------------------------------------
    def _reinitialize(self, n_task_combinations: int, seed: int, task_family: str) -> dict:
        if task_family not in FAMILIES:
            raise _Refused(400, f"Invalid task family: {task_family}")
        self._suite = self._make_suite(n_task_combinations, seed, task_family)
        return _done(
            f"Task suite re-initialized with n_task_combinations={n_task_combinations}, "
            f"seed={seed}."
        )

    def _task_list(self, max_index: int) -> dict:
        names = list(self._suite)
        if max_index > len(names) or max_index < 0:
            return {"task_list": names}
        return {"task_list": names[:max_index]}

    def _initialize(self, task_type: str, task_idx: int) -> dict:
        inst = self._instance(task_type, task_idx)
        self.interaction_cache = ""
        if inst.initialized:
            raise RuntimeError(f"{task_type}.initialize_task() is already called.")
        inst.initialized = True
        self.device.foreground, self.device.typed = None, ""  # the apps' state is restored
        self.events.append(("initialize", task_type, task_idx))
        return _done(f"Task {task_type} {task_idx} initialized.")

    def _tear_down(self, task_type: str, task_idx: int) -> dict:
        inst = self._instance(task_type, task_idx)
        inst.initialized = False
        self.events.append(("tear_down", task_type, task_idx))
        return _done(f"Task {task_type} {task_idx} torn down.")

    def _score(self, task_type: str, task_idx: int) -> dict:
        inst = self._instance(task_type, task_idx)
        if not inst.initialized:
            raise RuntimeError(f"{task_type}.initialize_task() must be called first.")
        if inst.task.retrieval and not self.interaction_cache:
            return {"score": 0.0}
        return {"score": inst.task.check(self.device, self.interaction_cache, inst.params)}

    def _execute(self, body: Any) -> dict:
        if not isinstance(body, dict):
            raise _Refused(422, [{"type": "dict_type", "loc": ["body"], "msg": "not a dict"}])
        unknown = set(body) - ACTION_FIELDS
        if unknown or body.get("action_type") not in ACTION_TYPES:
            raise ValueError(f"Invalid action: {body}")  # JSONAction(**body) fails: HTTP 500
        kind = body["action_type"]
        if kind == "answer":
            self.interaction_cache = body.get("text") or ""
        elif kind == "open_app":
            name = body.get("app_name")
            if not name:
                raise ValueError("No app name provided")
            activity = _activity(name)
            line = f"am start -n {activity}" if activity else f"monkey -p {shlex.quote(name)} 1"
            self.device.run(line)
        elif kind != "status":
            raise NotImplementedError(f"the stand-in does not perform {kind}")
        return _done(f"Action {body} executed.")

    def _reset(self, go_home: bool) -> dict:
        if go_home:
            self.device.run("input keyevent 3")
        self.interaction_cache = ""
        return _done(f"Environment reset with go_home={go_home}.")

    def _screenshot(self, wait_to_stabilize: bool) -> dict:
        return {"pixels": self.device.screens[self.device.screen].image.tolist()}

    # -- HTTP -----------------------------------------------------------------------------------
    def _answer(self, method: str, target: str, body: bytes) -> tuple[int, Any]:
        """(status, JSON answer, or a str for a plain-text one) of one request."""
        parts = urlsplit(target)
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        with self._lock:
            try:
                recorded: Any = json.loads(body or b"null")
            except ValueError:
                recorded = body
            self.requests.append((method, parts.path, query, recorded))
            route = self.routes.get((method, parts.path))
            if route is None:
                known = any(path == parts.path for _, path in self.routes)
                return (405, {"detail": "Method Not Allowed"}) if known else (
                    404, {"detail": "Not Found"})  # fmt: skip
            try:
                args = _parse_query(route.query, query)
                if route.body:
                    args["body"] = _json_body(body)
                return 200, route.handler(**args)
            except _Refused as e:
                return e.status, {"detail": e.detail}
            except Exception:
                return 500, "Internal Server Error"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: `stop` cuts them all

            def _serve(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                status, answer = server._answer(self.command, self.path, self.rfile.read(size))
                text = isinstance(answer, str)
                data = answer.encode() if text else json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "text/plain" if text else "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _serve

            def log_message(self, *args: Any) -> None:
                pass

        return Handler


def _done(message: str) -> dict[str, str]:
    return {"status": "success", "message": message}


_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


def _parse_query(spec: dict[str, tuple[type, Any]], query: dict[str, str]) -> dict[str, Any]:
    """The handler's arguments from the query string, or HTTP 422 with FastAPI's details."""
    args, errors = {}, []
    for name, (kind, default) in spec.items():
        raw = query.get(name)
        if raw is None:
            if default is _REQUIRED:
                errors.append({"type": "missing", "loc": ["query", name], "msg": "Field required",
                               "input": None})  # fmt: skip
            args[name] = default
            continue
        value: Any = raw
        if kind is int:
            value = int(raw) if re.fullmatch(r"[+-]?\d+", raw.strip()) else None
        elif kind is bool:
            low = raw.strip().lower()
            value = True if low in _TRUE else False if low in _FALSE else None
        if value is None:
            what = kind.__name__
            errors.append(
                {"type": f"{what}_parsing", "loc": ["query", name], "input": raw,
                 "msg": f"Input should be a valid {what}"}
            )  # fmt: skip
        args[name] = value
    if errors:
        raise _Refused(422, errors)
    return args


def _json_body(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except ValueError:
        raise _Refused(
            422, [{"type": "json_invalid", "loc": ["body"], "msg": "JSON decode error"}]
        ) from None
