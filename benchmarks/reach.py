"""Reach of the AitW action space: scripted solvers that use only the agent's vocabulary.

Every solver in `benchmarks.reach_solvers` (taps at points, drags, typed text, Enter; it reads
only the observation an agent gets) runs on our MiniWoB++ device over seeds 0..N-1. A task
counts as solved at >= 95 % success; an action kind counts as covered when a solved task's
solver uses it. Prints one row per task, writes JSON, and ends with
``RESULT solved_tasks=N tasks=M kinds_covered=K/K``.

    python benchmarks/reach.py [--seeds 20] [--tasks choose-list,enter-date] [--quick]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reach_solvers import SOLVERS, Episode, run_episode

from devicerl.agents.capabilities import ActionKind
from devicerl.envs import make
from devicerl.tasks.miniwob_reach import NEEDS

SOLVED_AT = 0.95


def _row(task: str, episodes: list[Episode]) -> dict:
    n = len(episodes)
    success = sum(e.success for e in episodes) / n
    return {
        "task": task,
        "kinds": [k.value for k in SOLVERS[task].kinds],
        "table_needs": [k.value for k in NEEDS[task]],
        "seeds": n,
        "success": success,
        "solved": success >= SOLVED_AT,
        "mean_steps": sum(e.steps for e in episodes) / n,
        "s_per_episode": sum(e.seconds for e in episodes) / n,
        "failed_seeds": {
            e.seed: e.error or f"reward {e.raw_reward:g}" for e in episodes if not e.success
        },
    }


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, cwd=Path(__file__).parent, check=True)  # fmt: skip
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=20, help="seeds per task (0..N-1)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: all solvers)")
    p.add_argument("--quick", action="store_true", help="every solver, 2 seeds")
    p.add_argument("--json", default=None, help="write the table here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    tasks = args.tasks.split(",") if args.tasks else sorted(SOLVERS)
    unknown = [t for t in tasks if t not in SOLVERS]
    if unknown:
        p.error(f"no solver for {', '.join(unknown)}")
    seeds = list(range(2 if args.quick else args.seeds))
    print(f"{len(tasks)} tasks x {len(seeds)} seeds (solved at >= {SOLVED_AT:.0%})")
    print(f"{'task':28s} {'success':>7s} {'steps':>5s} {'s/ep':>5s}  kinds")
    env = make("miniwob")
    rows = []
    t0 = time.perf_counter()
    try:
        for task in tasks:
            episodes = [run_episode(env, task, s)[0] for s in seeds]
            row = _row(task, episodes)
            rows.append(row)
            mark = f"  failed seeds {row['failed_seeds']}" if row["failed_seeds"] else ""
            kinds = " ".join(row["kinds"])
            print(f"{task:28s} {row['success']:7.0%} {row['mean_steps']:5.1f} "
                  f"{row['s_per_episode']:5.2f}  {kinds}{mark}", flush=True)  # fmt: skip
    finally:
        env.close()
    solved = [r for r in rows if r["solved"]]
    covered = {k for r in solved for k in r["kinds"]}
    kinds = [k.value for k in ActionKind]
    missing = [k for k in kinds if k not in covered]
    print(f"kinds covered by solved tasks: {len(covered)}/{len(kinds)}"
          + (f" (missing: {', '.join(missing)})" if missing else ""))  # fmt: skip
    result = {
        "command": "python benchmarks/reach.py " + " ".join(argv or sys.argv[1:]),
        "commit": _commit(),
        "seeds": len(seeds),
        "solved_at": SOLVED_AT,
        "wall_s": time.perf_counter() - t0,
        "solved_tasks": len(solved),
        "tasks": len(rows),
        "kinds_covered": sorted(covered),
        "kinds": kinds,
        "rows": rows,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    print(f"RESULT solved_tasks={len(solved)} tasks={len(rows)} "
          f"kinds_covered={len(covered)}/{len(kinds)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
