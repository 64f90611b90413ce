"""League benchmark: a DigiRL generalist vs a league's distilled generalist, PBT vs fixed.

MiniWoB++ ``miniwob-dev16``, the small CPU agent trained online from scratch (tuned DigiRL
setup), every system at the same total env budget (every env step of every policy counts):

- ``single``: one generalist on all 16 tasks (the shipped ``miniwob-digirl-tuned``);
- ``league``: specialists per task cluster + a generalist that learns from their kept episodes
  (the shipped ``miniwob-league-dev16``); the number reported is the GENERALIST alone;
- ``pbt``: the generalist with ``league.pbt``, a population of 4 sharing the budget
  (the shipped ``miniwob-league-pbt``); the member PBT ranks best at the end is evaluated;
- ``fixed``: the same generalist with the default hyperparameters, which is exactly
  ``single`` (same config, no population): its runs are reported, not run twice.

``single`` and ``league`` also stop at the marks (``--marks``, fractions of the budget; default
0.6, the issue's "<= 60 % of the env steps" goal): the reported policy is saved
(``RUN/at-<steps>/agent``), evaluated greedily on the test instances of all 16 tasks, and the
run resumes from its checkpoint. At the end every system's policy is evaluated greedily and
sampling its actions (T=1). Intervals are Student-t over training seeds
(`harness.report`); docs/league.md#benchmark says how to read the output.

Resumable: finished phases and evaluations of the same config and code are reused, and a run
killed mid-phase resumes from its last checkpoint (every 5 iterations). Last line:

    RESULT league_generalist=X single=X pbt=X fixed=X env_steps=N

    python benchmarks/league.py --seeds 0 1 --budget 1000 --eval-episodes 4 --save
    python benchmarks/league.py --quick   # a smoke test: one seed, 240 env steps, 1 test per task
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from harness.comparison import (
    evaluate_agent,
    finished,
    run_arguments,
    run_config,
    task_rates,
    train_phases,
)
from harness.report import (
    RunResult,
    diagnostics_table,
    read_curve,
    read_diagnostics,
    summarise,
    t_interval,
    table,
    task_table,
)

from devicerl.config import read_yaml, shipped_configs
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.provenance import provenance
from devicerl.runtime.setup.config import TrainConfig

SYSTEMS = ("single", "league", "pbt")
#: The config file each system starts from (then the suite, budget and seed overrides).
FILES = {
    system: shipped_configs()[name]
    for system, name in (
        ("single", "miniwob-digirl-tuned"),
        ("league", "miniwob-league-dev16"),
        ("pbt", "miniwob-league-pbt"),
    )
}
SUITE = "dev16"
#: The benchmark evaluates the saved policies itself; checkpoints make a killed run resumable.
PLUMBING = ("eval.at_end=false", "checkpoint_every=5")
RESULTS = Path(__file__).resolve().parent / "results"
#: Systems evaluated at the marks too (the "<= 60 % of the env steps" question); PBT only at the
#: end (its question is PBT vs fixed at the same budget), which saves an evaluation per run.
MARKED = ("single", "league")
#: A task counts as solved by a policy at >= 0.8 windowed training success over >= this many
#: episodes (a window of one or two lucky episodes is not "solved").
SOLVED_MIN = 5


# -- configs ---------------------------------------------------------------------------------
def policy_names(system: str) -> list[str]:
    """The league's policies named in the system's config file (none for ``single``)."""
    return list(read_yaml(FILES[system]).get("policies", {}) or {})


def system_config(
    system: str, seed: int, budget: int, eval_episodes: int, extra: Sequence[str] = ()
) -> TrainConfig:
    """The resolved training config of one (system, seed) run."""
    seeds = [f"policies.{p}.agent.seed={seed}" for p in policy_names(system)]
    if system == "pbt":
        seeds.append(f"league.pbt.seed={seed}")
    return run_config(
        "digirl",
        seed,
        setup="tuned",
        suite=SUITE,
        budget=budget,
        eval_episodes=eval_episodes,
        split="test",
        extra=[*PLUMBING, *seeds, *extra],
        path=FILES[system],
    )


def eval_config(cfg: TrainConfig) -> TrainConfig:
    """The evaluation of one saved policy: the run's config as a single-policy config."""
    if getattr(cfg, "policies", None):
        from devicerl.league.config import LeagueConfig

        cfg = replace(cfg, policies={}, league=LeagueConfig())  # type: ignore[call-arg]
    return cfg


