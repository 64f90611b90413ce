"""The benchmark harness behind benchmarks/learning.py (``benchmarks/harness``), on synthetic
devices: a report with tables, t-intervals across seeds, curves and the RESULT line; test
instances; finished runs are reused only when made by the same code; setups are the shipped
ones."""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import replace

import pytest
from harness.comparison import (
    SETUPS,
    _continuable,
    compare,
    config_file,
    run_config,
    run_one,
)
from harness.report import bootstrap_interval, result_line, t_interval

from devicerl.config import load_config
from devicerl.errors import ConfigError
from devicerl.runtime.runs.folder import RunDir
from devicerl.runtime.setup.config import TrainConfig

SYNTHETIC = [
    "env.name=synthetic",
    "env.worker=serial",
    "env.num_envs=2",
    "tasks.train=synthetic/tap",
    "trajectories_per_iter=8",
    "eval.n_tasks=1",
]


@pytest.mark.slow
def test_compare_writes_a_report_and_reuses_finished_runs(tmp_path, capsys) -> None:
    kw = dict(
        systems=("random", "digirl"),
        budget=120,
        eval_episodes=6,
        family=None,
        suite=None,
        extra=SYNTHETIC,
    )
    report = compare(tmp_path, **kw)
    assert list(report["summary"]) == ["random", "digirl"]
    # the first fresh evaluation of test instances of this setup (the test's own ledger)
    assert report["result"] == result_line(
        report["summary"], 120, tags="setup=tuned suite=custom split=test test_evals=1"
    )
    assert report["result"].startswith("RESULT digirl=") and "random=" in report["result"]
    trained = next(r for r in report["runs"] if r["system"] == "digirl")
    assert trained["env_steps"] >= 120 and trained["episodes"] == 6
    sampled_dir = tmp_path / "digirl-s0" / "eval-sampled"
    sampled = json.loads((sampled_dir / "eval.json").read_text())
    assert trained["success_sampled"] == sampled["success_rate"]  # read from its own eval
    assert "greedy: false" in (sampled_dir / "config.yaml").read_text()
    assert "split: test" in (tmp_path / "digirl-s0" / "config.yaml").read_text()
    assert trained["provenance"]["git_commit"] and "torch" in trained["provenance"]["packages"]
    assert (tmp_path / "digirl-s0" / "provenance.json").exists()
    steps = [p["step"] for p in trained["curve"]]
    assert steps == sorted(steps) and steps[-1] >= 120
    assert "train/step_filter_kept_frac" in trained["diagnostics"]
    assert (tmp_path / "learning.png").stat().st_size > 10_000
    text = (tmp_path / "report.md").read_text()
    assert "| digirl |" in text and "Per task" in text and "step_filter_kept_frac" in text
    assert json.loads((tmp_path / "comparison.json").read_text())["budget"] == 120

    metrics = tmp_path / "digirl-s0" / "metrics.jsonl"
    before = metrics.stat().st_mtime_ns
    again = compare(tmp_path, **kw)  # same configs and code: nothing runs again
    assert metrics.stat().st_mtime_ns == before
    assert again["runs"] == report["runs"]
    plumbing = [*SYNTHETIC, "checkpoint_every=2"]
    compare(tmp_path, **{**kw, "extra": plumbing})  # how a run is kept is not what it learns
    assert metrics.stat().st_mtime_ns == before

    for name in ("summary.json", "eval.json"):  # killed after its last checkpoint
        (tmp_path / "digirl-s0" / name).unlink()
    capsys.readouterr()
    resumed = compare(tmp_path, **kw)  # the same command continues it, not from scratch
    assert "continuing" in capsys.readouterr().out
    assert resumed["runs"][1]["env_steps"] == trained["env_steps"]
    assert (tmp_path / "digirl-s0" / "eval.json").exists()
    before = metrics.stat().st_mtime_ns

    prov = tmp_path / "digirl-s0" / "provenance.json"
    record = json.loads(prov.read_text())
    prov.write_text(json.dumps({**record, "git_commit": "0" * 40}))  # made by another commit
    allowed = compare(tmp_path, **{**kw, "systems": ("digirl",)}, allow_commit_change=True)
    assert metrics.stat().st_mtime_ns == before  # reused, and its commit is reported
    assert allowed["commits"] == ["0" * 40] and allowed["allow_commit_change"]
    compare(tmp_path, **{**kw, "systems": ("digirl",)})
    assert metrics.stat().st_mtime_ns != before  # refused: another commit runs again
    before = metrics.stat().st_mtime_ns
    changed = compare(tmp_path, **{**kw, "systems": ("digirl",), "extra": [*SYNTHETIC, "seed=0",
                      "digirl.lam=0.7"]})  # fmt: skip
    assert metrics.stat().st_mtime_ns != before  # a changed config runs again
    assert changed["runs"][0]["system"] == "digirl"

    with pytest.raises(ValueError, match="unknown system 'ppo'"):
        compare(tmp_path, systems=("ppo",))


