"""MiniWoB++ on our browser device: every task whose HTML ships in the ``miniwob`` package.

- Tasks are ``miniwob/<name>`` (``miniwob/click-test``, ``miniwob/flight.AA``, ...), one per
  HTML file in the package, each with a step budget (`step_budget`).
- Pages come from a local HTTP server over the package's ``html`` folder, started when the
  first device of the process needs it and stopped when the last one closes (``serve="file"``
  opens them with ``file://`` instead). The device's allow-list is that server.
- An episode starts like the official env's reset: end the running episode, seed
  ``Math.random`` with the seed (``Math.seedrandom(seed)``, so equal seeds give equal instances,
  and the same instances as the official env), set the data mode, start the episode and wait
  until the task says it is ready.
- The instruction is the task's utterance; its fields go to ``observation.extras["fields"]``.
- Reward comes from the task's own JavaScript; success = raw reward > 0. The task's 10-second
  wall-clock limit is disabled unless ``time_limit_s`` is set (a slow policy must not fail
  for being slow).
"""

from __future__ import annotations

import fnmatch
import functools
import importlib.util
import logging
import threading
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from devicerl.envs.browser.options import BrowserOptions
from devicerl.envs.browser.websuite import PageSetup, WebSuite, js_literal
from devicerl.errors import TaskError
from devicerl.records import Task, TaskStatus

log = logging.getLogger(__name__)

#: The browser device loads the suite of a MiniWoB task from here (`WebSuite`, by name).
WEB_SUITE = "devicerl.tasks.miniwob:MiniWoBSuite"
#: The task area of MiniWoB pages (CSS px at the page's top-left) and of the flight tasks.
TASK_SCREEN = (0, 0, 160, 210)
FLIGHT_SCREEN = (0, 0, 375, 667)
#: Page viewports. Most tasks get just the task area: Chromium spends ~3x less CPU per
#: screenshot step than at the official env's window (inner size 780x437), and their layout
#: is the same (checked element by element). Tasks whose jQuery UI widgets (dialogs, date
#: pickers, menus, autocomplete, colour picker) place themselves relative to the window get the
#: official window's size, so they lay out exactly as in the official env; so do the text
#: highlighting tasks (a drag that selects text scrolls a 160 px wide window sideways).
TASK_VIEWPORT = (160, 210)
WINDOW_VIEWPORT = (780, 437)
WINDOW_TASKS = (
    "book-flight*",
    "choose-date*",
    "click-dialog*",
    "click-menu*",
    "highlight-text*",
    "use-autocomplete*",
    "use-colorwheel*",
)
FLIGHT_VIEWPORT = (375, 667)
#: Page parts that are not the task (reward display, start cover, click trail, instruction).
SKIP_IDS = ("reward-display", "sync-task-cover", "click-canvas", "query", "query-wrap")
#: setTimeout's largest delay (~24.8 days): "no time limit".
_NO_LIMIT_MS = 2**31 - 1

#: Step budgets by task-name glob (first match wins); one action per step.
STEP_BUDGETS: tuple[tuple[str, int], ...] = (
    ("flight.*", 40),
    ("book-flight*", 25),
    ("choose-date*", 20),
    ("email-inbox*", 15),
    ("social-media*", 15),
    ("click-checkboxes-large", 15),
    ("search-engine", 12),
    ("navigate-tree", 12),
    ("click-shades", 12),
    ("drag-items*", 12),
    ("drag-sort-numbers", 15),
    ("form-sequence*", 10),
    ("login-user*", 10),
    ("click-checkboxes*", 10),
    ("click-button-sequence", 5),
    ("enter-*", 8),
    ("click-test*", 5),
    ("click-button", 5),
    ("click-link", 5),
    ("click-dialog*", 5),
    ("click-color", 5),
    ("click-widget", 5),
    ("click-tab", 5),
    ("click-shape", 5),
    ("focus-text*", 5),
    ("identify-shape", 5),
)
DEFAULT_STEP_BUDGET = 10


def step_budget(name: str) -> int:
    """The step budget of task ``name`` (without the ``miniwob/`` prefix)."""
    for pattern, steps in STEP_BUDGETS:
        if fnmatch.fnmatchcase(name, pattern):
            return steps
    return DEFAULT_STEP_BUDGET


