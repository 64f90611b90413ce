"""How the actor's minibatches are drawn from the imitated steps (uniformly over steps, as the
paper), and which distribution the loss scores them under (``loss_floor``)."""

from collections import Counter
from collections.abc import Sequence

import pytest
import torch

from devicerl.actions import Action
from devicerl.agents.small import SmallAgent
from devicerl.algos.config import ActorConfig, FilteredBCConfig
from devicerl.algos.filtered_bc import FilteredBC
from devicerl.records import EndReason, Observation, Step, Trajectory, UIElement


class CountingAgent(SmallAgent):
    """A small agent that counts, per instruction, the observations it learns from, and
    records the ``floor`` each log-prob call asks for."""

    def __init__(self) -> None:
        super().__init__(d_model=16, seed=0, allowed_types=("DUAL_POINT",), heads=())
        self.seen: Counter[str] = Counter()
        self.floors: list[bool] = []

    def log_prob(self, observations: Sequence[Observation], *args, **kwargs) -> torch.Tensor:
        self.seen.update(o.instruction for o in observations)
        self.floors.append(kwargs.get("floor", True))
        return super().log_prob(observations, *args, **kwargs)


def _win(task: str) -> Trajectory:
    obs = Observation(f"Tap {task}", (100, 100), elements=[UIElement("b", "button", task)])
    t = Trajectory(task, obs.instruction, steps=[Step(obs, Action.tap(0.5, 0.5))])
    t.steps[0].reward, t.steps[0].terminated = 1.0, True
    t.final_observation = obs
    return t.end(EndReason.SUCCESS)


def test_minibatches_draw_uniformly_over_the_imitated_steps() -> None:
    # 39 steps of one task and 1 of another: the rare task gets about 1/40 of the draws
    wins = [_win("common") for _ in range(39)] + [_win("rare")]
    agent = CountingAgent()
    actor = ActorConfig(updates=10, batch_size=16)
    metrics = FilteredBC(agent, FilteredBCConfig(top_p=1.0), actor, seed=0).update(wins)
    assert metrics["train/actor_samples"] == 40
    assert metrics["train/actor_updates"] == 10
    assert sum(agent.seen.values()) == 10 * 16
    share = agent.seen["Tap rare"] / sum(agent.seen.values())
    assert share < 0.07, share


def _page(instruction: str) -> Observation:
    words = ("amber", "plum", "teal")
    boxes = [
        UIElement(w, "button", w, bbox=(35.0 * i, 0.0, 35.0 * i + 30, 20.0))
        for i, w in enumerate(words)
    ]
    return Observation(instruction, (100, 100), elements=boxes)


@pytest.mark.parametrize("loss_floor", [True, False])
def test_loss_floor_sets_which_distribution_the_actor_fits(loss_floor: bool) -> None:
    agent = CountingAgent()
    actor = ActorConfig(updates=2, batch_size=4, loss_floor=loss_floor)
    FilteredBC(agent, FilteredBCConfig(top_p=1.0), actor, seed=0).update([_win("a")])
    assert agent.floors and set(agent.floors) == {loss_floor}


def test_without_the_floor_an_action_the_network_rejects_keeps_its_gradient() -> None:
    # the network learns to tap "amber"; imitating a tap on "plum" then has almost no gradient
    # through the floored log-prob (log(floor / 3) whatever the network), but a full one without
    agent = SmallAgent(d_model=16, seed=0, allowed_types=("DUAL_POINT",), heads=())
    assert agent.config.epsilon > 0
    obs = _page("Tap amber")
    amber, plum = (Action.tap(*(c / 100 for c in e.center)) for e in obs.elements[:2])
    win = Trajectory("t", obs.instruction, steps=[Step(obs, amber)])
    win.steps[0].reward, win.steps[0].terminated = 1.0, True
    win.final_observation = obs
    actor = ActorConfig(lr=1e-2, updates=60, batch_size=4)
    FilteredBC(agent, FilteredBCConfig(top_p=1.0), actor, seed=0).update(
        [win.end(EndReason.SUCCESS)]
    )
    assert agent.log_prob([obs], [plum], floor=False).exp().item() < 1e-3
    norms = {}
    for floor in (True, False):
        agent.module.zero_grad()
        (-agent.log_prob([obs], [plum], floor=floor).sum()).backward()
        norms[floor] = sum(float(p.grad.norm()) for p in agent.parameters() if p.grad is not None)
    assert norms[False] > 20 * norms[True], norms
