"""The league benchmark's parts (benchmarks/league.py): its configs are the tuned setup with a
league on top and clusters that split dev16; training in phases stops at each mark, then
resumes from the checkpoint instead of starting over, and reuses what is finished."""

from __future__ import annotations

import json

import pytest
from harness.comparison import run_config, train_phases

from devicerl.config import config_source, from_dict, load_config, read_yaml
from devicerl.league.config import LeagueRunConfig
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig
from devicerl.tasks import resolve

SYNTHETIC = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=4",
    "eval.n_tasks=1",
    "eval.at_end=false",
    "checkpoint_every=2",
]


def _names(split: str) -> list[str]:
    return [t if isinstance(t, str) else t.name for t in resolve(split)]


def test_league_configs_are_the_tuned_setup_with_a_league() -> None:
    tuned = read_yaml(config_source("miniwob-digirl-tuned"))
    setup = load_config(TrainConfig, config_source("miniwob-digirl-tuned"))
    assert setup.agent.small.allowed_types and "skip_noops" in setup.digirl.selection  # tuned
    tasks = _names("miniwob-dev16")
    for file in ("miniwob-league-dev16.yaml", "miniwob-league-pbt.yaml"):
        data = read_yaml(config_source(file))
        keys = ("mode", "algo", "env", "agent", "trajectories_per_iter", "exploration", "actor")
        for key in (*keys, "critic"):
            assert data.get(key) == tuned.get(key), f"{file}: {key} differs from the tuned setup"
        assert data["digirl"] == tuned["digirl"] and data["tasks"]["train"] == "miniwob-dev16"
        league = from_dict(LeagueRunConfig, {k: data[k] for k in ("policies", "league")})
        league.validate()
        for name, spec in league.policies.items():  # every policy: the tuned agent and DigiRL
            assert spec.agent == setup.agent and spec.digirl == setup.digirl, name
            assert spec.actor == setup.actor and spec.critic == setup.critic, name
            assert spec.algo == "digirl" and spec.trainable, name
        assert league.league.generalist == "generalist"
        assert all(league.policies["generalist"].covers(t) for t in tasks)
    league = from_dict(LeagueRunConfig, {k: read_yaml(config_source("miniwob-league-dev16"))[k]
                                         for k in ("policies", "league")})  # fmt: skip
    specialists = [n for n in league.policies if n != "generalist"]
    assert sorted(league.policies["generalist"].learn_from) == sorted(specialists)
    for task in tasks:  # the clusters split the 16 tasks: each has exactly one specialist
        owners = [n for n in specialists if league.policies[n].covers(task)]
        assert len(owners) == 1, (task, owners)
    pbt = read_yaml(config_source("miniwob-league-pbt"))["league"]["pbt"]
    assert pbt == {"policy": "generalist", "population": 4, "interval": 5}
    for file in ("miniwob-league-dev16.yaml", "miniwob-league-pbt.yaml"):  # as `train` reads it
        cfg = load_config(TrainConfig, config_source(file), ["policies.generalist.agent.seed=3"])
        cfg.validate()
        assert cfg.policies["generalist"].agent.seed == 3 and cfg.league.generalist


@pytest.mark.slow
def test_training_in_phases_resumes_at_each_mark_and_reuses_finished_phases(tmp_path) -> None:
    cfg = run_config("digirl", 0, family=None, suite=None, budget=40, extra=SYNTHETIC)
    folder = tmp_path / "run"
    seen: list[tuple[int, bool]] = []

    def after(mark: int, current: bool) -> None:
        seen.append((mark, current))
        assert current or mark == 20
        if current:  # the folder holds the policy as it was at the mark
            summary = json.loads((folder / "summary.json").read_text())
            assert mark <= summary["env_steps"] < mark + 20

    first = train_phases(folder, cfg, [20], after)  # a shorter budget first: one phase
    assert seen == [(20, True)] and 20 <= first["env_steps"] < 40
    iterations = first["iteration"]
    seen.clear()
    steps_before = [json.loads(x)["step"] for x in (folder / "metrics.jsonl").open()]

    second = train_phases(folder, cfg, [20, 40], after)  # the same run, one mark further
    assert seen == [(20, True), (40, True)]  # phase 1 reused (its folder still current)
    assert second["env_steps"] >= 40 and second["iteration"] > iterations
    steps = [json.loads(x)["step"] for x in (folder / "metrics.jsonl").open()]
    assert steps[: len(steps_before)] == steps_before  # resumed, appended: not restarted
    assert steps == sorted(steps) and steps[len(steps_before)] > first["env_steps"] - 1
    assert second["started_at"] == first["started_at"] and second["wall_s"] > first["wall_s"]
    assert RunDir(folder).load_config(type(cfg)).env_steps == 40

    seen.clear()
    mtime = (folder / "metrics.jsonl").stat().st_mtime_ns
    third = train_phases(folder, cfg, [20, 40], after)  # all finished: nothing trains
    assert (folder / "metrics.jsonl").stat().st_mtime_ns == mtime
    assert seen == [(20, False), (40, True)] and third == second

    (folder / "summary.json").unlink()  # killed after its last checkpoint: resumes there
    seen.clear()
    fourth = train_phases(folder, cfg, [20, 40], after)
    assert seen == [(20, False), (40, True)] and fourth["env_steps"] >= 40
