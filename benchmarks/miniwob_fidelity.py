"""Fidelity of our MiniWoB++ device against the official ``miniwob`` gymnasium env.

For every task with a scripted oracle plan (`miniwob_harness.oracle.PLANS`), the same
plan runs on our device and on the official env (Selenium + ChromeDriver) over the same seeds;
equal seeds give equal task instances on both (both seed ``Math.random`` the same way), so the
comparison is per seed. Prints one row per task: success rate on each env, how many seeds agree,
mean steps and wall time per episode.

    python benchmarks/miniwob_fidelity.py [--seeds 50] [--tasks click-test,enter-text]
        [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from miniwob_harness.official import EpisodeResult, run_official, run_ours
from miniwob_harness.oracle import PLANS

from devicerl.envs import make
from devicerl.tasks.miniwob import step_budget


def _row(task: str, ours: list[EpisodeResult], official: list[EpisodeResult]) -> dict:
    n = len(ours)
    return {
        "task": task,
        "seeds": n,
        "ours_success": sum(r.success for r in ours) / n,
        "official_success": sum(r.success for r in official) / n,
        "agree": sum(a.success == b.success for a, b in zip(ours, official)) / n,
        "ours_steps": sum(r.steps for r in ours) / n,
        "official_steps": sum(r.steps for r in official) / n,
        "ours_s_per_episode": sum(r.seconds for r in ours) / n,
        "official_s_per_episode": sum(r.seconds for r in official) / n,
        "disagreeing_seeds": [a.seed for a, b in zip(ours, official) if a.success != b.success],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=50, help="seeds per task (0..N-1)")
    p.add_argument("--tasks", default=None, help="comma-separated tasks (default: all planned)")
    p.add_argument("--quick", action="store_true", help="3 tasks x 5 seeds")
    p.add_argument("--json", default=None, help="write the table here")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    tasks = args.tasks.split(",") if args.tasks else sorted(PLANS)
    seeds = list(range(args.seeds))
    if args.quick:
        tasks, seeds = ["click-test-2", "click-dialog", "enter-text"], list(range(5))
    header = (f"{'task':24s} {'ours':>6s} {'official':>8s} {'agree':>6s} "
              f"{'steps':>11s} {'s/episode':>11s}")  # fmt: skip
    print(f"{len(tasks)} tasks x {len(seeds)} seeds\n{header}")
    rows = []
    t0 = time.perf_counter()
    env = make("miniwob")
    try:
        for task in tasks:
            budget = step_budget(task)
            row = _row(task, run_ours(env, task, seeds, budget), run_official(task, seeds, budget))
            rows.append(row)
            print(
                f"{task:24s} {row['ours_success']:6.0%} {row['official_success']:8.0%} "
                f"{row['agree']:6.0%} {row['ours_steps']:5.1f}/{row['official_steps']:<5.1f} "
                f"{row['ours_s_per_episode']:5.2f}/{row['official_s_per_episode']:<5.2f}",
                flush=True,
            )
    finally:
        env.close()
    same = sum(r["ours_success"] == r["official_success"] for r in rows)
    high = sum(r["ours_success"] >= 0.95 for r in rows)
    agree = sum(r["agree"] * r["seeds"] for r in rows) / sum(r["seeds"] for r in rows)
    summary = {
        "tasks": len(rows),
        "seeds": len(seeds),
        "same_success_rate": same,
        "ours_at_least_95": high,
        "per_seed_agreement": agree,
        "seconds": time.perf_counter() - t0,
        "rows": rows,
    }
    print(
        f"{same}/{len(rows)} tasks with the same success rate on both envs; "
        f"{high}/{len(rows)} tasks >= 95% on ours; per-seed agreement {agree:.1%}; "
        f"{summary['seconds']:.0f} s"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
