"""Episode records the pool assembles from worker replies: `Ready`, `Step`s, `Trajectory`s.

The pool sees every reset and step, so it builds trajectories itself; workers only send
observations and step results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from devicerl.agents.base import ActionSample
from devicerl.pool.workers.base import Reply
from devicerl.records import EndReason, EpisodePlan, Observation, Step, StepResult, Trajectory
from devicerl.tasks.base import TaskInstance


@dataclass
class Ready:
    """One device's news from `EnvPool.recv`.

    ``observation`` is what to act on next (the first observation of a new episode when
    ``first``), or None when the device has nothing to act on now (it is restarting, retired,
    or out of tasks). ``result`` is the device's last `StepResult` (with ``first``: the step
    that ended the previous episode; None after a failure). ``trajectory`` is the episode that
    just ended, if any. ``task`` and ``seed`` name the new episode's task instance and ``plan``
    its plan (set with ``first``).
    """

    env_id: int
    observation: Observation | None
    result: StepResult | None = None
    trajectory: Trajectory | None = None
    first: bool = False
    retired: bool = False
    task: str | None = None
    seed: int | None = None
    plan: EpisodePlan | None = None
    #: the new episode's `DeviceEnv.oracle` (set with ``first``; for demonstrators only)
    oracle: Any = None


@dataclass
class PendingAction:
    """The action in flight on a device, with what the agent said about it."""

    sample: ActionSample
    policy_version: int
    agent_time_s: float
    started_at: float


def after_step(env_id: int, result: StepResult) -> Ready:
    return Ready(env_id, result.observation, result)


def new_trajectory(inst: TaskInstance, reply: Reply | None, env_id: int, label: str):
    """The trajectory a reset starts (``reply`` None: a reset that never succeeded)."""
    obs = reply.observation if reply is not None else None
    return Trajectory(
        task=inst.task.name,
        instruction=obs.instruction if obs is not None else inst.task.instruction or "",
        seed=inst.seed,
        env_id=env_id,
        device=label,
        reset_time_s=reply.elapsed_s if reply is not None else 0.0,
        max_steps=inst.task.max_steps,
        plan=inst.plan,
    )


def step_record(observation: Observation, pending: PendingAction, reply: Reply) -> Step:
    """The `Step` for the action taken on ``observation``."""
    result = reply.result
    assert result is not None
    return Step(
        observation=observation,
        action=pending.sample.action,
        reward=float(result.reward),
        terminated=bool(result.terminated),
        truncated=bool(result.truncated),
        info=result.info,
        text=pending.sample.text,
        log_prob=pending.sample.log_prob,
        policy_version=pending.policy_version,
        agent_time_s=pending.agent_time_s,
        device_time_s=float(result.info.get("device_time_s", reply.elapsed_s)),
        started_at=pending.started_at,
    )


def finish(traj: Trajectory, result: StepResult) -> Trajectory:
    """Close an episode the device ended, with the device's end reason and success."""
    try:
        reason = EndReason(result.info["end_reason"])
    except (KeyError, ValueError):
        reason = EndReason.FAILURE if result.terminated else EndReason.MAX_STEPS
    traj.final_observation = result.observation
    return traj.end(reason, success=bool(result.info.get("success", False)))
