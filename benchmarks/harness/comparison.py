"""Side-by-side learning comparison: random baselines, Filtered BC and DigiRL on one env budget.

Each (system, seed) is a real training run (`Trainer`) in its own folder under the output
folder, configured from one of the package's shipped setups (`devicerl.config.shipped_configs`):
the named setup of its algorithm, ``<family>-<algo>-<setup>`` (``paper``: every addition beyond
the paper off; ``tuned``: the documented additions on), the single source of truth for the
benchmark, ``devicerl demo`` and ``devicerl train``. The learners train online from scratch on
training instances, then every system is evaluated on the same *test* instances (a seed range
disjoint from training's and from the validation range used while developing), greedily and
sampling its actions. The report (`harness.report`) gives means with t-intervals across
training seeds, per-task tables and the critics' diagnostics.

Used by ``benchmarks/learning.py`` (the full benchmark); ``benchmarks/league.py`` and
``benchmarks/miniwob_suite.py`` use its parts: `run_config` with a config file of its own,
`train_phases` (stop at marks of the budget, evaluate, resume), `run_one` and `evaluate_agent`.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from devicerl.config import load_config, shipped_configs
from devicerl.errors import ConfigError
from devicerl.files import file_sha256, write_json
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.runs.provenance import code_identity, provenance
from devicerl.runtime.setup.config import TrainConfig
from harness.report import RunResult, read_curve, read_diagnostics, write_report
from harness.sealed import record_test_evaluation, test_evaluations

#: The systems of the main table: the fair random baseline (uniform over what the agent can
#: express), the same restricted to elements flagged clickable (privileged DOM information),
#: and the two learners of the DigiRL paper.
SYSTEMS = ("random", "random_clickable", "filtered_bc", "digirl")
#: The group-relative learners, run from DigiRL's setup file (its agent, action space,
#: exploration and actor optimisation) with their own algorithm.
GROUP_SYSTEMS = ("grpo", "gigpo")
#: DigiRL with one selection step left out of its setup's list (`DigiRLConfig.selection`): what
#: each part contributes (without both critics' steps it is Filtered BC, a system of its own).
ABLATIONS = {"digirl_no_step_filter": "step_filter", "digirl_no_curriculum": "curriculum"}
#: The agent the learners start from, evaluated untrained: a fresh small agent, or with
#: ``agent.path`` a pre-trained one (docs/pretraining.md), so the table shows what RL added.
START = "start"
ALL_SYSTEMS = (*SYSTEMS, *GROUP_SYSTEMS, START, *ABLATIONS)
#: ``pretrained``: the learners start from the web-skills pre-trained agent (docs/pretraining.md)
#: instead of from scratch, and fine-tune it as the paper fine-tunes AutoUI.
SETUPS = ("paper", "tuned", "pretrained")
#: Benchmark suites: the named split each trains and is tested on.
SUITES = {"dev": "miniwob-dev", "dev16": "miniwob-dev16"}
#: Benchmark plumbing, not part of a setup: no TensorBoard; a checkpoint every 5 iterations, so
#: an interrupted benchmark continues its unfinished runs (SIGINT / SIGTERM write one at once).
RUN_OPTIONS = ("logging.tensorboard=false", "checkpoint_every=5")
#: Options that change how a run is kept and watched, not what it learns: runs that differ only
#: in these are the same run (for reuse and for continuing).
PLUMBING = ("logging", "checkpoint_every")


def run_arguments(
    description: str, out: str, budget: int, eval_episodes: int, budget_help: str
) -> argparse.ArgumentParser:
    """The command line every comparison benchmark shares: its output folder, env budget, test
    seeds per task, starting over, reusing other commits' runs and extra config overrides."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--out", default=out)
    ap.add_argument("--budget", type=int, default=budget, help=budget_help)
    ap.add_argument("--eval-episodes", type=int, default=eval_episodes, help="test seeds per task")
    ap.add_argument("--fresh", action="store_true", help="start over: re-run the runs in --out")
    ap.add_argument(
        "--allow-commit-change",
        action="store_true",
        help="reuse or continue runs made by another commit (recorded in the report)",
    )
    ap.add_argument("overrides", nargs="*", help="extra KEY=VALUE config overrides")
    return ap


def config_file(system: str, setup: str, family: str = "miniwob") -> Path:
    """The shipped setup file a system starts from (baselines use DigiRL's: same devices,
    agent and tasks)."""
    if setup not in SETUPS:
        raise ConfigError(f"unknown setup {setup!r}; choose from {', '.join(SETUPS)}")
    algo = "filteredbc" if system == "filtered_bc" else "digirl"
    name = f"{family}-{algo}-{setup}"
    shipped = shipped_configs()
    if name not in shipped:
        raise ConfigError(f"no shipped setup {name} (shipped: {', '.join(shipped)})")
    return shipped[name]


