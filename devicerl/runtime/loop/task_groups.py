"""Whole groups for the group-relative learners: the trainer hands a group's episodes to the
learner only once all of them are in.

The planner (`devicerl.runtime.acting.planning`) hands a task instance out ``group_size``
times under one group id; the members finish in any order, on any device. `TaskGroupBuffer` holds
the labelled members of each group until ``group_size`` of them arrived, then releases them
together. A member cut short by the infrastructure is re-run by the planner under the same id;
a group that is still not whole ``max_age`` iterations after its first member arrived (its
re-runs used up, or its devices lost) is dropped whole, and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from devicerl.algos.config import GROUP_MAX_AGE as MAX_AGE
from devicerl.records import Trajectory


@dataclass
class _Waiting:
    since: int
    members: list[Trajectory] = field(default_factory=list)


class TaskGroupBuffer:
    """Labelled group members, held until their group is whole (see the module doc)."""

    def __init__(self, max_age: int = MAX_AGE) -> None:
        self.max_age = max_age
        self._waiting: dict[str, _Waiting] = {}
        self.released = 0  #: groups handed on whole
        self.dropped = 0  #: groups dropped incomplete

    def hold(self, t: Trajectory, iteration: int) -> list[Trajectory]:
        """Hold ``t``; returns its group's members when this made the group whole (an episode
        outside any group passes at once)."""
        plan = t.plan
        if plan is None or plan.group is None:
            return [t]
        waiting = self._waiting.setdefault(plan.group, _Waiting(iteration))
        waiting.members.append(t)
        if len(waiting.members) < plan.group_size:
            return []
        del self._waiting[plan.group]
        self.released += 1
        return waiting.members

    def expire(self, iteration: int) -> int:
        """Drop the groups waiting for ``max_age`` iterations or more; returns how many."""
        old = [g for g, w in self._waiting.items() if iteration - w.since >= self.max_age]
        for g in old:
            del self._waiting[g]
        self.dropped += len(old)
        return len(old)

    @property
    def waiting(self) -> int:
        """Groups not yet whole."""
        return len(self._waiting)
