"""``devicerl collect``: run an agent on devices and store every trajectory (no learning)."""

from __future__ import annotations

import argparse
import json

from devicerl.cli.common import add_config_args, resolve_config, start_run


def add_parser(sub: argparse._SubParsersAction) -> None:
    from devicerl.runtime.train_config import TrainConfig

    p = sub.add_parser(
        "collect",
        help="collect trajectories with an agent into a run folder (e.g. offline data)",
        description="Collect env_steps steps with the agent on tasks.train into RUN_DIR's "
        "trajectory store (use it as offline_data of a later run, or view it).",
    )
    p.add_argument("--out", default=None, help="run folder (default: runs/collect)")
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.runtime.trainer import Trainer

    cfg = resolve_config(args)
    cfg.mode, cfg.algo = "online", "none"
    cfg.eval.at_end = False
    run_dir = start_run(args.out or "runs/collect", cfg)
    summary = Trainer(cfg, run_dir).run()
    print(json.dumps(summary, default=str))
    return 0