def system_overrides(system: str) -> list[str]:
    """Config overrides that turn a setup file into `system`."""
    if system == "random":  # a setup's saved start (agent.path) is not the uniform agent's
        return ["mode=eval", "algo=none", "agent.kind=uniform", "agent.path=null"]
    if system == "random_clickable":
        return ["mode=eval", "algo=none", "agent.kind=uniform_clickable", "agent.path=null"]
    if system == START:
        return ["mode=eval", "algo=none"]
    if system in ("filtered_bc", "digirl", *GROUP_SYSTEMS):
        return ["mode=online", f"algo={system}"]
    if system in ABLATIONS:  # the setup's own list less the step (`ablation_overrides`)
        return ["mode=online", "algo=digirl"]
    raise ValueError(f"unknown system {system!r}; choose from {', '.join(ALL_SYSTEMS)}")


#: In a run folder: sha256 of each file of the saved agent the run started from (in an
#: evaluation's folder: of the agent it evaluated).
START_AGENT_FILE = "start_agent.json"


def _relevant(cfg: TrainConfig) -> dict[str, Any]:
    """The parts of a config that matter to its run (the other algorithm's options and the
    plumbing dropped)."""
    data = asdict(cfg)
    others = {"digirl", "filtered_bc", "grpo", "gigpo"} - {cfg.algo}
    if cfg.algo == "gigpo":  # GiGPO uses GRPO's options too
        others.discard("grpo")
    for key in (*PLUMBING, *sorted(others), *(("critic",) if cfg.algo != "digirl" else ())):
        data.pop(key)
    if cfg.mode == "eval":  # an evaluation trains on no env step: the budget is not its own
        data.pop("env_steps")
    return data


def _start_agent(cfg: TrainConfig) -> dict[str, str]:
    """sha256 of each file of the saved agent `cfg` starts from (``agent.path`` or
    ``agent.init_from``; none: {}), so a pre-trained agent made again at the same path is
    another start."""
    start = cfg.agent.path or cfg.agent.init_from
    if not start or not Path(start).is_dir():
        return {}
    return {p.name: file_sha256(p) for p in sorted(Path(start).iterdir()) if p.is_file()}


def _same_start(folder: Path, cfg: TrainConfig) -> bool:
    recorded = folder / START_AGENT_FILE
    saved = json.loads(recorded.read_text("utf-8")) if recorded.exists() else {}
    return saved == _start_agent(cfg)


def _eval_file(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "eval.json").read_text(encoding="utf-8"))


def task_rates(per_task: dict[str, dict[str, int]]) -> dict[str, float]:
    """Success rate per task of an ``eval.json``'s ``per_task`` counts."""
    return {k: v["successes"] / v["episodes"] for k, v in per_task.items() if v["episodes"]}


def _read_result(folder: Path, system: str, seed: int) -> RunResult:
    """The result of the finished run in `folder` (its summary, eval and metrics)."""
    summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
    t0 = float(summary.get("started_at", (folder / "config.yaml").stat().st_mtime))
    evaluation = _eval_file(folder)
    return RunResult(
        system=system,
        seed=seed,
        success=float(summary["eval"]["success_rate"]),
        episodes=int(summary["eval"]["episodes"]),
        env_steps=int(summary["env_steps"]),
        wall_s=float(summary["elapsed_s"]),
        curve=read_curve(folder / "metrics.jsonl", t0),
        per_task=task_rates(evaluation["per_task"]),
        detours=float(evaluation.get("loop_step_frac", math.nan)),
        diagnostics=read_diagnostics(folder / "metrics.jsonl"),
        provenance=RunDir(folder).provenance(),
    )


def _same_code(folder: Path, allow_commit_change: bool) -> bool:
    """True when the run in `folder` came from the running code (commit and uncommitted diff),
    or from any code with `allow_commit_change` (its own provenance is kept in the report)."""
    saved = RunDir(folder).provenance()
    if allow_commit_change or code_identity(saved) == code_identity(provenance()):
        return True
    print(
        f"== not reusing {folder}: made by commit {saved.get('git_commit')} "
        f"(diff {saved.get('git_diff_sha256')}), running {provenance()['git_commit']} "
        f"(diff {provenance()['git_diff_sha256']}); --allow-commit-change reuses it"
    )
    return False


