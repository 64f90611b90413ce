"""Detours (steps that lead back to a screen the episode showed before) and the actor option
that imitates episodes without them (`actor.drop_loops`), in both learners."""

from __future__ import annotations

import pytest
import torch
from harness.report import RunResult, summarise, table

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.algos.base import ActorConfig
from devicerl.algos.digirl import DigiRL, DigiRLConfig
from devicerl.algos.filtered_bc import FilteredBC, FilteredBCConfig
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement
from devicerl.runtime.evaluate import EvalResult

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


def test_without_loops_cuts_every_detour_and_leaves_a_path() -> None:
    # A -> B -> A is a detour (cut from the first A), then C -> B -> C: the second one
    t = episode("ABACBCD")
    cut = t.without_loops()
    assert names(cut) == "ACD" and cut.extras["loop_steps_dropped"] == 4
    assert cut.success and cut.episode_id == t.episode_id and t.length == 7  # t unchanged
    assert cut.steps[-1] is t.steps[-1]  # the step that ended the episode always stays
    assert t.without_loops() is cut  # cached
    # a no-op (the same screen twice in a row) is the shortest loop
    assert names(episode("AAB").without_loops()) == "AB"
    # an episode without a repeated screen is returned as it is
    plain = episode("ABC")
    assert plain.without_loops() is plain and "loop_steps_dropped" not in plain.extras
    # a rewarded step is never cut, nor anything before it
    assert names(episode("ABAC", rewards={1: 0.5}).without_loops()) == "ABAC"
    assert names(episode("ABACAD", rewards={1: 0.5}).without_loops()) == "ABAD"
    # a different instruction is a different screen
    other = episode("AB")
    other.steps[1].observation = screen("A", "something else")
    assert other.without_loops() is other


def _p_submit(learner_cls, config, drop: bool, wins: list[Trajectory]) -> tuple[float, dict]:
    torch.manual_seed(0)
    agent = SmallAgent(d_model=32, seed=1, allowed_types=("DUAL_POINT",), swipes=False)
    actor = ActorConfig(lr=3e-3, updates=60, batch_size=8, drop_loops=drop, loss_floor=False)
    learner = learner_cls(agent, config(actor=actor), seed=0)
    metrics = learner.update(wins)
    closed = screen("A")
    with torch.no_grad():
        logp = agent.log_prob([closed], [SUBMIT], [None], floor=False)
    return float(logp.exp()), metrics


def _digirl(actor: ActorConfig) -> DigiRLConfig:
    # the step filter off: every step of a success passes, as with a rehearsed success
    return DigiRLConfig(actor=actor, step_filter=False, top_p=1.0, critic_warmup=0)


def test_drop_loops_keeps_both_learners_from_imitating_a_detour() -> None:
    # every success toggles the header open and closed (A -> B -> A) before it submits. From
    # the closed page A with nothing done yet (the agent reads its earlier actions), the
    # imitated action is the header: a greedy policy opens and closes the section forever
    wins = [episode("ABA") for _ in range(8)]
    for learner_cls, config in ((FilteredBC, lambda actor: FilteredBCConfig(actor=actor)),
                                (DigiRL, _digirl)):  # fmt: skip
        kept_detour, m_all = _p_submit(learner_cls, config, False, wins)
        without, m_cut = _p_submit(learner_cls, config, True, wins)
        assert "train/loop_steps_dropped_frac" not in m_all
        assert m_cut["train/loop_steps_dropped_frac"] == 2 / 3
        assert m_all["train/actor_samples"] == 24 and m_cut["train/actor_samples"] == 8
        assert without > 0.9 and kept_detour < 0.1, (learner_cls.name, without, kept_detour)


def test_evaluation_counts_the_greedy_episodes_detours() -> None:
    result = EvalResult()
    for t in (episode("ABACBCD"), episode("AB")):  # 4 of 7 steps, 0 of 2: detours
        result.add(t)
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
