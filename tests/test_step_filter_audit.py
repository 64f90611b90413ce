"""benchmarks/step_filter_audit.py: per task, what DigiRL's step filter drops from successes,
hand-computed with fixed critics, and the same numbers read from a run folder's newest
checkpoint and store."""

from __future__ import annotations

import pytest
import step_filter_audit as sfa  # benchmarks/ (see conftest.py)
import torch
from _runs import collect
from test_digirl_select import FixedCritic, trajectory

from devicerl.agents.small import SmallAgent
from devicerl.algos.digirl import DigiRL, DigiRLConfig
from devicerl.config import load_config
from devicerl.runtime.learner_setup import make_learner
from devicerl.runtime.run_dir import RunDir
from devicerl.runtime.train_config import TrainConfig


def successes_and_a_failure():
    return [
        trajectory("flat", [0.3] * 6, success=True, max_steps=10),
        trajectory("rise", [0.1, 0.3, 0.5, 0.7, 0.9, 0.95], success=True, max_steps=10),
        trajectory("rise", [0.9, 0.1], success=False, max_steps=10),  # failures are not audited
    ]


def test_a_flat_critic_drops_the_first_steps_of_a_long_success() -> None:
    rl = DigiRL(SmallAgent(seed=0), DigiRLConfig(), seed=0)
    rl.step_critic = FixedCritic(lambda o: o.extras["v"])  # type: ignore[assignment]
    out = sfa.audit_trajectories(rl, successes_and_a_failure())
    # flat: A = lam^(H-h) = 1/32 1/16 1/8 1/4 1/2 1 against 1/horizon = 0.1: the first two go
    assert out["flat"] == pytest.approx(
        dict(successes=1, mean_length=6, steps_dropped=2 / 6, first_step_dropped=1, value_spread=0)
    )
    # rising: A_1 = 1/32 + (31/32) 0.2 = 0.225, every later A larger: all kept
    assert out["rise"] == pytest.approx(
        dict(successes=1, mean_length=6, steps_dropped=0, first_step_dropped=0, value_spread=0.85)
    )
    assert "| flat | 1.000 | 6.000 | 0.333 | 1.000 | 0.000 |" in sfa.table({"r": out})


def test_a_run_folder_is_audited_under_its_checkpoints_critics(tmp_path) -> None:
    cfg = load_config(TrainConfig, None, ["algo=digirl", "env.name=synthetic"])
    run = RunDir(tmp_path / "run").create()
    run.save_config(cfg)
    learner = make_learner(cfg, cfg.agent.make())
    assert isinstance(learner, DigiRL)
    with torch.no_grad():  # weights a freshly built learner does not have
        for p in learner.step_critic.parameters():
            p.add_(torch.randn_like(p))
    models = {k: m.state_dict() for k, m in learner.modules().items()}
    run.checkpoint_manager().save(1, models, {}, {"iteration": 1})
    trajs = collect(30, screen=(48, 80))  # random-policy episodes, some multi-step successes
    with run.writer() as w:
        w.extend(trajs)
    out, expected = sfa.audit(run.path), sfa.audit_trajectories(learner, trajs)
    assert out and set(out) == set(expected)
    for task, row in expected.items():
        assert out[task] == pytest.approx(row)
    fresh = sfa.audit_trajectories(make_learner(cfg, cfg.agent.make()), trajs)  # type: ignore[arg-type]
    assert any(fresh[t]["value_spread"] != pytest.approx(out[t]["value_spread"]) for t in out)

    cfg = load_config(TrainConfig, None, ["algo=filtered_bc", "env.name=synthetic"])
    other = RunDir(tmp_path / "bc").create()
    other.save_config(cfg)
    with pytest.raises(SystemExit, match=r"bc is a filtered_bc run"):
        sfa.audit(other.path)
