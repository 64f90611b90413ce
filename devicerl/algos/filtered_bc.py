"""Filtered behaviour cloning: imitate the top-p trajectories by return.

Rule when few succeed (the reference's edge case): a trajectory with return <= 0 is never kept.
When fewer than ``ceil(top_p * N)`` trajectories succeed, only the successful ones are kept;
when none succeeds, the iteration makes no actor update.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner, Sample, usable
from devicerl.algos.config import FilteredBCConfig as FilteredBCConfig  # re-export
from devicerl.algos.formulas import filtered_bc_mask
from devicerl.records import Trajectory


def top_p_by_return(data: Sequence[Trajectory], top_p: float) -> list[Trajectory]:
    """The trajectories Filtered BC imitates: the top-p by return, ties kept, never a failure
    (also DigiRL's selection without critics)."""
    returns = torch.tensor([t.total_reward for t in data], dtype=torch.float32)
    return [t for t, k in zip(data, filtered_bc_mask(returns, top_p).tolist()) if k]


class FilteredBC(Learner):
    """Maximise the log-likelihood of every step of the kept trajectories."""

    name = "filtered_bc"

    def __init__(self, actor: Policy, config: FilteredBCConfig, seed: int = 0) -> None:
        super().__init__(actor, config.actor, seed)
        self.config = config

    def select(self, data: Sequence[Trajectory]) -> tuple[list[Sample], dict[str, float]]:
        """Every step of the top-p trajectories by return (never a failure)."""
        kept = top_p_by_return(data, self.config.top_p)
        samples = [Sample(t, i) for t in kept for i in range(t.length)]
        return samples, {"train/kept_trajectories": float(len(kept))}

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        samples, stats = self.select(data)
        metrics = self.actor_step(samples, data)
        metrics["train/data_trajectories"] = float(len(data))
        return {**metrics, **stats}
