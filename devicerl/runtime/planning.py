"""The episode planner: what each new episode is, decided before it starts.

The pool asks its instance source for a new episode whenever a device is free to reset. An
`EpisodePlanner` is that source: it draws the task instance and decides the episode's
`EpisodePlan` — which policy acts (a league's `PolicyAssignment`; a single-policy run's is
always `DEFAULT_POLICY`) and the exploration level it acts with (`ExplorationSchedule`). The
plan travels with the instance through the pool to the collector (`Ready.plan`) and is stored
with the trajectory (`Trajectory.plan`), so every later reader sees the same decision as a typed
field.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from devicerl.records import DEFAULT_POLICY, EpisodePlan, TaskInstance, Trajectory
from devicerl.runtime.exploration import ExplorationSchedule
from devicerl.tasks import TaskSampler


class PolicyAssignment(Protocol):
    """Chooses the acting policy of new episodes (a league's mapping or frontier sampling)."""

    def next(self, sampler: TaskSampler) -> tuple[TaskInstance, str] | None:
        """The next instance (drawn from ``sampler`` or chosen for a policy) and its policy."""
        ...


class EpisodePlanner:
    """Hands out task instances with their plans (see the module doc)."""

    def __init__(
        self,
        sampler: TaskSampler,
        *,
        assignment: PolicyAssignment | None = None,
        exploration: ExplorationSchedule | None = None,
    ) -> None:
        self.sampler = sampler
        self.assignment = assignment
        self.exploration = exploration

    def next(self) -> TaskInstance | None:
        if self.assignment is not None:
            chosen = self.assignment.next(self.sampler)
            if chosen is None:
                return None
            inst, policy = chosen
        else:
            inst, policy = self.sampler.next(), DEFAULT_POLICY
            if inst is None:
                return None
        epsilon = self.exploration.level(inst.task.name) if self.exploration is not None else 0.0
        return replace(inst, plan=EpisodePlan(policy=policy, epsilon=epsilon))

    def record(self, trajectory: Trajectory) -> None:
        """A labelled episode came back: the exploration schedule counts it."""
        if self.exploration is not None:
            self.exploration.record(trajectory.task, trajectory.success, trajectory.epsilon)
