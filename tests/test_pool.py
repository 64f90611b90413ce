"""EnvPool API: send/recv, auto-reset, complete trajectories, shared-memory frames, errors."""

from __future__ import annotations

import glob
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from pool_helpers import children_now, drive, episode_length, refusing_device, wait_clean

from devicerl.actions import Action
from devicerl.agents import ActionSample
from devicerl.envs import EnvSpec, make, register
from devicerl.errors import ConfigError
from devicerl.pool import EnvPool
from devicerl.records import EndReason
from devicerl.tasks import Task, TaskSampler

STEPS = [Task("synthetic/steps", max_steps=10, env="synthetic")]
TAP = Action.tap(0.5, 0.5)


def _specs(n: int, **kw) -> list[EnvSpec]:
    base = {"render": False, "step_latency": "uniform:0.001,0.004"}
    return [EnvSpec("synthetic/steps", {**base, **kw, "seed": i}) for i in range(n)]


@pytest.mark.parametrize("worker", ["serial", "subprocess"])
def test_episodes_are_complete_and_handed_out_once(worker: str) -> None:
    with EnvPool(_specs(3), tasks=TaskSampler(STEPS, seed=1), worker=worker) as pool:
        first = pool.recv(min_ready=3, timeout=10)
        assert sorted(r.env_id for r in first) == [0, 1, 2]
        assert all(r.first and r.trajectory is None for r in first)
        pool.send([TAP] * 3, [0, 1, 2])
        trajectories = drive(pool, 24)
        stats = pool.stats()
    assert len({t.episode_id for t in trajectories}) == len(trajectories)
    assert len({t.seed for t in trajectories}) == len(trajectories)
    for t in trajectories:
        assert t.is_complete and not t.is_truncated
        assert t.end_reason in (EndReason.SUCCESS, EndReason.FAILURE)
        assert len(t.steps) == episode_length(t.instruction)  # no step lost or repeated
        assert [s.observation.step for s in t.steps] == list(range(len(t.steps)))
        assert t.final_observation is not None and t.final_observation.step == len(t.steps)
        assert t.success == (t.steps[-1].reward == 1.0)
        assert t.env_id in (0, 1, 2) and t.device == "synthetic/steps"
    assert stats["steps"] >= sum(len(t.steps) for t in trajectories)


def test_recv_returns_whoever_is_ready_without_waiting_for_the_slow() -> None:
    specs = [
        EnvSpec("synthetic/steps", {"render": False, "step_latency": 1.0}),
        EnvSpec("synthetic/steps", {"render": False, "step_latency": 0.005}),
    ]
    with EnvPool(specs, tasks=STEPS) as pool:
        pool.recv(min_ready=2, timeout=10)
        pool.send([TAP, TAP], [0, 1])
        ready = pool.recv(min_ready=1, timeout=0.8)
        assert [r.env_id for r in ready] == [1]
        assert pool.recv(min_ready=1, timeout=0.05) == []  # device 0 is still busy


def test_steps_keep_what_the_agent_said() -> None:
    with EnvPool(_specs(1), tasks=STEPS, worker="serial") as pool:
        pool.recv()
        sample = ActionSample(TAP, text="tap it", log_prob=-0.5, extras={"k": 1})
        pool.send([sample], [0], policy_version=7, agent_time_s=0.25)
        (r,) = pool.recv()
        step = (r.trajectory or pool.slots[0].trajectory).steps[0]
    assert (step.text, step.log_prob, step.policy_version, step.agent_time_s) == (
        "tap it",
        -0.5,
        7,
        0.25,
    )
    assert step.device_time_s > 0 and step.started_at > 0


def test_send_checks_state_and_arguments() -> None:
    with EnvPool(_specs(2), tasks=STEPS, worker="serial") as pool:
        with pytest.raises(RuntimeError, match="not waiting for an action"):
            pool.send([TAP], [0])  # nothing was delivered yet
        pool.recv(min_ready=2)
        with pytest.raises(ValueError, match="2 actions for 1 env ids"):
            pool.send([TAP, TAP], [0])
        with pytest.raises(IndexError):
            pool.send([TAP], [5])
        pool.send([TAP], [0])
        with pytest.raises(RuntimeError, match="not waiting"):
            pool.send([TAP], [0])  # already stepping


