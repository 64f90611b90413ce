"""League learner shards (``learner.num_workers: N`` in a league) on a real local Ray cluster:
each policy's learner in a separate process gives the in-process update on a fixed batch;
policies are placed on the least-loaded shard, removed and added while the shards run."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
import ray
import torch
from test_ddp import batch

from devicerl.config import load_config
from devicerl.records import EpisodePlan
from devicerl.runtime.loop.league import member_config
from devicerl.runtime.loop.population import Population
from devicerl.runtime.setup.config import TrainConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]

POLICY = {
    "agent.small.d_model": 32,
    "digirl.top_p": 0.5,
    "actor.lr": 3e-3,
    "actor.updates": 3,
    "actor.batch_size": 8,
    "critic.lr": 3e-3,
    "critic.batch_size": 8,
    "critic.updates": 2,
}


def _add(pop: Population, cfg: TrainConfig, name: str, spec) -> None:
    """A league member as the league observer adds one: its own learner config and seed."""
    pop.add_member(name, spec.agent.make(), member_config(cfg, name, spec), spec.agent.make)


def _learners(shards: int, names=("a", "b")) -> tuple[Population, TrainConfig]:
    overrides = [f"policies.{n}.{k}={v}" for n in names for k, v in POLICY.items()]
    overrides += [f"policies.{n}.agent.seed={i}" for i, n in enumerate(names)]
    overrides += [f"learner.num_workers={shards}"]
    cfg = load_config(TrainConfig, None, overrides)
    pop = Population(cfg)
    for name, spec in cfg.policies.items():
        _add(pop, cfg, name, spec)
    return pop, cfg


def _feed(pop: Population, data, names=("a", "b")) -> None:
    for name in names:
        for t in data:
            added = pop.route(dataclasses.replace(t, plan=EpisodePlan(policy=name)), [name])
            assert added == [name]


def _parameters(pop: Population, name: str) -> dict[str, torch.Tensor]:
    learner = pop[name].learner
    assert learner is not None
    out = {f"actor.{k}": v for k, v in learner.actor.get_weights().items()}
    for module, m in learner.modules().items():
        out.update({f"{module}.{k}": v.detach().clone() for k, v in m.state_dict().items()})
    return out


def test_learner_shards_give_the_in_process_update(monkeypatch, tmp_path) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "180")  # a loaded machine starts slowly
    torch.set_num_threads(1)
    data = batch()
    local, _ = _learners(1)
    assert local.shards is None
    before = {n: _parameters(local, n) for n in ("a", "b")}
    _feed(local, data)
    local.update()
    expected = {n: _parameters(local, n) for n in ("a", "b")}
    for n in ("a", "b"):
        moved = max((expected[n][k] - before[n][k]).abs().max().item() for k in before[n])
        assert moved > 1e-3, f"{n}: the update changed nothing"

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False}
    )
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    ray.init(
        address=cluster.address,
        runtime_env={
            "env_vars": {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *path])}
        },
        log_to_driver=False,
    )
    sharded, cfg = _learners(2)
    try:
        _feed(sharded, data)
        metrics = sharded.update()
        # each policy on its own shard (least loaded first), in a process that is not this one
        assert {
            metrics["policy/a/train/learner_shard"],
            metrics["policy/b/train/learner_shard"],
        } == {0.0, 1.0}
        shards = sharded.shards
        pids = ray.get([w.pid.remote() for w in shards.workers])
        assert os.getpid() not in pids and len(set(pids)) == 2
        sharded.refresh()  # critics and optimizers come back from the shards
        for n in ("a", "b"):
            got = _parameters(sharded, n)
            assert got.keys() == expected[n].keys()
            worst = max((got[k] - expected[n][k]).abs().max().item() for k in got)
            assert worst < 1e-5, f"{n}: the shard's update differs from in-process by {worst:.2e}"
            assert sharded[n].policy.version == 1

        # remove b: its shard frees its slot; a new policy takes the least-loaded shard
        freed = shards.placed["b"]
        sharded.remove_member("b")
        assert "b" not in shards.placed and ray.get(shards.workers[freed].names.remote()) == []
        _add(sharded, cfg, "c", dataclasses.replace(cfg.policies["a"]))
        _feed(sharded, data[:6], names=("c",))
        metrics = sharded.update()
        assert metrics["policy/c/train/learner_shard"] == float(freed)
        assert ray.get(shards.workers[freed].names.remote()) == ["c"]
        sharded.close()
        _league_run_on_shards(tmp_path)
    finally:
        sharded.close()
        ray.shutdown()
        cluster.shutdown()


def _league_run_on_shards(tmp_path: Path) -> None:
    """A whole league run with its learners on two shards (this test's Ray cluster): every
    trainable policy learns there, checkpoints bring the shards' state back."""
    from test_league_run import MAPPING, _trainer

    trainer = _trainer(
        tmp_path, "run", *MAPPING, "max_iterations=2", "checkpoint_every=1",
        "learner.num_workers=2",
    )  # fmt: skip
    before = {
        m.name: {k: v.clone() for k, v in m.learner.modules()["step_critic"].state_dict().items()}
        for m in trainer.population.trainable()
    }
    trainer.run()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    shards = {r[k] for r in rows for k in r if k.endswith("/train/learner_shard")}
    assert shards == {0.0, 1.0}  # generalist and taps, one on each shard
    ck = trainer.ckpt.load_latest()
    assert ck is not None and ck.iteration == 2
    assert set(ck.state["members"]) == {"generalist", "taps"}
    # the critics learn only on the shards: the checkpoint holds them trained (refreshed back)
    for name in ck.state["members"]:
        got = ck.models[f"{name}.step_critic"]
        assert any(not torch.equal(got[k], v) for k, v in before[name].items()), name
