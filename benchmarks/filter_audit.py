"""What DigiRL's two filters do to a finished run's successes, task by task.

Loads a DigiRL run's newest checkpoint (its critics) and the trajectories of the run's store
(the off-to-online demonstrations included), and reports per task:

- ``success_rate`` and ``v_instr``: the share of the task's stored trajectories that succeed and
  the instruction critic's mean value for them. A success is ranked by A_instr = 1 - V_instr,
  so a task whose V_instr is over-estimated sees its successes fall below the curriculum's cut.
- ``in_curriculum``: share of the task's successes the curriculum keeps (top-p by A_instr over
  the whole store, plus the successes the run's ``rehearsal`` step adds), as the learner's
  selection steps do.
- ``steps_dropped`` / ``first_step_dropped``: share of the successes' steps the step filter
  drops, and how often it drops a success's first step (every success, kept or not, as if none
  were rehearsed whole).
- ``steps_imitated``: share of the successes' steps one run of the learner's selection steps
  hands the actor (curriculum, rehearsal, step filter and no-op skipping as the run lists them;
  Filtered BC's share is 1 whenever at least top-p of the trajectories succeed).
- ``value_spread``: how far the step critic's values spread within a success (max - min).
  Near 0, A_step of a success is lam^(H-h) alone and the filter keeps by position: the last
  steps of every success, never the first ones of a long success.
- ``rehearsed_instructions``: how many distinct instructions the successes the ``rehearsal``
  step picks by A_instr hold (``digirl.rehearsal.pick: advantage``; 0 without that step or with
  the random pick). The instruction critic ties the successes of one instruction and ties fall
  to replay order, so 1 means the same oldest successes of a single instruction every
  iteration.

    python benchmarks/filter_audit.py RUN [RUN ...] --out results/filter-audit.json
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path

import torch

from devicerl.algos.base import usable
from devicerl.algos.digirl import DigiRL
from devicerl.algos.formulas import instruction_advantages, keep_steps, rehearsal_mask
from devicerl.algos.selection import StepFilter, horizon, run_steps
from devicerl.config import load_config
from devicerl.data.store import TrajectoryStore
from devicerl.records import DEFAULT_POLICY, Trajectory
from devicerl.runtime.runs.checkpoint import CheckpointManager
from devicerl.runtime.setup.config import TrainConfig
from devicerl.runtime.setup.learners import make_learner

COLUMNS = (
    "trajectories",
    "success_rate",
    "v_instr",
    "in_curriculum",
    "mean_length",
    "steps_dropped",
    "first_step_dropped",
    "steps_imitated",
    "value_spread",
    "rehearsed_instructions",
)


def load_learner(run: Path) -> DigiRL:
    """The run's DigiRL learner with the critics of its newest checkpoint (a single-policy run:
    its member's modules are saved as ``agent.instr_critic`` and ``agent.step_critic``)."""
    cfg = load_config(TrainConfig, run / "config.yaml")
    if cfg.algo != "digirl":
        raise SystemExit(f"error: {run} is a {cfg.algo} run; the audit needs DigiRL's critics")
    learner = make_learner(cfg, cfg.agent.make())
    assert isinstance(learner, DigiRL)
    ck = CheckpointManager(run / "checkpoints").load_latest()
    if ck is None:
        raise SystemExit(f"error: {run}/checkpoints holds no checkpoint")
    for name, module in learner.modules().items():
        key = f"{DEFAULT_POLICY}.{name}"
        if key not in ck.models:
            raise SystemExit(f"error: {ck.path} holds no {key} (not a single-policy DigiRL run)")
        module.load_state_dict(ck.models[key])
    return learner


