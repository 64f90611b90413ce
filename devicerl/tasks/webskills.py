"""Web skills: generated pages of generic web-UI skills, the small agent's pre-training suite.

DigiRL never starts from scratch: its policy is AutoUI, pre-trained on human demonstrations before
any RL. The small agent has no such checkpoint, so this suite gives it one without touching the
tasks it is evaluated on: nine page generators of generic skills, written for this project (no
MiniWoB++ page, instruction or instance), each an HTML page on MiniWoB++'s ``core`` scripts (the
same 160x210 frame, seeding and reward globals, so the browser device runs them as it runs
MiniWoB++):

- ``webskills/tap-element``: tap the button, link or item the instruction names (1-7 shown);
- ``webskills/fill-form``: 1-4 labelled text fields (label left or above, placeholder, or none),
  values given in any order and phrasing, then press the named button;
- ``webskills/tick-boxes``: tick the listed checkboxes (or one radio button), then press a button;
- ``webskills/open-then-tap``: open a section or a tab, then tap an element it shows;
- ``webskills/tap-nth``: tap the n-th item of a list ("the third link", "the 2nd button");
- ``webskills/focus-field``: tap into the named text field;
- ``webskills/search-pick``: type a term into a search box, press search, tap a result;
- ``webskills/fill-described``: 2-4 labelled boxes in a shuffled order and a sentence that
  describes the search, with no value quoted: each value follows a phrase that holds its box's
  label or a word of the same stem ("painted by Novak": Painter), and one may stand uncued
  before the thing sought ("maple chairs": Kind, the box left over);
- ``webskills/pick-option``: choose the asked option in 1-3 labelled drop-down lists
  (``<select>``, sometimes beside a text field), then press the named button.

A second suite, ``webskills-reach`` (tasks ``webskills-reach/<name>``), has six pages for the
skills of the reach heads (docs/agent-actions.md), which the first suite's agent lacks:

- ``drag-onto``: drag the named item onto the named box;
- ``set-slider``: drag one or two sliders' handles to the asked values, then press a button;
- ``tap-shape``: tap a shape named by colour and form, which only pixels tell apart (drawn as
  elements, or on a canvas: a tap at a free point);
- ``copy-text``: type text the page shows (a boxed value, the n-th word of a sentence, a table
  row), submitted by a button or Enter;
- ``type-transformed``: type computed text (another case, a sum, a difference, the next number);
- ``scroll-find``: swipe a scrolling list until the named item shows, then tap it.

Every page knows its solution (the device's `DeviceEnv.oracle`: taps of element ids, picker
rows by their text (a tap on a ``<select>`` opens the browser device's phone-style picker,
`devicerl.envs.browser.pickers`), texts to type, Enter, and taps and drags at free points of the
frame, which lie on the small agent's default point lattice), which the ``oracle`` agent
(`devicerl.agents.scripted.PlanOracle`) follows to record demonstrations; it is never part of an
observation, so agents read the page, never the plan. Words, labels and values come from the
pages' own lists (``webskills_html/common.js``). The shipped setup ``webskills-pretrain`` collects
and imitates the first suite, ``webskills-pretrain-reach`` both (docs/pretraining.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devicerl.envs.browser.websuite import PageSetup
from devicerl.errors import ConfigError
from devicerl.records import Task
from devicerl.tasks.miniwob import MOUNTS, SKIP_IDS, TASK_SCREEN, TASK_VIEWPORT, MiniWoBSuite

#: The browser device loads the suite of a web-skills task from here.
WEB_SUITE = "devicerl.tasks.webskills:WebSkillsSuite"
#: The pages (served by the MiniWoB++ server under ``/webskills/``).
PAGES = Path(__file__).resolve().parent / "webskills_html"
#: Task name -> step budget (the oracle needs at most budget - 1 steps).
FAMILIES: dict[str, int] = {
    "tap-element": 5,
    "fill-form": 10,
    "tick-boxes": 8,
    "open-then-tap": 5,
    "tap-nth": 5,
    "focus-field": 5,
    "search-pick": 8,
    "fill-described": 10,
    "pick-option": 10,
}

#: The ``webskills-reach`` pages (the reach heads' skills): task name -> step budget.
REACH_FAMILIES: dict[str, int] = {
    "drag-onto": 4,
    "set-slider": 6,
    "tap-shape": 4,
    "copy-text": 6,
    "type-transformed": 6,
    "scroll-find": 10,
}


def _tasks(suite: str, families: dict[str, int]) -> list[Task]:
    return [
        Task(f"{suite}/{name}", max_steps=steps, env="browser", params={"web_suite": WEB_SUITE})
        for name, steps in families.items()
    ]


def webskills_tasks() -> list[Task]:
    """The ``webskills`` suite."""
    return _tasks("webskills", FAMILIES)


def webskills_reach_tasks() -> list[Task]:
    """The ``webskills-reach`` suite (``webskills-reach/<name>``; the pages are served beside the
    first suite's): the reach heads' skills."""
    return _tasks("webskills-reach", REACH_FAMILIES)


class WebSkillsSuite(MiniWoBSuite):
    """Runs ``webskills/*`` tasks: MiniWoB++'s episode protocol on this package's pages, with
    the oracle plan returned by the reset."""

    reset_result = "({utterance: core.getUtterance(), plan: window.WS_PLAN || []})"

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        if self.serve != "http":  # the pages load ../core/ from the miniwob package
            raise ConfigError("web-skills pages need serve='http' (they share MiniWoB++'s core)")
        MOUNTS["webskills"] = PAGES  # the MiniWoB++ server serves them under /webskills/

    def page(self, task: Task) -> PageSetup:
        base = self._base_url()
        url = f"{base}webskills/{task.short_name}.html"
        return PageSetup(url, TASK_SCREEN, TASK_VIEWPORT, SKIP_IDS, (base.split("/")[2],))

    def on_reset(self, task: Task, value: Any) -> tuple[str, dict[str, Any]]:
        value = value if isinstance(value, dict) else {}
        return str(value.get("utterance", "")), {}

    def oracle(self, task: Task, value: Any) -> list[dict[str, Any]]:
        """The page's plan (`DeviceEnv.oracle`): taps, texts, Enter, free points and drags."""
        value = value if isinstance(value, dict) else {}
        return [dict(step) for step in value.get("plan") or [] if isinstance(step, dict)]
