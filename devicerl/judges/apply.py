"""Turning verdicts into labels and rewards on a trajectory (pure data; no threads).

How a verdict changes a finished `Trajectory` (`apply_verdict`):
- The device's own outcome and the applied verdict are kept in ``Trajectory.judgement``
  (`Judgement`); each judged step's verdict in ``Step.verdict``.
- ``success`` at step ``h``: reward 1.0 on step ``h`` and 0.0 on every other step, ``success``
  True, ``end_reason`` SUCCESS. With per-step judging ``h`` can be earlier than the last step
  (the device kept going because judging runs after the fact, never blocking it): the episode is
  cut at ``h`` - the steps after it are removed (their number is kept in
  ``Judgement.cut_steps``), step ``h`` becomes terminal and the screen the judge saw
  becomes ``final_observation``. This is what DigiRL does online: a success ends the episode.
- ``failure``: every reward 0.0, ``success`` False; an ``end_reason`` of SUCCESS (the device
  thought it succeeded) becomes FAILURE, other reasons are kept.
- ``unknown``: labels and rewards are left as the device recorded them; the caller decides (see
  `devicerl.judges.runner`). Unknown is never turned into a failure here.
"""

from __future__ import annotations

import copy
from typing import Any

from devicerl.judges.base import Judge, Label, Verdict
from devicerl.records import EndReason, Judgement, Trajectory


def _truncated_reason(trajectory: Trajectory) -> str:
    return f"cut short by infrastructure ({trajectory.truncation_cause or 'unknown cause'})"


def judge_trajectory(judge: Judge, trajectory: Trajectory, per_step: bool = False) -> Verdict:
    """The verdict for a finished episode; records step verdicts in ``Step.verdict``.

    ``per_step`` judges steps in order and stops at the first verdict that is not a failure (a
    success, or an unknown: after an unknown step no later success can be trusted to be the
    first). An infrastructure-truncated episode with no judged success is unknown; without
    ``per_step`` it is not sent to the judge at all.
    """
    if not trajectory.steps:
        return Verdict.unknown("the trajectory has no steps", judge=judge.name)
    if not per_step:
        if trajectory.is_truncated:
            return Verdict.unknown(_truncated_reason(trajectory) + "; not judged", judge=judge.name)
        verdict = judge.judge(trajectory)
        if verdict.step is not None:
            trajectory.steps[verdict.step].verdict = verdict.to_dict()
        return verdict
    verdict = None
    for i, step in enumerate(trajectory.steps):
        verdict = judge.judge_step(trajectory, i)
        step.verdict = verdict.to_dict()
        if verdict.label is not Label.FAILURE:
            return verdict
    assert verdict is not None
    if trajectory.is_truncated:
        return Verdict.unknown(
            _truncated_reason(trajectory) + " before any judged success",
            judge=judge.name,
            step=verdict.step,
        )
    return verdict


def apply_verdict(trajectory: Trajectory, verdict: Verdict) -> Trajectory:
    """Relabel ``trajectory`` in place from ``verdict`` (see the module doc) and return it."""
    before = trajectory.judgement
    native = trajectory.end_reason.value if trajectory.end_reason else None
    trajectory.judgement = Judgement(
        verdict.to_dict(),
        before.native_success if before is not None else trajectory.success,
        before.native_end_reason if before is not None else native,
        rescued=before.rescued if before is not None else None,
    )
    steps = trajectory.steps
    if verdict.is_unknown or not steps:
        return trajectory
    if not verdict.success:
        for s in steps:
            s.reward = 0.0
        trajectory.success = False
        if trajectory.end_reason is EndReason.SUCCESS:
            trajectory.end_reason = EndReason.FAILURE
        return trajectory
    h = len(steps) - 1 if verdict.step is None else verdict.step
    cut = len(steps) - h - 1
    if cut > 0:
        trajectory.final_observation = steps[h + 1].observation
        del steps[h + 1 :]
        trajectory.judgement.cut_steps = cut
    for i, s in enumerate(steps):
        s.reward = 1.0 if i == h else 0.0
    steps[h].terminated, steps[h].truncated = True, False
    trajectory.end_reason, trajectory.success = EndReason.SUCCESS, True
    trajectory.truncation_cause = None
    return trajectory


def is_labelled(trajectory: Trajectory) -> bool:
    """False when a judge looked at ``trajectory`` and could not tell (its applied verdict is
    unknown): keep such episodes out of training and success statistics. Episodes no judge
    has seen keep the device's labels and count as labelled."""
    return trajectory.judgement is None or trajectory.judgement.labelled


def detached(t: Trajectory) -> Trajectory:
    """A copy of ``t`` that a judging thread still relabelling ``t`` cannot change (the
    observations, the bulky part, are shared: judging never modifies them)."""
    for attempt in range(3):
        shared = [s.observation for s in t.steps] + [t.final_observation]
        memo: dict[int, Any] = {id(o): o for o in shared if o is not None}
        try:
            return copy.deepcopy(t, memo)
        except RuntimeError:  # the thread changed a step's dict meanwhile: copy again
            if attempt == 2:
                raise
    raise AssertionError("unreachable")
