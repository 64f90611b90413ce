"""Offline and off-to-online training from imported ADP data, through `devicerl train`'s loop.

The small agent learns with Filtered BC from the committed ADP file of a MiniWoB++ run
(``tests/data/adp/miniwob``, recorded by ``record_miniwob.py`` there: scripted demonstrations
and random episodes on real Chromium) and beats the random agent on those tasks' evaluation
instances; then a run continues online from the same data. A tiny vision-language model learns
from an imported ADP export of synthetic-device episodes with screenshots, offline then online:
the actions of the data's successful episodes become likelier."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from devicerl.agents.random import RandomPolicy
from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.vlm.agent import VLMAgent
from devicerl.agents.vlm.config import VLMConfig
from devicerl.cli.main import main
from devicerl.config import load_config
from devicerl.data.adp.write import export_adp
from devicerl.data.store import TrajectoryStore
from devicerl.envs import make
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.loop.trainer import Trainer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.testing.vlm_tiny import build_tiny_vlm

FIXTURE = Path(__file__).parent / "data" / "adp" / "miniwob"
MINIWOB = "miniwob/click-button,miniwob/click-link,miniwob/focus-text-2,miniwob/click-dialog-2"
ON_MINIWOB = [
    "env.name=browser",
    "env.options={screenshot: false, task_pages: 1}",
    "env.num_envs=2",
    f"tasks.train={MINIWOB}",
    "eval.n_tasks=4",
    "eval.episodes_per_task=10",
    "logging.tensorboard=false",
    "agent.kind=small",
    "agent.small.allowed_types=[DUAL_POINT, TYPE]",
    "agent.small.heads=[]",
]


def _train(path: Path, *overrides: str) -> dict:
    cfg = load_config(TrainConfig, None, list(overrides))
    run = RunDir(path)
    run.create().save_config(cfg)
    return Trainer(cfg, run).run()


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("adp") / "miniwob"
    assert main(["import-adp", str(FIXTURE / "trajectories.jsonl"), "--out", str(out)]) == 0
    return out


def test_the_fixture_is_a_recorded_miniwob_run(imported) -> None:
    stored = TrajectoryStore(imported / "trajectories").read_all()
    tasks = {t.task for t in stored}
    assert tasks == set(MINIWOB.split(",")) and all(t.device == "browser" for t in stored)
    assert 0 < sum(t.success for t in stored) < len(stored)
    assert all(s.observation.elements and s.observation.screenshot is None
               for t in stored for s in t.steps)  # fmt: skip


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.timeout(900)
def test_filtered_bc_offline_from_adp_beats_random_then_goes_online(imported, tmp_path) -> None:
    data = f"offline_data={imported}"
    random = _train(tmp_path / "random", *ON_MINIWOB, "mode=eval", "agent.kind=random")
    off = _train(tmp_path / "off", *ON_MINIWOB, "mode=offline", "algo=filtered_bc", data,
                 "offline_iterations=8", "actor.lr=3e-3")  # fmt: skip
    assert off["offline_done"] == 8 and off["env_steps"] == 0
    trained, baseline = off["eval"]["success_rate"], random["eval"]["success_rate"]
    assert trained >= baseline + 0.3, (trained, baseline)
    both = _train(tmp_path / "both", *ON_MINIWOB, "mode=off2on", "algo=filtered_bc", data,
                  "offline_iterations=2", "env_steps=40", "trajectories_per_iter=8",
                  "eval.at_end=false")  # fmt: skip
    assert both["offline_done"] == 2 and both["env_steps"] >= 40
    stored = TrajectoryStore(tmp_path / "both" / "trajectories").read_all()
    assert any(t.device == "browser" and t.seed is not None and t.policy_version > 0
               for t in stored)  # fmt: skip


@pytest.fixture(autouse=False)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_tiny_vlm_learns_offline_from_imported_adp_then_online(tmp_path, one_thread) -> None:
    env = make("synthetic", screen=(64, 96), n_boxes=2)
    episodes = [rollout(env, SyntheticOracle(), "synthetic/tap", seed=s) for s in range(6)]
    episodes += [rollout(env, RandomPolicy(seed=s), "synthetic/tap", seed=s) for s in range(6)]
    env.close()
    export_adp(episodes, tmp_path / "adp")
    assert main(["import-adp", str(tmp_path / "adp"), "--out", str(tmp_path / "data")]) == 0
    model = build_tiny_vlm(tmp_path / "model", "qwen2_vl")
    solved = [
        t for t in TrajectoryStore(tmp_path / "data" / "trajectories").read_all() if t.success
    ]
    seen = [t.agent_observation(i) for t in solved for i in range(t.length)]
    taken = [s.action for t in solved for s in t.steps]

    def mean_log_prob(path: Path) -> float:
        agent = VLMAgent.from_pretrained(path, VLMConfig(max_new_tokens=24, history=0))
        with torch.no_grad():
            return float(agent.log_prob(seen, taken).mean())

    s = _train(
        tmp_path / "run", "mode=off2on", "algo=filtered_bc", f"offline_data={tmp_path / 'data'}",
        "offline_iterations=4", "env_steps=6", "trajectories_per_iter=4", "env.name=synthetic",
        "env.options={screen: [64, 96], n_boxes: 2}", "env.num_envs=2", "env.worker=serial",
        "tasks.train=synthetic/tap", "tasks.max_steps=2", "agent.kind=vlm", f"agent.path={model}",
        "agent.history=0", "agent.vlm.max_new_tokens=24", "actor.lr=3e-3", "actor.updates=4",
        "actor.batch_size=4", "actor.grad_accum=1", "eval.at_end=false",
        "logging.tensorboard=false",
    )  # fmt: skip
    assert s["offline_done"] == 4 and s["env_steps"] >= 6
    before, after = mean_log_prob(model), mean_log_prob(tmp_path / "run" / "agent")
    assert after > before + 1.0, (before, after)
