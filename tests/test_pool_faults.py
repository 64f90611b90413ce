"""Supervision with real processes: kill -9, hangs, exceptions, frozen workers, retirement."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import time
from collections import Counter

import psutil
import pytest
from pool_helpers import HelperDevice, children_now, episode_length, tagged_processes, wait_clean

from devicerl.actions import Action
from devicerl.envs import EnvSpec, register
from devicerl.envs.synthetic import SyntheticOptions
from devicerl.errors import DeviceError
from devicerl.pool import EnvPool, SupervisorConfig
from devicerl.pool.supervisor import Supervisor, kill_process_tree
from devicerl.records import EndReason
from devicerl.tasks import Task, TaskSampler

STEPS = [Task("synthetic/steps", max_steps=10, env="synthetic")]
TAP = Action.tap(0.5, 0.5)
register("helperdev/*", HelperDevice, options=SyntheticOptions, overwrite=True)


def _cause(t) -> str:
    """A truncated episode's cause without its details."""
    return t.truncation_cause.split(":")[0].split(" (")[0].split(" for ")[0]


def _run(
    pool: EnvPool,
    target: int,
    kill_every_s: float | None = None,
    seed: int = 0,
    causes: tuple[str, ...] = (),
):
    """Drive the pool until ``target`` complete episodes and, since faults are random, until
    episodes truncated by each of ``causes`` were seen; SIGKILL a random worker now and then.
    Returns (all trajectories, kills)."""
    rng = random.Random(seed)
    trajectories, kills = [], 0
    next_kill = time.monotonic() + (kill_every_s or 0)
    deadline = time.monotonic() + 90

    def done() -> bool:
        seen = {_cause(t) for t in trajectories if t.is_truncated}
        complete = sum(not t.is_truncated for t in trajectories)
        return complete >= target and seen.issuperset(causes)

    while not done():
        assert time.monotonic() < deadline, f"stuck: {pool.stats()}"
        ready = pool.recv(min_ready=1, timeout=1.0)
        trajectories += [r.trajectory for r in ready if r.trajectory is not None]
        ids = [r.env_id for r in ready if r.observation is not None]
        pool.send([TAP] * len(ids), ids)
        if kill_every_s and time.monotonic() >= next_kill:
            pids = list(pool.worker_pids().values())
            if pids:
                with contextlib.suppress(ProcessLookupError):  # it may have just died
                    os.kill(rng.choice(pids), signal.SIGKILL)
                    kills += 1
            next_kill = time.monotonic() + kill_every_s
    return trajectories, kills


def _check_delivery(trajectories) -> Counter:
    """Exactly once, complete episodes whole, interrupted ones truncated with a cause."""
    assert len({t.episode_id for t in trajectories}) == len(trajectories)
    seeds = [t.seed for t in trajectories]
    assert len(set(seeds)) == len(seeds), "an episode was handed out twice"
    causes: Counter = Counter()
    for t in trajectories:
        length = episode_length(t.instruction) if t.instruction else None
        if t.is_truncated:
            assert t.truncation_cause and not t.success
            assert length is None or len(t.steps) < length
            causes[_cause(t)] += 1
        else:
            assert t.end_reason in (EndReason.SUCCESS, EndReason.FAILURE)
            assert t.truncation_cause is None and len(t.steps) == length
    return causes


def test_kill9_hangs_and_exceptions_never_stop_the_run() -> None:
    baseline = children_now()
    faults = {"die": 0.01, "hang": 0.01, "hang_s": 3600, "error": 0.02}
    specs = [
        EnvSpec(
            "helperdev/steps",
            {"render": False, "step_latency": "uniform:0.002,0.01", "faults": faults},
        )
        for _ in range(6)
    ]
    config = SupervisorConfig(
        step_timeout=0.5, max_restarts=None, backoff_s=0.01, max_restarts_per_minute=10_000
    )
    pool = EnvPool(specs, tasks=TaskSampler(STEPS, seed=5), supervision=config)
    tag = pool.backend.tag
    try:
        trajectories, kills = _run(
            pool,
            target=150,
            kill_every_s=0.3,
            causes=("worker died", "step timed out after 0.5s", "DeviceError"),
        )
        stats = pool.stats()
    finally:
        pool.close()
    causes = _check_delivery(trajectories)
    assert kills >= 3
    assert causes["worker died"] >= 1  # kill -9 from outside and the device's own "die"
    assert causes["step timed out after 0.5s"] >= 1
    assert causes["DeviceError"] >= 1
    assert stats["restarts"] >= sum(causes.values())
    assert wait_clean(tag, baseline) == ([], []), "zombie or orphan process left"


