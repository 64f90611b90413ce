"""A browser device that keeps one page per task, so switching tasks does not navigate.

Sampling tasks at random (as training does) makes nearly every reset load another task's page:
about 100 ms of navigation, against about 17 ms to restart the same page's task in place
(measured on MiniWoB++; see the README). `PagedBrowserEnv` holds up to ``task_pages``
`BrowserEnv` pages (each its own context, sharing the process's Chromium) keyed by task and
routes each episode to its task's page; the least recently used page is closed beyond the limit.
A page whose task the device left (`DeviceEnv.leave`: it will not play that task again, as in an
evaluation that keeps each device on a task) serves the next new task: a navigation in a warm
page and renderer rather than a new context's cold start (about 3x cheaper per new task on a
busy machine); until a new task needs it, it stays loaded, so a device kept between runs (a
fleet's, `devicerl.pool.workers.fleet`) still has every task's page the next run. Episodes
behave exactly as on a single `BrowserEnv`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from devicerl.actions import Action
from devicerl.envs.base import DeviceEnv, TaskStatus
from devicerl.envs.browser.env import BrowserEnv
from devicerl.envs.browser.options import BrowserOptions
from devicerl.records import Observation, Task


class PagedBrowserEnv(DeviceEnv):
    """``make("browser", task_pages=8)``: one `BrowserEnv` page per task (LRU, at most
    ``options.task_pages``), each built with the same options."""

    name = "browser"

    def __init__(self, task: Task | str | None = None, options: BrowserOptions | None = None):
        super().__init__(task)
        self.options = options if options is not None else BrowserOptions(task_pages=8)
        self.task_pages = max(1, self.options.task_pages)
        self._pages: OrderedDict[str, BrowserEnv] = OrderedDict()
        self._current: BrowserEnv | None = None
        self._probe = BrowserEnv(task, self.options)  # first page: answers screen_size early
        self._spare: BrowserEnv | None = self._probe  # the first page while no task holds it
        self._left: set[str] = set()  # tasks with a page this device will not play again

    def _page_for(self, task: Task) -> BrowserEnv:
        page = self._pages.get(task.name)
        if page is not None:
            self._left.discard(task.name)
            self._pages.move_to_end(task.name)
            return page
        left = next((name for name in self._pages if name in self._left), None)
        if left is not None:  # the least recently used page of a task this device left
            self._left.discard(left)
            page = self._pages.pop(left)
        elif self._spare is not None:
            page, self._spare = self._spare, None
        else:
            page = BrowserEnv(task, self.options)
        self._pages[task.name] = page
        while len(self._pages) > self.task_pages:
            name, old = self._pages.popitem(last=False)
            self._left.discard(name)
            old.close()
        return page

    def leave(self, task: str) -> None:
        """``task``'s page will serve the next task that has no page (a navigation); until
        then it stays loaded (a device kept between runs finds it warm)."""
        if task in self._pages:
            self._left.add(task)

    def resolve_task(self, task: Task | str | None) -> Task:
        return self._probe.resolve_task(task if task is not None else self.default_task)

    @property
    def screen_size(self) -> tuple[int, int]:
        return (self._current or self._probe).screen_size

    def _reset(self, task: Task, seed: int) -> Observation:
        self._current = self._page_for(task)
        return self._current.reset(task, seed)

    def oracle(self) -> Any:
        return self._current.oracle() if self._current is not None else None

    def _step(self, action: Action) -> tuple[Observation, TaskStatus]:
        """The task's page does the step; this device applies the episode rules to it."""
        assert self._current is not None
        return self._current._step(action)

    def process_ids(self) -> list[int]:
        return (self._current or self._probe).process_ids()

    def _close(self) -> None:
        pages = list(self._pages.values())
        if self._spare is not None:
            pages.append(self._spare)
        for page in pages:
            page.close()
        self._pages.clear()


def make_browser(
    task: Task | str | None = None, options: BrowserOptions | None = None
) -> BrowserEnv | PagedBrowserEnv:
    """``make("browser", ...)``: a `BrowserEnv`, or with ``task_pages >= 1`` a
    `PagedBrowserEnv` keeping that many task pages."""
    options = options if options is not None else BrowserOptions()
    return PagedBrowserEnv(task, options) if options.task_pages else BrowserEnv(task, options)
