"""``devicerl eval``: evaluate an agent on the first N tasks of a split, in order."""

from __future__ import annotations

import argparse
import json

from devicerl.cli.common import add_config_args, resolve_config, start_run


def add_parser(sub: argparse._SubParsersAction) -> None:
    from devicerl.runtime.train_config import TrainConfig

    p = sub.add_parser(
        "eval",
        help="evaluate an agent (success rate with a 95%% confidence interval)",
        description="Run the agent (agent.path for a trained one) on the first eval.n_tasks "
        "tasks of tasks.eval (or tasks.train), eval.episodes_per_task seeds each, greedy by "
        "default; print the per-task table and write eval.json into the run folder.",
    )
    p.add_argument("--out", default=None, help="run folder (default: runs/eval)")
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.runtime.trainer import Trainer

    cfg = resolve_config(args)
    cfg.mode = "eval"
    run_dir = start_run(args.out or "runs/eval", cfg)
    summary = Trainer(cfg, run_dir).run()
    print(json.dumps(summary.get("eval", {}), default=str))
    return 0
