"""The ``browsergym`` suite: BrowserGym's tasks by their gymnasium ids, and AgentLab's MiniWoB++.

Task names are BrowserGym's ids (``browsergym/miniwob.click-test``, ``browsergym/webarena.310``,
``browsergym/openended``); the device that runs them is ``browsergym``
(`devicerl.envs.browsergym`, in BrowserGym's own environment). The suite lists MiniWoB++'s 125
tasks, the open-ended task and WebArena's and VisualWebArena's numbered tasks, each with
AgentLab's step budget and action set (`devicerl.envs.browsergym.benchmarks`); any other
registered id (WorkArena, AssistantBench) runs on the device by name.

AgentLab's MiniWoB++ protocol, from ServiceNow/BrowserGym at commit
9e779f087de9a65668b6974d11f9ce9816026e96 (``browsergym/experiments/.../benchmark/configs.py``,
``utils.py``, ``metadata/miniwob.csv``, ``loop.py``): the 125 tasks of the metadata file in its
(alphabetical) order, 10 steps, binary reward, the ``browsergym_split`` column (62 train, 63
test), and 5 seeds per task drawn in that order by ``np.random.RandomState(42).randint(0,
SEED_MAX, 5)``, where ``SEED_MAX = 2 ^ 32`` is Python's XOR, 34: every seed is below 34
(`agentlab_seeds`). MiniWoB++ pages come from the ``miniwob`` package we install, offline
(``file://``); `html_hashes` records what they were.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

from devicerl.envs.browsergym.benchmarks import BENCHMARKS
from devicerl.envs.browsergym.options import BrowserGymOptions
from devicerl.records import Task

#: AgentLab's MiniWoB++ train split (``browsergym_split == "train"``).
AGENTLAB_TRAIN: tuple[str, ...] = (
    "book-flight", "book-flight-nodelay", "buy-ticket", "choose-date", "choose-date-easy",
    "choose-date-medium", "choose-date-nodelay", "circle-center", "click-checkboxes",
    "click-checkboxes-large", "click-checkboxes-soft", "click-checkboxes-transfer",
    "click-collapsible", "click-collapsible-2", "click-collapsible-2-nodelay",
    "click-collapsible-nodelay", "click-dialog", "click-dialog-2", "click-option", "click-shades",
    "click-test-2", "click-test-transfer", "count-shape", "daily-calendar", "drag-box",
    "drag-items", "drag-shapes", "drag-shapes-2", "drag-single-shape", "drag-sort-numbers",
    "draw-circle", "draw-line", "enter-date", "enter-password", "enter-text", "enter-text-2",
    "enter-text-dynamic", "enter-time", "find-midpoint", "focus-text", "focus-text-2",
    "form-sequence", "identify-shape", "login-user", "login-user-popup", "multi-layouts",
    "multi-orderings", "navigate-tree", "odd-or-even", "read-table", "read-table-2",
    "search-engine", "text-editor", "text-transform", "unicode-test", "use-autocomplete",
    "use-autocomplete-nodelay", "use-colorwheel", "use-colorwheel-2", "use-slider",
    "use-slider-2", "visual-addition",
)  # fmt: skip
#: AgentLab's MiniWoB++ test split (``browsergym_split == "test"``).
AGENTLAB_TEST: tuple[str, ...] = (
    "ascending-numbers", "bisect-angle", "choose-list", "click-button", "click-button-sequence",
    "click-color", "click-link", "click-menu", "click-menu-2", "click-pie", "click-pie-nodelay",
    "click-scroll-list", "click-shape", "click-tab", "click-tab-2", "click-tab-2-easy",
    "click-tab-2-hard", "click-tab-2-medium", "click-test", "click-widget", "copy-paste",
    "copy-paste-2", "count-sides", "drag-circle", "drag-cube", "drag-items-grid", "email-inbox",
    "email-inbox-delete", "email-inbox-forward", "email-inbox-forward-nl",
    "email-inbox-forward-nl-turk", "email-inbox-important", "email-inbox-nl-turk",
    "email-inbox-noscroll", "email-inbox-reply", "email-inbox-star-reply", "find-greatest",
    "find-word", "form-sequence-2", "form-sequence-3", "generate-number", "grid-coordinate",
    "guess-number", "highlight-text", "highlight-text-2", "hot-cold", "number-checkboxes",
    "order-food", "phone-book", "resize-textarea", "right-angle", "scroll-text", "scroll-text-2",
    "sign-agreement", "simple-algebra", "simple-arithmetic", "social-media", "social-media-all",
    "social-media-some", "stock-market", "terminal", "tic-tac-toe", "use-spinner",
)  # fmt: skip
#: The 125 tasks in the metadata file's order (alphabetical), which orders the seed draws.
AGENTLAB_TASKS: tuple[str, ...] = tuple(sorted(AGENTLAB_TRAIN + AGENTLAB_TEST))
#: AgentLab's seed generator: its seed, seeds per task, and the exclusive upper bound it
#: really draws below (``2 ^ 32`` in its source is XOR).
AGENTLAB_SEED, AGENTLAB_REPEATS, AGENTLAB_SEED_MAX = 42, 5, 2 ^ 32
#: AgentLab's step budget on MiniWoB++.
AGENTLAB_MAX_STEPS = 10


def task_name(miniwob_task: str) -> str:
    """Our name of a MiniWoB++ task through BrowserGym: ``browsergym/miniwob.<task>``."""
    return f"browsergym/miniwob.{miniwob_task}"


def agentlab_seeds() -> dict[str, list[int]]:
    """AgentLab's evaluation seeds, 5 per task (repeats included), by our task name."""
    import numpy as np

    rng = np.random.RandomState(AGENTLAB_SEED)
    return {
        task_name(t): [int(s) for s in rng.randint(0, AGENTLAB_SEED_MAX, AGENTLAB_REPEATS)]
        for t in AGENTLAB_TASKS
    }


