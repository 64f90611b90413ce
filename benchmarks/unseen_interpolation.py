"""Weight interpolation between the start agent and the agents RL trained from it, measured on
the unseen-tasks protocol (`unseen_tasks`): does keeping part of the start's weights keep its
skills on the unseen tasks while keeping RL's gains on the train tasks?

For each finished learner run of an ``unseen_tasks.py`` output folder (the same arguments), and
each ``alpha`` of ``--alphas``, the agent with weights ``(1 - alpha) * start + alpha * trained``
(`devicerl.agents.interpolation`, as ``devicerl interpolate`` makes it) is saved in
the run folder's ``interp-<alpha>/agent`` and evaluated greedily on the ``--split`` instances of
the unseen and the train tasks, as the learner itself was. alpha = 1 is the trained agent (its
differences are then taken on the same instances; without it, from the run's own evaluation),
0 the start. Finished evaluations are reused, so an interrupted command continues.

    python benchmarks/unseen_interpolation.py --out runs/unseen --split validation \\
        --budget 4000 --eval-episodes 3 --seeds 0 1 --systems digirl --alphas 0.25 0.5 0.75 \\
        -- agent.path=benchmarks/agents/webskills-reach-2026-11-27

The last lines are, per alpha, ``RESULT alpha=A unseen_mean=X train_mean=X start_unseen=X
start_train=X trained_unseen=X seeds=K`` and 95 % intervals over the unseen tasks (bootstrap)
of its paired differences from the start and from the trained agent. Test instances are sealed:
a fresh evaluation of them is counted in the ledger under the setup
``<setup>+interpolate-<alpha>`` (alpha 1: under ``<setup>``, the same agents).
"""

from __future__ import annotations

import json
import shlex
import statistics
import sys
from pathlib import Path

from harness.comparison import START, evaluate_agent, task_rates
from harness.sealed import record_test_evaluation, test_evaluations
from unseen_tasks import (
    _mean_over,
    _reachable,
    arguments,
    paired_difference,
    setup_name,
    system_config,
)

from devicerl.agents.interpolation import interpolate_agents
from devicerl.runtime.runs.provenance import provenance
from devicerl.tasks import resolve


def main() -> int:
    ap = arguments()
    ap.description = __doc__.split("\n\n")[0]
    ap.add_argument("--alphas", type=float, nargs="+", default=[0.5])
    args = ap.parse_args()
    out = Path(args.out)
    setup = setup_name(args)
    probe = system_config(args, START, 0, ["miniwob/click-test"], "miniwob-unseen", 34)
    if not probe.agent.path:
        raise SystemExit("error: interpolation needs a saved start agent (agent.path=...)")
    start = Path(probe.agent.path)
    train, _ = _reachable(probe, "miniwob-train")
    unseen_names = [t.name for t in resolve("miniwob-unseen")]

    def rates(folder: Path) -> dict[str, float]:
        return task_rates(json.loads((folder / "eval.json").read_text("utf-8"))["per_task"])

    start_unseen = rates(out / f"{START}-s{args.seeds[0]}")
    start_train = rates(out / f"{START}-s{args.seeds[0]}" / "eval-train")
    per_alpha: dict[float, list[dict[str, float]]] = {}
    trained_unseen: list[dict[str, float]] = []
    rows = []
    fresh = {}
    for system in args.systems:
        for seed in args.seeds:
            run = out / f"{system}-s{seed}"
            if not (run / "agent").is_dir():
                raise SystemExit(f"error: {run} has no trained agent; run unseen_tasks.py first")
            if 1.0 not in args.alphas:  # the trained agent: the run's own evaluation
                trained_unseen.append(rates(run))
            for alpha in args.alphas:
                home = run / f"interp-{alpha:g}"
                agent = home / "agent"
                if not agent.exists():
                    interpolate_agents(start, run / "agent", alpha, agent)
                result = {}
                for split, n, sub in (
                    ("miniwob-unseen", 34, "eval"),
                    ("miniwob-train", 70, "eval-train"),
                ):
                    cfg = system_config(args, system, seed, train, split, n)
                    before = (home / sub / "eval.json").exists()
                    done = evaluate_agent(
                        cfg, agent, home / sub, greedy=True, allow=args.allow_commit_change
                    )
                    if split == "miniwob-unseen":
                        fresh[alpha] = fresh.get(alpha, False) or not before
                    result[split] = task_rates(done["per_task"])
                per_alpha.setdefault(alpha, []).append(result["miniwob-unseen"])
                row = {
                    "system": system,
                    "seed": seed,
                    "alpha": alpha,
                    "unseen": _mean_over("miniwob-unseen", result["miniwob-unseen"]),
                    "train": _mean_over("miniwob-train", result["miniwob-train"]),
                    "per_task_unseen": result["miniwob-unseen"],
                    "per_task_train": result["miniwob-train"],
                }
                rows.append(row)
                if alpha == 1.0:
                    trained_unseen.append(result["miniwob-unseen"])
                print(
                    f"== {system} seed {seed} alpha {alpha:g}: unseen {row['unseen']:.3f}, "
                    f"train {row['train']:.3f}",
                    flush=True,
                )

    def by_task(runs: list[dict[str, float]]) -> list[float]:
        return [statistics.mean(r.get(n, 0.0) for r in runs) for n in unseen_names]

    command = "python " + shlex.join(sys.argv)
    trained_mean = statistics.mean(_mean_over("miniwob-unseen", r) for r in trained_unseen)
    lines = []
    for alpha, runs in per_alpha.items():
        mine = [r for r in rows if r["alpha"] == alpha]
        if args.split == "test":
            # alpha 1 is the setup's own agent: its evaluations count under the setup's name
            name = setup if alpha == 1.0 else f"{setup}+interpolate-{alpha:g}"
            count = (
                record_test_evaluation("miniwob-unseen", name, command, provenance())
                if fresh[alpha]
                else None
            )
            evals = f"{count or test_evaluations('miniwob-unseen', name)}"
        else:
            evals = "none split=validation"
        mixed = by_task(runs)
        lines.append(
            f"alpha {alpha:g}: minus start {paired_difference(mixed, by_task([start_unseen]))}; "
            f"minus trained {paired_difference(mixed, by_task(trained_unseen))}"
        )
        lines.append(
            f"RESULT alpha={alpha:g} unseen_mean={statistics.mean(r['unseen'] for r in mine):.3f} "
            f"train_mean={statistics.mean(r['train'] for r in mine):.3f} "
            f"start_unseen={_mean_over('miniwob-unseen', start_unseen):.3f} "
            f"start_train={_mean_over('miniwob-train', start_train):.3f} "
            f"trained_unseen={trained_mean:.3f} "
            f"seeds={len(mine) // len(args.systems)} test_evals={evals}"
        )
    table = ["| system | seed | alpha | unseen | train |", "|---|---|---|---|---|"]
    table += [
        f"| {r['system']} | {r['seed']} | {r['alpha']:g} | {r['unseen']:.3f} | {r['train']:.3f} |"
        for r in rows
    ]
    text = "\n".join([*table, "", *lines])
    report = {
        "command": ["python", "benchmarks/unseen_interpolation.py", *sys.argv[1:]],
        "setup": setup,
        "rows": rows,
        "result": lines,
        "provenance": provenance(),
    }
    (out / "interpolation.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    (out / "interpolation.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
