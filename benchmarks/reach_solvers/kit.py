"""What scripted MiniWoB++ solvers are made of: the agent's own action vocabulary, and a runner.

A solver sees exactly what an agent sees (`Observation`: instruction, fields, UI elements with
text / value / box / attributes, screenshot) and answers with AitW actions only: a tap at a
point, a drag from a point to a point, typed text, Enter. It never calls the page (no DOM
calls, no JavaScript): whatever it reads, it read from the observation.

A solver is a generator: it yields an `Action`, receives the next `Observation`, and so on;
returning ends its attempt. `SOLVERS` maps task names to `Solver`s (each declares the
`ActionKind`s it uses, which the benchmark counts). `SolverPolicy` plays a solver as a `Policy`
(the reach benchmark and the demonstrations both run it through `rollout`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

from devicerl.actions import Action, ActionType
from devicerl.agents.base import ActionSample, Policy
from devicerl.agents.capabilities import ActionKind
from devicerl.envs.base import DeviceEnv
from devicerl.records import Observation, Trajectory, UIElement
from devicerl.runtime.acting.rollout import rollout

Plan = Generator[Action, Observation, None]
SolverFn = Callable[[Observation], Plan]

#: The action types a solver may use (the AitW action space without back/home, which do
#: nothing on MiniWoB++'s single pages).
ALLOWED = frozenset({ActionType.DUAL_POINT, ActionType.TYPE, ActionType.PRESS_ENTER})


@dataclass(frozen=True)
class Solver:
    task: str
    kinds: tuple[ActionKind, ...]
    fn: SolverFn


SOLVERS: dict[str, Solver] = {}


def solver(*tasks: str, kinds: tuple[ActionKind, ...]) -> Callable[[SolverFn], SolverFn]:
    """Register ``fn`` as the solver of ``tasks``, using ``kinds``."""

    def register(fn: SolverFn) -> SolverFn:
        for task in tasks:
            SOLVERS[task] = Solver(task, kinds, fn)
        return fn

    return register


# -- reading the observation --------------------------------------------------------------------
def find_all(
    obs: Observation,
    role: str | None = None,
    text: str | None = None,
    tag: str | None = None,
    where: Callable[[UIElement], bool] | None = None,
) -> list[UIElement]:
    """Elements matching every given criterion, in document order."""
    out = []
    for e in obs.elements:
        if role is not None and e.role != role:
            continue
        if text is not None and e.text != text:
            continue
        if tag is not None and e.attrs.get("tag") != tag:
            continue
        if where is not None and not where(e):
            continue
        out.append(e)
    return out


def find(obs: Observation, **criteria: Any) -> UIElement:
    """The first element matching ``criteria``; raises `LookupError` naming them."""
    found = find_all(obs, **criteria)
    if not found:
        raise LookupError(f"no element with {criteria}")
    return found[0]


def field(obs: Observation, name: str) -> str:
    return str((obs.extras.get("fields") or {}).get(name, ""))


def quoted(text: str) -> list[str]:
    return re.findall(r'"([^"]*)"', text)


def pixel(obs: Observation, x: float, y: float) -> tuple[int, int, int]:
    """The screenshot's colour at screen pixel (x, y)."""
    assert obs.screenshot is not None, "this solver reads pixels: run with screenshots on"
    h, w = obs.screenshot.shape[:2]
    r, g, b = obs.screenshot[min(int(y), h - 1), min(int(x), w - 1)]
    return int(r), int(g), int(b)


# -- the action vocabulary ------------------------------------------------------------------------
def tap(obs: Observation, el: UIElement) -> Action:
    """Tap the element's centre (the small agent's tap)."""
    return Action.tap(*obs.to_normalised(*el.center))


def tap_uncovered(obs: Observation, el: UIElement) -> Action:
    """Tap the element where no element after it in the document (drawn over it) covers it:
    its centre when that is free, else the first free point of a 5x5 grid over its box."""
    later = obs.elements[obs.elements.index(el) + 1 :]
    left, top, right, bottom = el.bbox

    def covered(x: float, y: float) -> bool:
        return any(b[0] <= x <= b[2] and b[1] <= y <= b[3] for b in (e.bbox for e in later))

    for fy in (0.5, 0.25, 0.75, 0.1, 0.9):
        for fx in (0.5, 0.25, 0.75, 0.1, 0.9):
            x, y = left + fx * (right - left), top + fy * (bottom - top)
            if not covered(x, y):
                return point(obs, x, y)
    return tap(obs, el)


def point(obs: Observation, x: float, y: float) -> Action:
    """Tap any screen pixel."""
    w, h = obs.screen_size
    return Action.tap(min(max(x / w, 0.0), 1.0), min(max(y / h, 0.0), 1.0))


def drag(obs: Observation, start: tuple[float, float], end: tuple[float, float]) -> Action:
    """Touch at ``start``, move, lift at ``end`` (screen pixels)."""
    w, h = obs.screen_size

    def norm(p: tuple[float, float]) -> tuple[float, float]:
        return (min(max(p[0] / w, 0.0), 1.0), min(max(p[1] / h, 0.0), 1.0))

    return Action.swipe(*norm(start), *norm(end))


def type_text(text: str) -> Action:
    return Action.type_text(text)


def enter() -> Action:
    return Action.enter()


def settle(seconds: float = 0.4) -> None:
    """Let an animation run before the next action (an agent takes time to act, too)."""
    time.sleep(seconds)


# -- running ------------------------------------------------------------------------------------
class SolverPolicy(Policy):
    """One episode of ``task``'s solver as a `Policy` (build one per episode).

    It answers each observation with the solver's next action. When the solver gives up, fails
    (`LookupError` / `ValueError` / `AssertionError`) or uses an action outside `ALLOWED`, it
    answers ``status: impossible`` (the episode fails) and keeps the reason in ``error``.
    """

    def __init__(self, task: str) -> None:
        self.solve = SOLVERS[task].fn
        self.plan: Plan | None = None
        self.error = ""

    def _next(self, obs: Observation) -> Action:
        if not self.error:
            try:
                if self.plan is None:
                    self.plan = self.solve(obs)
                    action = next(self.plan)
                else:
                    action = self.plan.send(obs)
            except StopIteration:
                self.error = "solver gave up"
            except (LookupError, ValueError, AssertionError) as e:
                self.error = f"{type(e).__name__}: {e}"
            else:
                if action.type in ALLOWED:
                    return action
                self.error = f"solver used {action.type.value}, outside its vocabulary"
        return Action.impossible()

    def act(self, observations: Sequence[Observation], greedy: bool = False) -> list[ActionSample]:
        if len(observations) != 1:
            raise ValueError("SolverPolicy plays one episode at a time")
        return [ActionSample(self._next(observations[0]), log_prob=None)]


@dataclass
class Episode:
    task: str
    seed: int
    success: bool
    raw_reward: float
    steps: int
    seconds: float
    error: str = ""


def run_episode(env: DeviceEnv, task: str, seed: int) -> tuple[Episode, Trajectory]:
    """One episode of ``task``'s solver on ``env`` (a MiniWoB++ device, which ends it at the
    task's step budget): its summary, and the trajectory `rollout` recorded."""
    policy = SolverPolicy(task)
    t0 = time.perf_counter()
    traj = rollout(env, policy, f"miniwob/{task}", seed)
    raw = float(traj.steps[-1].info.get("raw_reward", 0.0)) if traj.steps else 0.0
    error = policy.error or traj.truncation_cause or ""
    seconds = time.perf_counter() - t0
    return Episode(task, seed, bool(traj.success), raw, len(traj.steps), seconds, error), traj