def test_worker_is_killed_with_its_process_tree() -> None:
    config = SupervisorConfig(step_timeout=0.3, backoff_s=0.01)
    spec = EnvSpec("helperdev/steps", {"render": False, "faults": {"hang": 1.0}})
    pool = EnvPool(spec, 1, STEPS, supervision=config)
    tag = pool.backend.tag
    try:
        pool.recv(timeout=10)
        (worker_pid,) = pool.worker_pids().values()
        helpers = [p for p in tagged_processes(tag) if p.pid != worker_pid]
        assert [p.name() for p in helpers] == ["sleep"]
        pool.send([TAP], [0])  # hangs: the worker and its helper must both go
        (r,) = pool.recv(timeout=10)
        assert r.trajectory.truncation_cause == "step timed out after 0.3s"
        assert not helpers[0].is_running() or helpers[0].status() == "zombie"
        (r,) = pool.recv(timeout=10)  # restarted: a fresh worker with a fresh helper
        assert r.first and pool.worker_pids()[0] != worker_pid
    finally:
        pool.close()
    assert wait_clean(tag, set(), timeout=5)[0] == []


def test_orphaned_helpers_of_a_dead_worker_are_found_through_its_group() -> None:
    config = SupervisorConfig(backoff_s=0.01)
    pool = EnvPool(EnvSpec("helperdev/steps", {"render": False}), 1, STEPS, supervision=config)
    tag = pool.backend.tag
    try:
        pool.recv(timeout=10)
        (worker_pid,) = pool.worker_pids().values()
        helper = next(p for p in tagged_processes(tag) if p.pid != worker_pid)
        os.kill(worker_pid, signal.SIGKILL)  # the helper is orphaned, reparented away
        pool.send([TAP], [0])  # dropped or failed: either way the pool notices the death
        _run(pool, target=2)
        assert not helper.is_running() or helper.status() == "zombie"
    finally:
        pool.close()