def same_run(folder: Path, cfg: TrainConfig, allow_commit_change: bool = False) -> bool:
    """Whether the run in `folder` has the same relevant config as `cfg` and came from the
    same code (finished or not: see `finished`)."""
    try:
        saved = RunDir(folder).load_config(TrainConfig)
    except Exception:  # missing or unreadable: not the same run
        return False
    same = _relevant(saved) == _relevant(cfg) and _same_start(folder, cfg)
    return same and _same_code(folder, allow_commit_change)


def finished(folder: Path, cfg: TrainConfig, allow_commit_change: bool = False) -> bool:
    """Whether `folder` holds a finished run of `cfg` made by the same code."""
    return (folder / "summary.json").exists() and same_run(folder, cfg, allow_commit_change)


def _finished(
    folder: Path, cfg: TrainConfig, system: str, allow_commit_change: bool
) -> RunResult | None:
    """The result of a finished run in `folder` with the same relevant config and code, else
    None."""
    try:
        if not finished(folder, cfg, allow_commit_change):
            return None
        return _read_result(folder, system, cfg.seed)
    except Exception:  # unfinished or unreadable: simply run again
        return None


class RunStopped(Exception):
    """A run was stopped by SIGINT / SIGTERM; its checkpoint lets the same command continue."""


def _continuable(folder: Path, cfg: TrainConfig, allow_commit_change: bool) -> bool:
    """Whether `folder` holds an interrupted run (killed, or stopped by a signal) of the same
    relevant config and code, with a published checkpoint to continue from."""
    try:
        saved = RunDir(folder).load_config(TrainConfig)
        if _relevant(saved) != _relevant(cfg) or not _same_start(folder, cfg):
            return False
        summary = folder / "summary.json"
        if summary.exists() and "stopped_by" not in json.loads(summary.read_text("utf-8")):
            return False  # it ended (a finished run is read by `_finished`)
        has_checkpoint = bool(RunDir(folder).checkpoint_manager().published())
        return has_checkpoint and _same_code(folder, allow_commit_change)
    except Exception:  # missing or unreadable: start it again
        return False


def _train_and_eval(
    system: str,
    seed: int,
    folder: Path,
    cfg: TrainConfig,
    reuse: bool,
    allow: bool,
    resume: bool = False,
) -> RunResult:
    from devicerl.runtime.loop.factory import make_trainer

    if reuse and (done := _finished(folder, cfg, system, allow)) is not None:
        print(f"== {system} seed {seed}: reusing the finished run in {folder}")
        done.reused = True
        return done
    run_dir = RunDir(folder)
    if resume and reuse and _continuable(folder, cfg, allow):
        print(f"== {system} seed {seed}: continuing {folder} from its last checkpoint")
        (folder / "summary.json").unlink(missing_ok=True)
        t0 = run_dir.config_path.stat().st_mtime  # the run's start (config.yaml is kept)
        run_dir.lock()
        try:
            trainer = make_trainer(cfg, run_dir, resume=True)
        except BaseException:
            run_dir.unlock()
            raise
    else:
        if folder.is_symlink():  # a linked run of another folder: replaced, left intact there
            folder.unlink()
        elif folder.exists():  # a fresh run: never append to an older run's metrics
            shutil.rmtree(folder)
        run_dir.create()
        run_dir.save_config(cfg)
        if start := _start_agent(cfg):
            write_json(folder / START_AGENT_FILE, start, indent=1)
        t0 = time.time()
        trainer = make_trainer(cfg, run_dir)
    summary = trainer.run()
    summary_file = run_dir.path / "summary.json"
    write_json(summary_file, {**summary, "started_at": t0})
    if trainer.stopped:
        raise RunStopped(
            f"{system} seed {seed} stopped by {trainer.stopped} in {folder} (checkpoint "
            "written); the same command continues it"
            if resume
            else f"{system} seed {seed} stopped by {trainer.stopped} in {folder}"
        )
    return _read_result(folder, system, seed)


def evaluate_agent(
    cfg: TrainConfig,
    agent_dir: Path | None,
    sub: Path,
    *,
    greedy: bool,
    reuse: bool = True,
    allow: bool = False,
) -> dict[str, Any]:
    """Evaluate the saved agent in `agent_dir` on `cfg`'s evaluation instances in the run
    folder `sub` (``eval.json``: success overall and per task); greedy or sampling its
    actions (T=1). With `reuse`, a finished evaluation there of the same config and agent files
    (`START_AGENT_FILE`: a fresh checkout of a committed agent is the same agent) by the same
    code is read instead. ``agent_dir=None``: the agent `cfg` builds (the random policy)."""
    from devicerl.runtime.loop.factory import make_trainer

    ecfg = replace(
        cfg,
        mode="eval",
        eval=replace(cfg.eval, greedy=greedy),
        agent=cfg.agent if agent_dir is None else replace(cfg.agent, path=str(agent_dir)),
    )
    if reuse and (sub / "eval.json").exists() and _reusable(sub, ecfg, agent_dir, allow):
        return _eval_file(sub)
    if sub.exists():
        shutil.rmtree(sub)
    run_dir = RunDir(sub).create()
    run_dir.save_config(ecfg)
    write_json(sub / START_AGENT_FILE, _start_agent(ecfg), indent=1)
    make_trainer(ecfg, run_dir).run()
    return _eval_file(sub)


