"""Frontier task sampling (the AlphaStar paper's PFSP, with tasks in place of opponents).

A task a policy always solves teaches it nothing, nor does one it never solves (no success to
imitate); the most is learnt where success is about half. Each task gets weight ``x (1 - x)`` of
the policy's recent success ``x`` on it, plus ``floor`` so solved tasks are still revisited
(forgetting shows) and hopeless ones still get tries. A task never played counts as the most
useful (x = 0.5), so new tasks are tried first.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from devicerl.league.success import SuccessTable


class FrontierSampler:
    """Draws each policy's next task from its own success table."""

    def __init__(self, table: SuccessTable, floor: float = 0.02, seed: int = 0) -> None:
        if floor < 0:
            raise ValueError(f"frontier floor must be >= 0, got {floor}")
        self.table = table
        self.floor = floor
        self.rng = random.Random(seed)

    def weights(self, policy: str, tasks: Sequence[str]) -> list[float]:
        """Unnormalised weight of each task for ``policy``."""
        out = []
        for task in tasks:
            x = self.table.rate(policy, task)
            x = 0.5 if x is None else x
            out.append(x * (1.0 - x) + self.floor)
        return out

    def probabilities(self, policy: str, tasks: Sequence[str]) -> list[float]:
        w = self.weights(policy, tasks)
        total = sum(w)
        if total <= 0:  # floor 0 and every task solved or hopeless: uniform
            return [1.0 / len(tasks)] * len(tasks)
        return [v / total for v in w]

    def sample(self, policy: str, tasks: Sequence[str]) -> str:
        """The task ``policy`` plays next."""
        if not tasks:
            raise ValueError(f"policy {policy!r} has no tasks to sample")
        return self.rng.choices(list(tasks), self.probabilities(policy, tasks))[0]
