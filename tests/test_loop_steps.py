"""Detours (steps that lead back to a screen the episode showed before): how many steps of an
episode they hold, and the evaluation's share of them."""

from __future__ import annotations

import pytest
from harness.report import RunResult, summarise, table

from devicerl.actions import Action
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement
from devicerl.runtime.loop.evaluation import EvalResult

HEADER, SUBMIT = Action.tap(0.5, 0.1), Action.tap(0.5, 0.9)


def screen(name: str, instruction: str = "open the section and submit") -> Observation:
    """A page with a header and a Submit button; `name` is the header's text (the state)."""
    header = UIElement("h", "button", text=name, bbox=(0, 0, 100, 20), clickable=True)
    submit = UIElement("s", "button", text="Submit", bbox=(0, 80, 100, 100), clickable=True)
    return Observation(instruction, (100, 100), elements=[header, submit])


def episode(screens: str, rewards: dict[int, float] | None = None) -> Trajectory:
    """One step per letter of `screens` (the screen the step acts from), a success whose last
    step is rewarded; each step taps the header except the last, which taps Submit."""
    rewards = rewards or {}
    t = Trajectory("miniwob/toggle", "open the section and submit")
    for i, name in enumerate(screens):
        last = i == len(screens) - 1
        action = SUBMIT if last else HEADER
        reward = 1.0 if last else rewards.get(i, 0.0)
        t.steps.append(Step(screen(name), action, reward=reward, terminated=last))
    return t.end(EndReason.SUCCESS, success=True)


def names(t: Trajectory) -> str:
    return "".join(s.observation.elements[0].text for s in t.steps)


def test_loop_steps_count_every_detour() -> None:
    # A -> B -> A is a detour (2 steps, from the first A), then C -> B -> C: 2 more
    t = episode("ABACBCD")
    assert t.loop_steps() == 4
    assert t.length == 7 and names(t) == "ABACBCD"  # counted, never cut
    # a no-op (the same screen twice in a row) is the shortest loop
    assert episode("AAB").loop_steps() == 1
    # an episode without a repeated screen has none
    assert episode("ABC").loop_steps() == 0
    # a rewarded step is never in a detour, nor anything before it
    assert episode("ABAC", rewards={1: 0.5}).loop_steps() == 0
    assert episode("ABACAD", rewards={1: 0.5}).loop_steps() == 2  # A -> C -> A after B
    # a different instruction is a different screen
    other = episode("AB")
    other.steps[1].observation = screen("A", "something else")
    assert other.loop_steps() == 0
    assert Trajectory("t", "x").loop_steps() == 0


def test_evaluation_counts_the_greedy_episodes_detours() -> None:
    result = EvalResult()
    for t in (episode("ABACBCD"), episode("AB")):  # 4 of 7 steps, 0 of 2: detours
        result.count(t)
    assert result.loop_step_frac == 4 / 9
    row = result.as_dict()["per_task"]["miniwob/toggle"]
    assert row == {"successes": 2, "episodes": 2, "steps": 9, "loop_steps": 4}
    assert result.as_dict()["loop_step_frac"] == 4 / 9
    assert "44.4%" in result.table().splitlines()[-1]
    # the comparison reads it back per run and shows its mean over seeds
    runs = [RunResult("digirl", s, 0.5, 2, 9, 1.0, detours=d) for s, d in ((0, 0.2), (1, 0.4))]
    runs.append(RunResult("digirl", 2, 0.5, 2, 9, 1.0))  # evaluated before it was recorded
    summary = summarise(runs)
    assert summary["digirl"]["detours"] == pytest.approx(0.3)
    assert table(summary).splitlines()[-1].endswith("| 30.0% (2 seeds) |")
    assert table(summarise(runs[:2])).splitlines()[-1].endswith("| 30.0% |")
