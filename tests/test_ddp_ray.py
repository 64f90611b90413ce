"""The Ray learner group (``learner.num_workers: 2``) on a real local Ray cluster of two nodes:
one update gives the parameters of one process, and a killed learner actor is replaced."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import ray
import torch
from test_ddp import batch

from devicerl.config import load_config
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner, seed_everything

pytestmark = [pytest.mark.slow, pytest.mark.ray]

CONFIG = [
    "agent.small.d_model=32",
    "digirl.top_p=0.5",
    "actor.lr=3e-3",
    "actor.updates=3",
    "actor.batch_size=15",
    "actor.grad_accum=2",
    "critic.lr=3e-3",
    "critic.batch_size=9",
    "critic.updates=2",
    "learner.num_workers=2",
]


def float64_workers() -> None:
    """Ray's worker set-up hook: the comparison is made in float64 (see test_ddp)."""
    import torch

    torch.set_default_dtype(torch.float64)


def built(cfg: TrainConfig):
    seed_everything(cfg.seed)
    actor = cfg.agent.make()
    return actor, make_learner(cfg, actor)


def parameters(actor, learner) -> dict[str, torch.Tensor]:
    out = {f"actor.{k}": v for k, v in actor.get_weights().items()}
    for name, module in learner.modules().items():
        out.update({f"{name}.{k}": v.detach().clone() for k, v in module.state_dict().items()})
    return out


def test_ray_learner_group_matches_one_process(monkeypatch) -> None:
    from ray.cluster_utils import Cluster

    from devicerl.runtime.distributed.ray_learners import RayLearners

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_raylet_start_wait_time_s", "180")  # a loaded machine starts slowly
    torch.set_num_threads(1)
    cfg = load_config(TrainConfig, None, CONFIG)
    data = batch()
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    group = None
    try:
        actor, learner = built(cfg)
        before = parameters(actor, learner)
        learner.update(data)
        expected = parameters(actor, learner)
        assert max((expected[k] - before[k]).abs().max().item() for k in expected) > 1e-3

        path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        cluster.add_node(num_cpus=1)  # one learner actor on each node
        cluster.wait_for_nodes()
        ray.init(
            address=cluster.address,
            runtime_env={
                # the hook travels by reference: workers import it from this folder
                "env_vars": {"PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *path])},
                "worker_process_setup_hook": float64_workers,
            },
            log_to_driver=False,
        )
        actor2, learner2 = built(cfg)
        group = RayLearners(cfg, learner2, actor2)
        metrics = group.update(data)
        assert metrics["train/learner_processes"] == 2.0
        assert metrics["train/learner_divergence"] == 0.0
        group.refresh()  # the critics and optimizers, from rank 0 into this process
        got = parameters(actor2, learner2)
        assert got.keys() == expected.keys()
        worst = max((got[k] - expected[k]).abs().max().item() for k in expected)
        assert worst < 1e-5, f"the Ray learner group differs from one process by {worst:.2e}"
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(nodes) == 2

        ray.kill(group.workers[1], no_restart=True)  # a learner actor dies: the group restarts
        metrics = group.update(data)
        assert metrics["train/learner_restarts"] == 1.0
        assert metrics["train/learner_processes"] == 2.0
        assert metrics["train/learner_divergence"] == 0.0
    finally:
        if group is not None:
            group.close()
        ray.shutdown()
        cluster.shutdown()
        torch.set_default_dtype(old)
