"""``devicerl demo``: the embedded default job (see README).

By default, a short version of the learning benchmark (``benchmarks/learning.py``): the small
CPU agent trains with DigiRL online (the ``tuned`` setup of ``configs/``) on the MiniWoB++
development suite in headless Chromium
(three devices stepped asynchronously, learning overlapped with acting), then it and the random
policy are evaluated on the same test instances. Progress bars show env steps/s and success;
the report (``report.md``: a table, ``learning.png``: success vs env steps and wall-clock) and
each run's folder (trajectories, metrics, checkpoints, agent) land in ``--out``.

``--synthetic`` runs a random-agent collection on synthetic devices instead (seconds, no
browser): the device pool with one worker process per device, trajectories in the store.
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="train on MiniWoB++ and compare with the random policy (a few minutes)",
        description="Train the small CPU agent with DigiRL on the MiniWoB++ development suite "
        "in headless Chromium for --budget env steps, evaluate it and the random policy on the "
        "same task instances, and write OUT/report.md and OUT/learning.png. With --synthetic: "
        "collect with a random agent on synthetic devices instead (seconds, no browser).",
    )
    p.add_argument("--out", default="runs/demo", help="folder for the report and the runs")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--budget", type=int, default=2500, help="env steps of training")
    p.add_argument("--eval-episodes", type=int, default=10, help="test seeds per task")
    p.add_argument(
        "--setup", default="tuned", choices=["paper", "tuned"], help="configs/miniwob-digirl-*"
    )
    p.add_argument(
        "--synthetic", action="store_true", help="random-agent collection on synthetic devices"
    )
    p.add_argument("--episodes", type=int, default=200, help="--synthetic: episodes to collect")
    p.add_argument("--devices", type=int, default=4, help="--synthetic: devices")
    p.add_argument(
        "--worker",
        default="subprocess",
        choices=["serial", "subprocess", "ray"],
        help="--synthetic: where devices run (default: one process each)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.synthetic:
        return collect_synthetic(args)
    from devicerl.config import load_config
    from devicerl.runtime.comparison import compare, config_file
    from devicerl.runtime.comparison_report import table
    from devicerl.runtime.train_config import TrainConfig

    # the tuned setup's entropy bonus (configs/miniwob-digirl-tuned.yaml) fades over the same
    # share of the budget as in the 8,000-step benchmark it was set for
    tuned = load_config(TrainConfig, config_file("digirl", "tuned"))
    fade = max(1, round(tuned.digirl.actor.entropy_versions * args.budget / 8000))
    report = compare(
        args.out,
        setup=args.setup,
        systems=("random", "digirl"),
        seeds=(args.seed,),
        budget=args.budget,
        eval_episodes=args.eval_episodes,
        extra=(f"digirl.actor.entropy_versions={fade}",) if args.setup == "tuned" else (),
    )
    print(table(report["summary"]))
    print(report["result_sampled"])
    print(report["result"])
    print(f"report written to {args.out}/report.md (curves: {args.out}/learning.png)")
    print(f"see the episodes with: devicerl view {args.out}/digirl-s{args.seed}")
    return 0


def collect_synthetic(args: argparse.Namespace) -> int:
    """Random agent on synthetic devices through the pool and the collector, into a run."""
    from devicerl.agents import RandomPolicy
    from devicerl.envs import EnvSpec
    from devicerl.pool import EnvPool
    from devicerl.runtime.collector import Collector
    from devicerl.runtime.metrics import LoggingConfig
    from devicerl.runtime.progress import RateProgress
    from devicerl.runtime.run_dir import RunDir
    from devicerl.tasks import TaskSampler, resolve

    run_dir = RunDir(args.out).create()
    run_dir.save_config({k: v for k, v in vars(args).items() if k != "func"})
    sampler = TaskSampler(resolve("synthetic/tap,synthetic/type"), seed=args.seed)
    specs = [
        EnvSpec("synthetic", {"step_latency": "uniform:0.001,0.005", "seed": args.seed + i})
        for i in range(args.devices)
    ]
    results: list[dict] = []
    log_every = max(1, args.episodes // 20)
    with (
        EnvPool(specs, tasks=sampler, worker=args.worker, seed=args.seed) as pool,
        run_dir.writer(background=True) as writer,
        run_dir.metrics_logger(LoggingConfig(tensorboard=False)) as metrics,
        RateProgress("collect", total=args.episodes) as bar,
    ):
        collector = Collector(pool, RandomPolicy(seed=args.seed))
        for traj in collector.collect(args.episodes):
            writer.append(traj)  # truncated episodes too: the store keeps their cause
            if traj.is_truncated:
                continue
            results.append({"task": traj.task, "success": traj.success, "steps": traj.length})
            bar.update(1, steps=traj.length, successes=int(traj.success))
            if len(results) % log_every == 0 or len(results) == args.episodes:
                recent = results[-log_every:]
                metrics.log(
                    {
                        **collector.stats.as_dict(),
                        "rollout/success_rate": sum(r["success"] for r in recent) / len(recent),
                        "rollout/episode_length": sum(r["steps"] for r in recent) / len(recent),
                    },
                    step=collector.stats.env_steps,
                )  # fmt: skip
        stats = collector.stats
    summary = {
        "episodes": len(results),
        "env_steps": stats.env_steps,
        "success_rate": bar.success_rate,
        "steps_per_s": stats.steps_per_s,
        "elapsed_s": stats.elapsed_s,
        "truncated": stats.truncated,
        "restarts": stats.restarts,
        "devices": args.devices,
        "worker": args.worker,
    }
    (run_dir.path / "summary.json").write_text(json.dumps(summary, indent=2))
    (run_dir.path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    print(json.dumps(summary))
    print(f"run written to {run_dir.path} (see it with: devicerl view {run_dir.path})")
    return 0
