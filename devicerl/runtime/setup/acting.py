"""What a run acts with, built the same way wherever it acts: the trainer's own process and each
Ray rollout group (`devicerl.runtime.cluster.rollout_group`) call these, so a setting means the
same in both (the training seed range, the task-group size, the step budget, a fresh
policy's version)."""

from __future__ import annotations

import uuid
from dataclasses import replace

from devicerl.agents.base import Policy
from devicerl.agents.factory import AgentSpec
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.runtime.acting.planning import EpisodePlanner, PolicyAssignment
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import TaskSampler, resolve


def make_policy(spec: AgentSpec, device: str | None = None) -> Policy:
    """A policy from ``spec`` (on ``device`` instead of the spec's when given), its version 0:
    versions count this run's updates, not a saved agent's own."""
    policy = (replace(spec, device=device) if device else spec).make()
    policy.version = 0
    return policy


def make_planner(
    cfg: TrainConfig,
    seed: int,
    *,
    exploration: ExplorationSchedule | None = None,
    assignment: PolicyAssignment | None = None,
) -> EpisodePlanner:
    """The planner of a run's training episodes: instances of ``tasks.train`` from the
    training seed range drawn with ``seed``, ``tasks.max_steps``, task groups of
    ``group_size`` under ids no other planner uses, exploration levels from ``exploration``
    and, in a league, each episode's policy from ``assignment``."""
    sampler = TaskSampler(
        resolve(cfg.tasks.train), seed=seed, max_steps=cfg.tasks.max_steps, seeds="train"
    )
    return EpisodePlanner(
        sampler,
        assignment=assignment,
        exploration=exploration,
        group_size=cfg.group_size,
        name=f"{uuid.uuid4().hex[:8]}.",  # task-group ids never repeat across planners
    )
