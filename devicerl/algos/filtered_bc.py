"""Filtered behaviour cloning: imitate the top-p trajectories by return.

Rule when few succeed (the reference's edge case): a trajectory with return <= 0 is never kept.
When fewer than ``ceil(top_p * N)`` trajectories succeed, only the successful ones are kept;
when none succeeds, the iteration makes no actor update.
"""

from __future__ import annotations

from collections.abc import Sequence

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner, Sample, every_step, top_p_by_return, usable
from devicerl.algos.config import FilteredBCConfig as FilteredBCConfig  # re-export
from devicerl.records import Trajectory


class FilteredBC(Learner):
    """Maximise the log-likelihood of every step of the kept trajectories."""

    name = "filtered_bc"

    def __init__(self, actor: Policy, config: FilteredBCConfig, seed: int = 0) -> None:
        super().__init__(actor, config.actor, seed)
        self.config = config

    def select(self, data: Sequence[Trajectory]) -> tuple[list[Sample], dict[str, float]]:
        """Every step of the top-p trajectories by return (never a failure; with
        ``actor.drop_loops``, less their detours)."""
        kept, stats = self.without_loops(top_p_by_return(data, self.config.top_p))
        return every_step(kept), {"train/kept_trajectories": float(len(kept)), **stats}

    def update(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        data = usable(trajectories)
        if not data:
            return {"train/data_trajectories": 0.0}
        samples, stats = self.select(data)
        metrics = self.actor_step(samples, data)
        metrics["train/data_trajectories"] = float(len(data))
        return {**metrics, **stats}
