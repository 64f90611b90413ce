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
