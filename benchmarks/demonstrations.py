"""Record scripted MiniWoB++ demonstrations into a trajectory store (an off-to-online run's data).

The reach benchmark's solvers (`reach_solvers`: AitW actions only, read from the observation)
play training instances (seeds from the ``train`` range, never a validation or test seed) on the
device a training run uses, and every successful episode is written, as a `Trajectory`, to a
store that ``offline_data=`` reads (`devicerl.runtime.setup.offline.load_offline`). Failed
episodes are dropped. The steps carry no log-prob (they are not the agent's own) and policy
version 0.

Demonstrations go beyond the DigiRL paper (its offline data are the pre-trained policy's own
rollouts): their rows are reported apart, never as `paper` or `tuned`
(benchmarks/results/notes-dev16-demonstrations-2026-11-25.md).

    python benchmarks/demonstrations.py --tasks login-user --episodes 10 --out runs/demos
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reach_solvers import SOLVERS, run_episode

from devicerl.data.store import TrajectoryWriter
from devicerl.envs import make
from devicerl.tasks import SEED_RANGES

#: First seed of the demonstrations: inside the ``train`` range, far from where samplers start.
FIRST_SEED = SEED_RANGES["train"][0] + 10_000_000


def record(tasks: Sequence[str], episodes: int, out: Path, env_kwargs: dict) -> dict[str, int]:
    """Write up to ``episodes`` successful demonstrations per task; returns successes per task."""
    unknown = [t for t in tasks if t not in SOLVERS]
    if unknown:
        raise SystemExit(f"error: no scripted solver for {', '.join(unknown)}")
    env = make("browser", **env_kwargs)
    kept: dict[str, int] = {}
    try:
        with TrajectoryWriter(out) as writer:
            for task in tasks:
                kept[task] = 0
                for i in range(episodes):
                    episode, traj = run_episode(env, task, FIRST_SEED + i)
                    if episode.success:
                        traj.extras["demonstration"] = "scripted"
                        writer.append(traj)
                        kept[task] += 1
                print(f"{task}: {kept[task]}/{episodes} successful demonstrations", flush=True)
    finally:
        env.close()
    return kept


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tasks", required=True, help="comma-separated MiniWoB++ tasks")
    ap.add_argument("--episodes", type=int, default=10, help="episodes played per task")
    ap.add_argument("--out", required=True, help="store folder (must not exist)")
    ap.add_argument("--task-pages", type=int, default=8, help="as the training device's")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.exists():
        raise SystemExit(f"error: --out {out} exists; choose a new folder")
    kwargs = {"screenshot": False, "task_pages": args.task_pages}
    record([t.strip() for t in args.tasks.split(",") if t.strip()], args.episodes, out, kwargs)


if __name__ == "__main__":
    main()
