"""Learning that transfers: RL on the ``train`` tasks of Synapse's 104, measured on the ``unseen``
ones it never trained on (`devicerl.tasks.miniwob_table3`: 70 / 34 by a seeded, stratified split
written once; every development task is in train).

Each learner (the run's setup from its saved start agent: ``agent.path``, fine-tuned with the
``pretrained`` setup's settings; without one, the ``tuned`` setup with the reach heads of
`miniwob_suite.HEADS`) trains online on the train tasks it can reach, then is evaluated greedily
on test instances of the unseen tasks (the run's own end-of-training evaluation) and of the
train tasks (an evaluation of its saved agent). The start agent untrained and the random policy
(uniform over what the agent can express) are evaluated on the same instances. A task the agent
cannot reach counts 0. ``--split validation`` evaluates validation instances instead, for
decisions (nothing counted in the sealed ledger). Interrupted, the same command continues
(finished runs are reused, unfinished ones resume from their last checkpoint).

    python benchmarks/unseen_tasks.py --out runs/unseen --budget 8000 --systems digirl \\
        filtered_bc agent.path=benchmarks/agents/webskills-reach-2026-11-27

The last lines are, per learner, ``RESULT system=S unseen_mean=X train_mean=X start_unseen=X
random_unseen=X env_steps=N seeds=K test_evals=N`` (means over seeds; test_evals: fresh
evaluations of the unseen tasks' test instances so far, from the sealed ledger), then one
``RESULT protocol=unseen digirl=X filteredbc=X ... start=X random=X`` line. Before them, 95 %
intervals resampling the unseen tasks (bootstrap): each learner's mean, its difference from the
start agent, and paired differences between learners. With ``--sampled``, each agent is also
evaluated on the unseen tasks' instances sampling its actions (T=1): a ``RESULT sampled
protocol=unseen ...`` line.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path
from typing import Any

from harness.comparison import (
    GROUP_SYSTEMS,
    START,
    evaluate_agent,
    run_arguments,
    run_config,
    run_one,
    task_rates,
)
from harness.report import bootstrap_interval, t_interval
from harness.sealed import record_test_evaluation, test_evaluations
from miniwob_suite import HEADS, _agent_kinds, coverage

from devicerl.runtime.runs.provenance import provenance
from devicerl.tasks import resolve
from devicerl.tasks.miniwob_table3 import PACKAGE_NAMES

LEARNERS = ("digirl", "filtered_bc", *GROUP_SYSTEMS)
#: The random baseline: uniform over what the agent can express.
RANDOM = "random"


def _reachable(cfg: Any, split: str) -> tuple[list[str], dict[str, str]]:
    """(tasks of ``split`` the agent can reach, the others with the reason)."""
    names = [t.name for t in resolve(split)]
    table3 = {v: k for k, v in PACKAGE_NAMES.items()}  # package name -> Table 3 name
    short = [table3.get(n.split("/", 1)[1], n.split("/", 1)[1]) for n in names]
    ours = [t.name for t in resolve("miniwob")]
    why = coverage(short, _agent_kinds(cfg), ours)
    return [n for n, s in zip(names, short) if not why.get(s)], {s: w for s, w in why.items() if w}


def _mean_over(split: str, per_task: dict[str, float]) -> float:
    """Mean success over every task of ``split`` (unreached tasks count 0)."""
    names = [t.name for t in resolve(split)]
    return sum(per_task.get(n, 0.0) for n in names) / len(names)


def _per_task(split: str, rows: list[dict[str, Any]]) -> list[float]:
    """Success per task of ``split`` (its order), the mean over `rows` (one per seed)."""
    key = "per_task_unseen" if split == "miniwob-unseen" else "per_task_train"
    names = [t.name for t in resolve(split)]
    return [statistics.mean(r[key].get(n, 0.0) for r in rows) for n in names]


def paired_difference(a: list[float], b: list[float]) -> str:
    """Mean of ``a - b`` (per task) with its 95 % bootstrap interval over the tasks."""
    diff = [x - y for x, y in zip(a, b)]
    lo, hi = bootstrap_interval(diff)
    return f"{statistics.mean(diff):+.3f} [{lo:+.3f}, {hi:+.3f}]"


#: Learner pairs whose paired difference on the unseen tasks is reported (when both ran).
PAIRS = (("gigpo", "grpo"), ("gigpo", "digirl"), ("grpo", "digirl"), ("filtered_bc", "digirl"))


def _intervals(rows: dict[str, dict[str, Any]], systems: list[str], start: str) -> list[str]:
    """Per learner: its unseen mean with a 95 % interval over the unseen tasks (bootstrap;
    per task, the mean over seeds), the seeds' own means (and their Student-t interval from 3
    seeds on), and its difference from the start agent on the same tasks with a paired interval;
    then the paired differences of `PAIRS`."""
    rates = {
        s: _per_task("miniwob-unseen", [r for r in rows.values() if r["system"] == s])
        for s in systems
    }
    rates["start"] = _per_task("miniwob-unseen", [rows[start]])

    lines = []
    for system in systems:
        lo, hi = bootstrap_interval(rates[system])
        per_seed = [r["unseen"] for r in rows.values() if r["system"] == system]
        seeds = ", ".join(f"{v:.3f}" for v in per_seed)
        if len(per_seed) >= 3:  # with 2 seeds the t factor is 12.7: the values say more
            s_lo, s_hi = t_interval(per_seed)
            seeds += f"; over seeds [{s_lo:.3f}, {s_hi:.3f}]"
        lines.append(
            f"{system}: unseen {statistics.mean(rates[system]):.3f} [{lo:.3f}, {hi:.3f}] "
            f"(seeds: {seeds}); minus start {paired_difference(rates[system], rates['start'])}"
        )
    lines += [
        f"{a} minus {b}: {paired_difference(rates[a], rates[b])}"
        for a, b in PAIRS
        if a in rates and b in rates
    ]
    return lines


def arguments() -> argparse.ArgumentParser:
    """The benchmark's command line."""
    doc = __doc__.split("\n\n")[0]
    ap = run_arguments(doc, "runs/unseen-tasks", 8000, 10, "training env steps per learner")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument(
        "--systems",
        nargs="*",
        default=["digirl", "filtered_bc"],
        choices=LEARNERS,
        help="the learners (none: only the start agent and the random policy are evaluated)",
    )
    ap.add_argument(
        "--split",
        default="test",
        choices=["test", "validation"],
        help="the instances evaluated (validation: for decisions; only test is sealed)",
    )
    ap.add_argument(
        "--sampled",
        action="store_true",
        help="also evaluate each agent on the unseen tasks sampling its actions (T=1)",
    )
    return ap


