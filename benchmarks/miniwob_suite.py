"""Full-suite benchmark: one RL run over the 104 MiniWoB++ tasks of Synapse's Table 3,
beside the published results.

One multi-task training run of the small CPU agent (DigiRL by default, ``--algorithm
filtered_bc`` for Filtered BC; the `tuned` setup: the shipped ``miniwob-digirl-tuned`` or
``miniwob-filteredbc-tuned``, online from scratch, no demonstrations) with the reach
heads of docs/agent-actions.md switched on (`HEADS`: taps at any point and drags, page-text
spans, the character decoder, Enter, screenshot pixel features), over every task of Synapse
(arXiv 2306.07863) App. A Table 3 (`TABLE3_TASKS`; names our ``miniwob`` package spells
differently are mapped by `PACKAGE_NAMES`). Tasks our package lacks or the agent cannot reach
(`devicerl tasks --reach miniwob`) are not trained on, count 0 and are listed with the reason.
The agent is then evaluated greedily on test instances (a seed range disjoint from training's),
``--eval-episodes`` per task, and each task's success is printed beside Human, CC-Net, CC-Net
(BC only), WebN-T5 and the best pre-2022 result ("Others": the best of Shi17 / WGE / QWeb /
DOM-Q-Net ...), read at run time from the published table (``--published``; the data stays
outside the repository). ``--out`` gets ``suite.txt``, ``suite.json`` and ``suite.png``;
the last line printed is

    RESULT suite_mean=X tasks_at_human=N tasks=104 env_steps=N seeds=1 test_evals=N

(unreachable tasks count 0; a task is at human level when its success >= Human's score).
Interrupted (killed, Ctrl-C, SIGTERM), the same command continues the run from its last
checkpoint (`harness.comparison.run_one` with ``resume``); a finished run of the same
config and code is read instead of re-run.

    python benchmarks/miniwob_suite.py --measure 300        # env steps/s on the 104-task mix
    python benchmarks/miniwob_suite.py --out runs/miniwob-suite   # 20,000 env steps, ~85 min
    python benchmarks/miniwob_suite.py --quick              # 5 tasks, tiny budget: minutes
    python benchmarks/miniwob_suite.py --untrained --out runs/suite-pre agent.path=AGENT

``--untrained`` evaluates the agent without training (``start-s<seed>``): with ``agent.path`` a
saved agent as it is, e.g. the web-skills pre-trained one (docs/pretraining.md); its own saved
configuration then says which tasks it can reach. ``agent.path`` without ``--untrained``
starts the training run from that agent, with the ``pretrained`` setup's fine-tuning settings
(the shipped ``miniwob-digirl-pretrained``) instead of ``tuned``'s. ``agent.init_from=AGENT``
does the same but keeps the reach heads: the benchmark's agent starts from that agent's
weights, and the parts it lacks (the heads, the pixel features) start fresh
(`devicerl.agents.small.SmallAgent.load_matching`):

    python benchmarks/miniwob_suite.py --out runs/suite-grown agent.init_from=AGENT
    python benchmarks/miniwob_suite.py --algorithm filtered_bc --out runs/fbc agent.init_from=AGENT
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.comparison import run_arguments

from devicerl.errors import ConfigError
from devicerl.tasks.miniwob_table3 import PACKAGE_NAMES, TABLE3_TASKS

#: The suite's name in the sealed test's ledger (`harness.sealed`).
SEALED = "miniwob-table3"

#: The development tasks (setups, options and the web-skills pages were developed on them).
DEV16 = "miniwob-dev16"

#: The learners a run can train with (comparison system name -> how the report names it).
ALGORITHMS: dict[str, str] = {"digirl": "DigiRL", "filtered_bc": "Filtered BC"}

#: Published columns printed beside ours: the last is the best pre-2022 method per task.
COLUMNS: tuple[str, ...] = ("Human", "CC-Net", "CC-Net(BC)", "WebN-T5", "Others")
BEST_PRE_2022 = "Others"
#: Where the published table is looked for (relative to the repository and its main checkout).
PUBLISHED_RELATIVE = Path("../shared/data/miniwob/published_table3.csv")

#: The agent of this benchmark: the tuned setup plus the reach heads (docs/agent-actions.md),
#: so that every kind of action the suite needs can be expressed. `swipes` stay off (tuned):
#: a drag scrolls.
HEADS: tuple[str, ...] = (
    # points: taps at any point, drags from any point to any point; page_text: type spans of an
    # element's text; free_text: the character decoder with copy (computed text)
    "agent.small.heads=[points,page_text,free_text]",
    "agent.small.inputs=[pixels]",  # per-element and per-cell CNN features
    "env.options.screenshot=true",  # ... which read the screenshot
    "agent.small.allowed_types=[DUAL_POINT,TYPE,PRESS_ENTER]",  # Enter (terminal)
)
#: With ``agent.init_from``: the pretrained setup names a saved agent (``agent.path``), which
#: init_from replaces; the grid cells that the heads add are gated, so that the grown agent
#: first acts as the saved one (docs/agent-actions.md).
GROWN: tuple[str, ...] = ("agent.path=null", "agent.small.cell_attention=gated")
#: --quick: a tap, a pixel, a drag, a computed-text task and one out of reach.
QUICK_TASKS: tuple[str, ...] = (
    "click-test", "click-color", "drag-item", "enter-text-2", "chase-circle",
)  # fmt: skip


def package_task(name: str) -> str:
    """Our task name (``miniwob/...``) of a Table 3 task."""
    if name not in TABLE3_TASKS:
        raise ConfigError(f"{name!r} is not a task of Synapse's Table 3")
    return "miniwob/" + PACKAGE_NAMES.get(name, name)


def default_published(repo: Path | None = None) -> Path:
    """The published table: ``$DEVICERL_MINIWOB_PUBLISHED``, else ``../shared/...`` beside
    this repository or beside its main checkout (for a git worktree)."""
    if env := os.environ.get("DEVICERL_MINIWOB_PUBLISHED"):
        return Path(env)
    repo = repo or Path(__file__).resolve().parents[1]
    roots = [repo]
    try:
        common = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--path-format=absolute", "--git-common-dir"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        if common:
            roots.append(Path(common).parent)
    except (OSError, subprocess.SubprocessError):
        pass
    for root in roots:
        if (root / PUBLISHED_RELATIVE).is_file():
            return (root / PUBLISHED_RELATIVE).resolve()
    return repo / PUBLISHED_RELATIVE  # missing: `read_published` names it


def _score(text: str, where: str) -> float | None:
    text = text.strip()
    if text.lower() in ("n/a", "na", "-", ""):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ConfigError(f"{where}: {text!r} is not a score (a number or n/a)") from None
    if not -1.0 <= value <= 1.0 or math.isnan(value):
        raise ConfigError(f"{where}: {value} is outside [-1, 1]")
    return value


def read_published(path: str | Path) -> dict[str, dict[str, float | None]]:
    """Task -> column -> published score (None: not reported) for every Table 3 task; one-line
    errors name the file, the line and the culprit."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"published table {path} not found (give it with --published PATH)")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        missing = [c for c in ("task", *COLUMNS) if c not in header]
        if missing:
            raise ConfigError(f"{path}: header lacks column(s) {', '.join(missing)}")
        out: dict[str, dict[str, float | None]] = {}
        for row in reader:
            where = f"{path}:{reader.line_num}"
            task = (row["task"] or "").strip()
            if task not in TABLE3_TASKS:
                raise ConfigError(f"{where}: {task!r} is not a task of Synapse's Table 3")
            if task in out:
                raise ConfigError(f"{where}: task {task!r} appears twice")
            out[task] = {c: _score(row[c] or "", f"{where} column {c}") for c in COLUMNS}
    if absent := [t for t in TABLE3_TASKS if t not in out]:
        raise ConfigError(f"{path}: no row for {len(absent)} task(s), e.g. {absent[0]!r}")
    return out