def test_the_start_row_evaluates_the_saved_agent_untrained(tmp_path) -> None:
    from devicerl.agents.small import SmallAgent
    from devicerl.agents.small.config import SmallAgentConfig

    saved = SmallAgent(SmallAgentConfig(allowed_types=("DUAL_POINT", "TYPE"), heads=(), seed=3))
    saved.save(tmp_path / "agent")
    kw = dict(
        systems=("start",),
        budget=120,
        eval_episodes=4,
        family=None,
        suite=None,
        extra=[*SYNTHETIC, f"agent.path={tmp_path / 'agent'}"],
    )
    report = compare(tmp_path / "cmp", **kw)
    (run,) = report["runs"]
    assert run["system"] == "start" and run["env_steps"] == 0 and run["episodes"] == 4
    sampled = json.loads((tmp_path / "cmp" / "start-s0" / "eval-sampled" / "eval.json").read_text())
    assert run["success_sampled"] == sampled["success_rate"]  # its own sampling evaluation
    cfg = load_config(TrainConfig, tmp_path / "cmp" / "start-s0" / "config.yaml")
    assert cfg.mode == "eval" and cfg.agent.path == str(tmp_path / "agent")
    line = f"RESULT start={run['success']:.3f} env_steps=120 setup=tuned suite=custom split=test"
    line += " test_evals=1"  # the first fresh evaluation of test instances (the test's ledger)
    assert report["result"] == line
    evaluated = tmp_path / "cmp" / "start-s0" / "eval.json"
    before = evaluated.stat().st_mtime_ns
    compare(tmp_path / "cmp", **kw)  # the same agent: read, not evaluated again
    assert evaluated.stat().st_mtime_ns == before
    compare(tmp_path / "cmp", **{**kw, "budget": 480})  # the learners' budget is not its own
    assert evaluated.stat().st_mtime_ns == before
    sampled_file = tmp_path / "cmp" / "start-s0" / "eval-sampled" / "eval.json"
    sampled_before = sampled_file.stat().st_mtime_ns
    later = time.time() + 60  # the same files written anew (a fresh checkout of the agent)
    for f in (tmp_path / "agent").iterdir():
        os.utime(f, (later, later))
    compare(tmp_path / "cmp", **kw)
    assert evaluated.stat().st_mtime_ns == before
    assert sampled_file.stat().st_mtime_ns == sampled_before
    SmallAgent(replace(saved.config, seed=5)).save(tmp_path / "agent")  # another agent, whose
    for f in (tmp_path / "agent").iterdir():  # files look older than the evaluations
        os.utime(f, (1e9, 1e9))
    compare(tmp_path / "cmp", **kw)
    assert sampled_file.stat().st_mtime_ns != sampled_before  # evaluated again
    before = evaluated.stat().st_mtime_ns
    SmallAgent(replace(saved.config, seed=4)).save(tmp_path / "agent")  # made again, same path
    compare(tmp_path / "cmp", **kw)
    assert evaluated.stat().st_mtime_ns != before  # another start: evaluated again
    before = evaluated.stat().st_mtime_ns
    linked = tmp_path / "cmp2" / "start-s0"  # another comparison links the finished row
    linked.parent.mkdir()
    linked.symlink_to(tmp_path / "cmp" / "start-s0")
    compare(tmp_path / "cmp2", **kw)
    assert evaluated.stat().st_mtime_ns == before  # read through the link
    SmallAgent(replace(saved.config, seed=6)).save(tmp_path / "agent")
    compare(tmp_path / "cmp2", **kw)  # evaluated again: in place of the link, not through it
    assert not linked.is_symlink() and (linked / "eval.json").exists()
    assert evaluated.stat().st_mtime_ns == before


