"""Data-parallel learners on real gloo process groups: one update of DigiRL and of Filtered BC
on the same batch with 1 and with 2 learner processes gives the same parameters.

In float64: the comparison checks that the data-parallel update is the same computation. In
float32 the two differ by rounding (sums in another order), and Adam's first steps turn the
rounding noise of parameters whose true gradient is zero (biases before a softmax) into steps
of about the learning rate, whichever way the update is computed.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.multiprocessing as mp
from safetensors.torch import load_file, save_file

from devicerl.agents.scripted import SyntheticOracle
from devicerl.agents.small import SmallAgent
from devicerl.algos.base import Learner
from devicerl.algos.config import (
    ActorConfig,
    CriticConfig,
    DigiRLConfig,
    EntropyConfig,
    FilteredBCConfig,
)
from devicerl.algos.digirl import DigiRL
from devicerl.algos.filtered_bc import FilteredBC
from devicerl.envs import make
from devicerl.records import Trajectory
from devicerl.runtime.acting.rollout import rollout
from devicerl.runtime.distributed.grad_sync import DataParallelSync, shard_bounds

# odd batch sizes: the two processes get unequal shards; grad_accum and the entropy bonus too
ACTOR = ActorConfig(
    lr=3e-3, updates=3, batch_size=15, grad_accum=2, entropy=EntropyConfig(coef=0.01)
)
CRITIC = CriticConfig(lr=3e-3, batch_size=9, updates=2)


def batch() -> list[Trajectory]:
    """Oracle successes and an untrained agent's (mostly failed) episodes, tap and type."""
    tap, typ = make("synthetic/tap", n_boxes=4), make("synthetic/type", n_boxes=4)
    agent = SmallAgent(d_model=32, seed=5)
    data = [rollout(tap, SyntheticOracle(), "synthetic/tap", s) for s in range(6)]
    data += [rollout(typ, SyntheticOracle(), "synthetic/type", s) for s in range(4)]
    data += [
        rollout(env, agent, name, s)
        for s in range(8)
        for env, name in ((tap, "synthetic/tap"), (typ, "synthetic/type"))
    ]
    return data


def learner(algo: str) -> Learner:
    torch.manual_seed(0)
    agent = SmallAgent(d_model=32, seed=1)
    if algo == "digirl":
        return DigiRL(agent, DigiRLConfig(top_p=0.5), ACTOR, CRITIC, seed=3)
    return FilteredBC(agent, FilteredBCConfig(top_p=0.5), ACTOR, seed=3)


def parameters(ln: Learner) -> dict[str, torch.Tensor]:
    out = {f"actor.{k}": v for k, v in ln.actor.get_weights().items()}
    for name, module in ln.modules().items():
        out.update({f"{name}.{k}": v.detach().clone() for k, v in module.state_dict().items()})
    return out


def _rank(rank: int, world: int, port: int, algo: str, data, out: str) -> None:
    from devicerl.runtime.distributed.process_group import init_group, leave

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    init_group(rank, world, "127.0.0.1", port, "gloo", timeout_s=120)
    try:
        ln = learner(algo)
        ln.grad_sync = DataParallelSync()
        ln.update(data)
        save_file(parameters(ln), f"{out}/rank{rank}.safetensors")
    finally:
        leave()


def test_shards_cover_the_batch_once() -> None:
    for n in (2, 7, 15, 64):
        for world in (1, 2, 3):
            if n < world:
                continue
            bounds = [shard_bounds(n, r, world) for r in range(world)]
            assert bounds[0][0] == 0 and bounds[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(bounds))
            assert max(e - s for s, e in bounds) - min(e - s for s, e in bounds) <= 1


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.mark.parametrize("algo", ["digirl", "filtered_bc"])
def test_one_update_with_two_processes_matches_one_process(tmp_path, float64, algo) -> None:
    from devicerl.runtime.distributed.process_group import free_port

    torch.set_num_threads(1)
    data = batch()
    assert any(t.success for t in data) and not all(t.success for t in data)
    single = learner(algo)
    before = parameters(single)
    metrics = single.update(data)
    assert metrics["train/actor_samples"] > 0  # the actor learnt something
    expected = parameters(single)
    assert all(v.dtype == torch.float64 for v in expected.values())
    moved = max((expected[k] - before[k]).abs().max().item() for k in expected)
    assert moved > 1e-3  # the update changed the parameters: the comparison below means something

    mp.spawn(_rank, args=(2, free_port(), algo, data, str(tmp_path)), nprocs=2, join=True)
    ranks = [load_file(str(tmp_path / f"rank{r}.safetensors")) for r in range(2)]
    for got in ranks:
        assert got.keys() == expected.keys()
        worst = max((got[k] - expected[k]).abs().max().item() for k in expected)
        assert worst < 1e-5, f"{algo}: 2 processes differ from 1 by {worst:.2e}"
    assert all(torch.equal(ranks[0][k], ranks[1][k]) for k in expected)  # ranks identical
