"""The actor's optional entropy bonus: it keeps the policy spread on states where nothing is
imitated, and it is refused for agents that cannot compute an entropy."""

from dataclasses import replace

import pytest
import torch

from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import SmallAgent
from devicerl.algos.base import ActorConfig
from devicerl.algos.filtered_bc import FilteredBC, FilteredBCConfig
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Trajectory
from devicerl.runtime.rollout import rollout


def _data() -> tuple[list[Trajectory], list[Trajectory]]:
    """Oracle successes on `tap`, and failed `type` episodes nothing should be learnt from."""
    tap, typ = make("synthetic/tap", n_boxes=4), make("synthetic/type", n_boxes=4)
    wins = [rollout(tap, SyntheticOracle(), "synthetic/tap", s) for s in range(12)]
    agent = SmallAgent(d_model=32, seed=5)
    losses = [rollout(typ, agent, "synthetic/type", s) for s in range(24)]
    return wins, [t for t in losses if not t.success][:12]


def _entropy_after(coef: float, wins, losses) -> tuple[float, dict[str, float]]:
    torch.manual_seed(0)
    agent = SmallAgent(d_model=32, seed=1)
    actor = ActorConfig(lr=3e-3, updates=15, batch_size=8, entropy_coef=coef)
    learner = FilteredBC(agent, FilteredBCConfig(top_p=0.5, actor=actor), seed=0)
    metrics = learner.update([*wins, *losses])
    with torch.no_grad():
        ent = agent.entropy([s.observation for t in losses for s in t.steps]).mean().item()
    return ent, metrics


def test_entropy_bonus_keeps_the_policy_spread_where_nothing_is_imitated() -> None:
    wins, losses = _data()
    assert wins and all(t.success for t in wins) and len(losses) >= 6
    plain, m0 = _entropy_after(0.0, wins, losses)
    bonus, m1 = _entropy_after(0.5, wins, losses)
    assert "train/actor_entropy" not in m0 and m1["train/actor_entropy"] > 0
    assert bonus > plain + 0.2, (bonus, plain)


def test_entropy_bonus_is_checked_at_start() -> None:
    with pytest.raises(ConfigError, match="entropy_coef"):
        FilteredBC(SmallAgent(d_model=32), FilteredBCConfig(actor=ActorConfig(entropy_coef=-1)))

    class NoEntropy(SmallAgent):
        entropy = None  # type: ignore[assignment]

    with pytest.raises(ConfigError, match="NoEntropy has none"):
        FilteredBC(NoEntropy(d_model=32), FilteredBCConfig(actor=ActorConfig(entropy_coef=0.1)))


def test_entropy_weight_falls_linearly_over_policy_versions() -> None:
    cfg = ActorConfig(entropy_coef=0.2, entropy_versions=10)
    assert [round(cfg.entropy_weight(v), 3) for v in (0, 5, 10, 50)] == [0.2, 0.1, 0.0, 0.0]
    assert ActorConfig(entropy_coef=0.2).entropy_weight(10**6) == 0.2  # constant by default
    wins, losses = _data()
    agent = SmallAgent(d_model=32, seed=1)
    agent.version = 10  # the bonus is spent: no entropy term at all
    learner = FilteredBC(agent, FilteredBCConfig(top_p=0.5, actor=cfg), seed=0)
    assert "train/actor_entropy" not in learner.update([*wins, *losses])


def test_actor_lr_falls_linearly_over_policy_versions() -> None:
    cfg = ActorConfig(lr=1e-3, lr_versions=10, lr_final=1e-4, updates=3, batch_size=8)
    assert [round(cfg.lr_at(v), 6) for v in (0, 5, 10, 50)] == [1e-3, 5.5e-4, 1e-4, 1e-4]
    assert ActorConfig(lr=1e-3).lr_at(10**6) == 1e-3  # constant by default
    wins, _ = _data()
    agent = SmallAgent(d_model=32, seed=1)
    learner = FilteredBC(agent, FilteredBCConfig(top_p=1.0, actor=cfg), seed=0)
    agent.version = 5
    metrics = learner.update(wins)
    assert metrics["train/actor_lr"] == pytest.approx(5.5e-4)
    assert learner.actor_opt.param_groups[0]["lr"] == pytest.approx(5.5e-4)
    # a schedule that ends at 0: past its end the same update leaves every weight as it was
    frozen = SmallAgent(d_model=32, seed=1)
    still = FilteredBC(frozen, FilteredBCConfig(top_p=1.0, actor=replace(cfg, lr_final=0.0)))
    frozen.version = 10
    before = [p.detach().clone() for p in frozen.parameters()]
    still.update(wins)
    assert all(torch.equal(a, b) for a, b in zip(before, frozen.parameters()))
    with pytest.raises(ConfigError, match="lr_versions"):
        FilteredBC(SmallAgent(d_model=32), FilteredBCConfig(actor=ActorConfig(lr_final=-1)))


def test_max_epochs_caps_the_updates_of_a_small_sample() -> None:
    cfg = ActorConfig(updates=12, batch_size=64, max_epochs=1.0)
    assert [cfg.updates_for(n) for n in (1, 64, 65, 408, 768, 5000)] == [1, 1, 2, 7, 12, 12]
    assert ActorConfig(updates=12).updates_for(3) == 12  # off: always `updates`, as the paper
    assert ActorConfig(updates=0, max_epochs=1.0).updates_for(100) == 0  # never more
    assert replace(cfg, grad_accum=2, max_epochs=0.5).updates_for(408) == 2
    wins, _ = _data()
    steps = sum(t.length for t in wins)
    capped = replace(cfg, batch_size=8, lr=1e-3)
    learner = FilteredBC(SmallAgent(d_model=32, seed=1), FilteredBCConfig(1.0, capped), seed=0)
    metrics = learner.update(wins)
    assert metrics["train/actor_samples"] == steps
    assert metrics["train/actor_updates"] == learner.updates_done == -(-steps // 8) < 12