# -- the policy a system reports -------------------------------------------------------------
def reported_policy(system: str, folder: Path) -> str | None:
    """The league member a system reports: the generalist, or PBT's best-ranked member
    (windowed success, ties to the original); None for ``single`` (the run's own agent)."""
    if system == "single":
        return None
    from devicerl.league.persist import load_league

    league, pbt = load_league(folder / "league")
    name = league.config.generalist or "generalist"
    if system == "pbt" and pbt is not None:
        scores = pbt.scores()
        name = max(pbt.members, key=lambda m: (scores[m], m == pbt.config.policy))
    return name


def export_policy(system: str, folder: Path, dest: Path) -> str:
    """Save the policy the system reports into `dest` (a saved agent); returns its name."""
    if dest.exists():
        shutil.rmtree(dest)
    name = reported_policy(system, folder)
    if name is None:
        shutil.copytree(folder / "agent", dest)
        return "agent"
    from devicerl.league.persist import load_league

    league, _ = load_league(folder / "league")
    league[name].policy.save(dest)
    (dest / "league_member.json").write_text(json.dumps({"member": name}))
    return name


# -- one run ---------------------------------------------------------------------------------
def run_system(
    system: str,
    seed: int,
    out: Path,
    cfg: TrainConfig,
    marks: Sequence[int],
    reuse: bool = True,
    allow: bool = False,
) -> tuple[RunResult, dict[int, float], dict[str, Any]]:
    """Train one (system, seed) through its marks, evaluating the reported policy at each.
    Returns the run's result (final greedy and sampled), greedy success per mark, and what
    the league looked like at the end (member evaluated, league table)."""
    folder = out / f"{system}-s{seed}"
    ecfg = eval_config(cfg)
    at_marks: dict[int, float] = {}
    evals: dict[str, dict[str, Any]] = {}
    info: dict[str, Any] = {}

    def after(mark: int, current: bool) -> None:
        sub = folder / f"at-{mark}"
        agent = sub / "agent"
        if not (agent / "small_agent.json").exists():
            if not current:
                raise SystemExit(f"{agent} is missing and the run moved on: re-run with --fresh")
            export_policy(system, folder, agent)
        greedy = evaluate_agent(
            ecfg, agent, sub / "eval-greedy", greedy=True, reuse=reuse, allow=allow
        )
        at_marks[mark] = float(greedy["success_rate"])
        print(f"== {system} seed {seed} at {mark} env steps: greedy {at_marks[mark]:.3f}")
        if mark == marks[-1]:
            evals["greedy"] = greedy
            evals["sampled"] = evaluate_agent(
                ecfg, agent, sub / "eval-sampled", greedy=False, reuse=reuse, allow=allow
            )

    summary = train_phases(folder, cfg, marks, after, reuse=reuse, allow=allow)
    member = folder / f"at-{marks[-1]}" / "agent" / "league_member.json"
    info["member"] = json.loads(member.read_text())["member"] if member.exists() else "agent"
    if system != "single" and (folder / "league" / "league.json").exists():
        info.update(league_info(folder))
    greedy, sampled = evals["greedy"], evals["sampled"]
    result = RunResult(
        system=system,
        seed=seed,
        success=float(greedy["success_rate"]),
        episodes=int(greedy["episodes"]),
        env_steps=int(summary["env_steps"]),
        wall_s=float(summary["wall_s"]),
        curve=read_curve(folder / "metrics.jsonl", float(summary["started_at"])),
        success_sampled=float(sampled["success_rate"]),
        per_task=task_rates(greedy["per_task"]),
        per_task_sampled=task_rates(sampled["per_task"]),
        diagnostics=read_diagnostics(folder / "metrics.jsonl"),
        provenance=RunDir(folder).provenance(),
    )
    return result, at_marks, info