@pytest.mark.slow
def test_an_interrupted_run_continues_from_its_checkpoint(tmp_path, capsys) -> None:
    """`run_one(resume=True)` (benchmarks/miniwob_suite.py): a run killed half-way continues
    from its last checkpoint (episodes kept, budget completed), not from scratch; a changed
    config or a run without a checkpoint starts over."""
    opts = dict(setup="tuned", suite=None, family=None, eval_episodes=4)
    extra = [*SYNTHETIC, "checkpoint_every=1", "logging.tensorboard=false"]
    half = run_config("digirl", 0, budget=40, extra=extra, **opts)
    full = run_config("digirl", 0, budget=80, extra=extra, **opts)
    first = run_one("digirl", 0, tmp_path, half, sampled=False)
    folder = tmp_path / "digirl-s0"
    # the state a kill at ~40 steps leaves of the 80-step run: its config, a checkpoint, no
    # summary
    RunDir(folder).save_config(full)
    for name in ("summary.json", "eval.json"):
        (folder / name).unlink()
    shards = sorted(p.name for p in RunDir(folder).trajectories.rglob("*.parquet"))
    assert shards and RunDir(folder).checkpoint_manager().published()
    capsys.readouterr()
    done = run_one("digirl", 0, tmp_path, full, sampled=False, resume=True)
    assert "continuing" in capsys.readouterr().out
    assert first.env_steps >= 40 and done.env_steps >= 80 and done.episodes == 4
    kept = {p.name for p in RunDir(folder).trajectories.rglob("*.parquet")}
    assert set(shards) <= kept and len(kept) > len(shards)  # the first half's episodes stay
    steps = [json.loads(line)["step"] for line in (folder / "metrics.jsonl").open()]
    assert steps[0] < 40 and steps[-1] >= 80  # one run's metrics, from its start

    again = run_one("digirl", 0, tmp_path, full, sampled=False, resume=True)
    assert "reusing the finished run" in capsys.readouterr().out  # finished: read, not run
    assert again.env_steps == done.env_steps

    (folder / "summary.json").unlink()
    assert _continuable(folder, full, allow_commit_change=False)
    other = run_config("digirl", 0, budget=80, extra=[*extra, "digirl.lam=0.7"], **opts)
    assert not _continuable(folder, other, allow_commit_change=False)  # another config
    shutil.rmtree(RunDir(folder).checkpoints)
    assert not _continuable(folder, full, allow_commit_change=False)  # nothing to continue


def test_setups_come_from_the_config_files() -> None:
    for setup in SETUPS:
        for system in ("digirl", "filtered_bc"):
            cfg = run_config(system, 1, setup=setup, suite="dev16", budget=300)
            direct = load_config(TrainConfig, config_file(system, setup), [])
            assert cfg.algo == system and cfg.seed == 1 and cfg.env_steps == 300
            assert replace(cfg.agent, seed=0) == direct.agent
            assert cfg.exploration == direct.exploration and cfg.digirl == direct.digirl
            assert cfg.tasks.train == "miniwob-dev16" and cfg.eval.n_tasks == 16
            assert cfg.eval.split == "test"
    paper = run_config("digirl", 0, setup="paper")
    tuned = run_config("digirl", 0, setup="tuned")
    assert paper.exploration.max is None and tuned.exploration.max > 0
    assert paper.digirl.selection == ["curriculum", "step_filter"]  # the paper's
    assert tuned.digirl.selection == ["curriculum", "rehearsal", "step_filter", "skip_noops"]
    assert tuned.digirl.rehearsal.per_task == 2
    assert paper.actor.entropy is None and tuned.actor.entropy.coef > 0
    assert paper.agent.small.allowed_types is None and paper.agent.small.heads == ("swipes",)
    assert paper.agent.small.epsilon == 0.0
    random = run_config("random_clickable", 0, setup="paper")
    assert random.mode == "eval" and random.agent.kind == "uniform_clickable"
    assert random.agent.small == paper.agent.small
    # an ablation is the setup's own selection with one step left out
    ablation = run_config("digirl_no_step_filter", 0)
    assert ablation.algo == "digirl" and ablation.mode == "online"
    assert ablation.digirl.selection == ["curriculum", "rehearsal", "skip_noops"]
    ablation = run_config("digirl_no_curriculum", 0, setup="paper")
    assert ablation.digirl.selection == ["step_filter"]
    assert replace(ablation.digirl, selection=[]) == replace(paper.digirl, selection=[])
    with pytest.raises(ConfigError, match="unknown setup 'best'"):
        config_file("digirl", "best")


