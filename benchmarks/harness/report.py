"""The comparison's report: each run's result (`RunResult`), means with intervals across
training seeds, per-task tables, the critics' diagnostics, learning curves, ``comparison.json``
and ``report.md``.

Intervals: each training seed gives one success rate (its policy on every test instance), and
the interval is Student's t over those per-seed rates (95 %, n - 1 degrees of freedom), so it
says how much another training seed could move the number; pooling every episode as if
independent would hide that (episodes of one policy are not independent draws of the learner).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from devicerl.files import write_json, write_text

#: Two-sided 95 % Student t quantiles by degrees of freedom (1..30; the normal's beyond).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip
#: Diagnostics the DigiRL learner logs each iteration (see `devicerl.algos.digirl`).
DIAGNOSTICS = (
    "train/step_filter_kept_frac",
    "train/curriculum_kept_frac",
    "train/kept_steps_failed_frac",
    "train/success_steps_dropped_frac",
    "train/step_value_spread",
    "train/critic_brier",
    "train/critic_accuracy",
    "train/instr_critic_auc",
)
_ORDER = ("random", "random_clickable", "start", "filtered_bc", "digirl")


@dataclass
class RunResult:
    """One (system, seed) run: final success on the test instances and its learning curve."""

    system: str
    seed: int
    success: float  # greedy
    episodes: int
    env_steps: int
    wall_s: float
    curve: list[dict[str, float]] = field(default_factory=list)  # step, time_s, success
    #: success of the same policy sampling its actions (T=1, as it acts in training)
    success_sampled: float | None = None
    per_task: dict[str, float] = field(default_factory=dict)  # greedy
    per_task_sampled: dict[str, float] = field(default_factory=dict)
    #: share of the greedy episodes' steps that were detours (``loop_step_frac`` of eval.json;
    #: nan for runs evaluated before it was recorded)
    detours: float = math.nan
    #: critics' diagnostics, mean over the last quarter of iterations (DigiRL only)
    diagnostics: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    #: read from a finished run, not trained and evaluated now
    reused: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The stored fields (``reused`` says how this process got them, not what they are)."""
        return {k: v for k, v in self.__dict__.items() if k != "reused"}


def t_interval(values: Sequence[float]) -> tuple[float, float]:
    """95 % Student-t interval of the mean of `values` (nan with fewer than two), clipped to
    [0, 1]."""
    n = len(values)
    if n < 2:
        return (math.nan, math.nan)
    mean, sd = float(np.mean(values)), float(np.std(values, ddof=1))
    t = _T975[n - 2] if n - 2 < len(_T975) else 1.96
    half = t * sd / math.sqrt(n)
    return (max(0.0, mean - half), min(1.0, mean + half))