def html_dir() -> Path:
    """The ``html`` folder of the installed ``miniwob`` package (found without importing it)."""
    spec = importlib.util.find_spec("miniwob")
    if spec is None or not spec.submodule_search_locations:
        raise TaskError("MiniWoB++ needs the `miniwob` package: pip install 'devicerl[browser]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "html"
    if not (path / "miniwob").is_dir():
        raise TaskError(f"the miniwob package at {path.parent} has no html/miniwob folder")
    return path


def task_names() -> list[str]:
    """Every task whose HTML ships in the package (regular tasks, then flight tasks)."""
    root = html_dir()
    names = sorted(p.stem for p in (root / "miniwob").glob("*.html"))
    flights = sorted(f"flight.{p.parent.name}" for p in (root / "flight").glob("*/wrapper.html"))
    return names + flights


def miniwob_tasks() -> list[Task]:
    """The ``miniwob`` suite."""
    return [
        Task(
            f"miniwob/{n}",
            max_steps=step_budget(n),
            env="browser",
            params={"subdomain": n, "web_suite": WEB_SUITE},
        )
        for n in task_names()
    ]


# -- local HTTP server ---------------------------------------------------------------------
#: Extra folders the server serves beside the package's html folder, by URL prefix (another
#: suite whose pages use MiniWoB++'s ``core`` scripts mounts its folder here, e.g. web skills).
MOUNTS: dict[str, Path] = {}


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass

    def translate_path(self, path: str) -> str:
        for prefix, folder in MOUNTS.items():
            if path.startswith(f"/{prefix}/"):
                rest = super().translate_path("/" + path[len(prefix) + 2 :])
                return str(folder / Path(rest).relative_to(self.directory))
        return super().translate_path(path)


class _Server:
    """One loopback HTTP server per process over the package's html folder, ref-counted."""

    lock = threading.Lock()
    httpd: ThreadingHTTPServer | None = None
    refs = 0

    @classmethod
    def acquire(cls) -> str:
        with cls.lock:
            if cls.httpd is None:
                handler = functools.partial(_QuietHandler, directory=str(html_dir()))
                httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
                httpd.daemon_threads = True
                threading.Thread(
                    target=httpd.serve_forever, name="devicerl-miniwob-http", daemon=True
                ).start()
                cls.httpd = httpd
            cls.refs += 1
            return f"http://127.0.0.1:{cls.httpd.server_address[1]}/"

    @classmethod
    def release(cls) -> None:
        with cls.lock:
            cls.refs -= 1
            if cls.refs <= 0 and cls.httpd is not None:
                cls.httpd.shutdown()
                cls.httpd.server_close()
                cls.httpd = None
                cls.refs = 0


# -- the suite -------------------------------------------------------------------------------
_RESET_JS = """(async () => {
  if (typeof core === "undefined") throw new Error("this page is not a MiniWoB task");
  core.endEpisode(0);
  Math.seedrandom(%(seed)s);
  core.setDataMode(%(mode)s);
  core.EPISODE_MAX_TIME = %(limit_ms)s;
  core.startEpisodeReal();
  for (let i = 0; i < 200 && !WOB_TASK_READY; i++) await new Promise(r => setTimeout(r, 10));
  if (!WOB_TASK_READY) throw new Error("the task did not become ready within 2 s");
  // The "START" cover shown when an episode ends would start a new one when clicked; episodes
  // start only here, so a click after the end is a no-op and the end is seen.
  if (core.cover_div) core.cover_div.onclick = null;
  return %(result)s;
})()"""

_STATUS_JS = "[WOB_DONE_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_GLOBAL, WOB_REWARD_REASON]"


@dataclass
class MiniWoBOptions(BrowserOptions):
    """A browser device running MiniWoB++'s core (``miniwob``, ``miniwob/*``, ``webskills/*``):
    the browser's options and the suite's."""

    time_limit_s: float | None = field(
        default=None,
        metadata={
            "help": "MiniWoB++'s wall-clock limit of an episode (null: none; its own is 10)",
            "gt": 0,
            "max": _NO_LIMIT_MS // 1000,
        },
    )
    data_mode: Literal["train", "test"] = field(
        default="train", metadata={"help": "the core's data mode (train, as the official env)"}
    )
    reload_every: int = field(
        default=0,
        metadata={
            "help": "reload the page every N episodes (0: never, as the official env)",
            "min": 0,
        },
    )
    serve: Literal["http", "file"] = field(
        default="http", metadata={"help": "pages from a loopback HTTP server, or file:// URLs"}
    )


class MiniWoBSuite(WebSuite):
    """Runs ``miniwob/*`` tasks on a `BrowserEnv` (one instance per device), with the
    `MiniWoBOptions` of its device (on a plain browser device, their defaults)."""

    allow_navigation = False
    #: The JS expression the reset script returns once the episode has started (`on_reset`).
    reset_result = "core.getUtterance()"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        o = options if isinstance(options, MiniWoBOptions) else MiniWoBOptions()
        self.limit_ms = _NO_LIMIT_MS if o.time_limit_s is None else int(o.time_limit_s * 1000)
        self.data_mode = o.data_mode
        self.reload_every = o.reload_every
        self.serve = o.serve
        self._base: str | None = None
        self._fields: dict[str, str] = {}

    def _base_url(self) -> str:
        if self._base is None:
            if self.serve == "http":
                self._base = _Server.acquire()
            else:
                self._base = html_dir().as_uri() + "/"
        return self._base

    def page(self, task: Task) -> PageSetup:
        name = task.params.get("subdomain") or task.short_name
        base = self._base_url()
        host = () if self.serve == "file" else (base.split("/")[2],)
        if name.startswith("flight."):
            url = f"{base}flight/{name.split('.', 1)[1]}/wrapper.html"
            screen, viewport = FLIGHT_SCREEN, FLIGHT_VIEWPORT
        else:
            url, screen = f"{base}miniwob/{name}.html", TASK_SCREEN
            full = any(fnmatch.fnmatchcase(name, p) for p in WINDOW_TASKS)
            viewport = WINDOW_VIEWPORT if full else TASK_VIEWPORT
        return PageSetup(url, screen, viewport, SKIP_IDS, host, self.serve == "file")

    def reset_script(self, task: Task, seed: int) -> str:
        return _RESET_JS % {
            "seed": js_literal(int(seed)),
            "mode": js_literal(self.data_mode),
            "limit_ms": self.limit_ms,
            "result": self.reset_result,
        }

    def status_script(self, task: Task) -> str:
        return _STATUS_JS

    def on_reset(self, task: Task, value: Any) -> tuple[str, dict[str, Any]]:
        if isinstance(value, dict):
            utterance = str(value.get("utterance", ""))
            fields = {str(k): str(v) for k, v in (value.get("fields") or {}).items()}
        else:
            utterance = str(value or "")
            fields = _extract_fields(task.params.get("subdomain") or task.short_name, utterance)
        return utterance, {"fields": fields}

    def on_status(self, task: Task, value: Any) -> TaskStatus:
        done, raw, reward, reason = value
        if not done:
            return TaskStatus()
        raw = float(raw)
        info = {"env_reward": float(reward), "reason": None if reason is None else str(reason)}
        return TaskStatus(done=True, success=raw > 0, raw_reward=raw, info=info)

    def reload_before_reset(self, task: Task, episode: int) -> bool:
        return self.reload_every > 0 and episode > 0 and episode % self.reload_every == 0

    def close(self) -> None:
        if self._base is not None and self.serve == "http":
            _Server.release()
        self._base = None


def _extract_fields(name: str, utterance: str) -> dict[str, str]:
    """The task's fields, by the ``miniwob`` package's own extractor for the task."""
    try:
        from miniwob.fields import get_field_extractor

        return {str(k): str(v) for k, v in get_field_extractor(name)(utterance)}
    except (KeyError, ValueError) as e:
        log.debug("no fields for %s: %s", name, e)
        return {}


def make_miniwob_env(task: Task | str | None = None, options: MiniWoBOptions | None = None):
    """``make("miniwob/<task>")``: a browser device (`make_browser`) whose MiniWoB++ and
    web-skill pages run with ``options``."""
    from devicerl.envs.browser.paged import make_browser

    return make_browser(task, options if options is not None else MiniWoBOptions())