def test_screenshots_travel_through_shared_memory_intact() -> None:
    spec = EnvSpec("synthetic/tap", {"screen": (270, 585)})
    tasks = TaskSampler([Task("synthetic/tap", max_steps=5, env="synthetic")], seed=3)
    with EnvPool([spec, spec], tasks=tasks) as pool:
        tag = pool.backend.tag
        ready = pool.recv(min_ready=2, timeout=10)
        frames = {r.env_id: r.observation.screenshot for r in ready}
        seeds = {i: pool.slots[i].trajectory.seed for i in frames}
        assert glob.glob(f"/dev/shm/drl_{tag[:8]}_*")
    assert not glob.glob(f"/dev/shm/drl_{tag[:8]}_*")  # close() unlinked every segment
    local = make("synthetic/tap", screen=(270, 585))
    for i, frame in frames.items():
        assert frame.shape == (585, 270, 3) and frame.flags.writeable
        expected = local.reset("synthetic/tap", seeds[i]).screenshot
        assert np.array_equal(frame, expected)


def test_sequential_sampler_runs_out_and_pool_is_done() -> None:
    tasks = TaskSampler(STEPS * 5, mode="sequential", cycle=False)
    with EnvPool(_specs(2), tasks=tasks, worker="serial") as pool:
        trajectories = drive(pool, 5)
        assert pool.recv(timeout=1) == [] and pool.done
    assert len(trajectories) == 5


def test_bad_configuration_fails_clearly() -> None:
    with pytest.raises(ConfigError, match="unknown device 'nope'"):
        EnvPool(EnvSpec("nope"), 2, STEPS)
    with pytest.raises(ConfigError, match="give 1 or 3"):
        EnvPool([EnvSpec("synthetic"), EnvSpec("synthetic")], 3, STEPS)
    with pytest.raises(ConfigError, match="unknown worker kind"):
        EnvPool(EnvSpec("synthetic"), 1, STEPS, worker="threads")
    with pytest.raises(ConfigError, match=r"unknown config key 'synthetic\.bogus'"):
        EnvSpec("synthetic", {"bogus": 1})  # named where the device is named, not in a worker
    register("refusing", refusing_device, overwrite=True)
    refusing = EnvPool(EnvSpec("refusing"), 1, STEPS)
    with refusing, pytest.raises(ConfigError, match=r"device 0 .*refuses to start"):
        refusing.recv(timeout=10)
    bad_task = EnvPool(EnvSpec("synthetic"), 1, [Task("synthetic/zzz")], worker="serial")
    with bad_task, pytest.raises(ConfigError, match="unknown task 'synthetic/zzz'"):
        bad_task.recv(timeout=10)


def test_close_leaves_no_process_behind() -> None:
    baseline = children_now()
    pool = EnvPool(_specs(4), tasks=STEPS)
    pool.recv(min_ready=4, timeout=10)
    pids, tag = pool.worker_pids(), pool.backend.tag
    assert len(pids) == 4
    pool.send([TAP] * 4, [0, 1, 2, 3])  # close with steps in flight
    pool.close()
    assert wait_clean(tag, baseline) == ([], [])
    with pytest.raises(RuntimeError, match="closed"):
        pool.recv()


def test_script_without_main_guard_can_use_subprocess_workers(tmp_path) -> None:
    script = tmp_path / "collect.py"
    script.write_text(
        textwrap.dedent(
            """
            from devicerl.actions import Action
            from devicerl.envs import EnvSpec
            from devicerl.pool import EnvPool

            pool = EnvPool(EnvSpec("synthetic/steps", {"render": False}), 2, "synthetic/steps")
            episodes = 0
            while episodes < 6:
                ready = pool.recv()
                episodes += sum(r.trajectory is not None for r in ready)
                ids = [r.env_id for r in ready if r.observation is not None]
                pool.send([Action.tap(0.5, 0.5)] * len(ids), ids)
            pool.close()
            print("episodes", episodes)
            """
        )
    )
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "episodes" in r.stdout
