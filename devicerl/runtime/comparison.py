"""Side-by-side learning comparison: random policy, Filtered BC and DigiRL on one env budget.

Each (system, seed) is a real training run (`Trainer`) in its own folder under the output
folder; the learners train online from scratch, then every system is evaluated greedily on the
same task instances (first ``n_tasks`` of the split x ``episodes_per_task`` seeds). The report
holds a table (final success, 95 % interval, wall-clock), learning curves against env steps and
wall-clock (``learning.png``), ``comparison.json`` and ``report.md``.

Used by ``benchmarks/learning.py`` (the full benchmark) and ``devicerl demo`` (a short one).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.config import load_config
from devicerl.runtime.evaluate import wilson_interval
from devicerl.runtime.run_dir import RunDir
from devicerl.runtime.train_config import TrainConfig

SYSTEMS = ("random", "filtered_bc", "digirl")

#: Policy versions (iterations) over which the MiniWoB++ setup's entropy bonus fades: about
#: half of an 8,000-step run (`devicerl demo` scales it to its budget).
ENTROPY_FADE_VERSIONS = 80
#: The MiniWoB++ development setup: the small CPU agent reads the DOM (no screenshots), three
#: Chromium devices with a page cache per task, taps and typing only.
MINIWOB_DEV = [
    "env.name=browser",
    "env.kwargs={screenshot: false, task_pages: 8}",
    "env.num_envs=3",
    "tasks.train=miniwob-dev",
    "agent.kind=small",
    "agent.small.allowed_types=[DUAL_POINT, TYPE]",
    "agent.small.swipes=false",
    "trajectories_per_iter=32",
    "digirl.actor.lr=1e-3",
    "digirl.actor.updates=12",  # enough to learn from a task's first rare successes
    "digirl.actor.entropy_coef=0.1",  # keeps exploring tasks with no success yet ...
    f"digirl.actor.entropy_versions={ENTROPY_FADE_VERSIONS}",  # ... then fades out
    "digirl.actor.skip_noops=true",  # a tap or typing that changed nothing is not imitated
    "filtered_bc.actor.lr=1e-3",
    "filtered_bc.actor.updates=12",
    "filtered_bc.actor.entropy_coef=0.1",
    f"filtered_bc.actor.entropy_versions={ENTROPY_FADE_VERSIONS}",
    "filtered_bc.actor.skip_noops=true",
    "exploration.max=0.6",  # tasks with no success yet are explored hard, solved ones not
    "eval.n_tasks=8",
    "logging.tensorboard=false",
    "checkpoint_every=1000000",
]


@dataclass
class RunResult:
    """One (system, seed) run: final greedy success and its learning curve."""

    system: str
    seed: int
    success: float
    episodes: int
    env_steps: int
    wall_s: float
    curve: list[dict[str, float]] = field(default_factory=list)  # step, time_s, success
    #: success of the same policy sampling its actions (as it acts in training), same instances
    success_sampled: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def system_overrides(system: str) -> list[str]:
    """Config overrides that turn the shared setup into `system`."""
    if system == "random":
        return ["mode=eval", "algo=none", "agent.kind=random"]
    if system in ("filtered_bc", "digirl"):
        return ["mode=online", f"algo={system}"]
    raise ValueError(f"unknown system {system!r}; choose from {', '.join(SYSTEMS)}")


def _curve(metrics_file: Path, t0: float) -> list[dict[str, float]]:
    out = []
    if not metrics_file.exists():
        return out
    for line in metrics_file.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if "rollout/iteration_success_rate" in rec:
            out.append(
                {
                    "step": float(rec["step"]),
                    "time_s": float(rec["time"]) - t0,
                    "success": float(rec["rollout/iteration_success_rate"]),
                }
            )
    return out


def _relevant(cfg: TrainConfig, system: str) -> dict[str, Any]:
    """The parts of a config that matter to `system` (others' algorithm options dropped)."""
    data = asdict(cfg)
    for algo in ("digirl", "filtered_bc"):
        if algo != system:
            data.pop(algo)
    return data


def _read_result(folder: Path, system: str, seed: int) -> RunResult:
    """The result of the finished run in `folder` (its summary, eval and metrics)."""
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    # the config is written just before a run starts
    t0 = float(summary.get("started_at", (folder / "config.yaml").stat().st_mtime))
    return RunResult(
        system=system,
        seed=seed,
        success=float(summary["eval"]["success_rate"]),
        episodes=int(summary["eval"]["episodes"]),
        env_steps=int(summary["env_steps"]),
        wall_s=float(summary["elapsed_s"]),
        curve=_curve(folder / "metrics.jsonl", t0),
    )


def _finished(folder: Path, cfg: TrainConfig, system: str) -> RunResult | None:
    """The result of a finished run in `folder` with the same relevant config, else None."""
    try:
        saved = RunDir(folder).load_config(TrainConfig)
        if _relevant(saved, system) == _relevant(cfg, system):
            return _read_result(folder, system, cfg.seed)
    except Exception:  # missing, unfinished or unreadable: simply run again
        pass
    return None


def _sampled_success(folder: Path, overrides: Sequence[str], reuse: bool) -> float:
    """Evaluate the run's final agent on the same instances, sampling its actions."""
    from devicerl.runtime.trainer import Trainer

    sub = folder / "eval-sampled"
    done = sub / "summary.json"
    if (
        reuse
        and done.exists()
        and done.stat().st_mtime >= (folder / "summary.json").stat().st_mtime
    ):
        return float(json.loads(done.read_text())["eval"]["success_rate"])
    if sub.exists():
        shutil.rmtree(sub)
    cfg = load_config(
        TrainConfig,
        None,
        [*overrides, "mode=eval", "eval.greedy=false", f"agent.path={folder / 'agent'}"],
    )
    run_dir = RunDir(sub).create()
    run_dir.save_config(cfg)
    return float(Trainer(cfg, run_dir).run()["eval"]["success_rate"])


def run_one(
    system: str,
    seed: int,
    out: Path,
    base: Sequence[str],
    budget: int,
    eval_episodes: int,
    reuse: bool = True,
) -> RunResult:
    """Train (unless random) and evaluate one system with one seed in ``out/<system>-s<seed>``:
    greedily, then sampling actions (``eval-sampled/``). With `reuse`, a finished run there
    with the same relevant config is read, not run again."""
    overrides = [
        *base,
        *system_overrides(system),
        f"seed={seed}",
        f"env_steps={budget}",
        f"eval.episodes_per_task={eval_episodes}",
    ]
    result = _train_and_eval(system, seed, out / f"{system}-s{seed}", overrides, reuse)
    result.success_sampled = (
        result.success  # greedy or not, the random policy samples
        if system == "random"
        else _sampled_success(out / f"{system}-s{seed}", overrides, reuse)
    )
    return result


def _train_and_eval(
    system: str,
    seed: int,
    folder: Path,
    overrides: Sequence[str],
    reuse: bool,
) -> RunResult:
    from devicerl.runtime.trainer import Trainer

    cfg = load_config(TrainConfig, None, overrides)
    if reuse and (done := _finished(folder, cfg, system)) is not None:
        print(f"== {system} seed {seed}: reusing the finished run in {folder}")
        return done
    if folder.exists():  # a fresh run: never append to an older run's metrics
        shutil.rmtree(folder)
    run_dir = RunDir(folder).create()
    run_dir.save_config(cfg)
    t0 = time.time()
    summary = Trainer(cfg, run_dir).run()
    summary_file = run_dir.path / "summary.json"
    summary_file.write_text(json.dumps({**summary, "started_at": t0}, indent=2))
    return _read_result(folder, system, seed)


def summarise(results: Sequence[RunResult]) -> dict[str, dict[str, float]]:
    """Per system: mean/min/max final success over seeds, pooled 95 % interval, mean wall-clock."""
    out: dict[str, dict[str, float]] = {}
    for system in SYSTEMS:
        rs = [r for r in results if r.system == system]
        if not rs:
            continue
        succ = [r.success for r in rs]
        n = sum(r.episodes for r in rs)
        k = round(sum(r.success * r.episodes for r in rs))
        lo, hi = wilson_interval(k, n)
        sampled = [r.success_sampled for r in rs if r.success_sampled is not None]
        out[system] = {
            "mean": float(np.mean(succ)),
            "mean_sampled": float(np.mean(sampled)) if sampled else float("nan"),
            "min": float(min(succ)),
            "max": float(max(succ)),
            "ci95_low": lo,
            "ci95_high": hi,
            "seeds": len(rs),
            "env_steps": float(np.mean([r.env_steps for r in rs])),
            "wall_s": float(np.mean([r.wall_s for r in rs])),
        }
    return out


def table(summary: dict[str, dict[str, float]]) -> str:
    lines = [
        "| system | final success, greedy (mean over seeds) | min-max | 95 % CI (pooled) "
        "| final success, sampled | seeds | env steps | wall-clock s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for system, s in summary.items():
        lines.append(
            f"| {system} | {s['mean']:.3f} | {s['min']:.3f}-{s['max']:.3f} "
            f"| [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}] | {s['mean_sampled']:.3f} "
            f"| {int(s['seeds'])} "
            f"| {s['env_steps']:.0f} | {s['wall_s']:.0f} |"
        )
    return "\n".join(lines)


def plot(results: Sequence[RunResult], path: Path, window: int = 3) -> Path:
    """Rollout success against env steps and wall-clock (one line per run; random dashed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    colours = {"random": "tab:gray", "filtered_bc": "tab:orange", "digirl": "tab:blue"}
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        c = colours.get(r.system, "k")
        if r.curve:
            raw = [p["success"] for p in r.curve]
            ys = [np.mean(raw[max(0, i - window + 1) : i + 1]) for i in range(len(raw))]
            for ax, key in zip(axes, ("step", "time_s")):
                ax.plot([p[key] for p in r.curve], ys, color=c, alpha=0.8, label=r.system)
                ax.scatter([r.curve[-1][key]], [r.success], color=c, marker="*", s=80)
        else:  # not trained: its eval success as a flat line
            for ax in axes:
                ax.axhline(r.success, color=c, linestyle="--", label=r.system)
    for ax, xlabel in zip(axes, ("env steps", "wall-clock s")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("success (rollouts; * = final greedy eval)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def result_line(
    summary: dict[str, dict[str, float]], budget: int, key: str = "mean", label: str = "RESULT"
) -> str:
    """``RESULT digirl=X filteredbc=X random=X env_steps=N`` (greedy; `key="mean_sampled"`
    for the sampled evaluation)."""
    parts = [
        f"{name.replace('_', '')}={summary[name][key]:.3f}"
        for name in ("digirl", "filtered_bc", "random")
        if name in summary
    ]
    return f"{label} {' '.join(parts)} env_steps={budget}"


def compare(
    out: str | Path,
    *,
    systems: Sequence[str] = SYSTEMS,
    seeds: Sequence[int] = (0,),
    budget: int = 8000,
    eval_episodes: int = 25,
    base: Sequence[str] = MINIWOB_DEV,
    extra: Sequence[str] = (),
    reuse: bool = True,
) -> dict[str, Any]:
    """Run every system with every seed; write ``comparison.json``, ``learning.png`` and
    ``report.md`` into `out`; return the report (``summary``, ``runs``, ``result``). With
    `reuse`, finished runs in `out` with the same relevant config are read instead of re-run
    (an interrupted benchmark resumes where it stopped)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for s in systems:
        system_overrides(s)  # unknown names fail before anything runs
    results: list[RunResult] = []
    for seed in seeds:
        for system in systems:
            print(f"== {system} seed {seed} (budget {budget} env steps)", flush=True)
            r = run_one(system, seed, out, [*base, *extra], budget, eval_episodes, reuse)
            print(f"== {system} seed {seed}: success {r.success:.3f} in {r.wall_s:.0f} s")
            results.append(r)
    summary = summarise(results)
    report = {
        "budget": budget,
        "seeds": list(seeds),
        "eval_episodes_per_task": eval_episodes,
        "overrides": [*base, *extra],
        "summary": summary,
        "runs": [r.as_dict() for r in results],
        "result": result_line(summary, budget),
        "result_sampled": result_line(summary, budget, "mean_sampled", "sampled:"),
    }
    (out / "comparison.json").write_text(json.dumps(report, indent=1))
    png = plot(results, out / "learning.png")
    md = [
        f"# Learning comparison ({budget} env steps per run, seeds {list(seeds)})",
        "",
        table(summary),
        "",
        f"![learning curves]({png.name})",
        "",
        report["result_sampled"],
        report["result"],
        "",
    ]
    (out / "report.md").write_text("\n".join(md), encoding="utf-8")
    return report
