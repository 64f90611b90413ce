"""``devicerl train``: offline, online, off-to-online training (and eval-only) from a config."""

from __future__ import annotations

import argparse
import json

from devicerl.cli.common import (
    add_config_args,
    add_run_args,
    discard_if_refused,
    print_config,
    resolve_config,
    start_new_run,
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from devicerl.runtime.setup.config import TrainConfig

    p = sub.add_parser(
        "train",
        help="train an agent (Filtered BC, DigiRL, GRPO or GiGPO; offline, online, off2on)",
        description="Train an agent into RUN_DIR (config.yaml, trajectories/, metrics.jsonl, "
        "tb/, checkpoints/, agent/, summary.json). The shipped setups "
        "(--config miniwob-digirl-tuned, ...) are in the package's configs/ folder. "
        "Resume a run after a crash, a kill or Ctrl-C (which writes a checkpoint first) with: "
        "devicerl train --resume RUN_DIR. An existing run folder is never written into by a "
        "new run (see docs/runs-and-safety.md).",
    )
    add_run_args(p, "runs/<mode>-<algo>-<date>-<time>")
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        default=None,
        help="continue the run in RUN_DIR from its latest checkpoint, with its saved config "
        "plus any KEY=VALUE overrides given here (--config is refused; --print-config shows "
        "the result without running)",
    )
    add_config_args(p, TrainConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from devicerl.runtime.distributed import process_group

    # under `accelerate launch`, rank 0 runs the trainer and the other ranks only learn
    launch = process_group.init_from_launcher() if process_group.launched() else None
    if launch is not None and launch.rank != 0:
        from devicerl.runtime.distributed.learners import follow

        try:
            return follow(launch)
        finally:
            process_group.leave()
    try:
        return _train(args, launch)
    finally:
        if launch is not None:
            from devicerl.runtime.distributed.learners import release

            release(launch)
            process_group.leave()


def _train(args: argparse.Namespace, launch) -> int:
    import sys

    from devicerl.errors import ConfigError
    from devicerl.runtime.runs.folder import RunDir
    from devicerl.runtime.setup.config import TrainConfig
    from devicerl.runtime.setup.preflight import check_run_config, run_inputs

    # Order matters: everything is validated before the first byte is written.
    if args.resume:
        if args.config:
            raise ConfigError(
                f"--resume {args.resume} continues with the run's saved config: drop "
                f"--config {args.config} and give changes as KEY=VALUE overrides"
            )
        run_dir = RunDir(args.resume)
        overrides = [*args.config_set, *args.config_overrides]
        cfg = run_dir.load_config(TrainConfig, overrides)
        if args.print_config:  # what the resumed run would use; nothing is written
            print_config(cfg)
            return 0
        check_run_config(cfg)
        # torch loads here, not for --help
        from devicerl.runtime.loop.factory import make_trainer

        run_dir.lock()
        trainer = make_trainer(cfg, run_dir, resume=True, launch=launch)
        if overrides:
            run_dir.save_config(cfg)
    else:
        cfg = resolve_config(args)  # a bad config or --print-config ends here, before torch
        check_run_config(cfg)
        from devicerl.runtime.loop.factory import make_trainer

        prefix = f"{cfg.mode}-{'league' if cfg.policies else cfg.algo}"
        run_dir, trainer = start_new_run(
            args, cfg, prefix, lambda r: make_trainer(cfg, r, launch=launch), inputs=run_inputs(cfg)
        )
    if args.resume:
        summary = trainer.run()
    else:
        with discard_if_refused(run_dir):
            summary = trainer.run()
    print(
        json.dumps({k: v for k, v in summary.items() if k not in ("eval", "league")}, default=str)
    )
    if "league" in summary:
        print(summary["league"]["table"])
    if trainer.stopped:
        print(
            f"devicerl train: stopped by {trainer.stopped} at iteration {trainer.state.iteration} "
            f"(checkpoint and agent written); continue with: devicerl train --resume "
            f"{run_dir.path}",
            file=sys.stderr,
        )
        return trainer.stop.exit_code
    print(f"run written to {run_dir.path} (see it with: devicerl view {run_dir.path})")
    return 0