def _reusable(sub: Path, ecfg: TrainConfig, agent_dir: Path | None, allow: bool) -> bool:
    """Whether the finished evaluation in `sub` is of `ecfg` and its agent's files by the same
    code; one written before the agent's digests were kept counts when it is newer than the
    agent. Anything unreadable: evaluate again."""
    try:
        if (sub / START_AGENT_FILE).exists():
            return finished(sub, ecfg, allow)
        files = agent_dir.iterdir() if agent_dir is not None else ()
        saved = max((f.stat().st_mtime for f in files), default=math.inf)
        done = sub / "summary.json"
        return done.exists() and done.stat().st_mtime >= saved and _same_code(sub, allow)
    except Exception:
        return False


def _sampled(folder: Path, cfg: TrainConfig, reuse: bool, allow: bool) -> dict[str, Any]:
    """Evaluate the run's final agent on the same instances, sampling its actions (T=1); an
    untrained `START` row (no ``agent/`` of its own) samples the agent its config names."""
    sub = folder / "eval-sampled"
    agent: Path | None = folder / "agent"
    if not agent.exists():
        agent = Path(cfg.agent.path) if cfg.agent.path else None
    return evaluate_agent(cfg, agent, sub, greedy=False, reuse=reuse, allow=allow)


def _summary(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "summary.json").read_text(encoding="utf-8"))


def train_phases(
    folder: Path,
    cfg: TrainConfig,
    marks: Sequence[int],
    after: Callable[[int, bool], None],
    *,
    reuse: bool = True,
    allow: bool = False,
) -> dict[str, Any]:
    """Train `cfg` (one policy or a league) in `folder` up to each mark of env steps in turn,
    resuming from the previous phase's checkpoint, and call ``after(mark, current)`` once each
    is reached (``current``: the folder still holds the policies as they were at that mark). A
    finished phase of the same config and code is reused; an unfinished one resumes from its
    last checkpoint. Returns the last summary (plus ``started_at`` and ``wall_s``, all phases)."""
    from devicerl.runtime.loop.factory import make_trainer

    phases = [replace(cfg, env_steps=m) for m in marks]
    done, current = -1, -1  # the last finished phase; the phase whose config is saved
    if reuse and folder.exists():
        for i, p in enumerate(phases):
            if same_run(folder, p, allow):
                current = i
                done = i if finished(folder, p, allow) else i - 1
    for i in range(done + 1):  # reused phases: what followed them is reused too
        after(marks[i], i == done == current)
    for i in range(done + 1, len(phases)):
        run_dir = RunDir(folder)
        resume = i > 0 or current == 0
        previous = _summary(folder) if resume and (folder / "summary.json").exists() else {}
        if not resume:
            if folder.exists():  # a fresh run: never append to an older run's metrics
                shutil.rmtree(folder)
            run_dir.create()
        run_dir.save_config(phases[i])
        (folder / "summary.json").unlink(missing_ok=True)
        print(f"== {folder.name}: training to {marks[i]} env steps", flush=True)
        t0 = time.time()
        summary = make_trainer(phases[i], run_dir, resume=resume).run()
        if summary.get("stopped_by"):
            raise SystemExit(f"stopped by {summary['stopped_by']}: re-run to resume")
        summary["started_at"] = previous.get("started_at", t0)
        summary["wall_s"] = previous.get("wall_s", 0.0) + summary["elapsed_s"]
        write_json(folder / "summary.json", summary)
        for stale in marks[i:]:  # policies saved at these marks by an older run
            shutil.rmtree(folder / f"at-{stale}", ignore_errors=True)
        after(marks[i], True)
    return _summary(folder)


