"""``devicerl view RUN_DIR``: write a static HTML report of a run (or of a bare store)."""

from __future__ import annotations

import argparse

from devicerl.cli.common import add_config_args, resolve_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="write a static HTML report of a run (episodes, actions, verdicts, curves)",
        description="Write RUN_DIR/report/index.html: every episode's screenshots with tap and "
        "swipe markers, actions, rewards and verdicts, filters by task and outcome, and "
        "learning curves from metrics.jsonl. Open the file in any browser.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a run folder, or a trajectory store folder")
    p.add_argument("--out", default=None, help="report folder (default: RUN_DIR/report)")
    from devicerl.runtime.reports.viewer import ViewConfig

    add_config_args(p, ViewConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from devicerl.data.store import TrajectoryStore
    from devicerl.errors import DataError
    from devicerl.files import check_apart
    from devicerl.runtime.reports.viewer import build_report
    from devicerl.runtime.runs.folder import RunDir, find_store

    cfg = resolve_config(args)
    if not Path(args.run_dir).is_dir():
        raise DataError(f"run folder {args.run_dir} does not exist")
    if args.out is not None:  # the report may go inside the run folder, not into its data
        check_apart(args.out, [("RUN_DIR's store", find_store(args.run_dir))])
    run = RunDir(args.run_dir)
    stored = TrajectoryStore(find_store(run.path), skip_bad=True).shards()
    if not (run.config_path.exists() or run.metrics_path.exists() or stored):
        raise DataError(  # a report is written into the folder viewed: only a run's or a store's
            f"{args.run_dir}: neither a run folder nor a trajectory store (no config.yaml, "
            "metrics.jsonl or trajectories/)"
        )
    report = build_report(args.run_dir, args.out, cfg)
    print(
        f"{report.episodes_shown} of {report.episodes_total} episodes, "
        f"{len(report.curves)} curve images -> {report.path}"
    )
    for msg in report.bad_shards.values():
        print(f"warning: skipped {msg}")
    return 0