def bootstrap_interval(values: Sequence[float], draws: int = 10_000) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the mean of `values` (one per task, say: it
    resamples the tasks; nan with fewer than two). Seeded, so a report is reproducible."""
    if len(values) < 2:
        return (math.nan, math.nan)
    rng = np.random.default_rng(0)
    arr = np.asarray(values, dtype=float)
    means = arr[rng.integers(0, len(arr), size=(draws, len(arr)))].mean(axis=1)
    return (float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975)))


def read_curve(metrics_file: Path, t0: float) -> list[dict[str, float]]:
    """Rollout success per iteration: env step, seconds since `t0`, success."""
    out: list[dict[str, float]] = []
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


def read_diagnostics(metrics_file: Path, last: float = 0.25) -> dict[str, float]:
    """Each diagnostic's mean over the last `last` share of the iterations that logged it,
    plus its mean over the whole run (``<name>/all``)."""
    if not metrics_file.exists():
        return {}
    series: dict[str, list[float]] = {k: [] for k in DIAGNOSTICS}
    for line in metrics_file.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        for k in DIAGNOSTICS:
            v = rec.get(k)
            if isinstance(v, int | float) and not math.isnan(v):
                series[k].append(float(v))
    out: dict[str, float] = {}
    for k, vs in series.items():
        if vs:
            tail = vs[-max(1, int(len(vs) * last)) :]
            out[k] = float(np.mean(tail))
            out[f"{k}/all"] = float(np.mean(vs))
    return out


def summarise(results: Sequence[RunResult]) -> dict[str, dict[str, Any]]:
    """Per system: mean, min, max and t-interval over seeds, greedy and sampled; mean per-task
    success; env steps and wall-clock."""
    out: dict[str, dict[str, Any]] = {}
    names = {r.system for r in results}
    systems = [s for s in _ORDER if s in names] + sorted(names - set(_ORDER))
    for system in systems:
        rs = [r for r in results if r.system == system]
        greedy = [r.success for r in rs]
        sampled = [r.success_sampled for r in rs if r.success_sampled is not None]
        tasks = sorted({t for r in rs for t in r.per_task})
        out[system] = {
            "mean": float(np.mean(greedy)),
            "min": float(min(greedy)),
            "max": float(max(greedy)),
            "ci95": t_interval(greedy),
            "mean_sampled": float(np.mean(sampled)) if sampled else math.nan,
            "ci95_sampled": t_interval(sampled),
            "per_seed": greedy,
            "per_seed_sampled": sampled,
            "seeds": len(rs),
            "env_steps": float(np.mean([r.env_steps for r in rs])),
            "wall_s": float(np.mean([r.wall_s for r in rs])),
            "detours": _nanmean([r.detours for r in rs]),
            "detours_seeds": sum(not math.isnan(r.detours) for r in rs),
            "per_task": {t: float(np.mean([r.per_task.get(t, 0.0) for r in rs])) for t in tasks},
            "per_task_sampled": {
                t: float(np.mean([r.per_task_sampled.get(t, 0.0) for r in rs])) for t in tasks
            },
            "diagnostics": {
                k: float(np.mean([r.diagnostics[k] for r in rs if k in r.diagnostics]))
                for k in sorted({k for r in rs for k in r.diagnostics})
            },
        }
    return out


def _nanmean(values: Sequence[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return float(np.mean(known)) if known else math.nan


def _ci(lo_hi: Sequence[float]) -> str:
    lo, hi = lo_hi
    return "-" if math.isnan(lo) else f"[{lo:.3f}, {hi:.3f}]"


def table(summary: dict[str, dict[str, Any]]) -> str:
    """The main table: greedy and sampled success with t-intervals over seeds."""
    lines = [
        "| system | greedy success (mean over seeds) | 95 % t-interval | per seed "
        "| sampled (T=1) | 95 % t-interval | per seed | seeds | env steps | wall-clock s "
        "| greedy detour steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for system, s in summary.items():
        seeds = " ".join(f"{v:.3f}" for v in s["per_seed"])
        seeds_s = " ".join(f"{v:.3f}" for v in s["per_seed_sampled"])
        lines.append(
            f"| {system} | {s['mean']:.3f} | {_ci(s['ci95'])} | {seeds} "
            f"| {s['mean_sampled']:.3f} | {_ci(s['ci95_sampled'])} | {seeds_s} "
            f"| {int(s['seeds'])} | {s['env_steps']:.0f} | {s['wall_s']:.0f} "
            f"| {_detours(s)} |"
        )
    return "\n".join(lines)


def _detours(s: dict[str, Any]) -> str:
    """Mean greedy detour share, and over how many seeds when some runs predate it."""
    value, known = s.get("detours", math.nan), s.get("detours_seeds", 0)
    if math.isnan(value):
        return "-"
    return f"{value:.1%}" + ("" if known == s["seeds"] else f" ({known} seeds)")


def task_table(summary: dict[str, dict[str, Any]]) -> str:
    """Per task (rows) and system (columns): greedy / sampled success, mean over seeds."""
    systems = list(summary)
    tasks = sorted({t for s in summary.values() for t in s["per_task"]})
    lines = [
        "| task | " + " | ".join(f"{s} greedy / sampled" for s in systems) + " |",
        "|---|" + "---|" * len(systems),
    ]
    for t in tasks:
        cells = [
            f"{summary[s]['per_task'].get(t, math.nan):.2f} / "
            f"{summary[s]['per_task_sampled'].get(t, math.nan):.2f}"
            for s in systems
        ]
        lines.append(f"| {t.split('/')[-1]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def diagnostics_table(summary: dict[str, dict[str, Any]]) -> str:
    """DigiRL's critic diagnostics (last quarter of iterations / whole run)."""
    rows = {k: v["diagnostics"] for k, v in summary.items() if v["diagnostics"]}
    if not rows:
        return ""
    lines = [
        "| system | " + " | ".join(k.split("/")[-1] for k in DIAGNOSTICS) + " |",
        "|---|" + "---|" * len(DIAGNOSTICS),
    ]
    for system, d in rows.items():
        cells = [
            f"{d.get(k, math.nan):.3f} ({d.get(k + '/all', math.nan):.3f})" for k in DIAGNOSTICS
        ]
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def result_line(
    summary: dict[str, dict[str, Any]],
    budget: int,
    key: str = "mean",
    label: str = "RESULT",
    tags: str = "",
) -> str:
    """``RESULT [grpo=X gigpo=X] digirl=X filteredbc=X random=X env_steps=N <tags>`` (greedy; `key=
    "mean_sampled"` for the sampled evaluation)."""
    parts = [
        f"{name.replace('_', '')}={summary[name][key]:.3f}"
        for name in ("grpo", "gigpo", "digirl", "filtered_bc", "random", "start")
        if name in summary
    ]
    return f"{label} {' '.join(parts)} env_steps={budget}{' ' + tags if tags else ''}"