def coverage(tasks: Sequence[str], agent_kinds: Any, ours: Sequence[str]) -> dict[str, str]:
    """Table 3 task -> why it is out of the run ('' when it is trained and evaluated): our
    package lacks it, it is outside the AitW action space, or the agent lacks a kind."""
    from devicerl.tasks.miniwob_reach import NEEDS, reach_rows

    have = set(ours)
    out: dict[str, str] = {}
    for task in tasks:
        name = package_task(task)
        if name not in have or name.split("/", 1)[1] not in NEEDS:
            out[task] = f"{name} is not in our MiniWoB++ package"
            continue
        row = reach_rows([name], agent_kinds)[0]
        if row.outside:
            out[task] = f"outside the AitW action space: {row.outside}"
        elif row.missing:
            out[task] = "the agent lacks " + ", ".join(k.value for k in row.missing)
        else:
            out[task] = ""
    return out


def training_counts(trajectories: Path) -> dict[str, tuple[int, int]]:
    """Package task -> (successes, episodes) of a run's training episodes (its store; truncated
    ones left out): a task the run never solved in training has nothing to imitate."""
    from devicerl.data.store import TrajectoryStore
    from devicerl.records import EndReason

    if not trajectories.is_dir():
        return {}
    index = TrajectoryStore(trajectories).index().to_pydict()
    counts: dict[str, tuple[int, int]] = {}
    for task, end, success in zip(index["task"], index["end_reason"], index["success"]):
        if end != EndReason.TRUNCATED.value:
            s, n = counts.get(task, (0, 0))
            counts[task] = (s + bool(success), n + 1)
    return counts


