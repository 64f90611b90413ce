"""Training loops on the synthetic device: learning beats the untrained policy, offline and
off-to-online modes, eval-only, policy versions and lag, the VLM judge behind one key."""

from __future__ import annotations

import json

import pytest

from devicerl.config import load_config
from devicerl.data.store import TrajectoryStore
from devicerl.errors import ConfigError
from devicerl.runtime.loop.evaluation import wilson_interval
from devicerl.runtime.loop.factory import make_trainer
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.testing.chat_server import ScriptedChatServer

FAST = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=4",
    "tasks.train=synthetic/tap",
    "logging.tensorboard=false",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "eval.episodes_per_task=100",
    "eval.greedy=false",
]
LEARN = ["actor.lr=3e-3", "critic.lr=3e-3", "actor.updates=8", "actor.batch_size=32"]


def train(tmp_path, name: str, *overrides: str) -> dict:
    cfg = load_config(TrainConfig, None, [*FAST, *LEARN, *overrides])
    run = RunDir(tmp_path / name)
    run.create().save_config(cfg)
    return make_trainer(cfg, run).run()


@pytest.fixture(scope="module")
def untrained(tmp_path_factory) -> float:
    summary = train(tmp_path_factory.mktemp("u"), "untrained", "mode=eval")
    return summary["eval"]["success_rate"]


#: Every addition beyond the paper off: no exploration floor, bonus, no-op skipping or
#: adaptive exploration (the shipped `paper` setup).
PAPER = ["agent.small.epsilon=0.0"]


@pytest.mark.slow
@pytest.mark.timeout(600)  # 1,200 env steps of DigiRL on a loaded 2-core machine
@pytest.mark.parametrize(
    "algo,extra",
    [("digirl", ["exploration.max=0.5"]), ("digirl", PAPER), ("filtered_bc", PAPER)],
    ids=["digirl-adaptive-exploration", "digirl-paper", "filtered_bc-paper"],
)
def test_online_training_beats_the_untrained_policy(tmp_path, untrained, algo, extra) -> None:
    explore = [e for e in extra if e.startswith("exploration")]
    s = train(tmp_path, algo, f"algo={algo}", "env_steps=1200", *extra)
    assert s["env_steps"] >= 1200 and s["iteration"] > 0
    trained = s["eval"]["success_rate"]
    assert untrained < 0.5  # 4 boxes: an untrained policy taps the right one ~1/4 of the time
    assert trained >= untrained + 0.35, (trained, untrained)
    assert s["mean_policy_lag"] is not None
    run = RunDir(tmp_path / algo)
    metrics = run.read_metrics()
    assert any("train/actor_loss" in m for m in metrics)
    assert any("train/policy_lag" in m and "pool/steps_per_s" in m for m in metrics)
    versions = {t.policy_version for t in run.store().read_all()}
    assert len(versions) > 3  # trajectories carry the version that acted, which moves on
    saved = json.loads((run.path / "agent" / "small_agent.json").read_text())
    assert saved["version"] == s["version"] > max(versions)  # saved with the last version
    explored = run.checkpoint_manager().load_latest().state["exploration"]
    assert bool(explored) == bool(explore)  # per-task success windows checkpointed when on
    if explore:
        assert len(explored["synthetic/tap"]) == 20 and sum(explored["synthetic/tap"]) > 10


def test_offline_then_off2on_from_a_stored_dataset(tmp_path, untrained) -> None:
    # The behaviour data comes from the random agent (a third of its episodes succeed): the
    # untrained small agent mostly ends episodes at once, leaving 0-5 successes to learn from.
    collected = train(
        tmp_path, "data", "algo=none", "agent.kind=random", "env_steps=600", "eval.at_end=false"
    )
    assert collected["episodes"] > 100
    behaviour = TrajectoryStore(tmp_path / "data" / "trajectories").read_all()
    assert sum(t.success for t in behaviour) >= 20
    data = str(tmp_path / "data")
    off = train(tmp_path, "off", "mode=offline", f"offline_data={data}", "offline_iterations=25")
    assert off["offline_done"] == 25 and off["env_steps"] == 0
    assert off["eval"]["success_rate"] >= untrained + 0.3
    both = train(
        tmp_path,
        "both",
        "mode=off2on",
        "algo=filtered_bc",
        f"offline_data={data}",
        "offline_iterations=5",
        "env_steps=200",
        "eval.at_end=false",
    )
    assert both["offline_done"] == 5 and both["env_steps"] >= 200
    stored = TrajectoryStore(tmp_path / "both" / "trajectories").read_all()
    assert len(stored) > collected["episodes"]  # the offline data plus the online episodes


