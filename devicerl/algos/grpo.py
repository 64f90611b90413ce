"""GRPO (Shao et al., arXiv 2402.03300), critic-free and group-relative, one iteration at a time.

The collector runs each task instance as a group of ``group_size`` episodes (the episode
planner, `devicerl.runtime.acting.planning`); the trainer hands a group to the learner only
once it is whole. From the replay buffer's usable trajectories:

1. `CompleteGroups`: the whole groups, acted fewer than ``max_staleness`` policy versions ago;
2. `EpisodeAdvantages`: A_i = (R_i - mean_group R) / std_group R (``normalise``; Dr. GRPO
   without), every step of episode i taking A_i; a group whose returns are all equal teaches
   nothing (its advantages are 0; counted as ``train/groups_uniform``);
3. `NonZeroAdvantage`: only samples with an advantage go on;
4. the actor maximises the decoupled clipped surrogate (`ClippedSurrogate`): min(r A, clip(r) A)
   with r = pi_theta / pi_prox, weighted by pi_prox / mu (mu: the policy that acted, its log-prob
   recorded per step), minus ``kl_coef`` times KL to the start policy when set.

`devicerl.algos.gigpo` adds GiGPO's step-level groups to this composition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner, usable
from devicerl.algos.config import ActorConfig, GRPOConfig
from devicerl.algos.selection import (
    CompleteGroups,
    EpisodeAdvantages,
    EveryStep,
    NonZeroAdvantage,
    run_steps,
)
from devicerl.algos.surrogate import ClippedSurrogate
from devicerl.records import Trajectory


class GRPO(Learner):
    """The GRPO learner: group-relative advantages and a clipped surrogate, no critic."""

    name = "grpo"

    def __init__(
        self, actor: Policy, config: GRPOConfig, actor_config: ActorConfig, seed: int = 0
    ) -> None:
        super().__init__(actor, seed)
        self.config = config
        self.surrogate = ClippedSurrogate(actor, actor_config, config, self.rng, self.grad_sync)
        self.selection: list[Any] = [
            CompleteGroups(config.group_size, config.max_staleness, lambda: actor.version),
            EpisodeAdvantages(config.normalise),
            EveryStep(),
            NonZeroAdvantage(),
        ]

    def parts(self) -> list[Any]:
        return [self.surrogate]

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.surrogate.optimizer}

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        sel = run_steps(self.selection, data)
        metrics = self.surrogate.step(sel.samples)
        self.updates_done += int(metrics.get("train/actor_updates", 0))
        return {"train/data_trajectories": float(len(data)), **sel.stats, **metrics}
