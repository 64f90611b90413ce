"""Picks the trainer's learner handle (`devicerl.runtime.distributed.learners`): one process,
the ranks of a launch, or a Ray learner group. It sits apart from the handles so none of them
imports another."""

from __future__ import annotations

from typing import Any

from devicerl.agents.base import Policy
from devicerl.algos.base import Learner
from devicerl.runtime.distributed.group import GroupInfo
from devicerl.runtime.distributed.learners import (
    LaunchedLearners,
    LearnerGroup,
    check_batch_sizes,
)
from devicerl.runtime.distributed.ray_group import RayLearnerGroup


def make_learner_group(
    cfg: Any, learner: Learner, actor: Policy, group: GroupInfo | None = None
) -> LearnerGroup:
    """The handle the trainer's config and launch ask for."""
    if group is not None and group.world_size > 1:
        check_batch_sizes(cfg, group.world_size)
        return LaunchedLearners(cfg, learner, actor, group)
    if cfg.learner.num_workers > 1:
        check_batch_sizes(cfg, cfg.learner.num_workers)
        return RayLearnerGroup(cfg, learner, actor)
    return LearnerGroup(learner, actor)
