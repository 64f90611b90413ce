"""The synthetic suite: the tasks the synthetic device (`devicerl.envs.synthetic`) runs."""

from __future__ import annotations

from devicerl.envs.synthetic import SyntheticEnv, SyntheticOptions
from devicerl.records import Task
from devicerl.tasks.registry import get


def synthetic_tasks() -> list[Task]:
    """The synthetic suite."""
    return [
        Task("synthetic/tap", max_steps=5, env="synthetic"),
        Task("synthetic/type", max_steps=6, env="synthetic"),
        Task("synthetic/steps", max_steps=10, env="synthetic"),
        Task("synthetic/answer", max_steps=3, env="synthetic"),
    ]


def make_synthetic_env(
    task: Task | str | None = "synthetic/tap", options: SyntheticOptions | None = None
) -> SyntheticEnv:
    """``make("synthetic/<kind>")``: a `SyntheticEnv` whose default task is resolved here."""
    return SyntheticEnv(get(task) if isinstance(task, str) else task, options)