def suite_rows(
    tasks: Sequence[str],
    per_task: Mapping[str, float],
    episodes: Mapping[str, int],
    published: Mapping[str, Mapping[str, float | None]],
    excluded: Mapping[str, str],
    trained: Mapping[str, tuple[int, int]] | None = None,
) -> list[dict[str, Any]]:
    """One row per Table 3 task: our success (0 when excluded), the published columns and
    (with ``trained``, `training_counts`) the run's training successes and episodes."""
    rows = []
    for task in tasks:
        name = package_task(task)
        reason = excluded.get(task, "")
        if not reason and name not in per_task:
            reason = "not evaluated (the run's evaluation has no episode of it)"
        rows.append(
            {
                "task": task,
                "package_task": name,
                "ours": 0.0 if reason else float(per_task[name]),
                "episodes": 0 if reason else int(episodes.get(name, 0)),
                "excluded": reason,
                **{c: published[task][c] for c in COLUMNS},
                "train": None if trained is None else list(trained.get(name, (0, 0))),
            }
        )
    return rows


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Our suite mean (excluded tasks count 0), tasks at human level, and each published
    column's mean over all tasks (not reported = 0) and over the tasks it reports."""
    n = len(rows)
    human = [r for r in rows if r["Human"] is not None]
    from devicerl.tasks import splits

    dev = set(splits()[DEV16])
    others = [r["ours"] for r in rows if r["package_task"] not in dev]
    out: dict[str, Any] = {
        "tasks": n,
        "suite_mean": sum(r["ours"] for r in rows) / n if n else 0.0,
        # the tasks no setup or pre-training page was developed on (docs/pretraining.md)
        "mean_outside_dev16": sum(others) / len(others) if others else None,
        "tasks_outside_dev16": len(others),
        "tasks_at_human": sum(r["ours"] >= r["Human"] for r in human),
        "excluded": sum(bool(r["excluded"]) for r in rows),
        "columns": {},
    }
    for c in COLUMNS:
        vals = [r[c] for r in rows if r[c] is not None]
        out["columns"][c] = {
            "mean_all": sum(vals) / n if n else 0.0,
            "mean_reported": sum(vals) / len(vals) if vals else None,
            "reported": len(vals),
        }
    return out


def _cell(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.2f}"


def _mean_cell(col: Mapping[str, Any], tasks: int) -> str:
    if not col["reported"]:
        return "n/a"
    cell = f"{col['mean_all']:.3f}"
    if col["reported"] < tasks:  # and the mean over the tasks it reports
        cell += f" ({col['mean_reported']:.3f} over {col['reported']})"
    return cell


