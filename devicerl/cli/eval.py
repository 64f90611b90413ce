"""``devicerl eval``: evaluate an agent on the first N tasks of a split, in order."""

from __future__ import annotations

import argparse
import json

from devicerl.cli.common import (
    add_config_args,
    add_run_args,
    discard_if_refused,
    resolve_config,
    start_new_run,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from devicerl.runtime.setup.config import TrainConfig

    p = sub.add_parser(
        "eval",
        help="evaluate an agent (success rate with a 95%% confidence interval)",
        description="Run the agent (agent.path for a trained one) on the first eval.n_tasks "
        "tasks of tasks.eval (or tasks.train), eval.episodes_per_task seeds each, greedy by "
        "default; print the per-task table and write eval.json into the run folder.",
    )
    add_run_args(p, "runs/eval-<date>-<time>")
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.runtime.loop.factory import make_trainer
    from devicerl.runtime.setup.preflight import check_run_config, run_inputs

    cfg = resolve_config(args)
    cfg.mode = "eval"
    check_run_config(cfg)
    run_dir, trainer = start_new_run(
        args,
        cfg,
        "eval",
        lambda r: make_trainer(cfg, r),
        resumable=False,
        inputs=run_inputs(cfg),
    )
    with discard_if_refused(run_dir):
        summary = trainer.run()
    print(json.dumps(summary.get("eval", {}), default=str))
    return trainer.stop.exit_code
