"""Learning benchmark: random baselines vs Filtered BC vs DigiRL on MiniWoB++, `paper` and
`tuned` setups side by side, on test instances.

The small CPU agent, no demonstrations, the same env budget for each learner (online from
scratch), each setup read from ``configs/miniwob-<algo>-<setup>.yaml``; every system is then
evaluated on the same test instances (a seed range disjoint from training and validation),
greedily and sampling (T=1). Per setup, ``--out/<suite>/<setup>/`` gets ``comparison.json``,
``learning.png`` and ``report.md``. Printed: per setup a table with 95 % t-intervals across
training seeds and per-task success, then the last two lines

    RESULT digirl=X filteredbc=X random=X env_steps=N setup=paper suite=dev split=test
    RESULT digirl=X filteredbc=X random=X env_steps=N setup=tuned suite=dev split=test

(greedy success, mean over seeds). Interrupted, it resumes: finished runs of the same config
and code (git commit + uncommitted diff) are reused; ``--allow-commit-change`` also reuses runs
of other commits (each run's commit is in the report).

    python benchmarks/learning.py --seeds 0 1 2 --budget 8000 --out runs/learning
    python benchmarks/learning.py --suite dev16 --out runs/learning
    python benchmarks/learning.py --setups tuned --systems digirl digirl_no_step_filter \\
        digirl_no_curriculum digirl_no_critics filtered_bc --suite dev16   # the ablations
    python benchmarks/learning.py --quick          # one seed, 1500 steps: a few minutes
    python benchmarks/learning.py --synthetic      # synthetic devices (under a minute)
"""

from __future__ import annotations

from devicerl.runtime.comparison import (
    ALL_SYSTEMS,
    SETUPS,
    SUITES,
    SYSTEMS,
    compare,
    run_arguments,
)
from devicerl.runtime.comparison_report import diagnostics_table, table, task_table

SYNTHETIC = [  # the setup of tests/test_training.py: 4 boxes, tap the named one
    "env.name=synthetic",
    "env.num_envs=4",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "digirl.actor.lr=3e-3",
    "digirl.critic.lr=3e-3",
    "filtered_bc.actor.lr=3e-3",
    "digirl.actor.updates=8",
    "filtered_bc.actor.updates=8",
    "digirl.actor.batch_size=32",
]


def main() -> None:
    doc = __doc__.split("\n\n")[0]
    ap = run_arguments(doc, "runs/learning-benchmark", 8000, 25, "env steps per learner")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=ALL_SYSTEMS)
    ap.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS)
    ap.add_argument("--suite", default="dev", choices=list(SUITES))
    ap.add_argument("--split", default="test", choices=["test", "validation"])
    ap.add_argument("--quick", action="store_true", help="one seed, 1500 env steps")
    ap.add_argument("--synthetic", action="store_true", help="synthetic devices, 1200 steps")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.budget, args.eval_episodes = [0], 1500, 10
    if args.synthetic:  # one setup: the synthetic overrides replace the setup files
        args.seeds, args.budget, args.eval_episodes = [0], 1200, 100
        args.setups = ["tuned"]
    lines = []
    for setup in args.setups:
        out = f"{args.out}/{'synthetic' if args.synthetic else args.suite}/{setup}"
        report = compare(
            out,
            setup=setup,
            suite=None if args.synthetic else args.suite,
            family=None if args.synthetic else "miniwob",
            systems=args.systems,
            seeds=args.seeds,
            budget=args.budget,
            eval_episodes=args.eval_episodes,
            split=args.split,
            extra=[*SYNTHETIC, *args.overrides] if args.synthetic else args.overrides,
            reuse=not args.fresh,
            allow_commit_change=args.allow_commit_change,
        )
        print(f"## setup {setup}, suite {args.suite}, {args.split} instances")
        print(table(report["summary"]))
        print(task_table(report["summary"]))
        if diag := diagnostics_table(report["summary"]):
            print(diag)
        print(f"report: {out}/report.md, plot: {out}/learning.png")
        print(report["result_sampled"])  # the same policies, sampling their actions
        lines.append(report["result"])
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
