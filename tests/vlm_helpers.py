"""Shared pieces of the vision-language agent tests: observations of real synthetic devices."""

from __future__ import annotations

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.records import Observation, with_previous_actions

SCREEN = (64, 96)


def observations(n: int = 4, kind: str = "tap", history: bool = True) -> list[Observation]:
    """``n`` first screens of synthetic tasks; with ``history`` the rows differ in length (some
    carry previous actions), so a batch of them is left-padded."""
    env = make(f"synthetic/{kind}", n_boxes=3, screen=SCREEN)
    out = [env.reset(seed=s) for s in range(n)]
    env.close()
    if not history:
        return out
    earlier = [Action.tap(0.1, 0.2), Action.type_text("hello")]
    return [with_previous_actions(o, earlier[: i % 3]) for i, o in enumerate(out)]


def two_choices(seed: int, decimals: int | None = None) -> tuple[Observation, Action, Action]:
    """A two-box synthetic screen and its two taps, on the named box and on the other one
    (their centres, rounded to ``decimals`` when given: shorter action texts)."""
    env = make("synthetic/tap", n_boxes=2, screen=SCREEN)
    obs = env.reset(seed=seed)
    env.close()
    named = obs.instruction.rsplit(" ", 1)[-1]
    target = next(e for e in obs.elements if e.text == named)
    other = next(e for e in obs.elements if e is not target)
    taps = []
    for box in (target, other):
        x, y = obs.to_normalised(*box.center)
        tap = Action.tap(x, y) if decimals is None else Action.tap(round(x, decimals),
                                                                   round(y, decimals))  # fmt: skip
        assert box.contains(*obs.to_pixels(*tap.touch))
        taps.append(tap)
    return obs, taps[0], taps[1]
