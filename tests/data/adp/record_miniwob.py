"""Record the small ADP file the offline-training test learns from: a MiniWoB++ run on real
headless Chromium (DOM only, no screenshots) exported with ``devicerl.data.adp``.

Per task, scripted demonstrations (the reach benchmark's solvers, all kept, solved or not) and
episodes of the random agent, on training seeds; written to ``miniwob/trajectories.jsonl`` with
the commit it was recorded at in ``miniwob/commit.txt``. Run from the repository root:

    python tests/data/adp/record_miniwob.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

from reach_solvers import run_episode  # noqa: E402

from devicerl.agents.random import RandomPolicy  # noqa: E402
from devicerl.data.adp.write import export_adp  # noqa: E402
from devicerl.envs import make  # noqa: E402
from devicerl.runtime.acting.rollout import rollout  # noqa: E402
from devicerl.tasks import SEED_RANGES  # noqa: E402

TASKS = ("click-button", "click-link", "focus-text-2", "click-dialog-2")
DEMONSTRATIONS, RANDOM = 8, 6
OUT = Path(__file__).resolve().parent / "miniwob"


def main() -> None:
    if OUT.exists():
        raise SystemExit(f"{OUT} exists: remove it to record again")
    first = SEED_RANGES["train"][0] + 20_000_000
    env = make("browser", screenshot=False, task_pages=1)
    trajectories = []
    try:
        for task in TASKS:
            for i in range(DEMONSTRATIONS):
                _, t = run_episode(env, task, first + i)
                trajectories.append(t)
            for i in range(RANDOM):
                policy = RandomPolicy(seed=i)
                trajectories.append(rollout(env, policy, f"miniwob/{task}", first + 100 + i))
            solved = sum(t.success for t in trajectories[-(DEMONSTRATIONS + RANDOM) :])
            print(f"{task}: {solved}/{DEMONSTRATIONS + RANDOM} solved", flush=True)
    finally:
        env.close()
    stats = export_adp(trajectories, OUT)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.strip()  # fmt: skip
    (OUT / "commit.txt").write_text(
        f"{commit}\npython tests/data/adp/record_miniwob.py\n{stats.trajectories} trajectories, "
        f"{stats.steps} steps\n"
    )
    print(stats)


if __name__ == "__main__":
    main()
