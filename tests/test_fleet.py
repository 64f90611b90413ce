"""A warm fleet: devices that outlive runs, attached by a run's pool (``worker="fleet"``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from pool_helpers import drive

from devicerl.envs import EnvSpec
from devicerl.errors import ConfigError
from devicerl.pool import EnvPool
from devicerl.pool.workers.base import DeviceRecipe
from devicerl.pool.workers.fleet import Fleet, FleetFolder
from devicerl.records import EndReason
from devicerl.tasks import Task, TaskSampler

STEPS = [Task("synthetic/steps", max_steps=10, env="synthetic")]
OPTIONS = {"render": False, "step_latency": "uniform:0.001,0.004"}


def _spec(**kw) -> EnvSpec:
    return EnvSpec("synthetic/steps", {**OPTIONS, **kw})


def _pool(n: int, name: str, spec: EnvSpec | None = None, **options) -> EnvPool:
    return EnvPool(
        [spec or _spec()] * n,
        tasks=TaskSampler(STEPS, seed=1),
        worker="fleet",
        worker_options={"name": name, **options},
    )


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """Two synthetic devices served (and restarted when they die) by a fleet in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    f = Fleet("t", DeviceRecipe.from_spec(_spec()), devices=2, warm=STEPS)
    f.start(timeout_s=60)
    try:
        with f.watching():
            yield f
    finally:
        f.stop()


def test_runs_attach_to_the_same_devices_which_outlive_them(fleet: Fleet) -> None:
    pids = [p.pid for p in fleet.processes]
    with _pool(2, "t") as pool:
        got = drive(pool, 12, timeout_s=20)
        assert sorted(pool.worker_pids().values()) == sorted(pids)  # no device started
    assert all(t.is_complete and t.end_reason is not EndReason.TRUNCATED for t in got)
    assert all(psutil.pid_exists(p) for p in pids)  # the run ended, its devices did not
    with _pool(1, "t") as pool:  # a second run, fewer devices: attaches again
        assert len(drive(pool, 4, timeout_s=20)) >= 4
        assert list(pool.worker_pids().values()) == [pids[0]]
    assert fleet.restarts == 0


def test_a_device_serves_one_run_at_a_time(fleet: Fleet) -> None:
    with _pool(1, "t") as pool:
        drive(pool, 1, timeout_s=20)
        with pytest.raises(ConfigError, match="device 0 is in use by another run"):
            _pool(1, "t", attach_timeout_s=1.0)


def test_a_run_is_refused_in_one_line_when_the_fleet_cannot_serve_it(fleet: Fleet) -> None:
    with pytest.raises(ConfigError, match="runs other devices"):
        _pool(1, "t", spec=_spec(step_latency="uniform:0.002,0.004"))
    with pytest.raises(ConfigError, match="has 2 devices; the run asks for more"):
        _pool(3, "t")
    with pytest.raises(ConfigError, match="no fleet named 'other' is up"):
        _pool(1, "other")
    with pytest.raises(ConfigError, match="fleet name"):
        FleetFolder("../up")
    with pytest.raises(ConfigError, match="already up"):
        Fleet("t", DeviceRecipe.from_spec(_spec()), devices=1).start()


def test_a_run_without_its_fleet_is_refused_before_it_writes(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "ev"
    cmd = [sys.executable, "-m", "devicerl", "eval", "--config", "miniwob-eval"]
    r = subprocess.run(
        [*cmd, "env.worker=fleet", "env.fleet=nowhere", "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "devicerl eval: error: env.worker=fleet: no fleet named 'nowhere' is up; start one "
        "with: devicerl fleet up --config CONFIG --name nowhere"
    ]
    assert not out.exists()


def test_a_device_that_dies_mid_run_truncates_its_episode_and_comes_back(fleet: Fleet) -> None:
    with _pool(2, "t") as pool:
        drive(pool, 2, timeout_s=20)
        victim = pool.worker_pids()[0]
        os.kill(victim, signal.SIGKILL)
        got = drive(pool, 10, timeout_s=20)
        assert pool.worker_pids()[0] != victim
    assert fleet.restarts == 1
    assert any(t.end_reason is EndReason.TRUNCATED for t in got)
    assert sum(t.is_complete and t.end_reason is not EndReason.TRUNCATED for t in got) >= 8


def test_stop_removes_the_devices_and_the_folder(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    f = Fleet("gone", DeviceRecipe.from_spec(_spec()), devices=1)
    f.start(timeout_s=60)
    folder, pid = f.folder, f.processes[0].pid
    assert oct(folder.path.stat().st_mode & 0o777) == "0o700"
    assert oct(folder.key_file.stat().st_mode & 0o777) == "0o600"
    assert oct(folder.sockets.stat().st_mode & 0o777) == "0o700"
    assert len(str(folder.socket(0))) < 100  # whatever the cache folder's length
    f.stop()
    assert not folder.path.exists() and not folder.sockets.exists()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_cli_fleet_up_serves_a_browser_eval_and_down_stops_it(tmp_path: Path) -> None:
    """The real thing: `devicerl fleet up` of a Chromium MiniWoB++ device, `devicerl eval`
    attached to it, `devicerl fleet down`."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cfg = [
        "--config",
        "miniwob-eval",
        "env.num_envs=1",
        "tasks.eval=miniwob/click-test,miniwob/click-button",
        "eval.n_tasks=2",
        "eval.episodes_per_task=2",
        "agent.kind=random",
    ]
    up = subprocess.Popen(
        [sys.executable, "-m", "devicerl", "fleet", "up", *cfg, "--for", "300"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        lines = []
        for line in up.stdout:
            lines.append(line)
            if "devices up" in line or up.poll() is not None:
                break
        assert "1 browser devices up, 2 tasks opened" in "".join(lines), "".join(lines)
        ev = subprocess.run(
            [
                sys.executable,
                "-m",
                "devicerl",
                "eval",
                *cfg,
                "env.worker=fleet",
                "--out",
                str(tmp_path / "ev"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert ev.returncode == 0, ev.stderr[-2000:]
        assert '"episodes": 4' in ev.stdout
        down = subprocess.run(
            [sys.executable, "-m", "devicerl", "fleet", "down"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert down.returncode == 0, down.stderr
        assert up.wait(30) == 0
        assert "fleet 'default' stopped" in up.stdout.read()
    finally:
        if up.poll() is None:
            up.kill()
    time.sleep(0.1)
    folder = FleetFolder("default", tmp_path / "cache" / "devicerl" / "fleets")
    assert not folder.path.exists() and not folder.sockets.exists()
