"""Ray workers on a real local Ray cluster: episodes, kill -9 of an actor, clean shutdown."""

from __future__ import annotations

import os
import signal
import time

import pytest
import ray
from pool_helpers import children_now, episode_length, wait_clean

from devicerl.actions import Action
from devicerl.envs import EnvSpec
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.tasks import Task, TaskSampler

pytestmark = [pytest.mark.slow, pytest.mark.ray]
TAP = Action.tap(0.5, 0.5)


def test_ray_workers_survive_a_killed_actor(monkeypatch) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    baseline = children_now()
    specs = [
        EnvSpec("synthetic/steps", {"screen": (64, 96), "step_latency": 0.005, "seed": i})
        for i in range(2)
    ]
    pool = EnvPool(
        specs,
        tasks=TaskSampler([Task("synthetic/steps", max_steps=10)], seed=2),
        worker="ray",
        worker_options={"num_cpus": 0.25, "init_kwargs": {"num_cpus": 2}},
        supervision=SupervisorConfig(reset_timeout=60, backoff_s=0.01),
    )
    tag = pool.backend.tag
    trajectories, killed, killed_at = [], None, float("inf")

    def restarted_and_worked() -> bool:
        return any(t.env_id == 1 and t.started_at > killed_at for t in trajectories)

    try:
        t0 = time.monotonic()
        while sum(not t.is_truncated for t in trajectories) < 12 or not restarted_and_worked():
            ready = pool.recv(min_ready=1, timeout=30)
            assert ready, pool.stats()
            trajectories += [r.trajectory for r in ready if r.trajectory is not None]
            ids = [r.env_id for r in ready if r.observation is not None]
            for r in ready:
                if r.observation is not None:
                    assert r.observation.screenshot.shape == (96, 64, 3)
            pool.send([TAP] * len(ids), ids)
            if killed is None and len(trajectories) >= 4 and 1 in ids:
                killed, killed_at = pool.worker_pids()[1], time.time()
                os.kill(killed, signal.SIGKILL)  # mid-step: its episode must be cut
                print(f"killed after {time.monotonic() - t0:.1f}s")
        print(f"done after {time.monotonic() - t0:.1f}s")
        assert pool.worker_pids()[1] != killed
    finally:
        pool.close()
    assert not ray.is_initialized()  # the pool started the cluster, so it stopped it
    cut = [t for t in trajectories if t.is_truncated]
    assert len(cut) == 1 and cut[0].env_id == 1
    assert cut[0].truncation_cause.startswith("worker died (")
    for t in trajectories:
        if not t.is_truncated:
            assert len(t.steps) == episode_length(t.instruction)
    assert len({t.episode_id for t in trajectories}) == len(trajectories)
    assert wait_clean(tag, baseline, timeout=15) == ([], [])


def test_devices_spread_over_a_two_node_cluster(monkeypatch) -> None:
    """A real Ray cluster of two nodes on this machine (a head and a second raylet): the pool
    joins it by address, one device per node (1 CPU each), and episodes flow from both."""
    import psutil
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert not ray.is_initialized()
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        specs = [EnvSpec("synthetic/tap", {"screen": (64, 96), "seed": i}) for i in range(2)]
        pool = EnvPool(
            specs,
            tasks=TaskSampler([Task("synthetic/tap", max_steps=3)], seed=0),
            worker="ray",
            worker_options={"address": cluster.address, "num_cpus": 1},
            supervision=SupervisorConfig(reset_timeout=60),
        )
        try:
            done = []
            while {t.env_id for t in done} != {0, 1} or len(done) < 6:
                ready = pool.recv(min_ready=1, timeout=30)
                assert ready, pool.stats()
                done += [r.trajectory for r in ready if r.trajectory is not None]
                ids = [r.env_id for r in ready if r.observation is not None]
                pool.send([TAP] * len(ids), ids)
            # each actor process is a child of its node's raylet: two nodes, two raylets
            raylets = {psutil.Process(pid).ppid() for pid in pool.worker_pids().values()}
            assert len(raylets) == 2, raylets
            assert len(ray.nodes()) == 2
        finally:
            pool.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
