"""``devicerl demo``: the embedded default job (see README).

By default, one training run and its evaluation: the small CPU agent trains with DigiRL online
from scratch (the shipped ``tuned`` setup, ``miniwob-digirl-tuned``) on the MiniWoB++
development suite in headless Chromium (three devices stepped asynchronously, learning
overlapped with acting) for ``--budget`` env steps; the trainer then evaluates the trained agent
greedily on test instances (a seed range disjoint from training's). ``--out`` is the run folder
(trajectories, metrics, checkpoints, agent, ``eval.json``) and also gets ``report.md`` (the
evaluation and the training rollouts' success) and ``curves/`` (learning curves from the run's
metrics). Comparing setups and baselines over seeds is the learning benchmark's job
(``benchmarks/learning.py``), not the demo's.

``--synthetic`` runs a random-agent collection on synthetic devices instead (seconds, no
browser): the device pool with one worker process per device, trajectories in the store.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devicerl.cli.common import bounded

if TYPE_CHECKING:
    from devicerl.runtime.setup.config import TrainConfig

#: The suite the demo trains on; the trainer evaluates on test instances of the same tasks.
SUITE = "miniwob-dev"
#: The budget the tuned setup's entropy-bonus fade was set for: a shorter demo fades it over
#: the same share of its budget.
SETUP_BUDGET = 8000


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="train DigiRL on MiniWoB++ and evaluate it (a few minutes)",
        description="Train the small CPU agent with DigiRL (the shipped tuned setup) on the "
        "MiniWoB++ development suite in headless Chromium for --budget env steps, evaluate it "
        "greedily on test instances, and write the run, OUT/report.md and OUT/curves/ into "
        "--out. With --synthetic: collect with a random agent on synthetic devices instead "
        "(seconds, no browser).",
    )
    p.add_argument("--out", default="runs/demo", help="run folder (default: runs/demo)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="delete an earlier run in --out first (without it, an existing run is refused)",
    )
    p.add_argument("--seed", type=bounded(min=0), default=0, help="random seed")
    p.add_argument("--budget", type=bounded(min=1), default=2500, help="env steps of training")
    p.add_argument(
        "--eval-episodes", type=bounded(min=1, max=10_000), default=10, help="test seeds per task"
    )
    p.add_argument(
        "--setup",
        default="tuned",
        choices=["paper", "tuned"],
        help="the shipped setup miniwob-digirl-SETUP",
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


def run(args: argparse.Namespace) -> int:
    if args.synthetic:
        return collect_synthetic(args)
    return train_and_evaluate(args)


def _check_out(path: str, overwrite: bool) -> None:
    """Refuse an existing run in --out unless --overwrite (the demo does not resume), and any
    other folder, with the run-folder rule of every verb."""
    from devicerl.files import check_apart
    from devicerl.runtime.runs.folder import RunDir

    check_apart(path, [])  # an empty --out is refused: it is not "here"
    RunDir(path).check_new(overwrite, resumable=False)


def demo_config(setup: str, budget: int, eval_episodes: int, seed: int) -> TrainConfig:
    """The shipped setup ``miniwob-digirl-<setup>`` on the development suite for `budget` env
    steps, evaluated at the end on `eval_episodes` test seeds of each of its tasks."""
    from devicerl.config import config_source, load_config
    from devicerl.runtime.setup.config import TrainConfig
    from devicerl.tasks import resolve

    path = config_source(f"miniwob-digirl-{setup}")
    overrides = [
        f"tasks.train={SUITE}",
        f"env_steps={budget}",
        f"seed={seed}",
        f"agent.seed={seed}",
        f"eval.n_tasks={len(resolve(SUITE))}",
        f"eval.episodes_per_task={eval_episodes}",
        "eval.split=test",
        "logging.tensorboard=false",
    ]
    entropy = load_config(TrainConfig, path).actor.entropy
    if entropy is not None and entropy.fade_versions is not None:
        # fade over the same share of the budget as the setup's
        fade = max(1, round(entropy.fade_versions * budget / SETUP_BUDGET))
        overrides.append(f"actor.entropy.fade_versions={fade}")
    return load_config(TrainConfig, path, overrides)


def train_and_evaluate(args: argparse.Namespace) -> int:
    """One training run in --out, the trainer's own evaluation at its end, then the report."""
    from devicerl.cli.common import start_run
    from devicerl.runtime.runs.folder import RunDir
    from devicerl.runtime.setup.preflight import check_run_config

    cfg = demo_config(args.setup, args.budget, args.eval_episodes, args.seed)
    check_run_config(cfg)
    _check_out(args.out, args.overwrite)  # refused before torch and Chromium start
    run_dir = RunDir(args.out)
    from devicerl.runtime.loop.factory import make_trainer

    trainer = make_trainer(cfg, run_dir)
    start_run(run_dir, cfg, overwrite=args.overwrite)
    summary = trainer.run()
    if trainer.stopped:
        print(
            f"devicerl demo: stopped by {trainer.stopped}; continue with: devicerl train "
            f"--resume {run_dir.path}"
        )
        return trainer.stop.exit_code
    report = write_report(run_dir.path, cfg, summary, args.setup)
    print(report)
    print(f"report written to {run_dir.path / 'report.md'} (curves: {run_dir.path / 'curves'})")
    print(f"see the episodes with: devicerl view {run_dir.path}")
    return 0