def _task(name: str, benchmark: str, params: dict | None = None) -> Task:
    bench = BENCHMARKS[benchmark]
    return Task(
        name,
        max_steps=bench.max_steps,
        env="browsergym",
        params={"action_subsets": list(bench.action_subsets), **(params or {})},
    )


def browsergym_tasks() -> list[Task]:
    """The ``browsergym`` suite (see the module doc)."""
    tasks = [_task(task_name(t), "miniwob") for t in AGENTLAB_TASKS]
    tasks.append(_task("browsergym/openended", "openended"))
    tasks += [_task(f"browsergym/webarena.{i}", "webarena") for i in range(812)]
    tasks += [_task(f"browsergym/visualwebarena.{i}", "visualwebarena") for i in range(910)]
    return tasks


def browsergym_needs() -> list[str]:
    """What BrowserGym tasks need (`devicerl tasks`): the environment, then per benchmark its
    package and servers, and whether they are set here."""
    from devicerl.envs.browsergym.env import REQUIREMENTS
    from devicerl.envs.foreign.venv import find_env

    python = find_env(REQUIREMENTS)
    lines = [
        f"BrowserGym's own environment: {python}"
        if python
        else "BrowserGym's own environment: not built (`devicerl env browsergym`)"
    ]
    counts = {"miniwob": len(AGENTLAB_TASKS), "openended": 1, "webarena": 812}
    counts["visualwebarena"] = 910
    for bench in BENCHMARKS.values():
        missing = bench.missing()
        state = f"missing {', '.join(missing)}" if missing else "variables set"
        if not bench.variables:
            state = "nothing to set"
        listed = f"{counts[bench.name]} tasks" if bench.name in counts else "run by name"
        lines.append(f"{bench.name} ({listed}, {bench.max_steps} steps): {bench.needs()} [{state}]")
    return lines


def miniwob_url() -> str:
    """``MINIWOB_URL`` for BrowserGym: the package's task pages, as a ``file://`` folder URL."""
    from devicerl.tasks.miniwob import html_dir

    return (html_dir() / "miniwob").as_uri() + "/"


def html_hashes(root: Path | None = None) -> dict[str, str]:
    """sha256 of every file of the MiniWoB++ pages BrowserGym loads (the package's ``html``
    folder: ``miniwob/``, ``core/``, ``common/``), by path relative to it."""
    from devicerl.tasks.miniwob import html_dir

    root = root or html_dir()
    out = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        if path.relative_to(root).parts[0] in ("miniwob", "core", "common"):
            out[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def html_digest(hashes: dict[str, str]) -> str:
    """One sha256 over `html_hashes` (path and hash per line, in order)."""
    text = "".join(f"{k} {v}\n" for k, v in sorted(hashes.items()))
    return hashlib.sha256(text.encode()).hexdigest()


def make_browsergym_env(task: Task | str | None = None, options: BrowserGymOptions | None = None):
    """``make("browsergym/...")``: a `BrowserGymEnv` whose MiniWoB++ pages are the
    ``miniwob`` package's (``MINIWOB_URL``, offline) unless ``options`` name others."""
    from devicerl.envs.browsergym.env import BrowserGymEnv

    options = options if options is not None else BrowserGymOptions()
    if options.miniwob_url is None:
        options = replace(options, miniwob_url=miniwob_url())
    return BrowserGymEnv(task, options)
