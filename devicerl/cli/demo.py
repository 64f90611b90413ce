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
import re
from pathlib import Path

from devicerl.cli.common import bounded


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="train on MiniWoB++ and compare with the random policy (a few minutes)",
        description="Train the small CPU agent with DigiRL on the MiniWoB++ development suite "
        "in headless Chromium for --budget env steps, evaluate it and the random policy on the "
        "same task instances, and write OUT/report.md and OUT/learning.png. With --synthetic: "
        "collect with a random agent on synthetic devices instead (seconds, no browser). An "
        "existing run is never written into (a demo folder is continued: finished runs in it "
        "are reused).",
    )
    p.add_argument("--out", default="runs/demo", help="folder for the report and the runs")
    p.add_argument("--seed", type=bounded(min=0), default=0, help="random seed")
    p.add_argument("--budget", type=bounded(min=1), default=2500, help="env steps of training")
    p.add_argument(
        "--eval-episodes", type=bounded(min=1, max=10_000), default=10, help="test seeds per task"
    )
    p.add_argument(
        "--setup", default="tuned", choices=["paper", "tuned"], help="configs/miniwob-digirl-*"
    )
    p.add_argument(
        "--synthetic", action="store_true", help="random-agent collection on synthetic devices"
    )
    p.add_argument(
        "--episodes",
        type=bounded(min=1, max=1_000_000),
        default=200,
        help="--synthetic: episodes to collect",
    )
    p.add_argument(
        "--devices", type=bounded(min=1, max=256), default=4, help="--synthetic: devices"
    )
    p.add_argument(
        "--worker",
        default="subprocess",
        choices=["serial", "subprocess", "ray"],
        help="--synthetic: where devices run (default: one process each)",
    )
    p.set_defaults(func=run)


#: What a demo (a comparison of runs) writes into its folder: continuing one is allowed.
_DEMO_ENTRIES = re.compile(r"^(comparison\.json|report\.md|learning\.png|[a-z_]+-s\d+)$")


def check_demo_folder(out: Path) -> None:
    """A demo writes a comparison of runs into ``out``: a new or empty folder, or a demo it
    wrote before (its finished runs are reused); never a run, never a folder of other files."""
    from devicerl.errors import RunError
    from devicerl.files import check_output
    from devicerl.runtime.run_dir import RunDir

    check_output(out, what="--out", error=RunError)
    if not out.is_dir():
        return
    if RunDir(out).is_run():
        raise RunError(
            f"--out {out} is a run folder; a demo writes a comparison of runs into a folder of "
            "its own: choose another --out"
        )
    foreign = sorted(e.name for e in out.iterdir() if not _DEMO_ENTRIES.match(e.name))
    if foreign:
        raise RunError(
            f"--out {out} holds files a demo did not write ({foreign[0]}): choose a new or "
            "empty folder"
        )


def run(args: argparse.Namespace) -> int:
    if args.synthetic:
        return collect_synthetic(args)
    from devicerl.config import load_config
    from devicerl.runtime.comparison import compare, config_file
    from devicerl.runtime.comparison_report import table
    from devicerl.runtime.train_config import TrainConfig

    check_demo_folder(Path(args.out))

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
    from devicerl.cli.common import start_run
    from devicerl.envs import EnvSpec
    from devicerl.files import write_json, write_text
    from devicerl.pool import EnvPool
    from devicerl.runtime.collector import Collector
    from devicerl.runtime.metrics import LoggingConfig
    from devicerl.runtime.progress import RateProgress
    from devicerl.runtime.run_dir import RunDir
    from devicerl.tasks import TaskSampler, resolve

    options = {k: v for k, v in vars(args).items() if k not in ("func", "command", "verbose")}
    run_dir = RunDir(args.out)
    run_dir.check_new(resumable=False, overwritable=False)  # before anything starts
    sampler = TaskSampler(resolve("synthetic/tap,synthetic/type"), seed=args.seed)
    specs = [
        EnvSpec("synthetic", {"step_latency": "uniform:0.001,0.005", "seed": args.seed + i})
        for i in range(args.devices)
    ]
    start_run(run_dir, options, resumable=False)
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
    write_json(run_dir.path / "summary.json", summary)
    write_text(run_dir.path / "episodes.jsonl", "".join(json.dumps(r) + "\n" for r in results))
    run_dir.unlock()
    print(json.dumps(summary))
    print(f"run written to {run_dir.path} (see it with: devicerl view {run_dir.path})")
    return 0
