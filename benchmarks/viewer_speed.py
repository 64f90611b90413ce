"""`devicerl view` of a large run: today's viewer against the one of an older commit.

Builds a run (``--episodes`` episodes of 1-10 steps with 270x585 screenshots on the synthetic
device, one shard each as a training run writes them, and a metrics.jsonl with learning
curves), then renders it with both viewers, each in its own process (`devicerl view`, imports
included), alternating, once per ``--show`` value (``max_episodes``: the newest N; 0: all),
and prints the wall and CPU times, the peak memory of each process and the ratios. The old
viewer runs from a git worktree of the commit (`--old-commit`). Goals: the newest 200 of 3,000
in under 10 s, all 3,000 in under 30 s, memory bounded.

    python benchmarks/viewer_speed.py [--episodes 3000] [--show 200 0] [--repeats 1] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
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


def view(pythonpath: Path, run: Path, out: Path, show: int) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds (user + system), peak memory in MB) of one `devicerl view`."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    cmd = [sys.executable, "-m", "devicerl", "view", str(run), "--out", str(out)]
    cmd.append(f"max_episodes={show}")
    with tempfile.TemporaryFile("w+") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=pythonpath)
        _, status, usage = os.wait4(proc.pid, 0)  # this process's own usage and peak memory
        took = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"view failed ({pythonpath}): {err.read().strip()[-500:]}")
    return took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=3000)
    ap.add_argument("--show", type=int, nargs="+", default=[200, 0], help="max_episodes values")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--old-commit", default="869a8c1")
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
            t0 = time.perf_counter()
            build_run(run, args.episodes)
            built = time.perf_counter() - t0
            runs: dict[str, dict[str, list[float]]] = {}
            for _ in range(args.repeats):
                for show in args.show:
                    for name, code in (("old", old), ("new", ROOT)):
                        out = tmp_path / f"report-{name}"
                        shutil.rmtree(out, ignore_errors=True)
                        got = runs.setdefault(
                            f"{name}/{show}", {"wall_s": [], "cpu_s": [], "max_rss_mb": []}
                        )
                        for key, value in zip(got, view(code, run, out, show)):
                            got[key].append(round(value, 2))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)])
    from devicerl.runtime.runs.provenance import provenance

    result: dict = {
        "command": " ".join(["python", *sys.argv]),
        "provenance": provenance(),
        "episodes": args.episodes,
        "old_commit": args.old_commit,
        "build_s": round(built, 1),
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": os.getloadavg()[0],
        "runs": runs,
    }
    print(f"devicerl view of {args.episodes} episodes, best of {args.repeats} (imports included)")
    for show in args.show:
        label = f"newest {show}" if show else "all"
        old_best, new_best = (min(runs[f"{n}/{show}"]["wall_s"]) for n in ("old", "new"))
        result[f"speedup_wall/{show}"] = old_best / new_best
        peak = [max(runs[f"{n}/{show}"]["max_rss_mb"]) for n in ("old", "new")]
        print(
            f"  {label:10s} old ({args.old_commit}) {old_best:6.1f} s  new {new_best:6.1f} s  "
            f"x{old_best / new_best:.1f}   peak memory old {peak[0]:.0f} MB new {peak[1]:.0f} MB"
        )
    print(
        f"  (load average {result['load_avg_1m_at_end']:.1f} on {result['cpus']} CPUs: wall "
        "times on a busy machine are noisy)"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
