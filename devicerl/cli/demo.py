"""``devicerl demo``: the embedded default job (see README).

Today it collects episodes with a random agent on several synthetic devices (with simulated
latency) through the asynchronous device pool and the collector, and writes a report; later
it becomes a short MiniWoB++ training run.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded default job and write a report")
    p.add_argument("--episodes", type=int, default=200, help="episodes to collect")
    p.add_argument("--devices", type=int, default=4, help="synthetic devices")
    p.add_argument("--out", default="runs/demo", help="run folder for the report")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument(
        "--worker",
        default="subprocess",
        choices=["serial", "subprocess", "ray"],
        help="where devices run (default: one process each)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from devicerl.agents import RandomPolicy
    from devicerl.envs import EnvSpec
    from devicerl.pool import EnvPool
    from devicerl.runtime.collector import Collector
    from devicerl.tasks import TaskSampler, resolve

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sampler = TaskSampler(resolve("synthetic/tap,synthetic/type"), seed=args.seed)
    specs = [
        EnvSpec("synthetic", {"step_latency": "uniform:0.001,0.005", "seed": args.seed + i})
        for i in range(args.devices)
    ]
    results: list[dict] = []
    with EnvPool(specs, tasks=sampler, worker=args.worker, seed=args.seed) as pool:
        collector = Collector(pool, RandomPolicy(seed=args.seed))
        stats = collector.stats
        with Progress(
            TextColumn("[bold]collect"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total} episodes"),
            TextColumn("{task.fields[rate]:.0f} steps/s  success {task.fields[success]:.1%}"),
            TimeElapsedColumn(),
        ) as bar:
            job = bar.add_task("collect", total=args.episodes, rate=0.0, success=0.0)
            for traj in collector.collect(args.episodes):
                if traj.is_truncated:
                    continue
                results.append({"task": traj.task, "success": traj.success, "steps": traj.length})
                bar.update(job, advance=1, rate=stats.steps_per_s, success=stats.success_rate)
        summary = {
            "episodes": len(results),
            "env_steps": stats.env_steps,
            "success_rate": sum(r["success"] for r in results) / max(len(results), 1),
            "steps_per_s": stats.steps_per_s,
            "elapsed_s": stats.elapsed_s,
            "truncated": stats.truncated,
            "restarts": stats.restarts,
            "devices": args.devices,
            "worker": args.worker,
        }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print(json.dumps(summary))
    print(f"report written to {out}/summary.json")
    return 0