def setup_name(args: argparse.Namespace) -> str:
    """The shipped setup the runs use: ``pretrained`` from a saved start agent, else ``tuned``."""
    return "pretrained" if any(o.startswith("agent.path=") for o in args.overrides) else "tuned"


def system_config(
    args: argparse.Namespace, system: str, seed: int, train: list[str], evaluate: str, n: int
) -> Any:
    """One system's run config: trained on `train`, evaluated on ``--split`` instances of the
    first `n` tasks of `evaluate`."""
    setup = setup_name(args)
    extra = [*(HEADS if setup == "tuned" else ()), *args.overrides]
    # the random policy is uniform over the heads of the agent it stands beside
    heads = HEADS if system == RANDOM and setup == "pretrained" else ()
    return run_config(
        system,
        seed,
        setup=setup,
        suite=",".join(train),
        split=args.split,
        budget=args.budget,
        eval_episodes=args.eval_episodes,
        extra=[*extra, *heads, f"tasks.eval={evaluate}", f"eval.n_tasks={n}"],
    )


def main() -> int:
    args = arguments().parse_args()
    out = Path(args.out)
    setup = setup_name(args)

    probe = system_config(args, START, 0, ["miniwob/click-test"], "miniwob-unseen", 34)
    train, out_of_reach = _reachable(probe, "miniwob-train")
    unseen_reach, _ = _reachable(probe, "miniwob-unseen")
    print(
        f"== {len(train)} of 70 train tasks and {len(unseen_reach)} of 34 unseen tasks in "
        f"reach; out of reach (count 0): {', '.join(sorted(out_of_reach)) or 'none'}",
        flush=True,
    )
    rows: dict[str, dict[str, Any]] = {}
    fresh = False
    for system in [RANDOM, START, *args.systems]:
        for seed in args.seeds if system in LEARNERS else args.seeds[:1]:
            cfg = system_config(args, system, seed, train, "miniwob-unseen", 34)
            folder = out / f"{system}-s{seed}"
            sampled_file = folder / "eval-sampled" / "eval.json"
            before = sampled_file.stat().st_mtime_ns if sampled_file.exists() else None
            result = run_one(
                system, seed, out, cfg, not args.fresh, args.allow_commit_change,
                sampled=args.sampled, resume=True,
            )  # fmt: skip
            ran = sampled_file.exists() and sampled_file.stat().st_mtime_ns != before
            fresh = fresh or not result.reused or ran  # test instances evaluated afresh
            on_train = system_config(args, system, seed, train, "miniwob-train", 70)
            if system in LEARNERS:
                agent: Path | None = folder / "agent"
            else:  # the start agent as saved, or the random policy its config builds
                agent = Path(cfg.agent.path) if system == START and cfg.agent.path else None
            done = evaluate_agent(
                on_train, agent, folder / "eval-train", greedy=True, reuse=not args.fresh,
                allow=args.allow_commit_change,
            )  # fmt: skip
            per_train = task_rates(done["per_task"])
            rows[f"{system}-s{seed}"] = {
                "system": system,
                "seed": seed,
                "unseen": _mean_over("miniwob-unseen", result.per_task),
                "unseen_sampled": _mean_over("miniwob-unseen", result.per_task_sampled)
                if args.sampled
                else None,
                "train": _mean_over("miniwob-train", per_train),
                "env_steps": result.env_steps,
                "per_task_unseen": result.per_task,
                "per_task_train": per_train,
                "provenance": result.provenance,
            }
            r = rows[f"{system}-s{seed}"]
            print(
                f"== {system} seed {seed}: unseen {r['unseen']:.3f}, train {r['train']:.3f}, "
                f"{r['env_steps']} env steps",
                flush=True,
            )
    # the unseen tasks' test instances are sealed: count each fresh evaluation of them
    command = "python " + shlex.join(sys.argv)
    name = "miniwob-unseen"
    if args.split == "test":
        evals = record_test_evaluation(name, setup, command, provenance()) if fresh else None
        evals = f"{evals or test_evaluations(name, setup)}"
    else:
        evals = "none split=validation"
    start_unseen = rows[f"{START}-s{args.seeds[0]}"]["unseen"]
    random_unseen = rows[f"{RANDOM}-s{args.seeds[0]}"]["unseen"]
    lines = []
    for system in args.systems:
        mine = [r for r in rows.values() if r["system"] == system]
        unseen = statistics.mean(r["unseen"] for r in mine)
        train_mean = statistics.mean(r["train"] for r in mine)
        lines.append(
            f"RESULT system={system} unseen_mean={unseen:.3f} train_mean={train_mean:.3f} "
            f"start_unseen={start_unseen:.3f} random_unseen={random_unseen:.3f} "
            f"env_steps={mine[0]['env_steps']} seeds={len(mine)} test_evals={evals}"
        )
    if args.sampled:
        sampled = {
            s: statistics.mean(r["unseen_sampled"] for r in rows.values() if r["system"] == s)
            for s in [*args.systems, START]
        }
        lines.append(
            "RESULT sampled protocol=unseen "
            + " ".join(f"{s.replace('_', '')}={m:.3f}" for s, m in sampled.items())
            + f" test_evals={evals}"
        )
    means = {
        s: statistics.mean(r["unseen"] for r in rows.values() if r["system"] == s)
        for s in args.systems
    }
    lines.append(
        "RESULT protocol=unseen "
        + " ".join(f"{s.replace('_', '')}={m:.3f}" for s, m in means.items())
        + f" start={start_unseen:.3f} random={random_unseen:.3f} test_evals={evals}"
    )
    spread = _intervals(rows, args.systems, f"{START}-s{args.seeds[0]}")
    report = {
        "command": ["python", "benchmarks/unseen_tasks.py", *sys.argv[1:]],
        "intervals": spread,
        "setup": setup,
        "out_of_reach": out_of_reach,
        "rows": rows,
        "result": lines,
        "provenance": provenance(),
    }
    (out / "unseen.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    table = ["| system | seed | unseen | train | env steps |", "|---|---|---|---|---|"]
    table += [
        f"| {r['system']} | {r['seed']} | {r['unseen']:.3f} | {r['train']:.3f} | {r['env_steps']} |"
        for r in rows.values()
    ]
    text = "\n".join(
        [*table, "", "95 % intervals over the unseen tasks (bootstrap):", *spread, *lines]
    )
    (out / "unseen.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