def test_helpers_die_when_the_dead_leader_is_reaped_while_it_is_being_killed(monkeypatch) -> None:
    """The race behind a helper that once outlived pool.close(): the worker is a zombie when
    the kill starts, and its parent (the forkserver) reaps it before the kill reaches the group."""
    leader = subprocess.Popen(["sh", "-c", "sleep 1000 & exit 0"], start_new_session=True)
    born = psutil.Process(leader.pid).create_time()
    deadline = time.monotonic() + 10
    helpers: list[psutil.Process] = []
    while not helpers or psutil.Process(leader.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the leader did not start its helper and exit"
        helpers = [p for p in psutil.process_iter(["name"]) if _in_group(p, leader.pid)]
        time.sleep(0.01)

    def reaped_meanwhile(self, recursive=False):
        leader.wait()  # the zombie goes while the kill looks at it
        raise psutil.NoSuchProcess(self.pid)

    monkeypatch.setattr(psutil.Process, "children", reaped_meanwhile)
    try:
        kill_process_tree(leader.pid, born)
        assert all(not h.is_running() or h.status() == "zombie" for h in helpers)
    finally:
        for h in helpers:
            with contextlib.suppress(psutil.Error):
                h.kill()


def _in_group(p: psutil.Process, pgid: int) -> bool:
    try:
        return p.pid != pgid and os.getpgid(p.pid) == pgid
    except OSError:
        return False


def test_frozen_worker_is_caught_by_missing_heartbeats() -> None:
    # 20 intervals of silence: a healthy worker on a loaded 2-core machine (the test suite
    # beside it) has stalled for 0.6 s, never for 2
    config = SupervisorConfig(
        step_timeout=None, heartbeat_interval_s=0.1, heartbeat_timeout_s=2.0, backoff_s=0.01
    )
    spec = EnvSpec("synthetic/steps", {"render": False, "step_latency": 0.05})
    with EnvPool(spec, 2, STEPS, supervision=config) as pool:
        pool.recv(min_ready=2, timeout=10)
        frozen = pool.worker_pids()[0]
        os.kill(frozen, signal.SIGSTOP)
        pool.send([TAP, TAP], [0, 1])
        trajectories, _ = _run(pool, target=3, causes=("no heartbeat",))
        assert pool.counters["heartbeat_failures"] == 1
        deadline = time.monotonic() + 30
        while 0 not in pool.worker_pids():  # caught: the device restarts in a fresh process
            assert time.monotonic() < deadline, f"not restarted: {pool.stats()}"
            pool.recv(min_ready=1, timeout=0.2)
        assert pool.worker_pids()[0] != frozen
    cut = [t for t in trajectories if t.is_truncated]
    assert len(cut) == 1 and cut[0].truncation_cause.startswith("no heartbeat for")


def test_device_over_its_restart_budget_is_retired_and_the_pool_goes_on() -> None:
    broken = EnvSpec("synthetic/steps", {"render": False, "faults": {"die": 1.0, "on_reset": True}})
    healthy = EnvSpec("synthetic/steps", {"render": False, "step_latency": 0.002})
    config = SupervisorConfig(max_restarts=2, backoff_s=0.01)
    with EnvPool([broken, healthy], tasks=STEPS, supervision=config) as pool:
        trajectories = []
        while not pool.retired or len(trajectories) < 10:
            more, _ = _run(pool, target=1)
            trajectories += more
        assert list(pool.retired) == [0]
        assert pool.retired[0] == "worker died (signal 9, SIGKILL)"
        assert all(t.env_id == 1 for t in trajectories if not t.is_truncated)
        assert pool.stats()["restarts"] == 2


def test_error_when_every_device_is_retired() -> None:
    spec = EnvSpec("synthetic/steps", {"render": False, "faults": {"error": 1.0}})
    config = SupervisorConfig(max_restarts=1, backoff_s=0.01)
    with EnvPool(spec, 2, STEPS, supervision=config, worker="serial") as pool:
        pool.recv(min_ready=2)
        pool.send([TAP, TAP], [0, 1])
        retired = []
        with pytest.raises(DeviceError, match="all 2 devices were retired"):
            for _ in range(50):
                ready = pool.recv(timeout=1)
                retired += [r for r in ready if r.retired]
                ids = [r.env_id for r in ready if r.observation is not None]
                pool.send([TAP] * len(ids), ids)
    assert sorted(r.env_id for r in retired if r.trajectory) == [0, 1]
    assert all("injected error during step" in r.trajectory.truncation_cause for r in retired)


def test_supervisor_backoff_budget_and_rate_limit() -> None:
    sup = Supervisor(SupervisorConfig(max_restarts=3, restart_window_s=100, backoff_s=1.0), 4)
    assert sup.on_failure(0, 0.0) == 0.0  # first failure: restart at once
    assert sup.on_failure(0, 1.0) == 2.0  # then 1 s, 2 s, ... while it keeps failing
    assert sup.on_failure(0, 2.0) == 4.0
    assert sup.on_failure(0, 3.0) is None  # 4th restart within the window: retire
    assert sup.on_failure(0, 200.0) == 204.0  # window passed, still failing: backoff 4 s
    sup.on_success(0)
    assert sup.on_failure(0, 300.0) == 300.0
    limited = Supervisor(SupervisorConfig(max_restarts=None, max_restarts_per_minute=2), 8)
    times = [limited.on_failure(i, 10.0) for i in range(4)]
    assert times[:2] == [10.0, 10.0] and times[2] >= 40.0 and times[3] >= times[2] + 30.0


def test_action_for_an_observation_voided_by_a_crash_is_dropped() -> None:
    config = SupervisorConfig(backoff_s=0.01)
    with EnvPool(
        EnvSpec("synthetic/steps", {"render": False}), 1, STEPS, supervision=config
    ) as pool:
        pool.recv(timeout=10)  # env 0 now waits for our action...
        os.kill(pool.worker_pids()[0], signal.SIGKILL)  # ...and its worker dies meanwhile
        ready = []
        while not ready:  # nothing is in flight, so recv returns at once until it notices
            ready = pool.recv(timeout=1)
            time.sleep(0.01)
        (cut,) = ready
        assert cut.observation is None and cut.trajectory.is_truncated
        assert cut.trajectory.truncation_cause == "worker died (signal 9, SIGKILL)"
        pool.send([TAP], [0])  # the agent answers the voided observation: dropped
        assert pool.counters["dropped_actions"] == 1
        (fresh,) = pool.recv(timeout=10)
        assert fresh.first and fresh.trajectory is None
        pool.send([TAP], [0])  # the new observation takes actions again
        assert pool.recv(timeout=10)
