"""Windowed success per (policy, task) and per policy: what snapshots, frontier sampling, the
regression gate and the league table read."""

from __future__ import annotations

from collections import deque
from typing import Any


class SuccessTable:
    """The last ``task_window`` outcomes of each policy on each task, and the last
    ``policy_window`` outcomes of each policy over all its tasks (not smoothed: a share)."""

    def __init__(self, task_window: int = 20, policy_window: int = 100) -> None:
        self.task_window = task_window
        self.policy_window = policy_window
        self.by_task: dict[str, dict[str, deque[bool]]] = {}
        self.by_policy: dict[str, deque[bool]] = {}
        self.episodes: dict[str, int] = {}

    def record(self, policy: str, task: str, success: bool) -> None:
        """One finished, labelled episode of ``policy`` on ``task``."""
        tasks = self.by_task.setdefault(policy, {})
        tasks.setdefault(task, deque(maxlen=self.task_window)).append(bool(success))
        self.by_policy.setdefault(policy, deque(maxlen=self.policy_window)).append(bool(success))
        self.episodes[policy] = self.episodes.get(policy, 0) + 1

    def rate(self, policy: str, task: str) -> float | None:
        """Success of ``policy`` on ``task`` over its window (None: never played)."""
        window = self.by_task.get(policy, {}).get(task)
        return sum(window) / len(window) if window else None

    def count(self, policy: str, task: str) -> int:
        return len(self.by_task.get(policy, {}).get(task, ()))

    def policy_rate(self, policy: str) -> tuple[float | None, int]:
        """(success over the policy's recent episodes, how many episodes the window holds)."""
        window = self.by_policy.get(policy)
        if not window:
            return None, 0
        return sum(window) / len(window), len(window)

    def copy_policy(self, source: str, target: str) -> None:
        """``target`` starts with ``source``'s windows (a snapshot, a PBT exploit: the same
        weights, so the same record until it plays its own episodes)."""
        tasks = self.by_task.get(source, {})
        self.by_task[target] = {t: deque(w, maxlen=self.task_window) for t, w in tasks.items()}
        pooled = self.by_policy.get(source, ())
        self.by_policy[target] = deque(pooled, maxlen=self.policy_window)

    def drop(self, policy: str) -> None:
        self.by_task.pop(policy, None)
        self.by_policy.pop(policy, None)
        self.episodes.pop(policy, None)

    def tasks(self) -> list[str]:
        return sorted({t for tasks in self.by_task.values() for t in tasks})

    def to_json(self) -> dict[str, Any]:
        return {
            "task_window": self.task_window,
            "policy_window": self.policy_window,
            "by_task": {
                p: {t: [int(x) for x in w] for t, w in ts.items()} for p, ts in self.by_task.items()
            },
            "by_policy": {p: [int(x) for x in w] for p, w in self.by_policy.items()},
            "episodes": dict(self.episodes),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SuccessTable:
        table = cls(int(data["task_window"]), int(data["policy_window"]))
        for p, ts in data["by_task"].items():
            table.by_task[p] = {
                t: deque((bool(x) for x in w), maxlen=table.task_window) for t, w in ts.items()
            }
        for p, w in data["by_policy"].items():
            table.by_policy[p] = deque((bool(x) for x in w), maxlen=table.policy_window)
        table.episodes = {p: int(n) for p, n in data["episodes"].items()}
        return table