def test_eval_only_runs_each_task_in_order(tmp_path) -> None:
    s = train(
        tmp_path,
        "ev",
        "mode=eval",
        "tasks.eval=synthetic/tap,synthetic/type,synthetic/steps",
        "eval.n_tasks=2",
        "eval.episodes_per_task=5",
    )
    per_task = s["eval"]["per_task"]
    assert sorted(per_task) == ["synthetic/tap", "synthetic/type"]
    assert all(v["episodes"] == 5 for v in per_task.values())
    lo, hi = s["eval"]["ci95"]
    assert 0.0 <= lo <= s["eval"]["success_rate"] <= hi <= 1.0
    assert json.loads((tmp_path / "ev" / "eval.json").read_text())["episodes"] == 10


def test_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-3) and hi == pytest.approx(0.5962, abs=1e-3)
    lo, hi = wilson_interval(10, 10)
    assert hi == 1.0 and lo == pytest.approx(0.7225, abs=1e-3)


def test_training_with_the_vlm_judge(tmp_path) -> None:
    def verdict(body: dict) -> str:
        return "Status: success" if len(body["messages"]) % 2 else "Status: failure"

    with ScriptedChatServer(verdict) as srv:
        s = train(
            tmp_path,
            "vlm",
            "algo=filtered_bc",
            "env_steps=150",
            "eval.at_end=false",
            "judge.kind=vlm",
            f"judge.chat.base_url={srv.base_url}",
            "judge.chat.model=scripted",
            f"judge.vlm.cache_path={tmp_path / 'cache.sqlite'}",  # not the user's cache
        )
        assert len(srv.requests) > 0
    stored = TrajectoryStore(tmp_path / "vlm" / "trajectories").read_all()
    judged = [t for t in stored if t.judgement is not None]
    assert judged and s["episodes"] > 0
    assert all(t.success == (t.judgement.verdict["label"] == "success") for t in judged)


def test_bad_configs_fail_at_start(tmp_path) -> None:
    with pytest.raises(ConfigError, match="offline_data"):
        load_config(TrainConfig, None, ["mode=offline"])
    with pytest.raises(ConfigError, match=r"exploration\.max=1\.5: must be in \(0, 1\)"):
        load_config(TrainConfig, None, ["exploration.max=1.5"])
    with pytest.raises(ConfigError, match=r"unknown config key 'digirl\.lamda'"):
        load_config(TrainConfig, None, ["digirl.lamda=0.3"])
    cfg = load_config(TrainConfig, None, [*FAST, "agent.kind=api", "agent.api.chat.model=x"])
    with pytest.raises(ConfigError, match=r"log-prob|cannot be trained|not trainable"):
        make_trainer(cfg, RunDir(tmp_path / "never"))
    assert not (tmp_path / "never").exists()


def test_a_saved_agents_version_does_not_shift_the_runs_schedules(tmp_path) -> None:
    """A pre-trained agent carries its own version count; the entropy bonus's fade of the run
    that fine-tunes it starts at this run's version 0 (its first updates with the bonus)."""
    from devicerl.agents.small import SmallAgent

    saved = SmallAgent(seed=3)
    saved.version = 60  # e.g. 60 offline iterations of pre-training: past the fade below
    saved.save(tmp_path / "agent")
    summary = train(
        tmp_path,
        "ft",
        "algo=filtered_bc",
        "env_steps=160",  # until the first successes are imitated,
        "trajectories_per_iter=8",
        f"agent.path={tmp_path / 'agent'}",
        "eval.episodes_per_task=2",
        # a fade longer than this run can be (160 steps / 8 episodes of >= 1 step: at most 20
        # versions) and shorter than the saved agent's 60
        "actor.entropy={coef: 0.1, fade_versions: 40}",
    )
    rows = [json.loads(line) for line in (tmp_path / "ft" / "metrics.jsonl").open()]
    updates = [r for r in rows if "train/actor_lr" in r and r.get("train/actor_samples")]
    assert updates and all("train/actor_entropy" in r for r in updates)  # the bonus is on
    assert summary["version"] == summary["iteration"] < 40
