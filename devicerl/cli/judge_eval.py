"""``devicerl judge-eval RUN_OR_DATA``: measure a judge against episodes with ground truth.

RUN_OR_DATA is a run folder (its ``trajectories/`` store) or a bare trajectory store folder
(`devicerl.data.store`). The judge comes from the `JudgeConfig` options (``--config FILE``,
``--set kind=vlm``, ``chat.model=NAME`` ...); the default is the task-native check.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from devicerl.cli.common import add_config_args, bounded, resolve_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge-eval",
        help="measure a success judge against ground truth (confusion matrix, accuracy, FPR)",
        description="Run a judge over stored episodes that have ground truth (a human label in "
        "Trajectory.ground_truth, else the task's own success check) and print the confusion "
        "matrix, accuracy, false-positive / false-negative rates and unknown verdicts. Corrupt "
        "shards are skipped and named; the report covers the others.",
    )
    p.add_argument("data", metavar="RUN_OR_DATA", help="a run folder or a trajectory store")
    p.add_argument(
        "--limit", type=bounded(min=0), default=0, help="judge at most this many episodes (0: all)"
    )
    p.add_argument(
        "--json",
        default=None,
        metavar="PATH",
        help="also write the report as JSON (a new file, or one judge-eval wrote before)",
    )
    from devicerl.judges.config import JudgeConfig

    add_config_args(p, JudgeConfig)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import itertools
    import sys

    from devicerl.data.store import TrajectoryStore
    from devicerl.errors import DataError
    from devicerl.files import check_apart, write_json
    from devicerl.judges import make_judge
    from devicerl.judges.evaluate import JudgeReport, evaluate_judge
    from devicerl.records import Trajectory
    from devicerl.runtime.runs.folder import find_store
    from devicerl.runtime.runs.progress import RateProgress

    config = resolve_config(args)
    if args.json is not None:
        check_json_output(Path(args.json))  # before judging: the work is not lost to a bad path
        # the report may go inside the run folder, not into the store it reads
        check_apart(args.json, [("RUN_OR_DATA's store", find_store(args.data))], what="--json")
    store = TrajectoryStore(find_store(args.data), skip_bad=True)  # one bad shard costs its own
    if not store.shards():
        raise DataError(f"{args.data}: no stored episodes (not a run or trajectory store folder)")
    episodes = store.iter_trajectories()
    if args.limit > 0:
        episodes = itertools.islice(episodes, args.limit)
    with make_judge(config) as judge, RateProgress("judge-eval", unit="episodes") as bar:

        def progress(report: JudgeReport, t: Trajectory) -> None:
            acc = "n/a" if report.accuracy is None else f"{report.accuracy:.1%}"
            bar.update(1, steps=t.length, successes=int(t.success), accuracy=acc)

        report = evaluate_judge(judge, episodes, workers=config.n_workers, progress=progress)
    print(report.format())
    for path, reason in store.bad_shards.items():
        print(f"judge-eval: skipped bad shard {path.name}: {reason}", file=sys.stderr)
    if not report.n:
        print(f"judge-eval: no episode in {args.data} has ground truth", file=sys.stderr)
    if args.json is not None:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        skipped = {p.name: reason for p, reason in store.bad_shards.items()}
        write_json(args.json, {**report.to_dict(), "skipped_shards": skipped})  # scrubbed
    return 0 if report.n else 1


def check_json_output(path: Path) -> None:
    """``--json PATH`` can be written: a new file in a writable folder, or a report judge-eval
    wrote before (never another file: a run's config, a user's document)."""
    from devicerl.errors import DataError, PathError
    from devicerl.files import check_output, read_text

    check_output(path, what="--json", kind="file")
    if not path.exists():
        return
    try:
        earlier = json.loads(read_text(path, 1 << 26, what="--json file"))
    except (DataError, ValueError):
        earlier = None
    if not (isinstance(earlier, dict) and {"judge", "tp", "fp"} <= earlier.keys()):
        raise PathError(f"--json {path} exists and is not a judge-eval report: choose a new file")
