"""Learning benchmark: random baselines vs Filtered BC vs DigiRL on MiniWoB++, `paper` and
`tuned` setups side by side, on test instances.

The small CPU agent, no demonstrations, the same env budget for each learner (online from
scratch), each setup the shipped ``miniwob-<algo>-<setup>`` (``devicerl/configs/``); every
system is then evaluated on the same test instances (a seed range disjoint from training and
validation), greedily and sampling (T=1). Per setup, ``--out/<suite>/<setup>/`` gets
``comparison.json``, ``learning.png`` and ``report.md``. Printed: per setup a table with 95 %
t-intervals across training seeds and per-task success, then the last two lines

    RESULT digirl=X filteredbc=X random=X env_steps=N setup=paper suite=dev split=test
    RESULT digirl=X filteredbc=X random=X env_steps=N setup=tuned suite=dev split=test

(greedy success, mean over seeds). Interrupted, it resumes: finished runs of the same config
and code (git commit + uncommitted diff) are reused, and the run it was in continues from its
last checkpoint (every 5 iterations; SIGINT / SIGTERM write one before it stops);
``--allow-commit-change`` also reuses runs of other commits (each run's commit is in the
report).

    python benchmarks/learning.py --seeds 0 1 2 --budget 8000 --out runs/learning
    python benchmarks/learning.py --suite dev16 --out runs/learning
    python benchmarks/learning.py --setups tuned --systems digirl digirl_no_step_filter \\
        digirl_no_curriculum filtered_bc --suite dev16   # the ablations
    python benchmarks/learning.py --quick          # one seed, 1500 steps: a few minutes
    python benchmarks/learning.py ... --save       # also write benchmarks/results/learning-*
    python benchmarks/learning.py --synthetic      # synthetic devices (under a minute)
    python benchmarks/learning.py --suite dev16 --setups pretrained --pretrained AGENT

The ``pretrained`` setup starts both learners from the web-skills pre-trained agent
(docs/pretraining.md; ``--pretrained`` names its folder, else the setup file's ``agent.path``)
and, with the default systems, adds the ``start`` row: that agent evaluated untrained, so the
table shows what RL added (``--systems ... start`` asks for it explicitly).
"""

from __future__ import annotations

import datetime
import json
import shlex
import shutil
import sys
from pathlib import Path

from harness.comparison import (
    ABLATIONS,
    ALL_SYSTEMS,
    SETUPS,
    START,
    SUITES,
    SYSTEMS,
    RunStopped,
    compare,
    run_arguments,
)
from harness.report import diagnostics_table, table, task_table

from devicerl.runtime.runs.provenance import provenance

RESULTS = Path(__file__).resolve().parent / "results"

SYNTHETIC = [  # the setup of tests/test_training.py: 4 boxes, tap the named one
    "env.name=synthetic",
    "env.num_envs=4",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=16",
    "eval.n_tasks=1",
    "actor.lr=3e-3",
    "critic.lr=3e-3",
    "actor.updates=8",
    "actor.batch_size=32",
]


def main() -> None:
    doc = __doc__.split("\n\n")[0]
    ap = run_arguments(doc, "runs/learning-benchmark", 8000, 25, "env steps per learner")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=ALL_SYSTEMS)
    ap.add_argument("--setups", nargs="+", default=["paper", "tuned"], choices=SETUPS)
    ap.add_argument("--suite", default="dev", choices=list(SUITES))
    ap.add_argument("--split", default="test", choices=["test", "validation"])
    ap.add_argument(
        "--pretrained",
        metavar="AGENT",
        help="the saved small agent the pretrained setup starts from (default: its file's)",
    )
    ap.add_argument("--quick", action="store_true", help="one seed, 1500 env steps")
    ap.add_argument("--synthetic", action="store_true", help="synthetic devices, 1200 steps")
    ap.add_argument(
        "--save", action="store_true", help="write benchmarks/results/{learning,ablation}-*"
    )
    args = ap.parse_args()
    if args.pretrained and "pretrained" not in args.setups:
        ap.error("--pretrained names the agent of the pretrained setup: add --setups pretrained")
    if args.quick:
        args.seeds, args.budget, args.eval_episodes = [0], 1500, 10
    if args.synthetic:  # one setup: the synthetic overrides replace the setup files
        args.seeds, args.budget, args.eval_episodes = [0], 1200, 100
        args.setups = ["tuned"]
    text: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        text.append(line)

    lines, reports = [], {}
    args.name = "synthetic" if args.synthetic else args.suite
    for setup in args.setups:
        out = f"{args.out}/{args.name}/{setup}"
        systems, extra = list(args.systems), list(args.overrides)
        if setup == "pretrained":
            if systems == list(SYSTEMS):  # the agent both learners start from, untrained, too
                systems.append(START)
            if args.pretrained:
                extra.insert(0, f"agent.path={Path(args.pretrained).resolve()}")
        reports[setup] = report = compare(
            out,
            setup=setup,
            suite=None if args.synthetic else args.suite,
            family=None if args.synthetic else "miniwob",
            systems=systems,
            seeds=args.seeds,
            budget=args.budget,
            eval_episodes=args.eval_episodes,
            split=args.split,
            extra=[*SYNTHETIC, *extra] if args.synthetic else extra,
            reuse=not args.fresh,
            allow_commit_change=args.allow_commit_change,
        )
        say(f"## setup {setup}, suite {args.suite}, {args.split} instances")
        say(table(report["summary"]))
        say(task_table(report["summary"]))
        if diag := diagnostics_table(report["summary"]):
            say(diag)
        say(f"report: {out}/report.md, plot: {out}/learning.png")
        say(report["result_sampled"])  # the same policies, sampling their actions
        lines.append(report["result"])
    for line in lines:
        say(line)
    if args.save:
        save(args, reports, text)


def save(args, reports: dict[str, dict], text: list[str]) -> None:
    """``benchmarks/results/learning[-<suite>]-DATE.{json,txt}`` (``ablation[-<suite>]-DATE``
    when an ablation is among the systems) and a plot per setup; the command and the code that
    produced them head both files."""
    suite = "" if args.name == "dev" else f"-{args.name}"
    kind = "ablation" if set(args.systems) & set(ABLATIONS) else "learning"
    stem = f"{kind}{suite}-{datetime.date.today().isoformat()}"
    command = "python benchmarks/learning.py " + shlex.join(sys.argv[1:])
    code = provenance()
    record = {"command": command, "provenance": code, "suite": args.name, "setups": reports}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    head = f"# {command}\n# commit {code['git_commit']}, dirty={code['git_dirty']}\n"
    (RESULTS / f"{stem}.txt").write_text(head + "\n".join(text) + "\n", encoding="utf-8")
    for setup in reports:
        plot = Path(args.out) / args.name / setup / "learning.png"
        if plot.exists():
            shutil.copy(plot, RESULTS / f"{stem}-{setup}.png")
    print(f"saved {RESULTS}/{stem}.{{json,txt}} and {stem}-<setup>.png")


if __name__ == "__main__":
    try:
        main()
    except RunStopped as e:  # the same command continues it
        sys.exit(f"stopped: {e}")
