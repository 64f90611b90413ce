"""What DigiRL's step filter does to a finished run's successes, task by task.

Loads a DigiRL run's newest checkpoint (its critics), reads every successful trajectory of the
run's store (the off-to-online demonstrations included) and, per task, reports the mean length,
the share of the successes' steps the step filter drops, how often it drops a success's first
step, and how far the step critic's values spread within a success (max - min).

A spread near 0 means the step critic cannot tell a trajectory's states apart. A_step is then
lam^(H-h) alone, and the filter keeps by position: the last steps of every success, never the
first ones of a long success.

    python benchmarks/step_filter_audit.py RUN [RUN ...] --out results/step-filter-audit.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

from devicerl.algos.base import horizon, usable
from devicerl.algos.digirl import DigiRL
from devicerl.algos.formulas import keep_steps
from devicerl.config import load_config
from devicerl.data.store import TrajectoryStore
from devicerl.records import Trajectory
from devicerl.runtime.checkpoint import CheckpointManager
from devicerl.runtime.learner_setup import make_learner
from devicerl.runtime.train_config import TrainConfig

COLUMNS = ("successes", "mean_length", "steps_dropped", "first_step_dropped", "value_spread")


def load_learner(run: Path) -> DigiRL:
    """The run's DigiRL learner with the critics of its newest checkpoint."""
    cfg = load_config(TrainConfig, run / "config.yaml")
    if cfg.algo != "digirl":
        raise SystemExit(f"error: {run} is a {cfg.algo} run; the audit needs DigiRL's critics")
    learner = make_learner(cfg, cfg.agent.make())
    assert isinstance(learner, DigiRL)
    ck = CheckpointManager(run / "checkpoints").load_latest()
    if ck is None:
        raise SystemExit(f"error: {run}/checkpoints holds no checkpoint")
    for name, module in learner.modules().items():
        module.load_state_dict(ck.models[name])
    return learner


def audit_trajectories(
    learner: DigiRL, trajectories: Iterable[Trajectory]
) -> dict[str, dict[str, float]]:
    """Per task: the columns of `COLUMNS` over the successful `trajectories`, under the
    learner's step critic."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0] * 5)
    for t in usable(list(trajectories)):
        if not t.success:
            continue
        v = learner.step_critic.values([s.observation for s in t.steps])
        keep = keep_steps(learner.step_advantages(t, v), horizon(t))
        row = sums[t.task.split("/")[-1]]
        row[0] += 1
        row[1] += t.length
        row[2] += int((~keep).sum())
        row[3] += int(not keep[0])
        row[4] += float(v.max() - v.min())
    return {
        task: {
            "successes": n,
            "mean_length": steps / n,
            "steps_dropped": dropped / steps,
            "first_step_dropped": first / n,
            "value_spread": spread / n,
        }
        for task, (n, steps, dropped, first, spread) in sorted(sums.items())
    }


def audit(run: Path) -> dict[str, dict[str, float]]:
    """`audit_trajectories` over a run's store, under its newest checkpoint's critics."""
    return audit_trajectories(load_learner(run), TrajectoryStore(run / "trajectories"))


def table(runs: dict[str, dict[str, dict[str, float]]]) -> str:
    """Per task, the mean over runs of each column (a task missing from a run is skipped)."""
    tasks = sorted({task for per in runs.values() for task in per})
    lines = ["| task | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for task in tasks:
        rows = [per[task] for per in runs.values() if task in per]
        cells = [sum(r[c] for r in rows) / len(rows) for c in COLUMNS]
        lines.append(f"| {task} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path, help="DigiRL run folders (config.yaml inside)")
    ap.add_argument("--out", type=Path, help="JSON file for the per-run, per-task numbers")
    args = ap.parse_args()
    runs = {str(run): audit(run) for run in args.runs}
    print(table(runs))
    if args.out:
        args.out.write_text(json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
