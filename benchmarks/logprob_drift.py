"""How far a run moved its policy on the actions it acted: every stored step of a run folder is
scored under a saved start agent and under the run's final agent (``RUN/agent``), and the steps
with the largest ``d = log pi_start - log pi_final`` are listed. A group learner's KL term (k3:
exp(d) - d - 1) is about e^d on such a step.

    python benchmarks/logprob_drift.py RUN --start benchmarks/agents/webskills-reach-2026-11-27

Small agents only (the ones that score any stored action).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from devicerl.agents.small import SmallAgent
from devicerl.algos.regression import observations_of
from devicerl.algos.selection import Sample
from devicerl.data.store import TrajectoryStore


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="a run folder with agent/ and trajectories/")
    ap.add_argument("--start", type=Path, required=True, help="the saved agent it started from")
    ap.add_argument("--top", type=int, default=12, help="steps listed")
    args = ap.parse_args()
    torch.set_num_threads(1)
    start = SmallAgent.from_pretrained(args.start)
    final = SmallAgent.from_pretrained(args.run / "agent")
    rows = []
    for t in TrajectoryStore(args.run / "trajectories").read_all():
        obs = observations_of(final, [Sample(t, i) for i in range(t.length)])
        actions = [s.action for s in t.steps]
        with torch.no_grad():
            ref = start.log_prob(obs, actions).tolist()
            now = final.log_prob(obs, actions).tolist()
        rows += [(r - n, r, n, t.task, s.action.describe()) for r, n, s in zip(ref, now, t.steps)]
    print(f"{args.run}: {len(rows)} steps")
    for limit in (5, 10, 20, 40):
        print(f"  d > {limit}: {sum(r[0] > limit for r in rows)}")
    for d, ref, now, task, action in sorted(rows, reverse=True)[: args.top]:
        print(f"  d={d:.1f} start={ref:.1f} final={now:.1f} {task} {action[:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
