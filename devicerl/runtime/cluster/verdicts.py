"""Finished episodes leave their node before their verdict: nothing finished dies with a node.

A rollout group with a VLM judge ships each finished episode twice over, in two sizes: first
the episode itself, unjudged, as soon as it ended (`Shipment.awaiting`), then, once its judge
answered, only the labels the verdict changed (a `Relabel`, no pixels). The learner's fleet
holds the unjudged copy until the labels arrive. If the group is lost in between, the fleet
judges the held episodes itself (`Rescue`, the run's own judge config) or, when it cannot get
a verdict, stores them unlabelled with the reason; each is stored exactly once either way.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass
from typing import Any

from devicerl.judges.apply import apply_verdict
from devicerl.judges.base import Verdict
from devicerl.records import EndReason, Judgement, Trajectory


def detached(t: Trajectory) -> Trajectory:
    """A copy of ``t`` that a judge thread relabelling ``t`` cannot change (observations, the
    bulky part, are shared: judging never modifies them)."""
    for attempt in range(3):
        shared = [s.observation for s in t.steps] + [t.final_observation]
        memo: dict[int, Any] = {id(o): o for o in shared if o is not None}
        try:
            return copy.deepcopy(t, memo)
        except RuntimeError:  # another thread added an extras key meanwhile: copy again
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


@dataclass
class Relabel:
    """What judging changed on an episode, to replay on its unjudged copy (see
    `devicerl.judges.apply.apply_verdict`): per kept step its reward, end flags and verdict;
    the episode's end, success and judgement. Steps past the kept ones were cut after a per-step
    success: the first cut step's screen becomes the final observation, as ``apply_verdict``
    does."""

    episode_id: str
    steps: list[tuple[float, bool, bool, dict[str, Any] | None]]
    end_reason: EndReason | None
    success: bool
    truncation_cause: str | None
    judgement: Judgement | None

    @classmethod
    def of(cls, t: Trajectory) -> Relabel:
        return cls(
            t.episode_id,
            [(s.reward, s.terminated, s.truncated, s.verdict) for s in t.steps],
            t.end_reason,
            t.success,
            t.truncation_cause,
            copy.deepcopy(t.judgement),
        )

    def apply(self, t: Trajectory) -> Trajectory:
        """Relabel ``t`` (the unjudged copy of this episode) in place and return it."""
        if t.episode_id != self.episode_id or len(self.steps) > len(t.steps):
            raise ValueError(f"labels of episode {self.episode_id} do not fit {t!r}")
        kept = len(self.steps)
        if kept < len(t.steps):
            t.final_observation = t.steps[kept].observation
            del t.steps[kept:]
        for step, (reward, terminated, truncated, verdict) in zip(t.steps, self.steps):
            step.reward, step.terminated, step.truncated = reward, terminated, truncated
            step.verdict = verdict
        t.end_reason, t.success = self.end_reason, self.success
        t.truncation_cause = self.truncation_cause
        t.judgement = copy.deepcopy(self.judgement)
        return t


def unlabelled(t: Trajectory, reason: str) -> Trajectory:
    """Store ``t`` without a verdict: an unknown one saying why (kept out of training)."""
    return apply_verdict(t, Verdict.unknown(reason, judge="none"))


class JudgeEscrow:
    """A group's judge runner that keeps an unjudged copy of every episode it was handed,
    until the group ships it (`held`): the collector uses it like the runner it wraps."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self._held: dict[str, Trajectory] = {}
        self._lock = threading.Lock()

    def submit(self, trajectory: Trajectory) -> None:
        with self._lock:
            self._held[trajectory.episode_id] = detached(trajectory)
        self.runner.submit(trajectory)

    def held(self) -> dict[str, Trajectory]:
        """Episodes handed to the judge whose judged version the group has not shipped."""
        with self._lock:
            return dict(self._held)

    def release(self, episode_id: str) -> None:
        """The judged version of ``episode_id`` left the group."""
        with self._lock:
            self._held.pop(episode_id, None)

    @property
    def pending(self) -> int:
        return self.runner.pending

    def poll(self) -> list[Any]:
        return self.runner.poll()

    def drain(self, timeout: float | None = None) -> list[Any]:
        return self.runner.drain(timeout)

    def close(self, wait: bool = True) -> None:
        self.runner.close(wait)


class Rescue:
    """The learner's judge for episodes whose group was lost before their verdict."""

    def __init__(self, judge_config: Any) -> None:
        self.config = judge_config
        self.runner: Any = None
        self.submitted = 0

    def submit(self, t: Trajectory, cause: str) -> None:
        if self.runner is None:
            from devicerl.judges.factory import make_runner

            self.runner = make_runner(self.config)
        if t.judgement is not None:
            t.judgement.rescued = cause
        else:  # the learner's judge keeps it when it applies its verdict
            t.judgement = Judgement({}, t.success, t.end_reason.value if t.end_reason else None)
            t.judgement.rescued = cause
        self.submitted += 1
        self.runner.submit(t)

    @property
    def pending(self) -> int:
        return self.runner.pending if self.runner is not None else 0

    def poll(self) -> list[Trajectory]:
        return [j.trajectory for j in self.runner.poll()] if self.runner is not None else []

    def finish(self, timeout: float) -> list[Trajectory]:
        """What the judge answers within ``timeout``; then stop it (the caller stores the
        episodes it did not answer as `unlabelled` copies: a late answer cannot touch those)."""
        if self.runner is None:
            return []
        done = [j.trajectory for j in self.runner.drain(timeout)]
        self.runner.close(wait=False)
        return done
