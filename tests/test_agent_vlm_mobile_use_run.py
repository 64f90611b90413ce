"""The shipped ``miniwob-vlm-mobile-use`` setup end to end on CPU: a tiny random Qwen2.5-VL
speaking Qwen's ``mobile_use`` tool calls trains online with DigiRL on a MiniWoB++ page in real
headless Chromium through the CLI, checkpoints every iteration, and resumes with
``devicerl train --resume`` for one more."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from devicerl.agents.vlm.agent import VLMAgent
from devicerl.data.store import TrajectoryStore
from devicerl.runtime.runs.checkpoint import CheckpointManager
from devicerl.testing.vlm_tiny import build_tiny_vlm

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _train(*args: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "devicerl", "train", *args],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert r.returncode == 0, r.stderr[-3000:]


def test_tiny_qwen25vl_trains_in_mobile_use_checkpoints_and_resumes(tmp_path) -> None:
    model = build_tiny_vlm(tmp_path / "model", "qwen2_5_vl")
    run = tmp_path / "run"
    _train(
        "--config", "miniwob-vlm-mobile-use", "--out", str(run),
        f"agent.path={model}", "agent.device=cpu", "agent.vlm.max_new_tokens=12",
        "agent.vlm.gradient_checkpointing=false", "env.num_envs=2",
        "tasks.train=miniwob/click-test", "tasks.max_steps=2", "trajectories_per_iter=4",
        "max_iterations=2", "env_steps=100000", "checkpoint_every=1", "eval.at_end=false",
        "logging.tensorboard=false", "actor.batch_size=4", "actor.grad_accum=1",
        "actor.updates=2", "critic.updates=1",
    )  # fmt: skip
    assert CheckpointManager(run / "checkpoints").published()
    _train("--resume", str(run), "max_iterations=3")

    mgr = CheckpointManager(run / "checkpoints")
    last = mgr.load(mgr.published()[-1])
    assert last.iteration == 3
    saved = json.loads((run / "agent" / "vlm_agent.json").read_text())
    assert saved["config"]["codec"] == "mobile_use" and saved["lora"]
    agent = VLMAgent.from_pretrained(run / "agent")
    assert agent.codec.name == "mobile_use" and agent.version == 3
    stored = TrajectoryStore(run / "trajectories").read_all()
    steps = [s for t in stored for s in t.steps]
    assert len(stored) >= 12 and {s.policy_version for s in steps} >= {0, 2}
    for s in steps:  # each step keeps the text the codec read its action from
        obs = s.observation
        assert s.action == agent.codec.parse(s.text, agent.geometry(obs, agent.image(obs)))