def format_table(rows: Sequence[Mapping[str, Any]], summary: Mapping[str, Any]) -> str:
    """The per-task table (markdown), its mean row and the excluded tasks with the reason."""
    trained = any(r.get("train") is not None for r in rows)
    head = ["task", "ours", "n", *COLUMNS[:-1], "best pre-2022", *(["train"] if trained else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        mark = " *" if r["excluded"] else ""
        ours = f"{r['ours']:.2f}{mark}"
        name = r["task"] + (f" ({r['package_task']})" if PACKAGE_NAMES.get(r["task"]) else "")
        cells = [name, ours, str(r["episodes"]), *(_cell(r[c]) for c in COLUMNS)]
        if trained:
            cells.append("{}/{}".format(*r["train"]) if r.get("train") else "")
        lines.append("| " + " | ".join(cells) + " |")
    cols = summary["columns"]
    mean_cells = [
        "**mean**",
        f"**{summary['suite_mean']:.3f}**",
        "",
        *(_mean_cell(cols[c], summary["tasks"]) for c in COLUMNS),
        *([""] if trained else []),
    ]
    lines.append("| " + " | ".join(mean_cells) + " |")
    lines.append("")
    lines.append(
        "ours: greedy success on test instances; * = not trained or evaluated, counts 0. "
        + ("train: the run's successes / episodes in training. " if trained else "")
        + "Published: Human and CC-Net mean scores, the others success rates; a mean in "
        "brackets is over the tasks that method reports (n/a counts 0 outside them)."
    )
    if summary.get("mean_outside_dev16") is not None:
        lines.append(
            f"mean over the {summary['tasks_outside_dev16']} tasks outside miniwob-dev16 (the "
            f"development split): {summary['mean_outside_dev16']:.3f}"
        )
    excluded = [r for r in rows if r["excluded"]]
    if excluded:
        lines.append(f"excluded ({len(excluded)}, counted 0):")
        lines += [f"  {r['task']}: {r['excluded']}" for r in excluded]
    return "\n".join(lines)


def result_line(summary: Mapping[str, Any], env_steps: int, test_evals: int) -> str:
    """The RESULT line: one run (one training seed); ``test_evals`` is the sealed ledger's
    count of the suite's test evaluations for this setup, this one included."""
    return (
        f"RESULT suite_mean={summary['suite_mean']:.3f} "
        f"tasks_at_human={summary['tasks_at_human']} tasks={summary['tasks']} "
        f"env_steps={env_steps} seeds=1 test_evals={test_evals}"
    )


def plot(rows: Sequence[Mapping[str, Any]], path: Path, title: str) -> Path:
    """Bars: our success per task; markers: Human, CC-Net, CC-Net (BC), best pre-2022."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    xs = range(len(rows))
    fig, ax = plt.subplots(figsize=(max(8.0, 0.2 * len(rows) + 2), 5.5), layout="constrained")
    ax.bar(xs, [r["ours"] for r in rows], color="#3b75af", label="ours (greedy, test seeds)")
    out = [i for i, r in zip(xs, rows) if r["excluded"]]
    ax.plot(out, [0.0] * len(out), "v", color="grey", label="ours: out of reach (counts 0)")
    styles = {"Human": ("k_", 10), "CC-Net": ("r.", 6), "CC-Net(BC)": ("gx", 5)}
    styles[BEST_PRE_2022] = ("m+", 6)
    for col, (style, size) in styles.items():
        pts = [(i, r[col]) for i, r in zip(xs, rows) if r[col] is not None]
        label = "best pre-2022" if col == BEST_PRE_2022 else col
        ax.plot([p[0] for p in pts], [p[1] for p in pts], style, markersize=size, label=label)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["task"] for r in rows], rotation=90, fontsize=6)
    ax.set_xlim(-0.7, len(rows) - 0.3)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("success (Human, CC-Net: mean score)", fontsize=8)
    ax.legend(fontsize=7, ncol=6, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def _parse() -> argparse.Namespace:
    doc = __doc__.split("\n\n")[0]
    ap = run_arguments(doc, "runs/miniwob-suite", 20000, 20, "training env steps")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--algorithm", choices=list(ALGORITHMS), default="digirl")
    ap.add_argument("--tasks", default="", help="comma-separated Table 3 tasks (default: all)")
    ap.add_argument("--published", default=None, help="published Table 3 CSV")
    ap.add_argument("--quick", action="store_true", help="5 tasks, 300 env steps, 2 seeds each")
    ap.add_argument(
        "--measure",
        type=int,
        default=0,
        metavar="N",
        help="train N env steps on the mix and evaluate one episode per task; print both "
        "phases' env steps/s and the training budget that fits --minutes",
    )
    ap.add_argument("--minutes", type=float, default=90.0, help="with --measure: time to fit")
    ap.add_argument(
        "--untrained",
        action="store_true",
        help="evaluate the agent (agent.path, else a fresh one) without training",
    )
    args = ap.parse_args()
    if args.quick:
        args.tasks = args.tasks or ",".join(QUICK_TASKS)
        args.budget, args.eval_episodes = 300, 2
        args.out = args.out if args.out != "runs/miniwob-suite" else "runs/miniwob-suite-quick"
    elif args.eval_episodes < 20 and not args.measure:
        print(f"note: --eval-episodes {args.eval_episodes} is below the protocol's 20")
    return args


def _system(args: argparse.Namespace) -> str:
    """The comparison system this call runs: the chosen algorithm, or the agent evaluated
    untrained."""
    from harness.comparison import START

    return START if getattr(args, "untrained", False) else args.algorithm


def _agent_kinds(cfg: Any) -> Any:
    """The action kinds of the configured agent: a saved one's own configuration wins."""
    from devicerl.agents.capabilities import small_agent_kinds

    if cfg.agent.path:
        from devicerl.agents.small import SmallAgent

        return SmallAgent.from_pretrained(cfg.agent.path).action_kinds
    return small_agent_kinds(cfg.agent.small.architecture())


def _config(args: argparse.Namespace, tasks: Sequence[str], budget: int, extra: Sequence[str]):
    from harness.comparison import run_config

    grown = any(o.startswith("agent.init_from=") for o in args.overrides)
    pretrained = grown or any(o.startswith("agent.path=") for o in args.overrides)
    return run_config(
        _system(args),
        args.seed,
        setup="pretrained" if pretrained else "tuned",  # a saved agent is fine-tuned as such
        suite=",".join(tasks),
        family="miniwob",
        budget=budget,
        eval_episodes=max(1, args.eval_episodes),
        split="test",
        extra=[*HEADS, *(GROWN if grown else ()), *extra, *args.overrides],
    )  # fmt: skip


def _measure(args: argparse.Namespace, tasks: Sequence[str]) -> None:
    """A short training run on the mix, then one greedy test episode per task: env steps/s of
    each phase (training includes the learner's updates, evaluation only acts) and the
    training budget that fits ``--minutes`` with the full evaluation."""
    from harness.comparison import evaluate_agent

    from devicerl.runtime.loop.factory import make_trainer
    from devicerl.runtime.runs.folder import RunDir

    cfg = _config(args, tasks, args.measure, ["eval.at_end=false"])
    run_dir = RunDir(Path(args.out) / "measure").start_new(overwrite=True)
    run_dir.save_config(cfg)
    summary = make_trainer(cfg, run_dir).run()
    steps, wall = int(summary["env_steps"]), float(summary["elapsed_s"])
    rate = steps / wall
    one = _config(args, tasks, args.measure, ["eval.episodes_per_task=1"])
    sub = Path(args.out) / "measure-eval"
    evaluate_agent(one, run_dir.path / "agent", sub, greedy=True, reuse=False)
    done = json.loads((sub / "summary.json").read_text(encoding="utf-8"))
    eval_rate = int(done["eval"]["env_steps"]) / float(done["elapsed_s"])
    per_episode = int(done["eval"]["env_steps"]) / max(1, int(done["eval"]["episodes"]))
    eval_steps = len(tasks) * args.eval_episodes * per_episode
    eval_s = eval_steps / eval_rate
    budget = max(0, int(rate * (args.minutes * 60 - eval_s)))
    print(
        f"measured: training {steps} env steps in {wall:.0f} s = {rate:.2f} env steps/s; "
        f"evaluation {eval_rate:.2f} env steps/s, {per_episode:.1f} steps/episode on "
        f"{len(tasks)} tasks, ~{eval_steps:.0f} steps (~{eval_s / 60:.0f} min) for "
        f"{args.eval_episodes} per task; training budget for {args.minutes:.0f} min: ~{budget}"
    )
    print(
        f"RESULT env_steps_per_s={rate:.3f} eval_env_steps_per_s={eval_rate:.3f} "
        f"tasks={len(tasks)} suggested_budget={budget}"
    )


def main() -> int:
    from harness.comparison import RunStopped, run_one
    from harness.sealed import record_test_evaluation, test_evaluations

    from devicerl.runtime.runs.provenance import provenance
    from devicerl.tasks import resolve

    args = _parse()
    chosen = [t.strip() for t in args.tasks.split(",") if t.strip()] or list(TABLE3_TASKS)
    for t in chosen:
        package_task(t)  # an unknown name fails here, naming it
    published = read_published(args.published or default_published())
    ours = [t.name for t in resolve("miniwob")]
    kinds = _agent_kinds(_config(args, ["miniwob/click-test"], 1, []))
    excluded = {t: why for t, why in coverage(chosen, kinds, ours).items() if why}
    trained = [package_task(t) for t in chosen if t not in excluded]
    if args.measure:
        _measure(args, trained)
        return 0
    cfg = _config(args, trained, args.budget, [])
    system = _system(args)
    what = "the agent, untrained"
    setup = "pretrained" if cfg.agent.path or cfg.agent.init_from else "tuned"
    if system in ALGORITHMS:  # a saved agent (agent.path) keeps its own heads
        what = f"{ALGORITHMS[system]} {setup}{'' if cfg.agent.path else ' + reach heads'}"
    if cfg.agent.path:
        what += f" ({'from ' if system in ALGORITHMS else ''}{cfg.agent.path})"
    elif cfg.agent.init_from:
        what += f" (weights from {cfg.agent.init_from}; the parts it lacks start fresh)"
    # a saved agent brings its own action space: the heads it has, not the ones HEADS asks for
    heads = list(HEADS)
    if cfg.agent.path:
        heads = [f"the saved agent's own: {' '.join(sorted(k.value for k in kinds))}"]
    out = Path(args.out)
    folder = out / f"{system}-s{args.seed}"
    started = time.time()
    budget = args.budget if system in ALGORITHMS else 0
    print(
        f"== {what} on {len(trained)} of {len(chosen)} Table 3 tasks ({len(excluded)} out of "
        f"reach, counted 0), {budget} env steps, then {args.eval_episodes} test seeds per task; "
        f"run folder {folder}",
        flush=True,
    )
    try:
        result = run_one(
            system,
            args.seed,
            out,
            cfg,
            reuse=not args.fresh,
            allow=args.allow_commit_change,
            sampled=False,
            resume=True,
        )
    except RunStopped as e:
        print(f"stopped: {e}", file=sys.stderr)
        return 130
    # the suite's test instances are sealed: count each fresh evaluation of them
    command = "python " + shlex.join(sys.argv)
    test_evals = (
        test_evaluations(SEALED, setup)
        if result.reused
        else record_test_evaluation(SEALED, setup, command, provenance())
    )
    eval_file = json.loads((folder / "eval.json").read_text("utf-8"))
    episodes = {k: int(v["episodes"]) for k, v in eval_file["per_task"].items()}
    trained = training_counts(folder / "trajectories") if system in ALGORITHMS else None
    rows = suite_rows(chosen, result.per_task, episodes, published, excluded, trained)
    summary = summarise(rows)
    header = (
        f"# MiniWoB++ full suite (Synapse Table 3, {len(chosen)} tasks): {what}, 1 run, "
        f"seed {args.seed}, {result.env_steps} training env steps, "
        f"{args.eval_episodes} test seeds per task, greedy\n"
        f"# command: python benchmarks/miniwob_suite.py {' '.join(sys.argv[1:])}\n"
        f"# heads: {' '.join(heads)}\n"
        f"# run: {folder} ({result.wall_s:.0f} s training + evaluation;"
        f" this call {time.time() - started:.0f} s); commit "
        f"{result.provenance.get('git_commit')}"
    )
    result_text = result_line(summary, result.env_steps, test_evals)
    text = "\n".join([header, format_table(rows, summary), result_text])
    print(text)
    (out / "suite.txt").write_text(text + "\n", encoding="utf-8")
    report = {
        "command": ["python", "benchmarks/miniwob_suite.py", *sys.argv[1:]],
        "heads": list(heads),
        "budget": args.budget,
        "eval_episodes": args.eval_episodes,
        "env_steps": result.env_steps,
        "wall_s": result.wall_s,
        "summary": summary,
        "rows": rows,
        "run_provenance": result.provenance,
        "provenance": provenance(),
        "test_evals": test_evals,
        "result": result_text,
    }
    (out / "suite.json").write_text(json.dumps(report, indent=2), encoding="utf-8")
    title = (
        f"MiniWoB++, Synapse Table 3 ({len(chosen)} tasks): {what}, "
        f"{result.env_steps} env steps, {args.eval_episodes} test seeds per task\n" + result_text
    )
    plot(rows, out / "suite.png", title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
