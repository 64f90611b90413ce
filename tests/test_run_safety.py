"""Run folders that cannot be lost: the real `devicerl train` in subprocesses on synthetic devices.

A new run never writes into an existing one, default names are unique, one process at a time
holds a run folder (stale locks of dead processes are taken over), nothing is written before
the config, tasks, device and agent are validated, and SIGINT / SIGTERM stop a run with a
checkpoint that `--resume` continues from.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch
from _runs import tagged_processes

from devicerl.errors import RunError
from devicerl.runtime.runs.checkpoint import CheckpointManager
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.lock import RunLock

FAST = [
    "env.name=synthetic",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=4",
    "env_steps=1000000",
    "eval.at_end=false",
    "actor.updates=2",
    "actor.batch_size=8",
    "critic.updates=1",
]


def _cli(*args: str, cwd: Path | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return subprocess.run(
        [sys.executable, "-m", "devicerl", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


def _start(args: list[str], tag: str) -> subprocess.Popen:
    env = dict(
        os.environ,
        DEVICERL_TEST_TAG=tag,
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    return subprocess.Popen(
        [sys.executable, "-m", "devicerl", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _snapshot(folder: Path) -> dict[str, str]:
    """sha256 of every file under ``folder`` (the lock file aside)."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def _wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        if proc.poll() is not None:
            raise AssertionError(f"process ended before {what}: {proc.stderr.read()}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _iterations_logged(run: Path) -> int:
    path = run / "metrics.jsonl"
    if not path.exists():
        return 0
    rows = [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]
    return sum(1 for r in rows if "train/iteration" in r)


# -- no overwrite, unique default names ---------------------------------------------------------


def test_existing_run_is_refused_unless_overwrite(tmp_path) -> None:
    run = tmp_path / "run"
    first = _cli("train", "--out", str(run), *FAST, "env.worker=serial", "max_iterations=2")
    assert first.returncode == 0, first.stderr
    before = _snapshot(run)
    assert "agent/model.safetensors" in before  # the trained agent

    again = _cli("train", "--out", str(run), *FAST, "env.worker=serial", "max_iterations=1")
    line = _one_line_error(again, str(run), "--resume", "--overwrite")
    assert "already exists" in line
    assert _snapshot(run) == before  # agent, config, store, metrics, checkpoints untouched

    old_shards = {p.name for p in (run / "trajectories").glob("shard-*")}
    over = _cli(
        "train", "--out", str(run), "--overwrite", *FAST, "env.worker=serial", "max_iterations=1"
    )
    assert over.returncode == 0, over.stderr
    assert json.loads((run / "summary.json").read_text())["iteration"] == 1
    assert not old_shards & {p.name for p in (run / "trajectories").glob("shard-*")}
    assert [p.name for p in CheckpointManager(run / "checkpoints").published()] == ["iter-000001"]


def test_overwrite_refuses_a_folder_that_is_not_a_run(tmp_path) -> None:
    precious = tmp_path / "thesis"
    precious.mkdir()
    (precious / "chapter1.tex").write_text("months of work")
    proc = _cli("train", "--out", str(precious), "--overwrite", *FAST, "max_iterations=1")
    _one_line_error(proc, "not a run folder")
    assert (precious / "chapter1.tex").read_text() == "months of work"
    assert sorted(p.name for p in precious.iterdir()) == ["chapter1.tex"]


def test_default_output_names_are_unique(tmp_path) -> None:
    args = ["train", *FAST, "env.worker=serial", "max_iterations=1", "actor.updates=1"]
    for _ in range(2):
        proc = _cli(*args, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2, runs
    assert all(r.name.startswith("online-digirl-") for r in runs)
    assert all((r / "agent").is_dir() and (r / "config.yaml").is_file() for r in runs)


# -- validation before anything is written ----------------------------------------------------


@pytest.mark.parametrize(
    "bad, culprit",
    [
        ("tasks.eval=synthetic/tapp", "tasks.eval"),
        ("tasks.train=nosuchsuite/x", "tasks.train"),
        ("env.name=nosuchdevice", "env.name"),
        ("env.options={scren: [64, 64]}", "scren"),
        ("agent.path=/nonexistent/agent", "agent.path"),
        ("agent.kind=smal", "agent.kind"),
    ],
)
def test_nothing_written_before_validation(tmp_path, bad: str, culprit: str) -> None:
    run = tmp_path / "run"
    args = ["train", "--out", str(run), *FAST, "env.worker=serial", "max_iterations=1"]
    proc = _cli(*args, "eval.at_end=true", "eval.n_tasks=2", bad, cwd=tmp_path)
    _one_line_error(proc, culprit)
    assert not run.exists()
    assert list(tmp_path.iterdir()) == []  # no default folder either


def test_resume_validates_before_rewriting_config(tmp_path) -> None:
    run = tmp_path / "run"
    first = _cli("train", "--out", str(run), *FAST, "env.worker=serial", "max_iterations=1")
    assert first.returncode == 0, first.stderr
    before = _snapshot(run)
    for bad in ("env.name=nosuchdevice", "tasks.eval=synthetic/nope", "env.options={bogus: 1}"):
        proc = _cli("train", "--resume", str(run), bad, "max_iterations=2")
        _one_line_error(proc)
        assert _snapshot(run) == before, bad


# -- the lock -----------------------------------------------------------------------------------


_HOLD = """
import sys, time
from devicerl.runtime.runs.lock import RunLock
RunLock(sys.argv[1]).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_lock_held_by_a_live_process_refuses_and_a_dead_ones_is_taken_over(tmp_path) -> None:
    run = tmp_path / "run"
    first = _cli("train", "--out", str(run), *FAST, "env.worker=serial", "max_iterations=1")
    assert first.returncode == 0, first.stderr
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        before = _snapshot(run)
        proc = _cli("train", "--resume", str(run), "max_iterations=2")
        _one_line_error(proc, "in use by process", str(holder.pid))
        assert _snapshot(run) == before
        with pytest.raises(RunError, match="in use"):
            RunLock(run).acquire()
    finally:
        holder.kill()  # dies without releasing: its lock file stays behind
        holder.wait()
    assert json.loads((run / ".lock").read_text())["pid"] == holder.pid
    resumed = _cli("train", "--resume", str(run), "max_iterations=2")
    assert resumed.returncode == 0, resumed.stderr
    assert "stale lock" in resumed.stderr and str(holder.pid) in resumed.stderr
    assert json.loads((run / "summary.json").read_text())["iteration"] == 2


def test_lock_is_exclusive_within_a_process_and_released(tmp_path) -> None:
    run = RunDir(tmp_path / "r").create()
    run.lock()
    with pytest.raises(RunError, match="in use"):
        RunDir(tmp_path / "r").lock()
    run.unlock()
    RunDir(tmp_path / "r").lock().unlock()


# -- graceful stop ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_with_checkpoint_and_resume_continues(tmp_path, sig, code) -> None:
    run = tmp_path / "run"
    tag = uuid.uuid4().hex
    # checkpoint_every is huge: the only checkpoint is the one the signal makes
    args = ["train", "--out", str(run), *FAST, "env.worker=subprocess", "checkpoint_every=1000"]
    proc = _start(args, tag)
    try:
        _wait_for(lambda: _iterations_logged(run) >= 2, proc, "two iterations")
        second = _cli("train", "--resume", str(run), "max_iterations=1")  # while it runs
        _one_line_error(second, "in use by process", str(proc.pid))
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, err
    assert f"stopped by {signal.Signals(sig).name}" in err and "--resume" in err
    assert "Traceback" not in err
    summary = json.loads((run / "summary.json").read_text())
    stopped_at = summary["iteration"]
    assert summary["stopped_by"] == signal.Signals(sig).name and stopped_at >= 2
    ck = CheckpointManager(run / "checkpoints").load_latest()
    assert ck is not None and ck.iteration == stopped_at  # the work up to the signal is kept
    assert (run / "agent").is_dir() and any((run / "agent").iterdir())
    deadline = time.monotonic() + 20  # the devices were closed, not orphaned
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not tagged_processes(tag), "device workers outlived the stopped trainer"

    resumed = _cli(
        "train", "--resume", str(run), "env.worker=serial", f"max_iterations={stopped_at + 2}"
    )
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads((run / "summary.json").read_text())
    assert after["iteration"] == stopped_at + 2 and "stopped_by" not in after
    assert after["episodes"] > summary["episodes"]  # counters continued, not restarted
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    iterations = [r["train/iteration"] for r in rows if "train/iteration" in r]
    assert iterations[-2:] == [stopped_at + 1, stopped_at + 2]


# -- latest never names a deleted checkpoint ----------------------------------------------------


def test_latest_never_points_to_a_deleted_checkpoint(tmp_path) -> None:
    model = torch.nn.Linear(3, 2)
    mgr = CheckpointManager(tmp_path, keep=2)
    for i in (38, 39, 40):
        mgr.save(i, {"actor": model.state_dict()}, {}, {})
    # a run that went back to an older checkpoint writes a lower iteration than the newest
    mgr.save(5, {"actor": model.state_dict()}, {}, {})
    latest = (tmp_path / "latest").read_text().strip()
    assert (tmp_path / latest).is_dir(), f"latest names {latest}, which was deleted"
    ck = mgr.load_latest()
    assert ck is not None and ck.iteration == 5
    assert [p.name for p in mgr.published()] == ["iter-000005"]
