"""``devicerl collect``: run an agent on devices and store every trajectory (no learning)."""

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
        "collect",
        help="collect trajectories with an agent into a run folder (e.g. offline data)",
        description="Collect env_steps steps with the agent on tasks.train into RUN_DIR's "
        "trajectory store (use it as offline_data of a later run, or view it).",
    )
    add_run_args(p, "runs/collect-<date>-<time>")
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.runtime.loop.factory import make_trainer
    from devicerl.runtime.setup.preflight import check_run_config, run_inputs

    # collecting is online and learns nothing, whatever the file says (a pre-training file
    # names an offline mode and its data, which a collection has not made yet)
    args.config_set = ["mode=online", "algo=none", *args.config_set]
    cfg = resolve_config(args)
    cfg.mode, cfg.algo = "online", "none"
    cfg.eval.at_end = False
    check_run_config(cfg)
    run_dir, trainer = start_new_run(
        args,
        cfg,
        "collect",
        lambda r: make_trainer(cfg, r),
        resumable=False,
        inputs=run_inputs(cfg),
    )
    with discard_if_refused(run_dir):
        summary = trainer.run()
    print(json.dumps(summary, default=str))
    return trainer.stop.exit_code