def success_step_values(
    learner: DigiRL, successes: Sequence[Trajectory], batch: int = 256
) -> Iterator[torch.Tensor]:
    """The step critic's values of each success's steps, in order, scored in batches of
    `batch` observations (one critic call per success took minutes on a run's store)."""
    observations = [s.observation for t in successes for s in t.steps]
    flat = torch.cat(
        [
            learner.critics.step.values(observations[i : i + batch])
            for i in range(0, len(observations), batch)
        ]
        or [torch.zeros(0)]
    )
    return iter(flat.split([t.length for t in successes]))


def audit_trajectories(
    learner: DigiRL, trajectories: Sequence[Trajectory]
) -> dict[str, dict[str, float]]:
    """Per task: the columns of `COLUMNS` over `trajectories`, under the learner's critics and
    filters (tasks with no success report no step columns)."""
    data = usable(list(trajectories))
    samples = run_steps(learner.selection, data).samples
    imitated = Counter(s.trajectory.episode_id for s in samples)
    v_instr = learner.critics.instruction_values(data).tolist()
    final = torch.tensor([1.0 if t.success else 0.0 for t in data])
    a_instr = instruction_advantages(final, torch.tensor(v_instr))
    config = learner.config
    rehearsal = config.rehearsal
    by_advantage = torch.zeros(len(data), dtype=torch.bool)
    if "rehearsal" in config.selection and rehearsal.pick == "advantage":
        tasks = [t.task for t in data]
        by_advantage = rehearsal_mask(
            tasks, final, a_instr, rehearsal.per_task, rehearsal.share or 0.0
        )
    step_filter = StepFilter(config.lam, learner.critics)
    rehearsed: dict[str, set[str]] = defaultdict(set)
    for t, k in zip(data, by_advantage.tolist()):
        if k:
            rehearsed[t.task.split("/")[-1]].add(t.instruction)
    step_values = success_step_values(learner, [t for t in data if t.success])
    rows: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(COLUMNS, 0.0))
    for t, vi in zip(data, v_instr):
        row = rows[t.task.split("/")[-1]]
        row["trajectories"] += 1
        row["v_instr"] += vi
        if not t.success:
            continue
        v = next(step_values)
        keep = keep_steps(step_filter.advantages(t, v), horizon(t))
        row["success_rate"] += 1
        row["in_curriculum"] += t.episode_id in imitated
        row["steps_imitated"] += imitated[t.episode_id]
        row["mean_length"] += t.length
        row["steps_dropped"] += int((~keep).sum())
        row["first_step_dropped"] += int(not keep[0])
        row["value_spread"] += float(v.max() - v.min())
    out = {}
    for task, row in sorted(rows.items()):
        n, wins, steps = row["trajectories"], row["success_rate"], row["mean_length"]
        out[task] = {"trajectories": n, "success_rate": wins / n, "v_instr": row["v_instr"] / n}
        if wins:
            out[task] |= {
                "in_curriculum": row["in_curriculum"] / wins,
                "mean_length": steps / wins,
                "steps_dropped": row["steps_dropped"] / steps,
                "first_step_dropped": row["first_step_dropped"] / wins,
                "steps_imitated": row["steps_imitated"] / steps,
                "value_spread": row["value_spread"] / wins,
                "rehearsed_instructions": len(rehearsed[task]),
            }
    return out


def audit(run: Path) -> dict[str, dict[str, float]]:
    """`audit_trajectories` over a run's store, under its newest checkpoint's critics."""
    return audit_trajectories(load_learner(run), list(TrajectoryStore(run / "trajectories")))


def table(runs: dict[str, dict[str, dict[str, float]]]) -> str:
    """Per task, the mean over runs of each column (over the runs that report it)."""
    tasks = sorted({task for per in runs.values() for task in per})
    lines = ["| task | " + " | ".join(COLUMNS) + " |", "|---|" + "---|" * len(COLUMNS)]
    for task in tasks:
        cells = []
        for c in COLUMNS:
            vals = [per[task][c] for per in runs.values() if c in per.get(task, {})]
            cells.append(f"{sum(vals) / len(vals):.3f}" if vals else "-")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
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
