"""Learning benchmark: random policy vs Filtered BC vs DigiRL on the MiniWoB++ development suite.

The small CPU agent, no demonstrations, the same env budget for each learner (online from
scratch), then a greedy evaluation of every system on the same instances (the 8 dev tasks x
``--eval-episodes`` seeds). Writes ``comparison.json``, ``learning.png`` (success vs env steps
and wall-clock) and ``report.md`` into ``--out``; the last line printed is
``RESULT digirl=X filteredbc=X random=X env_steps=N`` (mean final success over seeds).

    python benchmarks/learning.py --seeds 0 1 2 --budget 8000 --out benchmarks/results/learning
    python benchmarks/learning.py --quick          # one seed, 1500 steps: a few minutes
    python benchmarks/learning.py --synthetic      # synthetic devices (under a minute)
"""

from __future__ import annotations

import argparse

from devicerl.runtime.comparison import MINIWOB_DEV, SYSTEMS, compare, table

SYNTHETIC = [  # the setup of tests/test_training.py: 4 boxes, tap the named one
    "env.name=synthetic",
    "env.num_envs=4",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "eval.greedy=false",
    "logging.tensorboard=false",
    "checkpoint_every=1000000",
    "digirl.actor.lr=3e-3",
    "digirl.critic.lr=3e-3",
    "filtered_bc.actor.lr=3e-3",
    "digirl.actor.updates=8",
    "filtered_bc.actor.updates=8",
    "digirl.actor.batch_size=32",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/learning-benchmark")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--budget", type=int, default=8000, help="env steps per learner")
    ap.add_argument("--eval-episodes", type=int, default=25, help="seeds per task in eval")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--quick", action="store_true", help="one seed, 1500 env steps")
    ap.add_argument("--synthetic", action="store_true", help="synthetic devices, 1200 steps")
    ap.add_argument("--fresh", action="store_true", help="re-run finished runs in --out too")
    ap.add_argument("overrides", nargs="*", help="extra KEY=VALUE config overrides")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.budget, args.eval_episodes = [0], 1500, 10
    if args.synthetic:
        args.seeds, args.budget, args.eval_episodes = [0], 1200, 100
    report = compare(
        args.out,
        systems=args.systems,
        seeds=args.seeds,
        budget=args.budget,
        eval_episodes=args.eval_episodes,
        base=SYNTHETIC if args.synthetic else MINIWOB_DEV,
        extra=args.overrides,
        reuse=not args.fresh,
    )
    print(table(report["summary"]))
    print(f"report: {args.out}/report.md, plot: {args.out}/learning.png")
    print(report["result_sampled"])  # the same policies, sampling their actions
    print(report["result"])


if __name__ == "__main__":
    main()
