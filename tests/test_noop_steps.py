"""No-op steps (the screen did not change, no reward, the episode went on) and the selection
step that never imitates them (``skip_noops``)."""

from collections.abc import Sequence

import numpy as np
import torch

from devicerl.actions import AITW_TYPES, Action, ActionType
from devicerl.agents.base import ActionSample, Policy
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import SmallAgent
from devicerl.algos.config import ActorConfig, FilteredBCConfig
from devicerl.algos.filtered_bc import FilteredBC
from devicerl.envs import make
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement
from devicerl.runtime.acting.rollout import rollout


class TypeFirst(Policy):
    """Types a word first (nothing is focused: the screen stays as it was), then solves."""

    def __init__(self) -> None:
        self.oracle = SyntheticOracle()

    def act(self, observations: Sequence[Observation], greedy: bool = False):
        first = [o for o in observations if o.step == 0]
        assert len(first) in (0, len(observations))
        if first:
            return [ActionSample(Action.type_text("box")) for _ in observations]
        return self.oracle.act(observations, greedy)


def _screen(focused: bool, pixels: int = 0) -> Observation:
    box = UIElement("b", "textbox", bbox=(0, 0, 10, 10), focused=focused)
    shot = np.full((4, 4, 3), pixels, dtype=np.uint8)
    return Observation("Type hi", (10, 10), screenshot=shot, elements=[box])


def test_a_step_is_a_noop_when_the_next_screen_is_the_same() -> None:
    a, a2, focused, other_pixels = _screen(False), _screen(False), _screen(True), _screen(False, 9)
    assert a.same_screen(a2) and not a.same_screen(focused) and not a.same_screen(other_pixels)
    tap, typ = Action.tap(0.5, 0.5), Action.type_text("hi")
    t = Trajectory("t", "Type hi", steps=[Step(a, typ), Step(a2, tap), Step(focused, typ)])
    t.steps[-1].reward, t.steps[-1].terminated = 1.0, True
    t.final_observation = _screen(True)
    assert [t.is_noop(i) for i in range(3)] == [True, False, False]  # last: rewarded, ended
    cut = Trajectory("t", "Type hi", steps=[Step(a, typ)]).end(EndReason.TRUNCATED, cause="x")
    assert not cut.is_noop(0)  # nothing came after: unknown, not a no-op


def _p_type_first(skip: bool, wins: list[Trajectory]) -> tuple[float, dict[str, float]]:
    torch.manual_seed(0)
    agent = SmallAgent(d_model=32, seed=1, allowed_types=("DUAL_POINT", "TYPE"), heads=())
    actor = ActorConfig(lr=3e-3, updates=40, batch_size=8)
    selection = ["top_p_by_return", "skip_noops"] if skip else ["top_p_by_return"]
    config = FilteredBCConfig(selection=selection, top_p=1.0)  # type: ignore[arg-type]
    metrics = FilteredBC(agent, config, actor, seed=0).update(wins)
    firsts = [t.steps[0].observation for t in wins]
    with torch.no_grad():
        p_type = agent.forward(agent.featurize(firsts)).types.exp()
    return float(p_type[:, AITW_TYPES.index(ActionType.TYPE)].mean()), metrics


def test_skip_noops_keeps_the_actor_from_imitating_actions_that_changed_nothing() -> None:
    env = make("synthetic/tap", n_boxes=4, render=False)
    wins = [rollout(env, TypeFirst(), "synthetic/tap", s) for s in range(10)]
    assert all(t.success and t.length == 2 and t.is_noop(0) and not t.is_noop(1) for t in wins)
    imitated, m_all = _p_type_first(False, wins)
    skipped, m_skip = _p_type_first(True, wins)
    assert m_all["train/actor_samples"] == 20 and "train/actor_noops_skipped" not in m_all
    assert m_skip["train/actor_samples"] == 10 and m_skip["train/actor_noops_skipped"] == 10
    assert imitated > 0.8 and skipped < 0.2, (imitated, skipped)