def plot(results: Sequence[RunResult], path: Path, window: int = 3) -> Path:
    """Rollout success against env steps and wall-clock (one line per run; baselines dashed)."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    colours = {
        "random": "tab:gray",
        "random_clickable": "tab:brown",
        "start": "tab:purple",
        "filtered_bc": "tab:orange",
        "digirl": "tab:blue",
    }
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        c = colours.get(r.system, "tab:green")
        if r.curve:
            raw = [p["success"] for p in r.curve]
            ys = [np.mean(raw[max(0, i - window + 1) : i + 1]) for i in range(len(raw))]
            for ax, key in zip(axes, ("step", "time_s")):
                ax.plot([p[key] for p in r.curve], ys, color=c, alpha=0.8, label=r.system)
                ax.scatter([r.curve[-1][key]], [r.success], color=c, marker="*", s=80)
        else:  # not trained: its test success as a flat line
            for ax in axes:
                ax.axhline(r.success, color=c, linestyle="--", label=r.system)
    for ax, xlabel in zip(axes, ("env steps", "wall-clock s")):
        ax.set_xlabel(xlabel)
        ax.set_ylabel("success (rollouts; * = final greedy test)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(
    out: Path,
    results: Sequence[RunResult],
    *,
    setup: str,
    suite: str,
    split: str,
    budget: int,
    **meta: Any,
) -> dict[str, Any]:
    """Write ``comparison.json``, ``learning.png`` and ``report.md``; return the report."""
    summary = summarise(results)
    tags = f"setup={setup} suite={suite} split={split}"
    if meta.get("test_evals") is not None:
        tags += f" test_evals={meta['test_evals']}"
    report = {
        "setup": setup,
        "suite": suite,
        "split": split,
        "budget": budget,
        **meta,
        "commits": sorted({str(r.provenance.get("git_commit")) for r in results}),
        "summary": summary,
        "runs": [r.as_dict() for r in results],
        "result": result_line(summary, budget, tags=tags),
        "result_sampled": result_line(summary, budget, "mean_sampled", "sampled:", tags),
    }
    write_json(out / "comparison.json", report, indent=1)
    png = plot(results, out / "learning.png")
    md = [
        f"# Learning comparison: setup {setup}, suite {suite}, {split} instances "
        f"({budget} env steps per run, seeds {meta.get('seeds')})",
        "",
        table(summary),
        "",
        "Per task (mean over seeds):",
        "",
        task_table(summary),
        "",
    ]
    if diag := diagnostics_table(summary):
        md += ["Critic diagnostics (last quarter of iterations; whole run):", "", diag, ""]
    md += [f"![learning curves]({png.name})", "", report["result_sampled"], report["result"], ""]
    write_text(out / "report.md", "\n".join(md))
    return report
