"""Picks the trainer's learner handle (`devicerl.runtime.distributed.learners`): one process,
the ranks of a launch, or a Ray learner group. It sits apart from the handles so none of them
imports another."""

from __future__ import annotations

from typing import Any

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.runtime.distributed.learners import (
    LaunchedLearners,
    LearnerHandle,
    check_batch_sizes,
)
from devicerl.runtime.distributed.process_group import ProcessGroupInfo
from devicerl.runtime.distributed.ray_learners import RayLearners


def make_learner_handle(
    cfg: Any, learner: Learner, actor: Policy, launch: ProcessGroupInfo | None = None
) -> LearnerHandle:
    """The handle the trainer's config and launch ask for."""
    if launch is not None and launch.world_size > 1:
        check_batch_sizes(cfg, launch.world_size)
        return LaunchedLearners(cfg, learner, actor, launch)
    if cfg.learner.num_workers > 1:
        check_batch_sizes(cfg, cfg.learner.num_workers)
        return RayLearners(cfg, learner, actor)
    return LearnerHandle(learner, actor)
