"""Filtered behaviour cloning: imitate every step of the top-p trajectories by return.

Rule when few succeed (the reference's edge case): a trajectory with return <= 0 is never kept.
When fewer than ``ceil(top_p * N)`` trajectories succeed, only the successful ones are kept;
when none succeeds, the iteration makes no actor update.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner, usable
from devicerl.algos.config import ActorConfig, FilteredBCConfig
from devicerl.algos.regression import Regression
from devicerl.algos.selection import EveryStep, SkipNoops, TopPByReturn, run_steps
from devicerl.records import Trajectory


class FilteredBC(Learner):
    """Maximise the log-likelihood of every step of the kept trajectories."""

    name = "filtered_bc"

    def __init__(
        self, actor: Policy, config: FilteredBCConfig, actor_config: ActorConfig, seed: int = 0
    ) -> None:
        super().__init__(actor, seed)
        self.config = config
        self.regression = Regression(actor, actor_config, self.rng, self.grad_sync)
        steps = {"top_p_by_return": [TopPByReturn(config.top_p), EveryStep()]}
        steps["skip_noops"] = [SkipNoops()]
        self.selection = [step for name in config.selection for step in steps[name]]

    def parts(self) -> list[Regression]:
        return [self.regression]

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.regression.optimizer}

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        sel = run_steps(self.selection, data)
        metrics = self.regression.step(sel.samples, data)
        self.updates_done += int(metrics.get("train/actor_updates", 0))
        return {"train/data_trajectories": float(len(data)), **metrics, **sel.stats}
