"""Episode records the pool assembles from worker replies: `Ready`, `Step`s, `Trajectory`s.

The pool sees every reset and step, so it builds trajectories itself; workers only send
observations and step results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from devicerl.agents.base import ActionSample
from devicerl.pool.workers.base import Reply
from devicerl.records import EndReason, Observation, Step, Trajectory
from devicerl.tasks.base import TaskInstance


@dataclass
class Ready:
    """One device's news from `EnvPool.recv`.

    ``observation`` is what to act on next (the first observation of a new episode when
    ``first``), or None when the device has nothing to act on now (it is restarting, retired,
    or out of tasks). ``trajectory`` is the episode that just ended, if any. ``reward``,
    ``terminated``, ``truncated`` and ``info`` describe the last step. ``task`` names the task
    of the new episode (set with ``first``).
    """

    env_id: int
    observation: Observation | None
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    trajectory: Trajectory | None = None
    first: bool = False
    retired: bool = False
    task: str | None = None


@dataclass
class PendingAction:
    """The action in flight on a device, with what the agent said about it."""

    sample: ActionSample
    policy_version: int
    agent_time_s: float
    started_at: float


def after_step(env_id: int, reply: Reply) -> Ready:
    return Ready(
        env_id, reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info
    )


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
        extras={"max_steps": inst.task.max_steps},
    )


def step_record(observation: Observation, pending: PendingAction, reply: Reply) -> Step:
    """The `Step` for the action taken on ``observation``."""
    return Step(
        observation=observation,
        action=pending.sample.action,
        reward=reply.reward,
        terminated=reply.terminated,
        truncated=reply.truncated,
        info=reply.info,
        text=pending.sample.text,
        log_prob=pending.sample.log_prob,
        policy_version=pending.policy_version,
        agent_time_s=pending.agent_time_s,
        device_time_s=float(reply.info.get("device_time_s", reply.elapsed_s)),
        started_at=pending.started_at,
    )


def finish(traj: Trajectory, reply: Reply) -> Trajectory:
    """Close an episode the device ended, with the device's end reason and success."""
    try:
        reason = EndReason(reply.info["end_reason"])
    except (KeyError, ValueError):
        reason = EndReason.FAILURE if reply.terminated else EndReason.MAX_STEPS
    traj.final_observation = reply.observation
    return traj.end(reason, success=bool(reply.info.get("success", False)))