def run_config(
    system: str,
    seed: int,
    *,
    setup: str = "tuned",
    suite: str | None = "dev",
    family: str | None = "miniwob",
    budget: int = 8000,
    eval_episodes: int = 25,
    split: str = "test",
    extra: Sequence[str] = (),
    path: str | Path | None = None,
) -> TrainConfig:
    """The resolved config of one (system, seed) run: the setup file (or `path`, a config
    file in its place), the system's overrides, the suite, budget and evaluation protocol,
    then `extra`."""
    if path is None and family:
        path = config_file(system, setup, family)
    overrides = [*RUN_OPTIONS, *system_overrides(system)]
    if suite is not None:
        from devicerl.tasks import resolve

        split_name = SUITES.get(suite, suite)
        overrides += [f"tasks.train={split_name}", f"eval.n_tasks={len(resolve(split_name))}"]
    overrides += [
        f"seed={seed}",
        f"agent.seed={seed}",
        f"env_steps={budget}",
        f"eval.episodes_per_task={eval_episodes}",
        f"eval.split={split}",
        *extra,
    ]
    cfg = load_config(TrainConfig, path, overrides)
    if system in ABLATIONS:
        left = [s for s in cfg.digirl.selection if s != ABLATIONS[system]]
        cfg = load_config(TrainConfig, path, [*overrides, f"digirl.selection=[{', '.join(left)}]"])
    return cfg


def run_one(
    system: str,
    seed: int,
    out: Path,
    cfg: TrainConfig,
    reuse: bool = True,
    allow: bool = False,
    *,
    sampled: bool = True,
    resume: bool = False,
) -> RunResult:
    """Train (unless a baseline) and evaluate one system with one seed in
    ``out/<system>-s<seed>``: greedily, then (with `sampled`) sampling actions
    (``eval-sampled/``). With `reuse`, a finished run there with the same relevant config and
    code is read instead; with `resume` too, an interrupted one (killed, or stopped by a
    signal: `RunStopped`) continues from its last checkpoint (set ``checkpoint_every``)."""
    folder = out / f"{system}-s{seed}"
    result = _train_and_eval(system, seed, folder, cfg, reuse, allow, resume)
    if not sampled:
        return result
    if cfg.mode == "eval" and cfg.agent.kind in ("random", "uniform"):  # samples either way
        result.success_sampled, result.per_task_sampled = result.success, dict(result.per_task)
    else:
        sampled = _sampled(folder, cfg, reuse, allow)
        result.success_sampled = float(sampled["success_rate"])
        result.per_task_sampled = task_rates(sampled["per_task"])
    return result


def compare(
    out: str | Path,
    *,
    setup: str = "tuned",
    suite: str | None = "dev",
    family: str | None = "miniwob",
    systems: Sequence[str] = SYSTEMS,
    seeds: Sequence[int] = (0,),
    budget: int = 8000,
    eval_episodes: int = 25,
    split: str = "test",
    extra: Sequence[str] = (),
    reuse: bool = True,
    allow_commit_change: bool = False,
) -> dict[str, Any]:
    """Run every system with every seed of one setup; write ``comparison.json``,
    ``learning.png`` and ``report.md`` into `out`; return the report (``summary``, ``runs``,
    ``result``). With `reuse`, finished runs in `out` with the same relevant config and code
    are read instead of re-run, and an interrupted one continues from its last checkpoint (an
    interrupted benchmark resumes where it stopped; `RunStopped` when a signal stops it);
    `allow_commit_change` also reuses runs of other commits (recorded per run)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    kw = dict(setup=setup, suite=suite, family=family, budget=budget, split=split)
    configs = {
        (s, seed): run_config(s, seed, eval_episodes=eval_episodes, extra=extra, **kw)
        for s in systems
        for seed in seeds
    }  # unknown systems and bad overrides fail before anything runs
    results: list[RunResult] = []
    for seed in seeds:
        for system in systems:
            print(f"== {setup} {system} seed {seed} (budget {budget} env steps)", flush=True)
            cfg = configs[system, seed]
            r = run_one(system, seed, out, cfg, reuse, allow_commit_change, resume=True)
            print(
                f"== {setup} {system} seed {seed}: success {r.success:.3f} greedy, "
                f"{r.success_sampled:.3f} sampled ({split}) in {r.wall_s:.0f} s",
                flush=True,
            )
            results.append(r)
    test_evals = None
    if split == "test":  # the sealed test: count each fresh evaluation of test instances
        name = suite or "custom"
        fresh = any(not r.reused for r in results)
        command = "python " + shlex.join(sys.argv)
        test_evals = (
            record_test_evaluation(name, setup, command, provenance())
            if fresh
            else test_evaluations(name, setup)
        )
    return write_report(
        out,
        results,
        setup=setup,
        suite=suite or "custom",
        split=split,
        budget=budget,
        seeds=list(seeds),
        eval_episodes=eval_episodes,
        extra=list(extra),
        provenance=provenance(),
        allow_commit_change=allow_commit_change,
        test_evals=test_evals,
    )
