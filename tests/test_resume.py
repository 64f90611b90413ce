"""Kill -9 the training process at random moments, resume, repeat: no corrupt checkpoint, the
run keeps its progress and finishes; no worker process outlives a killed trainer."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _runs import tagged_processes

from devicerl.runtime.runs.checkpoint import CheckpointManager

ITERATIONS = 40
ARGS = [
    "env.name=synthetic",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=8",
    f"max_iterations={ITERATIONS}",
    "env_steps=1000000",
    "checkpoint_every=1",
    "eval.at_end=false",
    "actor.updates=4",
    "actor.batch_size=16",
    "critic.updates=2",
]


def _start(cmd: list[str], tag: str) -> subprocess.Popen:
    env = dict(os.environ, DEVICERL_TEST_TAG=tag)
    return subprocess.Popen(
        [sys.executable, "-m", "devicerl", *cmd],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _check_checkpoints(root: Path) -> int:
    """Every published checkpoint loads completely; returns the newest iteration."""
    mgr = CheckpointManager(root)
    newest = 0
    for path in mgr.published():
        ck = mgr.load(path)  # raises DataError on any missing/truncated/corrupt file
        assert {"agent.actor", "agent.instr_critic", "agent.step_critic"} <= set(ck.models)
        newest = max(newest, ck.iteration)
    return newest


def _wait_for_new_checkpoint(root: Path, newest: int, proc: subprocess.Popen) -> None:
    """Until a checkpoint newer than `newest` is published (or the process exits, or 120 s)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        latest = root / "latest"
        if latest.exists():
            name = latest.read_text().strip()
            if name.startswith("iter-") and int(name[5:]) > newest:
                return
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(600)  # about 2 minutes on a quiet machine; a loaded one takes longer
def test_kill9_and_resume(tmp_path) -> None:
    run = tmp_path / "run"
    rng = random.Random(7)
    tag = uuid.uuid4().hex
    progress = [0]
    trials = 0
    proc = _start(["train", "--out", str(run), "env.worker=subprocess", *ARGS], tag)
    while True:
        # a random moment once this process has trained (start-up time varies with the load)
        _wait_for_new_checkpoint(run / "checkpoints", progress[-1], proc)
        time.sleep(rng.uniform(0.0, 2.0))
        if proc.poll() is not None:
            break  # finished before the kill
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        trials += 1
        if run.joinpath("checkpoints").exists():
            newest = _check_checkpoints(run / "checkpoints")
            assert newest >= progress[-1]
            progress.append(newest)
        if trials == 1:  # the killed trainer's worker processes must go away by themselves
            deadline = time.monotonic() + 15
            while tagged_processes(tag) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not tagged_processes(tag), "worker processes outlived the killed trainer"
        resume = None
        if (run / "config.yaml").exists():
            resume = ["train", "--resume", str(run), "env.worker=serial"]
        proc = _start(
            resume or ["train", "--out", str(run), *ARGS, "env.worker=serial"],
            tag,
        )
        if trials >= 12:
            break
    rc = proc.wait(timeout=300)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    assert trials >= 10
    assert progress == sorted(progress), progress
    assert len(set(progress)) >= 10, f"too few resumed trials made progress: {progress}"
    print("checkpoint iteration after each kill:", progress)
    assert _check_checkpoints(run / "checkpoints") == ITERATIONS
    assert (run / "summary.json").exists()
    assert not tagged_processes(tag)
