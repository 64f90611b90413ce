"""`rollout`: play one episode on one device, serially, into a `Trajectory`.

The simplest way to produce real trajectories (tests, the demo, smoke runs, debugging a
policy). The asynchronous pool does the same for many devices at once.
"""

from __future__ import annotations

import time

from devicerl.agents.base import Policy
from devicerl.envs.base import DeviceEnv
from devicerl.errors import DeviceError
from devicerl.records import EndReason, Step, Trajectory
from devicerl.tasks.base import Task


def rollout(
    env: DeviceEnv,
    policy: Policy,
    task: Task | str,
    seed: int | None = None,
    *,
    greedy: bool = False,
    env_id: int | None = None,
) -> Trajectory:
    """One episode of ``task``; a device failure ends it as ``truncated`` with the cause."""
    name = task.name if isinstance(task, Task) else task
    traj = Trajectory(task=name, instruction="", seed=seed, env_id=env_id, device=env.name)
    t0 = time.perf_counter()
    try:
        obs = env.reset(task, seed)
    except DeviceError as e:
        return traj.end(EndReason.TRUNCATED, cause=f"reset: {type(e).__name__}: {e}")
    traj.reset_time_s = time.perf_counter() - t0
    traj.seed, traj.instruction = env.seed, obs.instruction
    # a demonstrator reads the episode's solution beside the observation, never in it
    known: dict = {"oracle": [env.oracle()]} if getattr(policy, "uses_oracle", False) else {}
    if getattr(policy, "uses_episodes", False):  # per-episode state (the API agent's budget)
        known["episodes"] = [traj.episode_id]
    while True:
        started = time.time()
        t0 = time.perf_counter()
        seen = traj.agent_observation(len(traj.steps), obs) if policy.uses_history else obs
        sample = policy.act([seen], greedy=greedy, **known)[0]
        agent_time = time.perf_counter() - t0
        try:
            result = env.step(sample.action)
        except DeviceError as e:
            traj.final_observation = obs
            return traj.end(EndReason.TRUNCATED, cause=f"step: {type(e).__name__}: {e}")
        traj.steps.append(
            Step(
                observation=obs,
                action=sample.action,
                reward=result.reward,
                terminated=result.terminated,
                truncated=result.truncated,
                info=result.info,
                text=sample.text,
                log_prob=sample.log_prob,
                policy_version=policy.version,
                agent_time_s=agent_time,
                device_time_s=float(result.info.get("device_time_s", 0.0)),
                started_at=started,
            )
        )
        obs = result.observation
        if result.done:
            traj.final_observation = obs
            reason = EndReason(result.info.get("end_reason", EndReason.FAILURE.value))
            return traj.end(reason, success=bool(result.info.get("success", False)))
