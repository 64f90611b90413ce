"""End to end on CPU: a tiny vision-language model trains online with DigiRL on MiniWoB++ pages in
real headless Chromium through the CLI (the shipped ``miniwob-vlm-digirl`` setup, screenshots on),
checkpoints, is killed with SIGKILL and resumes with ``devicerl train --resume``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from _runs import tagged_processes
from safetensors.torch import load_file

from devicerl.codecs.json_actions import parse_action
from devicerl.data.store import TrajectoryStore
from devicerl.records import DEFAULT_POLICY
from devicerl.runtime.runs.checkpoint import CheckpointManager
from devicerl.testing.vlm_tiny import build_tiny_vlm

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONFIG = "miniwob-vlm-digirl"  # devicerl/configs/miniwob-vlm-digirl.yaml, by its shipped name
ITERATIONS = 4


def _train(args: list[str], tag: str) -> subprocess.Popen:
    env = dict(os.environ, DEVICERL_TEST_TAG=tag)
    return subprocess.Popen(
        [sys.executable, "-m", "devicerl", "train", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _newest(root: Path) -> int:
    latest = root / "latest"
    name = latest.read_text().strip() if latest.exists() else ""
    return int(name[5:]) if name.startswith("iter-") else 0


def _gone(tag: str) -> None:
    """The run's worker and browser processes end within 15 s of their trainer."""
    deadline = time.monotonic() + 15
    while tagged_processes(tag) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = tagged_processes(tag)
    for p in left:  # leave nothing running, whatever the outcome
        p.kill()
    assert not left, f"processes outlived the trainer: {left}"


def test_tiny_vlm_trains_on_miniwob_is_killed_and_resumes(tmp_path) -> None:
    model = build_tiny_vlm(tmp_path / "model", "qwen2_vl")
    run, tag = tmp_path / "run", uuid.uuid4().hex
    args = [
        "--config", CONFIG, "--out", str(run),
        f"agent.path={model}", "agent.device=cpu", "agent.vlm.max_new_tokens=12",
        "env.num_envs=2", "tasks.train=miniwob/click-test", "tasks.max_steps=2",
        "trajectories_per_iter=4", f"max_iterations={ITERATIONS}", "env_steps=100000",
        "checkpoint_every=1", "eval.at_end=false", "logging.tensorboard=false",
        "actor.batch_size=4", "actor.grad_accum=1", "actor.updates=2",
        "critic.updates=1",
    ]  # fmt: skip
    proc = _train(args, tag)
    deadline = time.monotonic() + 120
    while _newest(run / "checkpoints") < 1 and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint within 120 s"
        time.sleep(0.1)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_at = _newest(run / "checkpoints")
    assert 1 <= killed_at < ITERATIONS
    _gone(tag)  # the killed trainer's devices go away by themselves

    resumed = _train(["--resume", str(run)], tag)
    rc = resumed.wait(timeout=240)
    assert rc == 0, resumed.stderr.read() if resumed.stderr else ""
    _gone(tag)

    mgr = CheckpointManager(run / "checkpoints")
    last = mgr.load(mgr.published()[-1])  # sha256-checked
    assert last.iteration == ITERATIONS and last.state["train"]["version"] == ITERATIONS
    actor = last.models[f"{DEFAULT_POLICY}.actor"]  # a single-policy run is a league of one
    assert actor and all(".lora_" in k for k in actor)
    adapter = load_file(str(run / "agent" / "lora" / "adapter_model.safetensors"))
    assert adapter.keys() == {k.replace(".default.", ".") for k in actor}
    assert (run / "summary.json").exists()

    stored = TrajectoryStore(run / "trajectories").read_all()
    steps = [s for t in stored for s in t.steps]
    assert len(stored) >= ITERATIONS * 4 and steps
    assert all(s.observation.screenshot is not None for s in steps)
    assert all(isinstance(s.text, str) and s.log_prob is not None for s in steps)
    assert all(parse_action(s.text) == s.action for s in steps)  # the record keeps it
    versions = {s.policy_version for s in steps}
    assert max(versions) >= killed_at + 1 and min(versions) == 0
