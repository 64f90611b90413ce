"""The task-native judge: the device's own success check (MiniWoB reward, synthetic truth).

Devices already record it: ``Step.info["success"]`` after each step and ``Trajectory.success``
when the episode ends. This judge reads them back, so it costs nothing and never fails; it is
the default and the ground truth that `devicerl judge-eval` measures other judges against.
"""

from __future__ import annotations

from devicerl.judges.base import Judge, Verdict
from devicerl.records import Trajectory


class NativeJudge(Judge):
    """Reads the success check the device recorded."""

    name = "native"

    def _judge_step(self, trajectory: Trajectory, index: int) -> Verdict:
        success = trajectory.steps[index].info.get("success")
        if success is None:
            return Verdict.unknown(f"step {index} has no recorded task success")
        return Verdict.of(bool(success), rationale="task's own success check")

    def judge(self, trajectory: Trajectory) -> Verdict:
        last = len(trajectory.steps) - 1 if trajectory.steps else None
        if not trajectory.is_complete:
            return Verdict.unknown("the episode has not ended", judge=self.name, step=last)
        if trajectory.is_truncated:
            cause = trajectory.truncation_cause or "unknown cause"
            return Verdict.unknown(
                f"cut short by infrastructure ({cause})", judge=self.name, step=last
            )
        return Verdict.of(
            trajectory.success, rationale="task's own success check", judge=self.name, step=last
        )
