"""The actor's optional entropy bonus: it keeps the policy spread on states where nothing is
imitated, and it is refused for agents that cannot compute an entropy."""

import pytest
import torch

from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import SmallAgent
from devicerl.algos.config import ActorConfig, EntropyConfig, FilteredBCConfig
from devicerl.algos.filtered_bc import FilteredBC
from devicerl.config import load_config
from devicerl.envs import make
from devicerl.errors import ConfigError
from devicerl.records import Trajectory
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.setup.config import TrainConfig


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
    entropy = EntropyConfig(coef=coef) if coef else None
    actor = ActorConfig(lr=3e-3, updates=15, batch_size=8, entropy=entropy)
    learner = FilteredBC(agent, FilteredBCConfig(top_p=0.5), actor, seed=0)
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
    for bad in ("coef: -1", "coef: 0", "fade_versions: 0"):
        with pytest.raises(ConfigError, match=r"^actor\.entropy") as err:
            load_config(TrainConfig, None, [f"actor.entropy={{{bad}}}"])
        assert "\n" not in str(err.value)
    cfg = load_config(TrainConfig, None, ["actor.entropy={coef: 0.2, fade_versions: 80}"])
    assert cfg.actor.entropy == EntropyConfig(coef=0.2, fade_versions=80)

    class NoEntropy(SmallAgent):
        entropy = None  # type: ignore[assignment]

    actor = ActorConfig(entropy=EntropyConfig(coef=0.1))
    with pytest.raises(ConfigError, match="NoEntropy has none"):
        FilteredBC(NoEntropy(d_model=32), FilteredBCConfig(), actor)


def test_entropy_weight_falls_linearly_over_policy_versions() -> None:
    entropy = EntropyConfig(coef=0.2, fade_versions=10)
    assert [round(entropy.weight(v), 3) for v in (0, 5, 10, 50)] == [0.2, 0.1, 0.0, 0.0]
    assert EntropyConfig(coef=0.2).weight(10**6) == 0.2  # constant by default
    wins, losses = _data()
    agent = SmallAgent(d_model=32, seed=1)
    agent.version = 10  # the bonus is spent: no entropy term at all
    cfg = ActorConfig(entropy=entropy)
    learner = FilteredBC(agent, FilteredBCConfig(top_p=0.5), cfg, seed=0)
    assert "train/actor_entropy" not in learner.update([*wins, *losses])
