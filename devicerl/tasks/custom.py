"""Task suites declared in a file: ``tasks.train: path/to/suite.yaml`` (or ``.yml``, ``.jsonl``).

A researcher's own web tasks need no Python. Each task names its page (a local HTML file,
served on loopback, or an ``http(s)`` URL), an instruction (a template whose ``{field}``
placeholders are filled with values drawn by the episode's seed), a success check (a JavaScript
expression evaluated in the page after every action, with ``fields`` and ``seed`` in scope),
optionally a failure check (ends the episode unsuccessfully), and a step budget. The checks
see ``fields``, ``seed`` and ``answer`` (the agent's last answer, an ANSWER action's text; null
before one), so a task that asks for information checks ``answer === fields.total``::

    suite: forms                 # task names are forms/<name> (default: the file's stem)
    viewport: [160, 210]         # the page's size in CSS pixels (default 320 x 240)
    tasks:
      - name: press-color
        page: pages/press-color.html
        instruction: Press the {color} button.
        fields: {color: [red, green, blue]}
        success: window.pressed === fields.color
        failure: window.pressed && window.pressed !== fields.color
        max_steps: 3

A ``.jsonl`` file holds one task object per line (the suite is named after the file).

An episode loads the page afresh, sets ``window.devicerl = {fields, seed}`` and calls the
page's ``window.devicerlReset(fields, seed)`` when it defines one (it may return a promise), so
the page can lay itself out for the instance; the observation's ``extras["fields"]`` holds the
values too. The file is checked when it is loaded, in one line naming the key
(``tasks[1].max_steps=0: must be in [1, 200]``); a suite file never chooses where anything is
written: names are plain words, and a page is a regular file inside the suite file's folder.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from devicerl.config import from_dict, safe_load, yaml_error_text
from devicerl.envs.browser.local_pages import PageServer
from devicerl.envs.browser.websuite import PageSetup, WebSuite, js_literal
from devicerl.errors import DeviceRLError, TaskError
from devicerl.files import inside, is_regular, read_text
from devicerl.records import Task, TaskStatus

#: The browser device loads the suite of a custom task from here.
WEB_SUITE = "devicerl.tasks.custom:CustomSuite"
SUFFIXES = (".yaml", ".yml", ".jsonl")
MAX_SUITE_BYTES = 4 << 20
DEFAULT_VIEWPORT = (320, 240)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: ``{{`` and ``}}`` (literal braces) or a ``{field}`` placeholder, scanned left to right.
_TEMPLATE = re.compile(r"\{\{|\}\}|\{(\w*)\}")


@dataclass
class CustomTask:
    """One task of a suite file."""

    name: str = field(default="", metadata={"help": "task name (letters, digits, . _ -)"})
    success: str = field(default="", metadata={"help": "JavaScript expression, truthy once solved"})
    page: str = field(default="", metadata={"help": "HTML file, relative to the suite file"})
    url: str = field(default="", metadata={"help": "or an http(s) URL"})
    instruction: str = field(default="", metadata={"help": "text; {field} takes a value"})
    fields: dict[str, list[str]] = field(
        default_factory=dict, metadata={"help": "field -> values, one drawn per episode"}
    )
    failure: str = field(default="", metadata={"help": "JS expression that ends it as failed"})
    max_steps: int = field(default=10, metadata={"help": "step budget", "min": 1, "max": 200})
    viewport: tuple[int, int] | None = field(
        default=None, metadata={"help": "page size [width, height] (default: the suite's)"}
    )


@dataclass
class SuiteFile:
    """A suite file: its name, default viewport and tasks."""

    tasks: list[CustomTask] = field(default_factory=list)
    suite: str = field(default="", metadata={"help": "suite name (default: the file's stem)"})
    viewport: tuple[int, int] = field(
        default=DEFAULT_VIEWPORT, metadata={"help": "page size [width, height] in CSS pixels"}
    )


def load_suite(path: str | Path) -> list[Task]:
    """The tasks of a suite file; any problem is a `TaskError` in one line naming the file."""
    p = Path(path)
    try:
        return _load(p)
    except DeviceRLError as e:
        message = str(e)
        raise TaskError(message if str(p) in message else f"suite {p}: {message}") from None


def _load(p: Path) -> list[Task]:
    text = read_text(p, MAX_SUITE_BYTES, what="suite file", error=TaskError)
    if p.suffix.lower() == ".jsonl":
        data: Any = {"tasks": [_json_line(line, i) for i, line in _lines(text)]}
    else:
        try:
            data = safe_load(text)
        except yaml.YAMLError as e:
            raise TaskError(f"not valid YAML: {yaml_error_text(e)}") from None
        except RecursionError:
            raise TaskError("not valid YAML: nested too deeply") from None
        if not isinstance(data, dict):
            raise TaskError("must hold a mapping with a 'tasks' list")
    spec = from_dict(SuiteFile, data)
    suite = spec.suite or re.sub(r"[^A-Za-z0-9._-]+", "-", p.stem).strip(".-") or "custom"
    if not _NAME.match(suite):
        raise TaskError(f"suite name {suite!r} must be letters, digits, '.', '_' or '-'")
    if not spec.tasks:
        raise TaskError("lists no task")
    root = p.resolve().parent
    tasks, seen = [], set()
    for i, t in enumerate(spec.tasks):
        key = f"tasks[{i}]"
        if not t.name:
            raise TaskError(f"{key}.name: every task needs a name")
        if not _NAME.match(t.name):
            raise TaskError(f"{key}.name {t.name!r} must be letters, digits, '.', '_' or '-'")
        if t.name in seen:
            raise TaskError(f"{key}.name {t.name!r} is given twice")
        seen.add(t.name)
        tasks.append(_task(suite, root, t, key, spec.viewport))
    return tasks


def _lines(text: str) -> list[tuple[int, str]]:
    return [(i, line) for i, line in enumerate(text.splitlines(), 1) if line.strip()]


def _json_line(line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError as e:
        raise TaskError(f"line {number} is not JSON: {e}") from None


def _task(suite: str, root: Path, t: CustomTask, key: str, viewport: tuple[int, int]) -> Task:
    if bool(t.page) == bool(t.url):
        raise TaskError(f"{key}: give either page (a local HTML file) or url")
    params: dict[str, Any] = {"web_suite": WEB_SUITE}
    if t.page:
        page = Path(t.page)
        if page.is_absolute():
            raise TaskError(f"{key}.page {t.page}: must be relative to the suite file's folder")
        try:
            resolved = inside(root, root / page, what=f"{key}.page")
        except DeviceRLError as e:
            raise TaskError(str(e)) from None
        if not is_regular(resolved, within=root):
            raise TaskError(f"{key}.page {t.page}: no such file in {root}")
        params.update(root=str(root), page=resolved.relative_to(root).as_posix())
    else:
        parts = urlsplit(t.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise TaskError(f"{key}.url {t.url!r}: must be an http:// or https:// URL")
        params["url"] = t.url
    if not t.success.strip():
        raise TaskError(f"{key}.success: a JavaScript expression is needed")
    for name, values in t.fields.items():
        if not re.fullmatch(r"\w+", name) or not values:
            raise TaskError(f"{key}.fields.{name}: a word naming a non-empty list of values")
    used = {m.group(1) for m in _TEMPLATE.finditer(t.instruction) if m.group(1) is not None}
    unknown = sorted(used - set(t.fields))
    if unknown:
        raise TaskError(f"{key}.instruction: {{{unknown[0]}}} is not one of its fields")
    w, h = t.viewport or viewport
    if not (16 <= w <= 4096 and 16 <= h <= 4096):
        raise TaskError(f"{key}.viewport [{w}, {h}]: width and height must be in [16, 4096]")
    params.update(
        template=t.instruction,
        fields={k: [str(v) for v in vs] for k, vs in t.fields.items()},
        success=t.success,
        failure=t.failure,
        viewport=[w, h],
    )
    return Task(f"{suite}/{t.name}", max_steps=t.max_steps, env="browser", params=params)


def draw_fields(task: Task, seed: int) -> dict[str, str]:
    """The field values of an instance: one per field, drawn by the seed (same seed, same
    values)."""
    rng = random.Random(f"{task.name}#{int(seed)}")
    return {k: rng.choice(v) for k, v in sorted(task.params.get("fields", {}).items())}


def instruction(task: Task, fields: dict[str, str]) -> str:
    """The task's template with its fields filled in (``{{``/``}}`` are literal braces)."""

    def fill(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        return fields.get(m.group(1), m.group(0))

    return _TEMPLATE.sub(fill, task.params.get("template", ""))


_RESET_JS = """(async () => {
  const task = %(task)s;
  window.devicerl = task;
  const hook = window.devicerlReset;
  if (typeof hook === "function") await hook(task.fields, task.seed);
  return task.fields;
})()"""

_STATUS_JS = """(() => {
  const task = window.devicerl || {fields: {}, seed: 0};
  const check = (source, name) => {
    if (!source) return false;
    window.__drlCheck = name;
    try {
      const answer = window.__drl ? window.__drl.answer : null;
      return !!(new Function("fields", "seed", "answer", "return (" + source + ");"))(
        task.fields, task.seed, answer);
    } catch (e) {
      return {error: String(e)};
    }
  };
  return [check(%(success)s, "success"), check(%(failure)s, "failure")];
})()"""


class CustomSuite(WebSuite):
    """Runs the tasks of suite files on a `BrowserEnv`: pages from their folder's loopback
    server (or their URL), a fresh load per episode, the task's checks after every action."""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        self._roots: set[str] = set()
        self._bases: dict[str, str] = {}

    def page(self, task: Task) -> PageSetup:
        viewport = tuple(task.params.get("viewport") or DEFAULT_VIEWPORT)
        if "url" in task.params:
            url = task.params["url"]
            return PageSetup(url, viewport=viewport, allow_hosts=(urlsplit(url).netloc,))
        root = task.params["root"]
        if root not in self._bases:
            self._bases[root] = PageServer.acquire(root)
            self._roots.add(root)
        base = self._bases[root]
        return PageSetup(
            base + task.params["page"], viewport=viewport, allow_hosts=(base.split("/")[2],)
        )

    def reset_script(self, task: Task, seed: int) -> str:
        state = {"fields": draw_fields(task, seed), "seed": int(seed)}
        return _RESET_JS % {"task": js_literal(state)}

    def status_script(self, task: Task) -> str:
        return _STATUS_JS % {
            "success": js_literal(task.params.get("success", "")),
            "failure": js_literal(task.params.get("failure", "")),
        }

    def on_reset(self, task: Task, value: Any) -> tuple[str, dict[str, Any]]:
        fields = {str(k): str(v) for k, v in (value or {}).items()}
        return instruction(task, fields), {"fields": fields}

    def on_status(self, task: Task, value: Any) -> TaskStatus:
        success, failure = value if isinstance(value, list) and len(value) == 2 else (False, False)
        for what, result in (("success", success), ("failure", failure)):
            if isinstance(result, dict):
                raise TaskError(f"task {task.name}: its {what} check failed: {result.get('error')}")
        if success:
            return TaskStatus(done=True, success=True, raw_reward=1.0)
        if failure:
            return TaskStatus(done=True, success=False, raw_reward=-1.0)
        return TaskStatus()

    def close(self) -> None:
        for root in self._roots:
            PageServer.release(root)
        self._roots.clear()
        self._bases.clear()
