"""Learner throughput with 1 and N data-parallel learner processes, side by side in one run.

The DigiRL update (critics, filters, actor) of the default config on a fixed replay of
synthetic-device trajectories, the same global minibatches whichever the number of processes:
each process learns its shard and gradients are all-reduced (`devicerl.runtime.distributed`).
1 process is the default single-process learner; N > 1 are real process groups: gloo on CPU
(one torch thread per process), NCCL with one GPU per process when the machine has enough
GPUs (then the numbers are per-GPU scaling). Prints samples/s (minibatch items the group learns
from per second: actor and critics), seconds per update and the ratio to 1 process; writes
JSON. The last line is ``RESULT learner_speedup_<N>=<samples/s(N) / samples/s(1)> ...``.

    python benchmarks/learner_scaling.py [--procs 1 2] [--updates 5] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch
import torch.multiprocessing as mp

from devicerl.config import load_config
from devicerl.runtime.setup.config import TrainConfig

CONFIG = ["digirl.top_p=0.5"]  # otherwise the default DigiRL config (batch 64, 20 actor updates)
QUICK = ["actor.updates=4", "critic.updates=2"]


def replay(n: int) -> list:
    """Oracle successes and an untrained agent's episodes on tap and type (a few % succeed)."""
    from devicerl.agents.scripted import SyntheticOracle
    from devicerl.agents.small import SmallAgent
    from devicerl.envs import make
    from devicerl.runtime.acting.rollout import rollout

    envs = {name: make(name, n_boxes=6) for name in ("synthetic/tap", "synthetic/type")}
    agent = SmallAgent(seed=5)
    data = []
    for s in range(n):
        name = "synthetic/tap" if s % 2 else "synthetic/type"
        policy = SyntheticOracle() if s % 4 == 0 else agent
        data.append(rollout(envs[name], policy, name, s))
    return data


def samples_per_update(cfg: TrainConfig) -> int:
    a, c = cfg.actor, cfg.critic
    return a.updates * a.grad_accum * a.batch_size + 2 * c.updates * c.batch_size


def _rank(rank: int, world: int, port: int, overrides: list[str], data, updates: int, out: str):
    from devicerl.runtime.distributed.grad_sync import DataParallelSync
    from devicerl.runtime.distributed.process_group import init_group, leave
    from devicerl.runtime.distributed.replica import fingerprint
    from devicerl.runtime.setup.learners import make_learner, seed_everything

    torch.set_num_threads(1)
    gpu = torch.cuda.device_count() >= world > 1
    device = torch.device("cuda", rank) if gpu else torch.device("cpu")
    cfg = load_config(TrainConfig, None, [*overrides, f"agent.device={device}"])
    if world > 1:
        init_group(rank, world, "127.0.0.1", port, "auto", device, timeout_s=600)
    try:
        seed_everything(cfg.seed)
        actor = cfg.agent.make()
        learner = make_learner(cfg, actor)
        if world > 1:
            learner.grad_sync = DataParallelSync()
        learner.update(data)  # warm-up: featurizer caches, allocator
        times = []
        for _ in range(updates):
            if world > 1:
                torch.distributed.barrier()
            t0 = time.perf_counter()
            learner.update(data)
            if gpu:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        if world > 1:
            times_all = [None] * world
            torch.distributed.all_gather_object(times_all, times)
            times = [max(ts) for ts in zip(*times_all)]  # an update ends with its slowest rank
        if rank == 0:
            result = {
                "times": times,
                "device": str(device),
                "fingerprint": fingerprint(actor, learner),
            }
            Path(out).write_text(json.dumps(result))
    finally:
        if world > 1:
            leave()


def measure(world: int, overrides: list[str], data, updates: int) -> dict:
    from devicerl.runtime.distributed.process_group import free_port

    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/result.json"
        args = (world, free_port(), overrides, data, updates, out)
        mp.spawn(_rank, args=args, nprocs=world, join=True)
        return json.loads(Path(out).read_text())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--procs", type=int, nargs="+", default=[1, 2])
    p.add_argument("--updates", type=int, default=5, help="timed updates per setting")
    p.add_argument("--trajectories", type=int, default=96, help="replay size")
    p.add_argument("--quick", action="store_true", help="fewer minibatches per update")
    p.add_argument("--json", default="learner_scaling.json")
    args = p.parse_args()
    overrides = CONFIG + (QUICK if args.quick else [])
    cfg = load_config(TrainConfig, None, overrides)
    data = replay(args.trajectories)
    per_update = samples_per_update(cfg)
    gpus = torch.cuda.device_count()
    print(
        f"DigiRL update: {per_update} minibatch samples (actor + critics), replay of "
        f"{len(data)} trajectories, {sum(t.length for t in data)} steps; "
        f"{gpus} GPU(s), {torch.get_num_threads()} CPU threads available"
    )
    rows = []
    for n in args.procs:
        r = measure(n, overrides, data, args.updates)
        mean_s = sum(r["times"]) / len(r["times"])
        rows.append(
            {
                "processes": n,
                "device": r["device"],
                "s_per_update": mean_s,
                "samples_per_s": per_update / mean_s,
                "times": r["times"],
                "fingerprint": r["fingerprint"],
            }
        )
    base = rows[0]["samples_per_s"]
    print(f"{'processes':>9} {'device':>8} {'s/update':>9} {'samples/s':>10} {'ratio':>6}")
    for row in rows:
        row["ratio"] = row["samples_per_s"] / base
        print(
            f"{row['processes']:>9} {row['device']:>8} {row['s_per_update']:>9.2f} "
            f"{row['samples_per_s']:>10.1f} {row['ratio']:>6.2f}"
        )
    out = {
        "config": overrides,
        "samples_per_update": per_update,
        "updates": args.updates,
        "trajectories": len(data),
        "gpus": gpus,
        "machine": platform.platform(),
        "cpus": torch.get_num_threads(),
        "rows": rows,
    }
    Path(args.json).write_text(json.dumps(out, indent=2))
    print(
        "RESULT " + " ".join(f"learner_speedup_{r['processes']}={r['ratio']:.3f}" for r in rows[1:])
    )


if __name__ == "__main__":
    main()
