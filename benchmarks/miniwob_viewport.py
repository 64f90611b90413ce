"""Why MiniWoB++ pages get a task-area viewport: cost per step, and layouts that stay the same.

1. Chromium CPU time per screenshot step (click + elements + CDP JPEG) with the page viewport
   equal to the 160x210 task area vs the official env's window (inner size 780x437).
2. For every MiniWoB++ task (FlightWoB excepted) and a few seeds, the elements seen with the
   task-area viewport vs with the 780x437 window: tasks whose layouts differ are printed (those
   in `devicerl.tasks.miniwob.WINDOW_TASKS` get the window size anyway).

    python benchmarks/miniwob_viewport.py [--seeds 3] [--steps 200] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from fnmatch import fnmatchcase
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from devicerl.actions import Action
from devicerl.envs import make
from devicerl.tasks import resolve
from devicerl.tasks.miniwob import TASK_VIEWPORT, WINDOW_TASKS, WINDOW_VIEWPORT


def _cpu(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def cpu_per_step(viewport: tuple[int, int], steps: int) -> float:
    """Chromium CPU milliseconds per screenshot step on click-test-2."""
    env = make("miniwob/click-test-2", viewport=viewport, share_browser=False, max_steps=10**9)
    try:
        env.reset(seed=0)
        pids = env.process_ids()[:-1]  # the private Chromium's tree, not the shared driver
        c0 = _cpu(pids)
        for i in range(steps):
            if env.step(Action.tap(0.9, 0.3 + 0.6 * (i % 7) / 7)).done:
                env.reset(seed=i)
        return 1000 * (_cpu(pids) - c0) / steps
    finally:
        env.close()


def layout_differences(seeds: int, limit: int | None) -> dict[str, list[int]]:
    """Tasks (and seeds) whose elements differ between the two viewports."""
    small = make("miniwob", viewport=TASK_VIEWPORT, screenshot=False)
    big = make("miniwob", viewport=WINDOW_VIEWPORT, screenshot=False)
    tasks = [t for t in resolve("miniwob") if not t.short_name.startswith("flight.")][:limit]
    out: dict[str, list[int]] = {}
    try:
        for task in tasks:
            for seed in range(seeds):
                views = []
                for env in (small, big):
                    obs = env.reset(task, seed)
                    views.append([(e.role, e.text, tuple(round(v) for v in e.bbox))
                                  for e in obs.elements])  # fmt: skip
                if views[0] != views[1]:
                    out.setdefault(task.short_name, []).append(seed)
    finally:
        small.close()
        big.close()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--quick", action="store_true", help="50 steps, 20 tasks x 1 seed")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    steps, seeds, limit = (50, 1, 20) if args.quick else (args.steps, args.seeds, None)
    t0 = time.perf_counter()
    small, big = cpu_per_step(TASK_VIEWPORT, steps), cpu_per_step(WINDOW_VIEWPORT, steps)
    print(f"Chromium CPU per screenshot step: {small:.1f} ms at {TASK_VIEWPORT}, "
          f"{big:.1f} ms at {WINDOW_VIEWPORT} ({big / small:.1f}x)")  # fmt: skip
    diffs = layout_differences(seeds, limit)
    window = {t: s for t, s in diffs.items() if any(fnmatchcase(t, p) for p in WINDOW_TASKS)}
    other = {t: s for t, s in diffs.items() if t not in window}
    print(f"layouts differ (given the window size anyway): {window or 'none'}")
    print(f"layouts differ (task-area viewport kept): {other or 'none'}")
    print(f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cpu_ms_per_step": {"task_area": small, "window": big},
            "differ_window_tasks": window, "differ_other": other}, indent=2))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
