"""``devicerl demo``: the embedded default job (see README).

Today it runs a real collection with a random agent on several synthetic devices (with
simulated latency) and writes a report; later it becomes a short MiniWoB++ training run.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the embedded default job and write a report")
    p.add_argument("--episodes", type=int, default=200, help="episodes to collect")
    p.add_argument("--devices", type=int, default=4, help="synthetic devices")
    p.add_argument("--out", default="runs/demo", help="run folder for the report")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from devicerl.agents import RandomPolicy
    from devicerl.envs import make
    from devicerl.tasks import TaskSampler, resolve

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sampler = TaskSampler(resolve("synthetic/tap,synthetic/type"), seed=args.seed)
    devices = [
        make("synthetic", step_latency="uniform:0.001,0.005", seed=args.seed + i)
        for i in range(args.devices)
    ]
    policy = RandomPolicy(seed=args.seed)
    results: list[dict] = []
    steps = 0
    t0 = time.perf_counter()
    with Progress(
        TextColumn("[bold]collect"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} episodes"),
        TextColumn("{task.fields[rate]:.0f} steps/s  success {task.fields[success]:.1%}"),
        TimeElapsedColumn(),
    ) as bar:
        job = bar.add_task("collect", total=args.episodes, rate=0.0, success=0.0)
        while len(results) < args.episodes:
            dev = devices[len(results) % len(devices)]
            inst = sampler.next()
            assert inst is not None
            obs = dev.reset(inst.task, inst.seed)
            while True:
                result = dev.step(policy.act([obs])[0].action)
                steps += 1
                obs = result.observation
                if result.done:
                    break
            results.append(
                {"task": inst.task.name, "success": result.info["success"], "steps": obs.step}
            )
            wins = sum(r["success"] for r in results)
            bar.update(
                job,
                advance=1,
                rate=steps / (time.perf_counter() - t0),
                success=wins / len(results),
            )
    for d in devices:
        d.close()
    elapsed = time.perf_counter() - t0
    summary = {
        "episodes": len(results),
        "env_steps": steps,
        "success_rate": sum(r["success"] for r in results) / len(results),
        "steps_per_s": steps / elapsed,
        "elapsed_s": elapsed,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    (out / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print(json.dumps(summary))
    print(f"report written to {out}/summary.json")
    return 0