def test_t_interval_over_seeds() -> None:
    lo, hi = t_interval([0.8, 0.9, 1.0])
    assert lo == pytest.approx(0.9 - 4.303 * 0.1 / math.sqrt(3)) and hi == 1.0  # clipped
    assert all(math.isnan(v) for v in t_interval([0.5]))
    assert t_interval([0.4, 0.6]) == (0.0, 1.0)  # two seeds: t = 12.7, a wide interval
    lo, hi = t_interval([0.50, 0.52, 0.54, 0.56, 0.58])
    assert (lo + hi) / 2 == pytest.approx(0.54) and hi - lo == pytest.approx(
        2 * 2.776 * math.sqrt(0.001) / math.sqrt(5)
    )


def test_bootstrap_interval_over_tasks() -> None:
    assert all(math.isnan(v) for v in bootstrap_interval([0.5]))
    assert bootstrap_interval([0.3] * 10) == pytest.approx((0.3, 0.3))  # no spread, no width
    values = [0.0] * 20 + [1.0] * 20  # mean 0.5, standard error 0.5 / sqrt(40) = 0.079
    lo, hi = bootstrap_interval(values)
    assert lo < 0.5 < hi and (hi - lo) == pytest.approx(2 * 1.96 * 0.5 / math.sqrt(40), rel=0.1)
    assert bootstrap_interval(values) == (lo, hi)  # seeded: the same report twice
    shifted = bootstrap_interval([v - 1.0 for v in values])  # differences may be negative
    assert shifted[0] == pytest.approx(lo - 1.0) and shifted[1] == pytest.approx(hi - 1.0)


def test_unseen_report_gives_a_seed_interval_from_three_seeds() -> None:
    from unseen_tasks import _intervals

    from devicerl.tasks import resolve

    names = [t.name for t in resolve("miniwob-unseen")]

    def row(system: str, seed: int, rate: float) -> dict:
        return {"system": system, "seed": seed, "unseen": rate,
                "per_task_unseen": dict.fromkeys(names, rate)}  # fmt: skip

    rows = {"start-s0": row("start", 0, 0.2)}
    rows |= {f"grpo-s{i}": row("grpo", i, v) for i, v in enumerate([0.1, 0.2, 0.3])}
    rows |= {f"gigpo-s{i}": row("gigpo", i, v) for i, v in enumerate([0.1, 0.3])}
    grpo, gigpo, pair = _intervals(rows, ["grpo", "gigpo"], "start-s0")
    lo, hi = t_interval([0.1, 0.2, 0.3])
    assert grpo.startswith("grpo: unseen 0.200 [0.200, 0.200] (seeds: 0.100, 0.200, 0.300;")
    assert f"over seeds [{lo:.3f}, {hi:.3f}]" in grpo and "minus start +0.000" in grpo
    assert "over seeds" not in gigpo  # two seeds: the values alone
    assert pair.startswith("gigpo minus grpo: +0.000")


def test_unseen_protocol_evaluates_the_split_asked_for() -> None:
    from unseen_tasks import START, arguments, setup_name, system_config

    from devicerl.tasks import resolve

    args = arguments().parse_args(["--split", "validation"])
    assert setup_name(args) == "tuned"  # no saved start agent
    train = ["miniwob/click-test"]
    learner = system_config(args, "digirl", 0, train, "miniwob-unseen", 34)
    start = system_config(args, START, 0, train, "miniwob-unseen", 34)
    assert [t.name for t in resolve(learner.tasks.train)] == train
    assert learner.eval.split == start.eval.split == "validation"
    assert learner.tasks.eval == "miniwob-unseen" and learner.eval.n_tasks == 34


def test_unseen_protocol_can_evaluate_the_start_and_random_alone() -> None:
    from unseen_tasks import arguments

    args = arguments().parse_args(["--systems", "--", "agent.path=runs/agent"])
    assert args.systems == [] and args.overrides == ["agent.path=runs/agent"]
