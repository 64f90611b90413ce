"""The judge interface: who decides whether an episode (or a step) solved its task.

A judge returns a `Verdict` that is ``success``, ``failure`` or ``unknown``. ``unknown`` means
the judge could not tell (its API was down, its reply was unreadable, there was nothing to look
at); it is never a failure in disguise, so callers handle it explicitly (see
`devicerl.judges.runner`).

Two entry points:
- `Judge.judge_step(trajectory, index)`: was the task solved by step ``index``? The judge sees
  the trajectory up to and including that step and the screen *after* it
  (`observation_after`). DigiRL labels every step this way.
- `Judge.judge(trajectory)`: was the finished episode a success? Looks at its last step.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any

from devicerl.records import Observation, Trajectory


class Label(str, Enum):
    """What a judge decided."""

    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"  #: the judge could not tell; ``reason`` says why


@dataclass(frozen=True)
class Verdict:
    """One judgement.

    ``step`` is the index of the judged step (the last one for a whole trajectory);
    ``cached`` tells that no request was made; ``latency_s`` is the wall time spent judging.
    """

    label: Label
    rationale: str = ""
    reason: str = ""
    judge: str = ""
    step: int | None = None
    cached: bool = False
    latency_s: float = 0.0

    @property
    def success(self) -> bool | None:
        """True / False, or None when unknown."""
        if self.label is Label.UNKNOWN:
            return None
        return self.label is Label.SUCCESS

    @property
    def reward(self) -> float | None:
        """Sparse reward of the judged step: 1.0 on success, 0.0 on failure, None if unknown."""
        s = self.success
        return None if s is None else float(s)

    @property
    def is_unknown(self) -> bool:
        return self.label is Label.UNKNOWN

    @classmethod
    def of(cls, success: bool, **kw: Any) -> Verdict:
        return cls(Label.SUCCESS if success else Label.FAILURE, **kw)

    @classmethod
    def unknown(cls, reason: str, **kw: Any) -> Verdict:
        return cls(Label.UNKNOWN, reason=reason, **kw)

    def with_(self, **kw: Any) -> Verdict:
        return replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["label"] = self.label.value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        return cls(**{**d, "label": Label(d["label"])})


def observation_after(trajectory: Trajectory, index: int) -> Observation | None:
    """The screen after step ``index``: the next step's observation, or the final one."""
    if index + 1 < len(trajectory.steps):
        return trajectory.steps[index + 1].observation
    return trajectory.final_observation


def screens_until(trajectory: Trajectory, index: int) -> list[Observation]:
    """Every observation from the start up to the screen after step ``index`` (oldest first)."""
    obs = [s.observation for s in trajectory.steps[: index + 1]]
    after = observation_after(trajectory, index)
    if after is not None:
        obs.append(after)
    return obs


def _check_index(trajectory: Trajectory, index: int) -> int:
    n = len(trajectory.steps)
    if index < 0:
        index += n
    if not 0 <= index < n:
        raise IndexError(f"step {index} out of range for a trajectory of {n} steps")
    return index


class Judge(ABC):
    """Decides success. Implementations must be thread-safe: runners call them concurrently."""

    name: str = "judge"

    def judge_step(self, trajectory: Trajectory, index: int = -1) -> Verdict:
        """Was the task solved by step ``index`` (negative counts from the end)?"""
        index = _check_index(trajectory, index)
        return self._judge_step(trajectory, index).with_(judge=self.name, step=index)

    def judge(self, trajectory: Trajectory) -> Verdict:
        """Was the finished episode a success? Judges its last step."""
        if not trajectory.steps:
            return Verdict.unknown("the trajectory has no steps", judge=self.name)
        return self.judge_step(trajectory, -1)

    @abstractmethod
    def _judge_step(self, trajectory: Trajectory, index: int) -> Verdict:
        """Judge step ``index`` (already checked to be in range)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release clients and caches."""

    def __enter__(self) -> Judge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