def write_report(out: Path, cfg: TrainConfig, summary: dict[str, Any], setup: str) -> str:
    """``report.md``: the greedy test evaluation (overall with its 95 % Wilson interval, and
    per task) beside the success of the training rollouts; ``curves/`` from the metrics."""
    from devicerl.files import write_text
    from devicerl.runtime.reports.plots import learning_curves
    from devicerl.runtime.runs.folder import RunDir

    evaluation = summary.get("eval") or {}
    rollout = summary.get("rollout_success_rate")
    rollout_text = "-" if rollout is None else f"{rollout:.3f}"
    lo, hi = evaluation.get("ci95", (float("nan"), float("nan")))
    lines = [
        f"# devicerl demo: DigiRL (`{setup}` setup) on {SUITE}, {summary['env_steps']} env "
        f"steps, seed {cfg.seed}",
        "",
        "| what | success | 95 % interval | episodes |",
        "|---|---|---|---|",
        f"| evaluation: trained agent, greedy, {cfg.eval.split} instances "
        f"({cfg.eval.episodes_per_task} per task) | {evaluation.get('success_rate', 0.0):.3f} "
        f"| [{lo:.3f}, {hi:.3f}] | {evaluation.get('episodes', 0)} |",
        f"| training rollouts (sampled, with exploration) | {rollout_text} | - "
        f"| {summary['episodes']} |",
        "",
        "| task | greedy test success | episodes |",
        "|---|---|---|",
    ]
    for task, row in sorted(evaluation.get("per_task", {}).items()):
        rate = row["successes"] / row["episodes"] if row["episodes"] else 0.0
        lines.append(f"| {task} | {rate:.2f} | {row['episodes']} |")
    curves = learning_curves(RunDir(out).read_metrics(), out / "curves")
    lines += ["", *(f"![{p.stem}](curves/{p.name})" for p in curves if p.stem == "success")]
    lines += [
        "",
        f"RESULT digirl={evaluation.get('success_rate', 0.0):.3f} "
        f"rollouts={rollout_text} env_steps={summary['env_steps']} setup={setup} "
        f"suite={SUITE} split={cfg.eval.split}",
    ]
    text = "\n".join(lines) + "\n"
    write_text(out / "report.md", text)
    return text


def collect_synthetic(args: argparse.Namespace) -> int:
    """Random agent on synthetic devices through the pool and the collector, into a new run
    folder (held locked while it runs)."""
    from devicerl.cli.common import start_run
    from devicerl.runtime.runs.folder import RunDir

    _check_out(args.out, args.overwrite)  # before anything starts
    options = {k: v for k, v in vars(args).items() if k not in ("func", "command", "verbose")}
    run_dir = start_run(RunDir(args.out), options, overwrite=args.overwrite, resumable=False)
    try:
        return _collect(args, run_dir)
    finally:
        run_dir.unlock()


def _collect(args: argparse.Namespace, run_dir: Any) -> int:
    from devicerl.agents import RandomPolicy
    from devicerl.envs import EnvSpec
    from devicerl.files import write_json, write_text
    from devicerl.pool import EnvPool
    from devicerl.runtime.acting.collector import Collector
    from devicerl.runtime.runs.metrics import LoggingConfig
    from devicerl.runtime.runs.progress import RateProgress
    from devicerl.tasks import TaskSampler, resolve

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
    write_json(run_dir.path / "summary.json", summary)
    write_text(run_dir.path / "episodes.jsonl", "".join(json.dumps(r) + "\n" for r in results))
    run_dir.unlock()
    print(json.dumps(summary))
    print(f"run written to {run_dir.path} (see it with: devicerl view {run_dir.path})")
    return 0
