"""League learner shards (``league.learner_shards: N``) on a real local Ray cluster: each policy's
learner in a separate process gives the in-process update on a fixed batch; policies are placed
on the least-loaded shard, removed and added while the shards run."""

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
from devicerl.league.state import League
from devicerl.runtime.league.learning import LeagueLearners
from devicerl.runtime.train_config import TrainConfig

pytestmark = [pytest.mark.slow, pytest.mark.ray]

POLICY = {
    "agent.small.d_model": 32,
    "agent.small.n_layers": 1,
    "digirl.top_p": 0.5,
    "digirl.actor.lr": 3e-3,
    "digirl.actor.updates": 3,
    "digirl.actor.batch_size": 8,
    "digirl.critic.lr": 3e-3,
    "digirl.critic.batch_size": 8,
    "digirl.critic.instruction_updates": 2,
    "digirl.critic.step_updates": 2,
}


def _learners(shards: int, names=("a", "b")) -> LeagueLearners:
    overrides = [f"policies.{n}.{k}={v}" for n in names for k, v in POLICY.items()]
    overrides += [f"policies.{n}.agent.small.seed={i}" for i, n in enumerate(names)]
    overrides += [f"league.learner_shards={shards}", "learner.cpus_per_worker=0.5"]
    cfg = load_config(TrainConfig, None, overrides)
    league = League.build(cfg.policies, cfg.league, seed=0)
    learners = LeagueLearners(cfg, league)
    learners.sync_members()
    return learners


def _feed(learners: LeagueLearners, data, names=("a", "b")) -> None:
    for name in names:
        for t in data:
            assert learners.route(dataclasses.replace(t, extras={**t.extras, "policy": name}))


def _parameters(learners: LeagueLearners, name: str) -> dict[str, torch.Tensor]:
    pl = learners.by_name[name]
    out = {f"actor.{k}": v for k, v in pl.learner.actor.get_weights().items()}
    for module, m in pl.learner.modules().items():
        out.update({f"{module}.{k}": v.detach().clone() for k, v in m.state_dict().items()})
    return out


def test_learner_shards_give_the_in_process_update(monkeypatch, tmp_path) -> None:
    from ray.cluster_utils import Cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "180")  # a loaded machine starts slowly
    torch.set_num_threads(1)
    data = batch()
    local = _learners(0)
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
    sharded = _learners(2)
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
            assert sharded.by_name[n].learner.actor.version == 1

        # remove b: its shard frees its slot; a new policy takes the least-loaded shard
        freed = shards.placed["b"]
        sharded.league.remove("b")
        sharded.sync_members()
        assert "b" not in shards.placed and ray.get(shards.workers[freed].names.remote()) == []
        spec = dataclasses.replace(sharded.league["a"].spec)
        sharded.league.add("c", spec, spec.agent.make())
        sharded.sync_members()
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
        "league.learner_shards=2", "learner.cpus_per_worker=0.5",
    )  # fmt: skip
    before = {
        n: {k: v.clone() for k, v in pl.learner.modules()["step_critic"].state_dict().items()}
        for n, pl in trainer.league_learners.by_name.items()
    }
    trainer.run()
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    shards = {r[k] for r in rows for k in r if k.endswith("/train/learner_shard")}
    assert shards == {0.0, 1.0}  # generalist and taps, one on each shard
    ck = trainer.ckpt.load_latest()
    assert (
        ck is not None
        and ck.iteration == 2
        and set(ck.state["league_learners"])
        == {
            "generalist",
            "taps",
        }
    )
    # the critics learn only on the shards: the checkpoint holds them trained (refreshed back)
    for name, saved in ck.state["league_learners"].items():
        got = ck.models[f"{saved['key']}.step_critic"]
        assert any(not torch.equal(got[k], v) for k, v in before[name].items()), name
