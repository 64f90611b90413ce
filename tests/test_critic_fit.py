"""benchmarks/critic_fit.py: the held-out step-critic numbers by hand with fixed values, and a
fresh critic refit on real trajectories without touching the run's own."""

from __future__ import annotations

import critic_fit as cf  # benchmarks/ (see conftest.py)
import pytest
import torch
from _runs import collect
from selection_helpers import learner, trajectory

from devicerl.algos.config import CriticConfig
from devicerl.algos.digirl import DigiRL
from devicerl.config import load_config
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner


def test_measure_by_hand() -> None:
    heldout = [
        # rising success: A = .55 .65 1, all kept (threshold 1/10)
        trajectory("a", [0.2, 0.6, 0.9], success=True, max_steps=10),
        # flat success: A = lam^(H-h) = 1/32 .. 1, the last 4 of 6 kept
        trajectory("e", [0.3] * 6, success=True, max_steps=10),
        # failure: A = V(s') - V(s) = -.3 .4 -.6, the second step kept
        trajectory("b", [0.5, 0.2, 0.6], success=False, max_steps=10),
        # one-step success: kept, nothing to spread
        trajectory("c", [0.4], success=True, max_steps=10),
    ]
    out = cf.measure(learner(), heldout)
    values = [0.2, 0.6, 0.9] + [0.3] * 6 + [0.5, 0.2, 0.6] + [0.4]
    labels = [1.0] * 9 + [0.0] * 3 + [1.0]
    brier = sum((v - y) ** 2 for v, y in zip(values, labels)) / 13
    # (success step, failure step) pairs ordered right, ties half: .9 beats all three failure
    # values, .6 beats two and ties one, .2 ties one, each .3 and the .4 beat .2 only
    auc = (3 + 2.5 + 0.5 + 7 * 1) / 30
    assert out == pytest.approx(
        dict(
            brier=brier,
            auc=auc,
            spread=(0.7 + 0.0) / 2,
            rise=(0.7 + 0.0) / 2,
            success_steps_kept=(3 + 4 + 1) / 10,
            failure_steps_kept=1 / 3,
        )
    )


def test_a_refit_critic_learns_and_leaves_the_run_alone() -> None:
    cfg = load_config(TrainConfig, None, ["algo=digirl", "env.name=synthetic"])
    base = make_learner(cfg, cfg.agent.make())
    assert isinstance(base, DigiRL)
    before = {k: v.clone() for k, v in base.critics.step.state_dict().items()}
    data = collect(24, screen=(48, 80))
    assert 0 < sum(t.success for t in data) < len(data)
    untrained = cf.measure(cf.fit(base, data, 0, 1e-3), data)
    trained = cf.measure(cf.fit(base, data, 150, 1e-3), data)
    assert trained["brier"] < untrained["brier"] - 0.02
    after = base.critics.step.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert base.critics.config == CriticConfig()  # the refits changed copies of it only
