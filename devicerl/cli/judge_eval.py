"""``devicerl judge-eval DATA``: measure a judge against trajectories with ground truth.

DATA is a folder of episode folders in the `devicerl.judges.files` format (one
``trajectory.json`` plus screenshots each). The judge comes from ``--config`` (a YAML file with
a ``judge:`` section, or the judge section itself) and ``--set key=value`` overrides, e.g.
``--set kind=vlm --set chat.model=qwen2-vl --set chat.base_url=http://127.0.0.1:8000/v1``.
"""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge-eval",
        help="measure a success judge against ground truth (confusion matrix, accuracy, FPR)",
    )
    p.add_argument("data", metavar="RUN_OR_DATA", help="folder of stored episodes")
    p.add_argument("--config", default=None, help="YAML with a judge: section")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="judge config override, e.g. kind=vlm or chat.model=NAME (repeatable)",
    )
    p.add_argument("--limit", type=int, default=0, help="judge at most this many episodes")
    p.add_argument("--json", default=None, metavar="PATH", help="also write the report as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import itertools
    import json
    import sys
    from pathlib import Path

    from rich.progress import Progress, TextColumn, TimeElapsedColumn

    from devicerl.config import load_config, read_yaml
    from devicerl.judges import JudgeConfig, make_judge
    from devicerl.judges.evaluate import JudgeReport, evaluate_judge
    from devicerl.judges.files import iter_trajectories

    base = read_yaml(args.config) if args.config else {}
    if isinstance(base.get("judge"), dict):
        base = base["judge"]
    config = load_config(JudgeConfig, None, args.overrides, base=base)
    trajectories = iter_trajectories(args.data)
    if args.limit > 0:
        trajectories = itertools.islice(trajectories, args.limit)
    with (
        make_judge(config) as judge,
        Progress(
            TextColumn("[bold]judge-eval"),
            TextColumn("{task.completed} episodes  {task.fields[rate]:.1f}/s  {task.fields[acc]}"),
            TimeElapsedColumn(),
            transient=True,
        ) as bar,
    ):
        job = bar.add_task("eval", total=None, rate=0.0, acc="")

        def progress(r: JudgeReport) -> None:
            done = r.n + r.no_truth
            acc = "" if r.accuracy is None else f"accuracy {r.accuracy:.1%}"
            rate = done / max(bar.tasks[0].elapsed or 1e-9, 1e-9)
            bar.update(job, completed=done, rate=rate, acc=acc)

        report = evaluate_judge(judge, trajectories, workers=config.n_workers, progress=progress)
    print(report.format())
    if not report.n:
        print(f"judge-eval: no episode in {args.data} has ground truth", file=sys.stderr)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report.to_dict(), indent=2))
    return 0 if report.n else 1