def league_info(folder: Path) -> dict[str, Any]:
    """The league at the end of a run: its table, each specialist's windowed training success
    on its own cluster, snapshots and PBT history."""
    from devicerl.league.persist import load_league
    from devicerl.league.table import league_table

    league, pbt = load_league(folder / "league")
    tasks = league.success.tasks()
    clusters = {}
    for name, m in league.members.items():
        mine = [t for t in tasks if m.spec.covers(t)]
        rates = [league.success.rate(name, t) for t in mine]
        rated = [r for r in rates if r is not None]
        clusters[name] = {
            "tasks": m.spec.tasks,
            "snapshot": m.snapshot,
            "recent_success": float(np.mean(rated)) if rated else None,
            "solved": [
                t
                for t, r in zip(mine, rates)
                if r is not None and r >= 0.8 and league.success.count(name, t) >= SOLVED_MIN
            ],
        }
    return {
        "table": league_table(league, tasks),
        "played": played(folder),
        "policies": clusters,
        "history": league.history,
        "pbt_members": list(pbt.members) if pbt is not None else [],
    }


def played(folder: Path) -> dict[str, dict[str, Any]]:
    """Per policy, what it played over the whole run (from the stored episodes): episodes, env
    steps, successes and successes per task (a specialist's successes are what it offered the
    generalist that learns from it)."""
    index = RunDir(folder).store(skip_bad=True).index().to_pylist()
    out: dict[str, dict[str, Any]] = {}
    for row in index:
        p = out.setdefault(
            str(row.get("plan_policy") or "?"),
            {"episodes": 0, "env_steps": 0, "successes": 0, "by_task": {}},
        )
        p["episodes"] += 1
        p["env_steps"] += int(row["num_steps"])
        p["successes"] += int(bool(row["success"]))
        task = p["by_task"].setdefault(row["task"], [0, 0])  # successes, episodes
        task[0] += int(bool(row["success"]))
        task[1] += 1
    return out


def played_table(stats: dict[str, dict[str, Any]]) -> str:
    """What each policy played: its share of the env steps and its successes."""
    total = sum(p["env_steps"] for p in stats.values()) or 1
    lines = [
        "| policy | episodes | env steps (share) | successes | success rate |",
        "|---|---|---|---|---|",
    ]
    for name, p in sorted(stats.items()):
        rate = p["successes"] / p["episodes"] if p["episodes"] else math.nan
        lines.append(
            f"| {name} | {p['episodes']} | {p['env_steps']} ({p['env_steps'] / total:.0%}) "
            f"| {p['successes']} | {rate:.2f} |"
        )
    return "\n".join(lines)


# -- report ----------------------------------------------------------------------------------
def steps_to_reach(
    marks_by_system: dict[str, dict[int, list[float]]], target: float
) -> dict[str, int | None]:
    """Per system, the first mark (env steps) whose mean greedy success over seeds reaches
    `target` (None: not within the budget)."""
    out: dict[str, int | None] = {}
    for system, by_mark in marks_by_system.items():
        reached = [m for m in sorted(by_mark) if np.mean(by_mark[m]) >= target - 1e-9]
        out[system] = reached[0] if reached else None
    return out


