"""`TaskAffinity`: a fixed list of task instances, handed out so that each device keeps to one
task while that task has instances left.

A device's first episode of a task opens the task's page (on a browser device a new context
and a page load: seconds on a busy machine); its later episodes of the task restart the page in
place (tens of milliseconds). Handed out in list order, as an evaluation's instances are listed
(every seed of the first task, then the second task's...), every device goes through every
task and opens every page, which can cost more than the episodes themselves. Kept to their
tasks, the devices open each page about once, and a device moving on from a task that ran out
loads the next task into the page it has (a navigation) rather than opening another. The
instances, the (task, seed) pairs, are exactly the list's; only which device plays which one
changes.

The pool asks with the device's id (`next_for`); a caller that does not say which device asks
gets the list's order (`next`).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable

from devicerl.records import TaskInstance


class TaskAffinity:
    """Hands out ``instances`` once each: a device gets the next instance of the task it is on;
    a device whose task ran out (or a new one) takes the first task no device is on yet, else
    joins the task with the most instances left per device on it (a device gets nothing only
    once every instance was handed out, so no instance waits on a device that is gone)."""

    #: A device moves to another task only when its task ran out, so it never gets back the
    #: task it left: the pool tells the device so (`DeviceEnv.leave`), and a device keeping a
    #: page per task navigates the page it has instead of opening another.
    leaves_tasks_for_good = True

    def __init__(self, instances: Iterable[TaskInstance]) -> None:
        #: instances not handed out yet, by task name, tasks in their first appearance's order
        self._left: dict[str, deque[TaskInstance]] = {}
        for inst in instances:
            self._left.setdefault(inst.task.name, deque()).append(inst)
        self._on: dict[int, str] = {}  # device -> the task it plays

    def __len__(self) -> int:
        """Instances not handed out yet."""
        return sum(len(q) for q in self._left.values())

    def next_for(self, env_id: int) -> TaskInstance | None:
        """The next instance for device ``env_id`` (None once every instance was handed out)."""
        task = self._on.get(env_id)
        if task not in self._left:
            task = self._choose()
            if task is None:
                self._on.pop(env_id, None)
                return None
            self._on[env_id] = task
        return self._take(task)

    def next(self) -> TaskInstance | None:
        """The next instance in the list's order (for a caller with no device to name)."""
        return self._take(next(iter(self._left))) if self._left else None

    def _choose(self) -> str | None:
        on = Counter(self._on.values())
        for task in self._left:
            if not on[task]:
                return task
        share = {t: len(q) / (on[t] + 1) for t, q in self._left.items()}
        return max(share, key=share.__getitem__, default=None)  # the first of the largest

    def _take(self, task: str) -> TaskInstance:
        queue = self._left[task]
        inst = queue.popleft()
        if not queue:
            del self._left[task]
        return inst
