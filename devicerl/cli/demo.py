"""``devicerl demo``: the embedded default job (see README).

Today it runs a real collection with a random agent on several synthetic devices (with
simulated latency) into a run folder — trajectories in the store, metrics in ``metrics.jsonl``
and TensorBoard, a summary — viewable with ``devicerl view``; later it becomes a short MiniWoB++
training run.
"""

from __future__ import annotations

import argparse
import json
import time


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded default job and write a report")
    p.add_argument("--episodes", type=int, default=200, help="episodes to collect")
    p.add_argument("--devices", type=int, default=4, help="synthetic devices")
    p.add_argument("--out", default="runs/demo", help="run folder for the report")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.agents import RandomPolicy
    from devicerl.envs import make
    from devicerl.runtime.metrics import LoggingConfig
    from devicerl.runtime.progress import RateProgress
    from devicerl.runtime.rollout import rollout
    from devicerl.runtime.run_dir import RunDir
    from devicerl.tasks import TaskSampler, resolve

    run_dir = RunDir(args.out).create()
    run_dir.save_config({k: v for k, v in vars(args).items() if k != "func"})
    sampler = TaskSampler(resolve("synthetic/tap,synthetic/type"), seed=args.seed)
    devices = [
        make("synthetic", step_latency="uniform:0.001,0.005", seed=args.seed + i)
        for i in range(args.devices)
    ]
    policy = RandomPolicy(seed=args.seed)
    results: list[dict] = []
    log_every = max(1, args.episodes // 20)
    t0 = time.perf_counter()
    with (
        run_dir.writer(background=True) as writer,
        run_dir.metrics_logger(LoggingConfig(tensorboard=False)) as metrics,
        RateProgress("collect", total=args.episodes) as bar,
    ):
        while len(results) < args.episodes:
            env_id = len(results) % len(devices)
            inst = sampler.next()
            assert inst is not None
            traj = rollout(devices[env_id], policy, inst.task, inst.seed, env_id=env_id)
            writer.append(traj)
            results.append({"task": traj.task, "success": traj.success, "steps": traj.length})
            bar.update(1, steps=traj.length, successes=int(traj.success))
            if len(results) % log_every == 0 or len(results) == args.episodes:
                recent = results[-log_every:]
                metrics.log(
                    {
                        "rollout/success_rate": sum(r["success"] for r in recent) / len(recent),
                        "rollout/episode_length": sum(r["steps"] for r in recent) / len(recent),
                        "rollout/episodes": len(results),
                        "pool/steps_per_s": bar.steps_per_s,
                    },
                    step=bar.steps,
                )
    for d in devices:
        d.close()
    elapsed = time.perf_counter() - t0
    summary = {
        "episodes": len(results),
        "env_steps": bar.steps,
        "success_rate": bar.success_rate,
        "steps_per_s": bar.steps / elapsed,
        "elapsed_s": elapsed,
    }
    (run_dir.path / "summary.json").write_text(json.dumps(summary, indent=2))
    (run_dir.path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print(json.dumps(summary))
    print(f"run written to {run_dir.path} (see it with: devicerl view {run_dir.path})")
    return 0
