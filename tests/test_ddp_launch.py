"""`accelerate launch --multi_gpu --num_processes 2 -m devicerl train` on CPU and synthetic
devices: rank 0 trains, rank 1 learns its shard of every update; the run survives kill -9 of
the launcher and both ranks and resumes from its last checkpoint to the end."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from _runs import tagged_processes

from devicerl.runtime.runs.checkpoint import CheckpointManager
from devicerl.runtime.runs.folder import RunDir

ITERATIONS = 6
ARGS = [
    "env.name=synthetic",
    "env.num_envs=2",
    "env.worker=serial",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=6",
    f"max_iterations={ITERATIONS}",
    "env_steps=1000000",
    "checkpoint_every=1",
    "eval.at_end=false",
    "actor.updates=2",
    "actor.batch_size=8",
    "critic.batch_size=8",
    "critic.updates=2",
]


def _launch(args: list[str], tag: str) -> subprocess.Popen:
    # accelerate 1.x starts several CPU processes only through its torchrun launcher
    # (--multi_gpu) or mpirun; without a GPU each rank joins with gloo
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu"]
    cmd += ["--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no"]
    cmd += ["--dynamo_backend", "no"]
    env = dict(os.environ, DEVICERL_TEST_TAG=tag, OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [*cmd, "-m", "devicerl", "train", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _kill_all(tag: str) -> int:
    procs = tagged_processes(tag)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()  # SIGKILL: launcher and both ranks at once
    psutil.wait_procs(procs, timeout=30)
    return len(procs)


def _wait_for_checkpoint(root: Path, proc: subprocess.Popen, timeout: float = 240) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        latest = root / "latest"
        if latest.exists() and latest.read_text().strip().startswith("iter-"):
            return int(latest.read_text().strip()[5:])
        time.sleep(0.1)
    return 0


@pytest.mark.slow
def test_accelerate_launch_trains_on_two_processes_and_resumes_after_kill9(tmp_path) -> None:
    run = tmp_path / "run"
    tag = uuid.uuid4().hex
    try:
        proc = _launch(["--out", str(run), *ARGS], tag)
        got = _wait_for_checkpoint(run / "checkpoints", proc)
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        assert 1 <= got < ITERATIONS
        assert _kill_all(tag) >= 3  # the launcher and two ranks
        killed_at = CheckpointManager(run / "checkpoints").load_latest().iteration

        proc = _launch(["--resume", str(run)], tag)
        out, _ = proc.communicate(timeout=400)
        assert proc.returncode == 0, out
    finally:
        _kill_all(tag)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["iteration"] == ITERATIONS
    updates = [m for m in RunDir(run).read_metrics() if "train/learner_processes" in m]
    # every update after the resume ran on two processes whose parameters stayed identical
    assert len(updates) >= ITERATIONS - killed_at
    assert all(m["train/learner_processes"] == 2.0 for m in updates)
    assert all(m["train/learner_divergence"] == 0.0 for m in updates)
    assert CheckpointManager(run / "checkpoints").load_latest().iteration == ITERATIONS
