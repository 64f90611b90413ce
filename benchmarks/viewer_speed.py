"""`devicerl view` on a 304-episode run: today's viewer against the one of commit ca447b5.

Builds a run like the probe's (304 episodes of 1-10 steps with 270x585 screenshots on the
synthetic device, a metrics.jsonl with learning curves), then renders it with both viewers, each
in its own process (`devicerl view`, imports included), alternating, and prints the times and
the ratio. The old viewer runs from a git worktree of the commit (`--old-commit`).

    python benchmarks/viewer_speed.py [--episodes 304] [--repeats 2] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build_run(path: Path, episodes: int) -> None:
    """A run folder with ``episodes`` stored episodes and a metrics log (like a real run's)."""
    from devicerl.agents.random import RandomPolicy
    from devicerl.envs import make
    from devicerl.runtime.acting.rollout import rollout
    from devicerl.runtime.runs.folder import RunDir
    from devicerl.tasks import resolve

    run = RunDir(path).create()
    env = make("synthetic/steps")
    tasks = resolve("synthetic/*")
    policy = RandomPolicy(seed=0)
    with run.writer() as w:
        for i in range(episodes):
            w.append(rollout(env, policy, tasks[i % len(tasks)], seed=i))
    env.close()
    with run.metrics_logger() as m:
        for step in range(0, 20_000, 100):
            m.log(
                {"rollout/success_rate": (step % 977) / 977, "train/actor_loss": 1 / (1 + step)},
                step,
            )


def view(pythonpath: Path, run: Path, out: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the process: user + system) of one `devicerl view`."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    cmd = [sys.executable, "-m", "devicerl", "view", str(run), "--out", str(out), "max_episodes=0"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=pythonpath)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise SystemExit(f"view failed ({pythonpath}): {r.stderr.strip()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return took, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=304)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--old-commit", default="ca447b5")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="viewer-speed-") as tmp:
        tmp_path = Path(tmp)
        old = tmp_path / "old"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(old), args.old_commit],
            check=True,
            capture_output=True,
        )
        try:
            run = tmp_path / "run"
            build_run(run, args.episodes)
            times: dict[str, list[float]] = {"old": [], "new": []}
            cpu: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(args.repeats):
                for name, code in (("old", old), ("new", ROOT)):
                    out = tmp_path / f"report-{name}"
                    shutil.rmtree(out, ignore_errors=True)
                    wall, used = view(code, run, out)
                    times[name].append(round(wall, 2))
                    cpu[name].append(round(used, 2))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])
    best = {k: min(v) for k, v in times.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    result = {
        "episodes": args.episodes,
        "old_commit": args.old_commit,
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "old_wall_s": times["old"],
        "new_wall_s": times["new"],
        "old_cpu_s": cpu["old"],
        "new_cpu_s": cpu["new"],
        "speedup_wall_best": best["old"] / best["new"],
        "speedup_cpu_best": best_cpu["old"] / best_cpu["new"],
    }
    print(f"devicerl view, {args.episodes} episodes, best of {args.repeats} (imports included)")
    print(f"  old ({args.old_commit}): wall {best['old']:.2f} s  cpu {best_cpu['old']:.2f} s")
    print(f"  new:             wall {best['new']:.2f} s  cpu {best_cpu['new']:.2f} s")
    print(
        f"  speed-up: wall {result['speedup_wall_best']:.1f}x, cpu "
        f"{result['speedup_cpu_best']:.1f}x (load average {result['load_avg_1m_at_end']:.1f} on "
        f"{result['cpus']} CPUs: wall times on a busy machine are noisy)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
