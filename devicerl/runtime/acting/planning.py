"""The episode planner: what each new episode is, decided before it starts.

The pool asks its instance source for a new episode whenever a device is free to reset. An
`EpisodePlanner` is that source: it draws the task instance and decides the episode's
`EpisodePlan` — which policy acts (a league's `PolicyAssignment`; a single-policy run's is
always `DEFAULT_POLICY`), the exploration level it acts with (`ExplorationSchedule`), and, for
the group-relative learners, the group it belongs to: with ``group_size`` G every drawn instance
is handed out G times under one group id, to whichever devices free up first (no device waits
for a group). The plan travels with the instance through the pool to the collector
(`Ready.plan`) and is stored with the trajectory (`Trajectory.plan`), so every later reader
sees the same decision as a typed field.

A group member cut short by the infrastructure (truncated, or left unlabelled by the judge) is
re-run: `retry` hands its instance out once more under the same group id, at most
``MAX_RETRIES`` times per group; past that the group stays incomplete and the trainer drops it
whole (`devicerl.runtime.loop.task_groups.TaskGroupBuffer`). The pool asks for instances on the
collector's thread and the judging stage reports outcomes on its own, so both go under a lock.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from dataclasses import replace
from typing import Protocol

from devicerl.records import DEFAULT_POLICY, EpisodePlan, TaskInstance, Trajectory
from devicerl.runtime.acting.exploration import ExplorationSchedule
from devicerl.tasks import TaskSampler

#: Re-runs a group gets for members the infrastructure cut short.
MAX_RETRIES = 4


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
        group_size: int | None = None,
        name: str = "g",
    ) -> None:
        """``name``: prefix of group ids (distinct per planner, e.g. per rollout group)."""
        self.sampler = sampler
        self.assignment = assignment
        self.exploration = exploration
        self.group_size = group_size
        self.name = name
        self._queue: deque[TaskInstance] = deque()  # members of the current group still to go
        self._groups = itertools.count()
        self._retries: dict[str, int] = {}
        self._tasks = {t.name: t for t in sampler.tasks}
        self._lock = threading.Lock()

    def next(self) -> TaskInstance | None:
        with self._lock:
            return self._next()

    def _next(self) -> TaskInstance | None:
        if self._queue:
            return self._queue.popleft()
        inst = self._draw()
        if inst is None or self.group_size is None:
            return inst
        plan = replace(
            inst.plan, group=f"{self.name}{next(self._groups)}", group_size=self.group_size
        )
        members = [replace(inst, plan=plan) for _ in range(self.group_size)]
        self._queue.extend(members[1:])
        return members[0]

    def _draw(self) -> TaskInstance | None:
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

    def retry(self, trajectory: Trajectory) -> bool:
        """A group member the infrastructure cut short: run its instance again under the same
        group, unless the group used its re-runs (or its task is not this planner's)."""
        return self.rerun(trajectory.task, trajectory.seed, trajectory.plan)

    def rerun(self, task_name: str, seed: int | None, plan: EpisodePlan | None) -> bool:
        """`retry` from an episode's instance and plan (what a rollout group is sent)."""
        task = self._tasks.get(task_name)
        if plan is None or plan.group is None or task is None or seed is None:
            return False
        with self._lock:
            used = self._retries.get(plan.group, 0)
            if used >= MAX_RETRIES:
                return False
            if len(self._retries) > 10_000:  # groups long finished: forget the oldest
                self._retries.pop(next(iter(self._retries)))
            self._retries[plan.group] = used + 1
            self._queue.appendleft(TaskInstance(task, seed, plan))
        return True
