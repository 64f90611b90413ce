"""What a browser device needs to know about a suite of web tasks.

The device is generic (pages, input, screenshots, DOM); a `WebSuite` says where a task lives,
how an episode starts (a JavaScript expression, seeded) and how the task scores itself (a
JavaScript expression evaluated together with the DOM at every step). `UrlSuite` runs any
task that names a ``url`` in its params. A task names its own suite in
``params["web_suite"]`` (a ``"module:attr"``, loaded lazily: MiniWoB++ tasks name
`devicerl.tasks.miniwob.MiniWoBSuite`, so the device never imports the task layer), or its suite
name was registered with `register_web_suite`.
"""

from __future__ import annotations

import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from devicerl.envs.base import TaskStatus
from devicerl.errors import TaskError
from devicerl.records import Task


@dataclass(frozen=True)
class PageSetup:
    """Where a task's page is and which part of it is the screen.

    ``screen`` is (x, y, width, height) in CSS pixels of the page viewport; ``None`` means the
    whole viewport. ``viewport`` is the preferred (width, height) (``None``: the device's).
    """

    url: str
    screen: tuple[int, int, int, int] | None = None
    viewport: tuple[int, int] | None = None
    skip_ids: tuple[str, ...] = ()
    allow_hosts: tuple[str, ...] = ()
    allow_files: bool = False


class WebSuite(ABC):
    """How a browser device runs the tasks of one suite (one instance per device)."""

    #: Whether back/home may navigate. Single-page tasks (MiniWoB) would lose their state.
    allow_navigation: bool = True

    def __init__(self, options: Any = None) -> None:
        #: the device's options (a `BrowserOptions`; a suite with options of its own reads them
        #: from its device kind's subclass of it, as MiniWoB++ does)
        self.options = options

    @abstractmethod
    def page(self, task: Task) -> PageSetup:
        """The page ``task`` runs on."""

    def reset_script(self, task: Task, seed: int) -> str:
        """A JS expression (may be a Promise) that starts an episode; its value goes to
        `on_reset`."""
        return "null"

    def status_script(self, task: Task) -> str:
        """A JS expression evaluated with every observation; its value goes to `on_status`."""
        return "null"

    def on_reset(self, task: Task, value: Any) -> tuple[str, dict[str, Any]]:
        """The instruction and observation extras from the reset script's value."""
        return task.instruction or "", {}

    def oracle(self, task: Task, value: Any) -> Any:
        """The episode's solution from the reset script's value, when the suite knows one
        (`DeviceEnv.oracle`); never part of the observation."""
        return None

    def on_status(self, task: Task, value: Any) -> TaskStatus:
        return TaskStatus()

    def reload_before_reset(self, task: Task, episode: int) -> bool:
        """Whether to load the page again before episode number ``episode`` (0-based)."""
        return True

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release what the suite holds for this device (e.g. a server lease)."""


class UrlSuite(WebSuite):
    """Any task with ``params["url"]``; optional ``params["success_js"]`` (a JS expression
    that is truthy once solved) and ``params["allow_hosts"]`` (extra hosts)."""

    def page(self, task: Task) -> PageSetup:
        url = task.params.get("url")
        if not url:
            raise TaskError(f"browser task {task.name!r} has no params['url']")
        parts = urlsplit(url)
        hosts = tuple(task.params.get("allow_hosts", ()))
        if parts.scheme in ("http", "https") and parts.netloc:
            hosts = (parts.netloc, *hosts)
        return PageSetup(url=url, allow_hosts=hosts, allow_files=parts.scheme == "file")

    def status_script(self, task: Task) -> str:
        js = task.params.get("success_js")
        return f"!!({js})" if js else "null"

    def on_status(self, task: Task, value: Any) -> TaskStatus:
        if value is None:
            return TaskStatus()
        return TaskStatus(done=bool(value), success=bool(value), raw_reward=float(bool(value)))


_SUITES: dict[str, Callable[..., WebSuite] | str] = {}


def register_web_suite(name: str, factory: Callable[..., WebSuite] | str) -> None:
    """Make tasks of suite ``name`` run with ``factory`` (a class or ``"module:attr"``)."""
    _SUITES[name] = factory


def make_web_suite(task: Task, options: Any = None) -> WebSuite:
    """The suite object for ``task``, given the device's options: the one it names, else the
    one registered for its suite name, else `UrlSuite`."""
    factory = task.params.get("web_suite") or _SUITES.get(task.suite)
    if factory is None:
        return UrlSuite(options)
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    return factory(options)


def js_literal(value: Any) -> str:
    """A Python value as a JS literal (JSON)."""
    return json.dumps(value)
