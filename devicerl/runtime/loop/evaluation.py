"""Evaluation: the first N tasks of a split, in order, with fixed seeds; success with a
95 % Wilson confidence interval, per task and overall.

The instances (task, seed pairs) are drawn in the split's order; the devices then play them
kept to a task each (`devicerl.tasks.placement.TaskAffinity`), so a device opens as few task
pages as it can: the same episodes, fewer page loads."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from devicerl.agents.base import Policy
from devicerl.judges import JudgeConfig
from devicerl.pool.pool import EnvPool
from devicerl.records import Trajectory
from devicerl.runtime.acting.collector import Collector
from devicerl.runtime.acting.episode_counts import EpisodeCounts
from devicerl.runtime.acting.judging import judge_each
from devicerl.tasks.base import Task, TaskSampler
from devicerl.tasks.placement import TaskAffinity


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (0, 1 when n == 0)."""
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


@dataclass
class EvalResult(EpisodeCounts):
    """Success over the evaluated episodes (truncated/unlabelled ones are counted apart)."""

    env_steps: int = 0
    # task -> [successes, n, steps, loop steps] (steps of labelled episodes only)
    per_task: dict[str, list[int]] = field(default_factory=dict)

    @property
    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.successes, self.episodes)

    def count(self, t: Trajectory) -> bool:
        """Count ``t`` (and its steps) and its task's row; True when complete and labelled."""
        self.env_steps += t.length
        if not super().count(t):
            return False
        row = self.per_task.setdefault(t.task, [0, 0, 0, 0])
        row[0] += int(t.success)
        row[1] += 1
        row[2] += t.length
        row[3] += t.loop_steps()
        return True

    @property
    def loop_step_frac(self) -> float:
        """The share of the labelled episodes' steps that were detours: steps that led back
        to a screen the episode had shown (`Trajectory.without_loops`); a greedy policy that
        repeats an action going nowhere shows here before its success rate says why."""
        steps = sum(row[2] for row in self.per_task.values())
        return sum(row[3] for row in self.per_task.values()) / steps if steps else 0.0

    def metrics(self) -> dict[str, float]:
        """The result under the metric names a run logs (``eval/...``)."""
        lo, hi = self.interval
        return {
            "eval/success_rate": self.success_rate,
            "eval/ci95_low": lo,
            "eval/ci95_high": hi,
            "eval/episodes": self.episodes,
        }

    def as_dict(self) -> dict[str, Any]:
        lo, hi = self.interval
        return {
            "success_rate": self.success_rate,
            "ci95": [lo, hi],
            "episodes": self.episodes,
            "successes": self.successes,
            "truncated": self.truncated,
            "unlabelled": self.unlabelled,
            "env_steps": self.env_steps,
            "loop_step_frac": self.loop_step_frac,
            "per_task": {
                k: {"successes": s, "episodes": n, "steps": st, "loop_steps": lp}
                for k, (s, n, st, lp) in self.per_task.items()
            },
        }

    def table(self) -> str:
        lines = [f"{'task':40s} {'success':>8s} {'n':>5s} {'detours':>8s}"]
        for task, (s, n, st, lp) in sorted(self.per_task.items()):
            lines.append(f"{task:40s} {s / n:8.1%} {n:5d} {lp / st if st else 0.0:8.1%}")
        lo, hi = self.interval
        lines.append(
            f"{'overall':40s} {self.success_rate:8.1%} {self.episodes:5d} "
            f"{self.loop_step_frac:8.1%}  (95% CI {lo:.1%}-{hi:.1%}; truncated "
            f"{self.truncated}, unlabelled {self.unlabelled})"
        )
        return "\n".join(lines)


def eval_sampler(
    tasks: Sequence[Task],
    n_tasks: int,
    episodes_per_task: int,
    seed: int,
    split: str = "validation",
) -> TaskAffinity:
    """The first ``n_tasks`` tasks, each ``episodes_per_task`` times, in order, fixed seeds
    from the `split`'s seed range (`devicerl.tasks.SEED_RANGES`; never training's); handed
    to the devices kept to a task each."""
    chosen = list(tasks)[:n_tasks]
    ordered = [t for t in chosen for _ in range(episodes_per_task)]
    return TaskAffinity(
        TaskSampler(ordered, mode="sequential", seed=seed, cycle=False, seeds=split)
    )


def evaluate_policy(
    make_pool: Callable[[Any], EnvPool],
    policy: Policy,
    sampler: TaskSampler | TaskAffinity,
    *,
    greedy: bool = True,
    judge: JudgeConfig | None = None,
    on_episode: Callable[[Trajectory], None] | None = None,
) -> EvalResult:
    """Run ``policy`` over every instance of ``sampler`` once and score it (``make_pool``
    builds the devices playing the sampler's instances), each episode labelled by ``judge``
    (None: the task's own check) within its judging budget."""
    result = EvalResult()
    with make_pool(sampler) as pool:
        episodes = Collector(pool, policy, greedy=greedy).collect(None)
        for traj in judge_each(episodes, judge or JudgeConfig()):
            result.count(traj)
            if on_episode is not None:
                on_episode(traj)
    return result