def marks_table(marks_by_system: dict[str, dict[int, list[float]]]) -> str:
    """Greedy test success of the reported policy at each mark (mean over seeds, interval)."""
    marks = sorted({m for by in marks_by_system.values() for m in by})
    lines = [
        "| system | " + " | ".join(f"{m} env steps" for m in marks) + " |",
        "|---|" + "---|" * len(marks),
    ]
    for system, by in marks_by_system.items():
        cells = []
        for m in marks:
            vs = by.get(m, [])
            lo, hi = t_interval(vs)
            ci = "" if math.isnan(lo) else f" [{lo:.3f}, {hi:.3f}]"
            cells.append(f"{np.mean(vs):.3f}{ci}" if vs else "-")
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results: Sequence[RunResult], marks_by_system: dict[str, Any], path: Path) -> Path:
    """Left: training rollout success (every policy of the system) against env steps; right:
    the reported policy's greedy test success at each mark (dots: seeds, line: mean)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    colours = {"single": "tab:blue", "league": "tab:red", "pbt": "tab:green"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        if r.curve:
            xs = [p["step"] for p in r.curve]
            raw = [p["success"] for p in r.curve]
            ys = [np.mean(raw[max(0, i - 2) : i + 1]) for i in range(len(raw))]
            left.plot(xs, ys, color=colours.get(r.system), alpha=0.7, label=r.system)
    for system, by in marks_by_system.items():
        ms = sorted(by)
        right.plot(ms, [np.mean(by[m]) for m in ms], "-o", color=colours.get(system), label=system)
        for m in ms:
            right.scatter([m] * len(by[m]), by[m], color=colours.get(system), alpha=0.4, s=12)
    left.set_title("training rollouts (all the system's policies)")
    right.set_title("reported policy, greedy, test instances, 16 tasks")
    for ax in (left, right):
        ax.set_xlabel("env steps (whole system)")
        ax.set_ylabel("success")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def result_line(summary: dict[str, dict[str, Any]], budget: int, key: str = "mean") -> str:
    """``RESULT league_generalist=X single=X pbt=X fixed=X env_steps=N`` (fixed = single)."""

    def value(system: str) -> str:
        return f"{summary[system][key]:.3f}" if system in summary else "nan"

    return (
        f"RESULT league_generalist={value('league')} single={value('single')} "
        f"pbt={value('pbt')} fixed={value('single')} env_steps={budget}"
    )


def done(out: Path, system: str, seed: int, cfg: TrainConfig, args: argparse.Namespace) -> bool:
    """Whether a (system, seed) run trained its whole budget and was evaluated (greedy and
    sampled) by the same code (or any, with ``--allow-commit-change``)."""
    folder = out / f"{system}-s{seed}"
    last = folder / f"at-{args.budget}"
    return finished(folder, replace(cfg, env_steps=args.budget), args.allow_commit_change) and all(
        (last / sub / "summary.json").exists() for sub in ("eval-greedy", "eval-sampled")
    )


def main() -> None:
    doc = __doc__.split("\n\n")[0]
    ap = run_arguments(doc, "runs/league-benchmark", 1000, 4, "env steps per system, in all")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--marks", type=float, nargs="*", default=[0.6], help="fractions of it")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--quick", action="store_true", help="one seed, 240 env steps, 1 test each")
    ap.add_argument("--save", action="store_true", help="write benchmarks/results/league-DATE.*")
    ap.add_argument("--partial", action="store_true", help="name the saved files -partial")
    ap.add_argument(
        "--only-finished",
        action="store_true",
        help="report the finished runs only, run nothing (a partial report; see --partial)",
    )
    args = ap.parse_args()
    args.left_out = []
    if args.quick:
        args.seeds, args.budget, args.eval_episodes = [0], 240, 1
    marks = [*sorted({round(f * args.budget) for f in args.marks if 0 < f < 1}), args.budget]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    configs = {
        (s, seed): system_config(s, seed, args.budget, args.eval_episodes, args.overrides)
        for s in args.systems
        for seed in args.seeds
    }  # bad overrides fail before anything runs
    results: list[RunResult] = []
    by_mark: dict[str, dict[int, list[float]]] = {}
    infos: dict[str, Any] = {}
    for seed in args.seeds:
        for system in args.systems:
            print(f"== {system} seed {seed} (budget {args.budget} env steps, marks {marks})")
            stops = marks if system in MARKED else marks[-1:]
            if args.only_finished and not done(out, system, seed, configs[system, seed], args):
                print(f"== {system} seed {seed}: not finished, left out (--only-finished)")
                args.left_out.append(f"{system}-s{seed}")
                continue
            r, at, info = run_system(
                system, seed, out, configs[system, seed], stops, not args.fresh,
                args.allow_commit_change,
            )  # fmt: skip
            print(
                f"== {system} seed {seed}: {info['member']} greedy {r.success:.3f}, sampled "
                f"{r.success_sampled:.3f} (test) in {r.wall_s:.0f} s",
                flush=True,
            )
            results.append(r)
            infos[f"{system}-s{seed}"] = info
            for m, v in at.items():
                by_mark.setdefault(system, {}).setdefault(m, []).append(v)
    report = write(out, args, results, by_mark, infos, marks)
    print(report["text"])
    if args.save:
        stem = f"league-{datetime.date.today().isoformat()}{'-partial' if args.partial else ''}"
        RESULTS.mkdir(exist_ok=True)
        shutil.copy(out / "league.png", RESULTS / f"{stem}.png")
        shutil.copy(out / "league.json", RESULTS / f"{stem}.json")
        (RESULTS / f"{stem}.txt").write_text(report["text"] + "\n", encoding="utf-8")
        print(f"saved {RESULTS}/{stem}.{{txt,json,png}}")
    print(report["result_sampled"])
    print(report["result"])


def write(
    out: Path,
    args: argparse.Namespace,
    results: list[RunResult],
    by_mark: dict[str, dict[int, list[float]]],
    infos: dict[str, Any],
    marks: list[int],
) -> dict[str, Any]:
    """``league.json``, ``league.png`` and ``report.md`` in `out`; returns the report, with
    its text (what is printed and saved as ``.txt``)."""
    summary = summarise(results)
    single_final = summary["single"]["mean"] if "single" in summary else math.nan
    reach = steps_to_reach(by_mark, single_final) if "single" in summary else {}
    cmd = "python benchmarks/league.py " + " ".join(
        [f"--seeds {' '.join(map(str, args.seeds))}", f"--budget {args.budget}",
         f"--marks {' '.join(map(str, args.marks))}", f"--eval-episodes {args.eval_episodes}",
         f"--systems {' '.join(args.systems)}", *args.overrides]
    )  # fmt: skip
    text = [
        f"# {cmd}",
        f"# MiniWoB++ {SUITE} (16 tasks), test instances, {args.eval_episodes} per task; "
        f"budget {args.budget} env steps per system (all its policies); seeds {args.seeds}; "
        "fixed = single (the same config: a generalist with the default hyperparameters)",
    ]
    if getattr(args, "left_out", None):
        text.append(f"# PARTIAL: not finished, left out: {', '.join(args.left_out)}")
    text += [
        "",
        table(summary),
        "",
        "Per task (greedy / sampled, mean over seeds):",
        "",
        task_table(summary),
        "",
        "Greedy test success of the reported policy at each mark (mean [95 % t-interval]):",
        "",
        marks_table(by_mark),
        "",
    ]
    if reach:
        text.append(
            f"Env steps to reach single's final greedy success ({single_final:.3f}), first mark "
            f"of {marks}: "
            + ", ".join(f"{s} {'not reached' if v is None else v}" for s, v in reach.items())
        )
        if reach.get("league") is not None:
            share = reach["league"] / args.budget
            text.append(f"league generalist: {share:.0%} of the budget (goal <= 60 %)")
        text.append("")
    if diag := diagnostics_table(summary):
        text += ["Critic diagnostics (last quarter of iterations; whole run):", "", diag, ""]
    for run, info in infos.items():
        if "table" in info:
            text += [f"## {run}: evaluated member {info['member']}", "", info["table"], ""]
            text += ["Played over the run (stored episodes, incl. the last unconsumed ones):", ""]
            text += [played_table(info["played"]), ""]
            for name, p in info["policies"].items():
                if not p["snapshot"]:
                    rs = p["recent_success"]
                    text.append(
                        f"- {name} ({p['tasks']}): recent training success "
                        f"{'-' if rs is None else f'{rs:.2f}'}; solved (>= 0.8 over >= "
                        f"{SOLVED_MIN} episodes): "
                        f"{', '.join(t.split('/')[-1] for t in p['solved']) or 'none'}"
                    )
            text.append("")
    report = {
        "benchmark": "league",
        "suite": SUITE,
        "split": "test",
        "budget": args.budget,
        "marks": marks,
        "seeds": args.seeds,
        "eval_episodes": args.eval_episodes,
        "systems": args.systems,
        "fixed": "single (same config, reused)",
        "left_out": list(getattr(args, "left_out", [])),
        "overrides": args.overrides,
        "provenance": provenance(),
        "commits": sorted({str(r.provenance.get("git_commit")) for r in results}),
        "summary": summary,
        "at_marks": {s: {str(m): v for m, v in by.items()} for s, by in by_mark.items()},
        "steps_to_single_final": reach,
        "league": infos,
        "runs": [r.as_dict() for r in results],
        "result": result_line(summary, args.budget),
        "result_sampled": "sampled: " + result_line(summary, args.budget, "mean_sampled")[7:],
    }
    (out / "league.json").write_text(json.dumps(report, indent=1, default=str))
    plot(results, by_mark, out / "league.png")
    report["text"] = "\n".join(text)
    (out / "report.md").write_text(report["text"] + "\n\n![league](league.png)\n")
    return report


if __name__ == "__main__":
    main()
